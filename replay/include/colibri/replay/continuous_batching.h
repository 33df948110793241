// Open-loop pacing: when each request arrives, and which requests each
// forward pass carries (continuous batching).
//
// ScheduleArrivals gives each replayed request an arrival time relative to
// the run's start: from a request-arrival trace (Azure CSV, Mooncake JSONL:
// the routing trace's requests take the arrival times in order, `repeat`
// cycles them to cover every arrival; the arrival trace's token counts are
// ignored) or, without one, from the routing trace's own recorded arrivals.
// Times are divided by `time_scale` (2 = arrivals twice as fast) and rounded
// to the nanosecond; they are absolute offsets from the run's start, so a
// real-clock run waits for each against the clock, never by accumulated
// sleeps.
//
// ContinuousBatcher forms forward passes the way a serving engine does
// (vLLM's default scheduler before chunked prefill): requests that have
// arrived wait in FIFO order; while fewer than `max_batch` requests are
// running and some are waiting, the next pass is a prefill pass over as many
// waiting requests as fit (each runs its first recorded pass, usually its
// prompt); otherwise it is a decode pass over every running request (each
// runs its next recorded pass). A request leaves after its last pass. With
// nothing running and nobody waiting, the run waits for the next arrival.
// Each pass is executed as one layer batch per MoE layer, layers in order,
// holding every member's tokens at that layer in admission order.
//
// Ownership: the batcher borrows the store (it must outlive it).
// Thread-safety: none. Errors: ScheduleArrivals -- no arrivals, a trace
// without recorded arrivals, a non-positive time scale.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "colibri/engine/clock.h"
#include "colibri/replay/request_store.h"
#include "colibri/traces/arrivals.h"

namespace colibri::replay {

struct ScheduledRequest {
  size_t request = 0;             // in the RequestStore
  engine::TimeNs arrival_ns = 0;  // from the run's start
};

struct ArrivalOptions {
  const traces::ArrivalTrace* arrivals = nullptr;  // null: the routing trace's recorded arrivals
  double time_scale = 1.0;
  bool repeat = false;
  uint64_t max_arrivals = 0;  // use only the first N arrivals; 0 = all
};

struct ArrivalSchedule {
  std::vector<ScheduledRequest> requests;  // non-decreasing arrival time
  uint64_t arrivals_total = 0;             // arrivals available before max_arrivals and the request count cut them
};

Result<ArrivalSchedule> ScheduleArrivals(const RequestStore& store, const ArrivalOptions& options);

class ContinuousBatcher {
 public:
  ContinuousBatcher(const RequestStore* store, std::vector<ScheduledRequest> schedule, uint32_t max_batch);

  struct Step {
    enum class Kind { kPass, kWait, kDone };
    Kind kind = Kind::kDone;
    engine::TimeNs wait_until_ns = 0;  // kWait: the next arrival, from the run's start
  };
  // What to do at `now_ns` (from the run's start). kPass: call NextLayerBatch
  // until it returns false (the members then advance by one pass).
  Step Next(engine::TimeNs now_ns);
  // The current pass's next layer batch (pass_id = the pass's number; rows
  // keyed by instance, the index in the schedule). false: the pass is done.
  bool NextLayerBatch(LayerBatch* batch);

  // Instances (schedule indices) in the current pass, in admission order.
  const std::vector<size_t>& members() const { return members_; }
  bool prefill_pass() const { return prefill_pass_; }
  engine::TimeNs arrival_ns(size_t instance) const { return schedule_[instance].arrival_ns; }
  uint64_t passes() const { return pass_count_; }
  size_t max_pass_requests() const { return max_pass_requests_; }  // the most requests one pass carried

 private:
  void FinishPass();

  const RequestStore* store_;
  std::vector<ScheduledRequest> schedule_;
  uint32_t max_batch_;
  size_t next_arrival_ = 0;
  std::deque<size_t> waiting_;
  std::vector<size_t> running_;
  std::vector<size_t> next_pass_;  // per instance
  std::vector<size_t> members_;
  std::vector<RequestStore::Cursor> cursors_;
  bool prefill_pass_ = false;
  uint64_t pass_count_ = 0;
  size_t max_pass_requests_ = 0;
};

}  // namespace colibri::replay
