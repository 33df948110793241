// Routing stability: both traces stream in lockstep while their records list
// the same keys; from the first record pair that differs (or the end of one
// side), the rest of the candidate goes into an ordered index that the rest of
// the baseline is looked up in. Keys left in the index are missing in the
// baseline and count last, in the candidate's record order.
#include "colibri/reports/stability.h"

#include <algorithm>
#include <map>
#include <memory>
#include <span>
#include <tuple>
#include <utility>

#include "colibri/traces/reader.h"

namespace colibri::reports {
namespace {

using traces::ModelShape;
using traces::TraceReader;
using traces::TraceRecord;

using Key = std::tuple<uint64_t, uint64_t, uint32_t>;  // request, position, layer
using Ranked = std::span<const uint32_t>;               // empty: the key is missing on that side

Key KeyOf(const TraceRecord& record, size_t token) {
  return {record.request_id, record.positions[token], record.layer};
}

Ranked RankedOf(const TraceRecord& record, size_t token, uint32_t top_k) {
  return Ranked(record.expert_ids).subspan(token * top_k, top_k);
}

std::string Join(const std::vector<uint32_t>& ids) {
  std::string out;
  for (uint32_t id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

Status CheckSameShape(const TraceReader& baseline, const TraceReader& candidate) {
  const ModelShape& a = baseline.header().shape;
  const ModelShape& b = candidate.header().shape;
  auto differ = [&](const std::string& field, const std::string& in_a, const std::string& in_b) {
    return Status::InvalidArgument(baseline.path() + " and " + candidate.path() + ": different " + field + " (" + in_a +
                                   " vs " + in_b + "): their routing cannot be compared");
  };
  if (a.moe_layer_ids != b.moe_layer_ids) return differ("moe_layer_ids", Join(a.moe_layer_ids), Join(b.moe_layer_ids));
  if (a.experts_per_layer != b.experts_per_layer) {
    return differ("experts_per_layer", std::to_string(a.experts_per_layer), std::to_string(b.experts_per_layer));
  }
  if (a.top_k != b.top_k) return differ("top_k", std::to_string(a.top_k), std::to_string(b.top_k));
  return Status::Ok();
}

// Visits `record` when `more` and then every later record of `reader`.
template <typename Visit>
Status ForEachRest(TraceReader* reader, TraceRecord* record, bool more, Visit visit) {
  while (more) {
    visit(*record);
    COLIBRI_ASSIGN_OR_RETURN(more, reader->Next(record));
  }
  return Status::Ok();
}

bool SameKeys(const TraceRecord& a, const TraceRecord& b) {
  return a.request_id == b.request_id && a.pass_id == b.pass_id && a.layer == b.layer && a.positions == b.positions;
}

// Counts one key. Expert ids are distinct within a list (the reader validates records).
void CountKey(const Key& key, Ranked baseline, Ranked candidate, RoutingStability* out) {
  ++out->compared;
  out->missing_in_baseline += baseline.empty();
  out->missing_in_candidate += candidate.empty();
  size_t common = 0;
  for (uint32_t id : baseline) common += std::ranges::count(candidate, id);
  out->jaccard_sum += static_cast<double>(common) / static_cast<double>(baseline.size() + candidate.size() - common);
  out->set_identical += common == baseline.size() && common == candidate.size();
  const bool same_ranks = std::ranges::equal(baseline, candidate);
  out->ranked_identical += same_ranks;
  if (same_ranks || out->diverged) return;
  out->diverged = true;
  out->first = RoutingDivergence{std::get<0>(key), std::get<1>(key), std::get<2>(key),
                                 std::vector<uint32_t>(baseline.begin(), baseline.end()),
                                 std::vector<uint32_t>(candidate.begin(), candidate.end())};
}

// Counts every token of a baseline record against `candidate_of(token)`.
template <typename CandidateOf>
void CountRecord(const TraceRecord& record, uint32_t top_k, CandidateOf candidate_of, RoutingStability* out) {
  for (size_t t = 0; t < record.token_count(); ++t) {
    CountKey(KeyOf(record, t), RankedOf(record, t, top_k), candidate_of(t), out);
  }
}

// The candidate's decisions not compared yet. A multimap keeps a key routed twice (a
// recomputed pass) paired occurrence by occurrence, as the lockstep does.
class CandidateIndex {
 public:
  explicit CandidateIndex(uint32_t top_k) : top_k_(top_k) {}

  void Add(const TraceRecord& record) {
    for (size_t t = 0; t < record.token_count(); ++t) at_.emplace(KeyOf(record, t), ids_.size() + t * top_k_);
    ids_.insert(ids_.end(), record.expert_ids.begin(), record.expert_ids.end());
  }

  // The earliest unclaimed list of `key`, removed from the index; empty when none.
  Ranked Take(const Key& key) {
    const auto it = at_.find(key);
    if (it == at_.end()) return {};
    const Ranked ranked = ListAt(it->second);
    at_.erase(it);
    return ranked;
  }

  // Counts every key left (missing in the baseline) in the candidate's record order.
  void CountLeft(RoutingStability* out) const {
    std::vector<std::pair<size_t, Key>> left;
    left.reserve(at_.size());
    for (const auto& [key, offset] : at_) left.emplace_back(offset, key);
    std::ranges::sort(left);
    for (const auto& [offset, key] : left) CountKey(key, {}, ListAt(offset), out);
  }

 private:
  Ranked ListAt(size_t offset) const { return Ranked(ids_).subspan(offset, top_k_); }

  uint32_t top_k_;
  std::vector<uint32_t> ids_;      // ranked lists in the candidate's record order
  std::multimap<Key, size_t> at_;  // key -> offset of its list in ids_
};

}  // namespace

Result<RoutingStability> CompareRouting(const std::string& baseline_trace, const std::string& candidate_trace) {
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> baseline, TraceReader::Open(baseline_trace));
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> candidate, TraceReader::Open(candidate_trace));
  COLIBRI_RETURN_IF_ERROR(CheckSameShape(*baseline, *candidate));
  const uint32_t top_k = baseline->header().shape.top_k;
  RoutingStability out;
  TraceRecord b, c;
  // The readers are opened without allow_torn: a torn file fails in Next(),
  // since the figures would cover part of a run.
  bool more_b = false, more_c = false;
  while (true) {
    COLIBRI_ASSIGN_OR_RETURN(more_b, baseline->Next(&b));
    COLIBRI_ASSIGN_OR_RETURN(more_c, candidate->Next(&c));
    if (!more_b || !more_c || !SameKeys(b, c)) break;
    CountRecord(b, top_k, [&](size_t t) { return RankedOf(c, t, top_k); }, &out);
  }
  CandidateIndex index(top_k);
  COLIBRI_RETURN_IF_ERROR(ForEachRest(candidate.get(), &c, more_c, [&](const TraceRecord& r) { index.Add(r); }));
  COLIBRI_RETURN_IF_ERROR(ForEachRest(baseline.get(), &b, more_b, [&](const TraceRecord& r) {
    CountRecord(r, top_k, [&](size_t t) { return index.Take(KeyOf(r, t)); }, &out);
  }));
  index.CountLeft(&out);
  return out;
}

}  // namespace colibri::reports
