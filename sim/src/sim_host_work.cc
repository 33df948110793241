#include "colibri/sim/sim_host_work.h"

#include <algorithm>
#include <string>

namespace colibri::sim {
namespace {

// fixed_ns + the ps terms' sum rounded to the nearest ns.
engine::TimeNs Cost(engine::TimeNs fixed_ns, unsigned __int128 ps) {
  return fixed_ns + static_cast<engine::TimeNs>((ps + 500) / 1000);
}

unsigned __int128 Product(uint64_t a, uint64_t b) { return static_cast<unsigned __int128>(a) * b; }

}  // namespace

Result<HostWorkProfile> HostWorkAtThreads(const std::vector<HostWorkProfile>& measured, uint32_t threads) {
  if (measured.empty()) return Status::InvalidArgument("sim host work: the machine profile has no host_work");
  const HostWorkProfile* unrecorded = nullptr;
  std::vector<uint32_t> counts;
  for (const HostWorkProfile& h : measured) {
    if (h.threads == threads) return h;
    if (h.threads == 0 && unrecorded == nullptr) unrecorded = &h;
    if (h.threads != 0) counts.push_back(h.threads);
  }
  if (unrecorded != nullptr) return *unrecorded;
  std::sort(counts.begin(), counts.end());
  std::string list;
  for (uint32_t t : counts) list += (list.empty() ? "" : ", ") + std::to_string(t);
  return Status::Unsupported("the machine's host_work was measured at " + list + " compute thread(s), not at the " +
                             std::to_string(threads) + " this run models (calibrate with that many threads)");
}

Result<std::unique_ptr<SimHostWork>> SimHostWork::Make(const HostWorkProfile& profile, const SimCompute* compute,
                                                       const ReadGrid& read_grid) {
  if (!profile.present) return Status::InvalidArgument("sim host work: the machine profile has no host_work");
  if (compute == nullptr) return Status::InvalidArgument("sim host work: no compute model for the gate GEMV");
  COLIBRI_RETURN_IF_ERROR(compute->GateGemvNs(1, 1, 1).status());
  ReadGrid submit_points;
  for (const ReadGridPoint& p : read_grid.points) {
    if (p.submit_ns > 0) submit_points.points.push_back(p);
  }
  return std::unique_ptr<SimHostWork>(new SimHostWork(profile, compute, std::move(submit_points)));
}

engine::TimeNs SimHostWork::ReadSubmitNs(uint64_t bytes, size_t in_flight) const {
  const uint32_t depth = static_cast<uint32_t>(std::min<size_t>(in_flight + 1, UINT32_MAX));
  return sim::ReadSubmitNs(submit_points_, bytes, depth);
}

engine::TimeNs SimHostWork::RoutingNs(size_t tokens, uint32_t experts, uint32_t hidden, bool gate_charged) const {
  if (tokens == 0) return 0;
  const engine::TimeNs routing_ns =
      Cost(profile_.routing_fixed_ns, Product(tokens, experts) * profile_.routing_ps_per_logit);
  if (!gate_charged) return routing_ns;
  const Result<engine::TimeNs> gate = compute_->GateGemvNs(experts, hidden, tokens);
  const engine::TimeNs gate_ns = gate.ok() ? gate.value() : 0;  // Make checked that the model costs gate GEMVs
  return std::max<engine::TimeNs>(0, routing_ns - gate_ns);
}

engine::TimeNs SimHostWork::SchedulingNs(size_t tokens, uint32_t top_k, uint32_t distinct_experts, uint32_t reads) const {
  const unsigned __int128 ps = Product(distinct_experts, profile_.scheduling_ps_per_expert) +
                               Product(tokens, top_k) * profile_.scheduling_ps_per_assignment +
                               Product(reads, profile_.scheduling_ps_per_read);
  return Cost(profile_.scheduling_fixed_ns + (reads > 0 ? profile_.scheduling_read_fixed_ns : 0), ps);
}

engine::TimeNs SimHostWork::GatherNs(size_t rows, uint32_t hidden) const {
  return Cost(profile_.gather_fixed_ns, Product(rows, hidden) * profile_.gather_ps_per_element);
}

engine::TimeNs SimHostWork::AggregationNs(size_t tokens, uint32_t top_k, uint32_t hidden) const {
  return Cost(profile_.aggregation_fixed_ns, Product(tokens, top_k) * hidden * profile_.aggregation_ps_per_element);
}

}  // namespace colibri::sim
