// `colibri replay TRACE --hw MACHINE ...`: the trace through the engine core
// on each named machine (modelled by default), closed loop; one result per
// machine (docs/REPLAY.md).
#include <cstdio>
#include <memory>

#include "cli_common.h"
#include "colibri/replay/replay_run.h"
#include "colibri/sim/profiles.h"
#include "commands.h"
#include "latency_json.h"

namespace colibri::cli {
namespace {

struct ReplayFlags {
  std::string trace;
  std::vector<std::string> machines;
  std::string hw_nvme, hw_pcie, hw_compute;
  std::vector<std::string> hw_files;
  std::string model_dir;
  std::string l1_bytes = "0";
  std::string l2_bytes = "0";
  std::string policy = "lru";
  std::string l1_policy = "lru";
  uint32_t queue_depth = 32;
  uint32_t staging_slots = 4;
  uint32_t threads = 1;
  uint32_t hidden = 0;
  bool pageable = false;
  std::string storage = "sim", transfer = "sim", compute = "sim";
  std::string routing = "recorded";
  uint64_t seed = 1;
  bool json = false;
};

Json HistogramJson(const replay::LatencyHistogram& h) {
  return Json{{"p50", h.Percentile(50)},   {"p90", h.Percentile(90)}, {"p99", h.Percentile(99)},
              {"p999", h.Percentile(99.9)}, {"max", h.max()},          {"samples", h.count()}};
}

Json TierJson(const engine::TierCounters& c) { return cli::TierJson(c.lookups, c.hits); }

Json RunJson(const replay::ReplayConfig& c, const replay::ReplayResult& r) {
  Json steps = Json::object();
  for (const auto& [name, h] : r.step_ns) steps[name] = HistogramJson(h);
  Json load = Json::array();
  for (const traces::LoadDeviation& d : r.expert_load) {
    load.push_back(Json{{"cv", d.cv}, {"max_over_mean", d.max_over_mean}, {"gini", d.gini}, {"unused", d.unused}});
  }
  return Json{{"machine", c.machine.label},
              {"nvme", c.machine.machine.nvme},
              {"pcie", c.machine.machine.pcie},
              {"compute", c.machine.machine.compute},
              {"backends", {{"storage", c.storage}, {"transfer", c.transfer}, {"compute", c.compute}}},
              {"clock", r.simulated ? "simulated" : "real"},
              {"seed", c.seed},
              {"modelled_layout", r.modelled_layout},
              {"event_digest", r.event_digest},
              {"events", r.events},
              {"steps", r.steps},
              {"layer_batches", r.layer_batches},
              {"passes", r.passes},
              {"requests", r.requests},
              {"wall_s", r.wall_s},
              {"simulated_ns", r.simulated ? Json(r.elapsed_ns) : Json(nullptr)},
              {"elapsed_ns", r.elapsed_ns},
              {"moe_ns", r.moe_ns},
              {"hit_pct_decode", Pct(r.served_decode, r.lookups_decode)},
              {"hit_pct_cum", Pct(r.served, r.lookups)},
              {"cache", {{"l1", TierJson(r.l1)}, {"l2", TierJson(r.l2)}}},
              {"read_bytes", r.read_bytes},
              {"reads", r.reads},
              {"queue_full_events", r.queue_full_events},
              {"staged_experts", r.staged},
              {"step_latency_ns", steps},
              {"request_latency_ns", HistogramJson(r.request_latency_ns)},
              {"ttft_ns", HistogramJson(r.ttft_ns)},
              {"tpot_ns", HistogramJson(r.tpot_ns)},
              {"expert_load", load}};
}

Result<replay::ReplayConfig> BaseConfig(const ReplayFlags& f) {
  replay::ReplayConfig c;
  c.trace_path = f.trace;
  c.model_dir = f.model_dir;
  c.storage = f.storage;
  c.transfer = f.transfer;
  c.compute = f.compute;
  COLIBRI_ASSIGN_OR_RETURN(c.routing, replay::ParseRoutingMode(f.routing));
  c.l1_bytes = std::stoull(f.l1_bytes);
  c.l2_bytes = std::stoull(f.l2_bytes);
  c.policy = f.policy;
  c.l1_policy = f.l1_policy;
  c.queue_depth = f.queue_depth;
  c.staging_slots = f.staging_slots;
  c.threads = f.threads;
  c.hidden = f.hidden;
  c.pinned = !f.pageable;
  c.seed = f.seed;
  return c;
}

Result<Json> Replay(const ReplayFlags& f) {
  COLIBRI_ASSIGN_OR_RETURN(sim::HardwareCatalog catalog, sim::HardwareCatalog::BuiltIn());
  COLIBRI_RETURN_IF_ERROR(catalog.AddFiles(f.hw_files));
  COLIBRI_ASSIGN_OR_RETURN(replay::ReplayConfig base, BaseConfig(f));
  Json runs = Json::array();
  Progress progress("replay");
  for (size_t i = 0; i < f.machines.size(); ++i) {
    replay::ReplayConfig c = base;
    COLIBRI_ASSIGN_OR_RETURN(c.machine,
                             catalog.Resolve(f.machines[i], sim::MachineOverrides{f.hw_nvme, f.hw_pcie, f.hw_compute}));
    COLIBRI_ASSIGN_OR_RETURN(replay::ReplayResult r, replay::RunReplay(c));
    runs.push_back(RunJson(c, r));
    progress.Update(i + 1, f.machines.size());
  }
  progress.Done();
  return Json{{"trace", f.trace}, {"runs", runs}};
}

void PrintHuman(const Json& j) {
  std::printf("%s\n", j["trace"].get<std::string>().c_str());
  std::printf("%-34s %10s %10s %10s %10s %10s %8s %8s %s\n", "machine", "step p50", "step p99", "TTFT p50", "TPOT p50",
              "TPOT p99", "hit%", "hit%dec", "digest");
  for (const Json& r : j["runs"]) {
    const Json& step = r["step_latency_ns"]["layer_batch"];
    auto ms = [](const Json& ns) { return ns.get<double>() / 1e6; };
    std::printf("%-34s %8.3fms %8.3fms %8.1fms %8.1fms %8.1fms %7.1f%% %7.1f%% %s\n",
                r["machine"].get<std::string>().c_str(), ms(step["p50"]), ms(step["p99"]), ms(r["ttft_ns"]["p50"]),
                ms(r["tpot_ns"]["p50"]), ms(r["tpot_ns"]["p99"]), r["hit_pct_cum"].get<double>(),
                r["hit_pct_decode"].get<double>(), r["event_digest"].get<std::string>().c_str());
  }
}

}  // namespace

void AddReplayCommand(CLI::App* app, int* exit_code) {
  auto f = std::make_shared<ReplayFlags>();
  CLI::App* cmd = app->add_subcommand("replay", "Replay a trace through the engine core on modelled (or real) hardware");
  cmd->add_option("trace", f->trace, "Trace file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--hw", f->machines, "Machine profile (repeatable: one run each; colibri hw list)")->required();
  cmd->add_option("--hw-nvme", f->hw_nvme, "Replace the machines' NVMe component (an id)");
  cmd->add_option("--hw-pcie", f->hw_pcie, "Replace the machines' PCIe link (an id)");
  cmd->add_option("--hw-compute", f->hw_compute, "Replace the machines' compute device (an id)");
  cmd->add_option("--hw-file", f->hw_files, "Extra profile files (components or machines)");
  cmd->add_option("--model", f->model_dir, "Model directory (needed by real backends)");
  cmd->add_option("--l1-bytes", f->l1_bytes, "L1 (device) budget, 0 = off")->transform(SizeValidator())->capture_default_str();
  cmd->add_option("--l2-bytes", f->l2_bytes, "L2 (host) budget, 0 = off")->transform(SizeValidator())->capture_default_str();
  cmd->add_option("--policy", f->policy, "L2 cache policy")->check(CLI::IsMember(engine::CachePolicyNames()))->capture_default_str();
  cmd->add_option("--l1-policy", f->l1_policy, "L1 cache policy")
      ->check(CLI::IsMember(engine::CachePolicyNames()))
      ->capture_default_str();
  cmd->add_option("--queue-depth", f->queue_depth, "NVMe reads in flight")->check(CLI::Range(1u, 32768u))->capture_default_str();
  cmd->add_option("--staging-slots", f->staging_slots, "Transient expert slots")->check(CLI::Range(1u, 4096u))->capture_default_str();
  cmd->add_option("--threads", f->threads, "CPU compute threads (--compute cpu)")->check(CLI::Range(1u, 256u))->capture_default_str();
  cmd->add_option("--hidden", f->hidden, "The model's hidden size, when the trace does not record it");
  cmd->add_flag("--pageable", f->pageable, "Host buffers are pageable, not pinned (modelled PCIe)");
  cmd->add_option("--storage", f->storage, "sim, uring or pread")->check(CLI::IsMember({"sim", "uring", "pread"}))->capture_default_str();
  cmd->add_option("--transfer", f->transfer, "sim or cpu")->check(CLI::IsMember({"sim", "cpu"}))->capture_default_str();
  cmd->add_option("--compute", f->compute, "sim or cpu")->check(CLI::IsMember({"sim", "cpu"}))->capture_default_str();
  cmd->add_option("--routing", f->routing, "recorded or recompute")
      ->check(CLI::IsMember({"recorded", "recompute"}))
      ->capture_default_str();
  cmd->add_option("--seed", f->seed, "Root seed of the modelled devices' random streams")->capture_default_str();
  cmd->add_flag("--json", f->json, "Print {\"runs\": [...]} as JSON on stdout");
  cmd->callback([f, exit_code] { *exit_code = Emit(Replay(*f), f->json, &PrintHuman); });
}

}  // namespace colibri::cli
