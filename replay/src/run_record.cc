#include "colibri/replay/run_record.h"

#include <nlohmann/json.hpp>

#include "colibri/reports/run_recording.h"
#include "colibri/sim/profiles.h"
#include "colibri/traces/importers.h"
#include "colibri/traces/reader.h"

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
              {"model_verify", engine::ModelVerifyName(c.model_verify)},
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
              {"raw_step_samples_cap", c.raw_step_samples_cap},
              {"faults", sim::FormatFaultSpec(c.faults)},
              {"read_retry_budget", c.read_retries}};
}

// What replays and local runs both store, from the fields ReplayResult and
// LocalRunResult name alike: distributions, scalars, tiers, expert load and
// the hit-rate series.
template <typename RunResult>
void AddSharedResults(const RunResult& r, double wall_s, uint64_t processed_tokens, reports::RunResults* out) {
  out->distributions["request_latency_ns"] = r.request_latency_ns;
  out->distributions["ttft_ns"] = r.ttft_ns;
  out->distributions["tpot_ns"] = r.tpot_ns;
  for (size_t i = 0; i < r.step_ns.size(); ++i) {
    out->distributions[std::string("step_latency_ns.") + RunResult::kStepNames[i]] = r.step_ns[i];
  }
  const uint64_t tokens = r.passes;  // one generated token per request pass
  const reports::Throughput throughput = reports::ThroughputOf(tokens, processed_tokens, r.steps, r.elapsed_ns);
  out->scalars = {{"elapsed_ns", static_cast<double>(r.elapsed_ns)},
                  {"wall_s", wall_s},
                  {"tokens_per_s", throughput.tokens_per_s},
                  {"processed_tokens_per_s", throughput.processed_tokens_per_s},
                  {"steps_per_s", throughput.steps_per_s},
                  {"steps", static_cast<double>(r.steps)},
                  {"routing_decisions", static_cast<double>(r.steps)},
                  {"layer_batches", static_cast<double>(r.layer_batches)},
                  {"passes", static_cast<double>(r.passes)},
                  {"requests", static_cast<double>(r.requests)},
                  {"read_bytes", static_cast<double>(r.read_bytes)},
                  {"read_bytes_per_token", tokens > 0 ? static_cast<double>(r.read_bytes) / tokens : 0.0},
                  {"prefetch_issued_bytes", static_cast<double>(r.prefetch.issued_bytes)},
                  {"prefetch_hits", static_cast<double>(r.prefetch.hits)},
                  {"prefetch_wasted_bytes", static_cast<double>(r.prefetch.wasted_bytes)}};
  out->tiers = reports::TiersOf(reports::CacheOutcome{r.lookups, r.served, r.lookups_decode, r.served_decode,
                                                      r.l1.lookups, r.l1.hits, r.l1_hits_decode, r.l2.lookups,
                                                      r.l2.hits, r.l2_hits_decode, r.read_bytes});
  out->expert_load = r.expert_load_counts;
  out->hit_rate = r.hit_rate;
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
  AddSharedResults(r, r.wall_s, r.processed_tokens, &out);
  out.scalars.insert({{"moe_ns", static_cast<double>(r.moe_ns)},
                      {"reads", static_cast<double>(r.reads)},
                      {"queue_full_events", static_cast<double>(r.queue_full_events)},
                      {"events", static_cast<double>(r.events)},
                      {"read_retries", static_cast<double>(r.read_retries)},
                      {"faults_injected", static_cast<double>(r.faults.size())}});
  for (const sim::InjectedFault& f : r.faults) out.faults.push_back(reports::FaultRecord{f.at_ns, f.kind, f.detail});
  out.texts = {{"event_digest", r.event_digest},
               {"clock", r.simulated ? "simulated" : "real"},
               {"modelled_layout", r.modelled_layout},
               {"summary_json", summary_json},
               {"trace_ending", r.trace.torn ? traces::TornEnding(r.trace.torn_at_byte, r.trace.records)
                                             : std::string("complete")}};
  if (r.open_loop) out.distributions["queue_ns"] = r.queue_ns;
  return out;
}

Result<reports::RunResults> LocalRunStoredResults(const LocalRunResult& r, const std::string& summary_json) {
  reports::RunResults out;
  AddSharedResults(r, static_cast<double>(r.elapsed_ns) / 1e9, r.prefill_tokens + r.decode_tokens, &out);
  out.texts = {{"output_digest", r.output_digest}, {"clock", "real"}, {"summary_json", summary_json}};
  out.scalars.insert({{"read_retries", static_cast<double>(r.read_retries)},
                      {"faults_injected", static_cast<double>(r.faults.size())}});
  for (const sim::InjectedFault& f : r.faults) out.faults.push_back(reports::FaultRecord{f.at_ns, f.kind, f.detail});
  // A failed request is stored with the faults: what the injected faults cost.
  out.scalars["requests_failed"] = static_cast<double>(r.failed_requests.size());
  for (const FailedRequest& f : r.failed_requests) {
    out.faults.push_back(reports::FaultRecord{f.at_ns, "request.failed",
                                              "request " + std::to_string(f.request) + ", pass " + std::to_string(f.pass) +
                                                  ": " + f.error});
  }
  if (r.recording) {
    COLIBRI_ASSIGN_OR_RETURN(const traces::SourceFile routing, traces::DescribeSourceFile(r.recording->path));
    out.routing_path = r.recording->path;
    out.routing_digest = routing.sha256;
  }
  return out;
}

}  // namespace colibri::replay
