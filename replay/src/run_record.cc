#include "colibri/replay/run_record.h"

#include <nlohmann/json.hpp>

#include "colibri/reports/run_recording.h"
#include "colibri/sim/profiles.h"
#include "colibri/traces/importers.h"

namespace colibri::replay {
namespace {

using Json = nlohmann::ordered_json;

template <typename Profile>
Json ComponentJson(const Profile& p) {
  Json parameters = Json::object();
  for (const sim::Parameter& parameter : sim::ParametersOf(p)) parameters[parameter.field] = parameter.value;
  return Json{{"id", p.id}, {"name", p.name}, {"parameters", parameters}};
}

Json MachineJson(const sim::ResolvedMachine& m) {
  return Json{{"label", m.label},
              {"machine", m.machine.name},
              {"nvme", ComponentJson(m.nvme)},
              {"pcie", ComponentJson(m.pcie)},
              {"compute", ComponentJson(m.compute)}};
}

Json ConfigJson(const ReplayConfig& c) {
  return Json{{"trace", c.trace_path},
              {"model", c.model_dir},
              {"routing", c.routing == RoutingMode::kRecorded ? "recorded" : "recompute"},
              {"l1_bytes", c.l1_bytes},
              {"l2_bytes", c.l2_bytes},
              {"policy", c.policy},
              {"l1_policy", c.l1_policy},
              {"prefetch", {{"predictor", c.prefetch.predictor},
                            {"width", c.prefetch.width},
                            {"decay", c.prefetch.decay},
                            {"profile", c.prefetch_profile}}},
              {"router", {{"mode", engine::RouterModeName(c.router.router.mode)},
                          {"load_aware", c.router.router.load_aware.enabled},
                          {"rebalance_threshold", c.router.router.load_aware.threshold},
                          {"capacity_factor", c.router.capacity_factor},
                          {"capacity_overflow", c.router.capacity_overflow == engine::CapacityOverflow::kDrop ? "drop" : "reroute"}}},
              {"pin_from", c.pin_from},
              {"pin_bytes", c.pin_bytes},
              {"queue_depth", c.queue_depth},
              {"staging_slots", c.staging_slots},
              {"threads", c.threads},
              {"hidden", c.hidden},
              {"pinned", c.pinned},
              {"seed", c.seed},
              {"pacing", c.pacing == Pacing::kOpen ? "open" : "closed"},
              {"arrivals", c.arrivals_path},
              {"time_scale", c.time_scale},
              {"repeat", c.repeat},
              {"max_arrivals", c.max_arrivals},
              {"max_batch", c.max_batch},
              {"raw_step_samples_cap", c.raw_step_samples_cap}};
}

void AddScalars(const ReplayResult& r, reports::RunResults* out) {
  const double seconds = static_cast<double>(r.elapsed_ns) / 1e9;
  auto per_s = [seconds](uint64_t n) { return seconds > 0 ? static_cast<double>(n) / seconds : 0.0; };
  const uint64_t tokens = r.passes;  // one generated token per request pass
  out->scalars = {{"elapsed_ns", static_cast<double>(r.elapsed_ns)},
                  {"moe_ns", static_cast<double>(r.moe_ns)},
                  {"wall_s", r.wall_s},
                  {"tokens_per_s", per_s(tokens)},
                  {"steps_per_s", per_s(r.steps)},
                  {"steps", static_cast<double>(r.steps)},
                  {"routing_decisions", static_cast<double>(r.steps)},
                  {"layer_batches", static_cast<double>(r.layer_batches)},
                  {"passes", static_cast<double>(r.passes)},
                  {"requests", static_cast<double>(r.requests)},
                  {"read_bytes", static_cast<double>(r.read_bytes)},
                  {"reads", static_cast<double>(r.reads)},
                  {"read_bytes_per_token", tokens > 0 ? static_cast<double>(r.read_bytes) / tokens : 0.0},
                  {"queue_full_events", static_cast<double>(r.queue_full_events)},
                  {"prefetch_issued_bytes", static_cast<double>(r.prefetch.issued_bytes)},
                  {"prefetch_hits", static_cast<double>(r.prefetch.hits)},
                  {"prefetch_wasted_bytes", static_cast<double>(r.prefetch.wasted_bytes)},
                  {"events", static_cast<double>(r.events)}};
}

}  // namespace

Result<reports::RunInfo> ReplayRunInfo(const ReplayConfig& c) {
  reports::RunInfo info;
  info.kind = "replay";
  info.label = c.machine.label;
  info.trace_path = c.trace_path;
  COLIBRI_ASSIGN_OR_RETURN(const traces::SourceFile trace, traces::DescribeSourceFile(c.trace_path));
  info.trace_digest = trace.sha256;
  if (c.routing == RoutingMode::kRecorded) {
    info.routing_path = c.trace_path;
    info.routing_digest = trace.sha256;
  }
  info.config_json = ConfigJson(c).dump();
  info.hardware_json = MachineJson(c.machine).dump();
  info.backends = "storage=" + c.storage + " transfer=" + c.transfer + " compute=" + c.compute;
  info.seed = c.seed;
  return info;
}

reports::RunResults ReplayRunResults(const ReplayResult& r, const std::string& summary_json) {
  reports::RunResults out;
  AddScalars(r, &out);
  out.texts = {{"event_digest", r.event_digest},
               {"clock", r.simulated ? "simulated" : "real"},
               {"modelled_layout", r.modelled_layout},
               {"summary_json", summary_json}};
  out.distributions["request_latency_ns"] = r.request_latency_ns;
  out.distributions["ttft_ns"] = r.ttft_ns;
  out.distributions["tpot_ns"] = r.tpot_ns;
  if (r.open_loop) out.distributions["queue_ns"] = r.queue_ns;
  for (size_t i = 0; i < r.step_ns.size(); ++i) {
    out.distributions[std::string("step_latency_ns.") + ReplayResult::kStepNames[i]] = r.step_ns[i];
  }
  out.tiers = reports::TiersOf(reports::CacheOutcome{r.lookups, r.served, r.lookups_decode, r.served_decode,
                                                     r.l1.lookups, r.l1.hits, r.l1_hits_decode, r.l2.lookups,
                                                     r.l2.hits, r.l2_hits_decode, r.read_bytes});
  out.expert_load = r.expert_load_counts;
  out.hit_rate = r.hit_rate;
  return out;
}

}  // namespace colibri::replay
