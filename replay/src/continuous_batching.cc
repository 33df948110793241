#include "colibri/replay/continuous_batching.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace colibri::replay {
namespace {

Result<engine::TimeNs> Scaled(uint64_t offset_ns, double time_scale) {
  const double scaled = std::round(static_cast<double>(offset_ns) / time_scale);
  if (!(scaled < static_cast<double>(std::numeric_limits<engine::TimeNs>::max()))) {
    return Status::InvalidArgument("arrival offset " + std::to_string(offset_ns) + " ns / --time-scale " +
                                   std::to_string(time_scale) + " overflows 64-bit nanoseconds");
  }
  return static_cast<engine::TimeNs>(scaled);
}

// The routing trace's recorded arrivals, relative to the earliest, in arrival order.
Result<std::vector<std::pair<uint64_t, size_t>>> RecordedArrivals(const RequestStore& store) {
  std::vector<std::pair<uint64_t, size_t>> arrivals;  // (arrival ns, request)
  for (size_t r = 0; r < store.requests(); ++r) {
    if (!store.arrival_ns(r)) {
      return Status::InvalidArgument("open-loop pacing: request " + std::to_string(store.trace_request_id(r)) +
                                     " has no recorded arrival_ns; pass --arrivals FILE (an Azure CSV or Mooncake "
                                     "JSONL request-arrival trace)");
    }
    arrivals.emplace_back(*store.arrival_ns(r), r);
  }
  std::stable_sort(arrivals.begin(), arrivals.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  const uint64_t first = arrivals.empty() ? 0 : arrivals.front().first;
  for (auto& arrival : arrivals) arrival.first -= first;
  return arrivals;
}

// The arrival trace's times, the routing trace's requests in order (cycled with `repeat`).
std::vector<std::pair<uint64_t, size_t>> FileArrivals(const RequestStore& store, const ArrivalOptions& o) {
  std::vector<std::pair<uint64_t, size_t>> arrivals;
  const size_t count = o.repeat ? o.arrivals->arrivals.size() : std::min(o.arrivals->arrivals.size(), store.requests());
  for (size_t i = 0; i < count; ++i) {
    arrivals.emplace_back(static_cast<uint64_t>(o.arrivals->arrivals[i].time_ns), i % store.requests());
  }
  return arrivals;
}

}  // namespace

Result<ArrivalSchedule> ScheduleArrivals(const RequestStore& store, const ArrivalOptions& o) {
  if (!(o.time_scale > 0) || !std::isfinite(o.time_scale)) {
    return Status::InvalidArgument("--time-scale " + std::to_string(o.time_scale) + ": expected a positive number");
  }
  if (store.requests() == 0) return Status::InvalidArgument("open-loop pacing: the routing trace has no requests");
  ArrivalSchedule schedule;
  std::vector<std::pair<uint64_t, size_t>> arrivals;
  if (o.arrivals != nullptr) {
    schedule.arrivals_total = o.arrivals->arrivals.size();
    arrivals = FileArrivals(store, o);
  } else {
    if (o.repeat) return Status::InvalidArgument("--repeat cycles the routing trace over --arrivals: pass --arrivals");
    COLIBRI_ASSIGN_OR_RETURN(arrivals, RecordedArrivals(store));
    schedule.arrivals_total = arrivals.size();
  }
  if (o.max_arrivals > 0 && arrivals.size() > o.max_arrivals) arrivals.resize(o.max_arrivals);
  for (const auto& [offset_ns, request] : arrivals) {
    COLIBRI_ASSIGN_OR_RETURN(const engine::TimeNs at, Scaled(offset_ns, o.time_scale));
    schedule.requests.push_back(ScheduledRequest{request, at});
  }
  return schedule;
}

ContinuousBatcher::ContinuousBatcher(const RequestStore* store, std::vector<ScheduledRequest> schedule,
                                     uint32_t max_batch)
    : store_(store), schedule_(std::move(schedule)), max_batch_(std::max<uint32_t>(1, max_batch)),
      next_pass_(schedule_.size(), 0) {}

ContinuousBatcher::Step ContinuousBatcher::Next(engine::TimeNs now_ns) {
  while (next_arrival_ < schedule_.size() && schedule_[next_arrival_].arrival_ns <= now_ns) {
    waiting_.push_back(next_arrival_++);
  }
  members_.clear();
  prefill_pass_ = running_.size() < max_batch_ && !waiting_.empty();
  if (prefill_pass_) {
    while (running_.size() + members_.size() < max_batch_ && !waiting_.empty()) {
      members_.push_back(waiting_.front());
      waiting_.pop_front();
    }
  } else if (!running_.empty()) {
    members_ = running_;
  } else if (next_arrival_ < schedule_.size()) {
    return Step{Step::Kind::kWait, schedule_[next_arrival_].arrival_ns};
  } else {
    return Step{};
  }
  cursors_.clear();
  for (size_t instance : members_) {
    cursors_.push_back(store_->Begin(schedule_[instance].request, next_pass_[instance]));
  }
  ++pass_count_;
  max_pass_requests_ = std::max(max_pass_requests_, members_.size());
  return Step{Step::Kind::kPass, 0};
}

bool ContinuousBatcher::NextLayerBatch(LayerBatch* batch) {
  std::optional<uint32_t> layer;
  for (const RequestStore::Cursor& cursor : cursors_) {
    const std::optional<uint32_t> l = store_->Layer(cursor);
    if (l && (!layer || *l < *layer)) layer = l;
  }
  if (!layer) {
    FinishPass();
    return false;
  }
  batch->Clear();
  batch->pass_id = pass_count_ - 1;
  batch->layer_index = *layer;
  for (size_t m = 0; m < members_.size(); ++m) {
    while (store_->Layer(cursors_[m]) == layer) store_->AppendSegment(&cursors_[m], members_[m], batch);
  }
  return true;
}

void ContinuousBatcher::FinishPass() {
  for (size_t instance : members_) ++next_pass_[instance];
  if (prefill_pass_) running_.insert(running_.end(), members_.begin(), members_.end());
  std::erase_if(running_, [&](size_t instance) {
    return next_pass_[instance] >= store_->passes(schedule_[instance].request);
  });
  members_.clear();
  cursors_.clear();
}

}  // namespace colibri::replay
