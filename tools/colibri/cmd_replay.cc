// `colibri replay TRACE --hw MACHINE ...`: the trace through the engine core
// on each named machine (modelled by default), closed or open loop; one result
// per machine, the machines run by up to --jobs threads (docs/REPLAY.md).
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "cache_flags.h"
#include "cli_common.h"
#include "colibri/replay/replay_run.h"
#include "colibri/replay/run_record.h"
#include "colibri/replay/trace_events.h"
#include "colibri/reports/latency_json.h"
#include "colibri/sim/profiles.h"
#include "colibri/traces/importers.h"
#include "commands.h"
#include "fault_flags.h"
#include "hw_flags.h"
#include "router_flags.h"
#include "run_storage.h"
#include "colibri/no_throw.h"

namespace colibri::cli {
namespace {

struct ReplayFlags {
  std::string trace;
  bool allow_torn = false;
  std::vector<std::string> machines;
  std::string hw_nvme, hw_pcie, hw_compute;
  std::vector<std::string> hw_files;
  std::string model_dir;
  std::string verify = "auto";
  TierFlags tiers;
  PrefetchFlags prefetch;
  std::string prefetch_profile;
  PinFlags pin;
  RouterFlags router;
  uint32_t vocab = 32000;
  uint32_t threads = 1;
  uint32_t hidden = 0;
  bool pageable = false;
  std::string storage = "sim";
  HwFlags hw{"sim", "sim"};  // --transfer, --compute (+ "auto", cpu, cuda)
  std::string routing = "recorded";
  uint64_t seed = 1;
  std::string pacing = "closed";
  std::string arrivals;
  double time_scale = 1.0;
  bool repeat = false;
  uint64_t max_arrivals = 0;
  uint32_t max_batch = 256;
  uint32_t jobs = 1;
  std::string trace_events;
  std::string faults = "none";  // a fault spec (sim/fault_spec.h)
  uint32_t read_retries = 2;
  uint64_t raw_step_samples_cap = 10'000'000;
  bool decode_series = false;
  StoreFlags store;
  bool pacing_given = false;
  bool json = false;
};

Json HistogramJson(const reports::LatencyHistogram& h) { return reports::PercentilesJson(reports::SummarizeHistogram(h)); }

// Per decode pass, in run order (--decode-series): one array per figure.
Json DecodeSeriesJson(const std::vector<replay::DecodePasses::Pass>& series) {
  Json read_bytes = Json::array(), nvme_read_ns = Json::array(), dense_ns = Json::array(), elapsed_ns = Json::array();
  for (const replay::DecodePasses::Pass& p : series) {
    read_bytes.push_back(p.read_bytes);
    nvme_read_ns.push_back(p.nvme_read_ns);
    dense_ns.push_back(p.dense_ns);
    elapsed_ns.push_back(p.elapsed_ns);
  }
  return Json{{"read_bytes", read_bytes}, {"nvme_read_ns", nvme_read_ns}, {"dense_ns", dense_ns}, {"elapsed_ns", elapsed_ns}};
}

Json DenseCostJson(const replay::DenseCostTotals& d) {
  return Json{{"pass_ns", d.pass_ns},
              {"attention_ns", d.attention_ns},
              {"fault_ns", d.fault_ns},
              {"kv_read_bytes", d.kv_read_bytes},
              {"faults", d.faults},
              {"faulted_bytes", d.faulted_bytes},
              {"shortfall_bytes_max", d.shortfall_bytes_max}};
}

Json DecodeJson(const replay::DecodePasses& d, bool series) {
  Json out{{"passes", d.passes},
              {"tokens", d.tokens},
              {"read_bytes", d.read_bytes},
              {"nvme_read_ns", d.nvme_read_ns},
              {"read_latency_ns", d.read_latency_ns},
              {"compute_ns", d.compute_ns},
              {"elapsed_ns", d.elapsed_ns},
              {"read_bytes_per_pass", HistogramJson(d.read_bytes_per_pass)},
              {"nvme_read_ns_per_pass", HistogramJson(d.nvme_read_ns_per_pass)},
              {"elapsed_ns_per_pass", HistogramJson(d.elapsed_ns_per_pass)}};
  if (series) out["series"] = DecodeSeriesJson(d.series);
  return out;
}

Json PacingJson(const replay::ReplayConfig& c, const replay::ReplayResult& r) {
  if (!r.open_loop) return Json{{"mode", "closed"}};
  return Json{{"mode", "open"},
              {"arrivals", c.arrivals_path.empty() ? Json("trace") : Json(c.arrivals_path)},
              {"arrivals_total", r.arrivals_total},
              {"time_scale", c.time_scale},
              {"repeat", c.repeat},
              {"max_arrivals", c.max_arrivals},
              {"max_batch", c.max_batch},
              {"max_pass_requests", r.max_pass_requests}};
}

Json RunJson(const replay::ReplayConfig& c, const replay::ReplayResult& r) {
  Json steps = Json::object();
  for (size_t i = 0; i < r.step_ns.size(); ++i) steps[replay::ReplayResult::kStepNames[i]] = reports::SamplesJson(r.step_ns[i]);
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
              {"hit_pct_decode", reports::Pct(r.served_decode, r.lookups_decode)},
              {"hit_pct_cum", reports::Pct(r.served, r.lookups)},
              {"cache", {{"l1", TierJson(r.l1)}, {"l2", TierJson(r.l2)}}},
              {"router", c.routing == replay::RoutingMode::kRecompute ? RouterJson(c.router, r.router) : Json(nullptr)},
              {"prefetch", PrefetchJson(c.prefetch.predictor, r.prefetch, r.l2.misses)},
              {"read_bytes", r.read_bytes},
              {"preload_bytes", r.preload_bytes},
              {"reads", r.reads},
              {"queue_full_events", r.queue_full_events},
              {"staged_experts", r.staged},
              {"step_latency_ns", steps},
              {"request_latency_ns", reports::SamplesJson(r.request_latency_ns)},
              {"ttft_ns", reports::SamplesJson(r.ttft_ns)},
              {"tpot_ns", reports::SamplesJson(r.tpot_ns)},
              {"queue_ns", r.open_loop ? reports::SamplesJson(r.queue_ns) : Json(nullptr)},
              {"dense_cost", DenseCostJson(r.dense_cost)},
              {"decode", DecodeJson(r.decode, c.decode_series)},
              {"throughput", reports::ThroughputJson(reports::ThroughputOf(r.passes, r.processed_tokens, r.steps, r.elapsed_ns))},
              {"pacing", PacingJson(c, r)},
              {"trace_ending", TraceEndingJson(r.trace.torn, r.trace.torn_at_byte, r.trace.records)},
              {"expert_load", load},
              {"faults", FaultsJson(c.faults, r.faults)},
              {"read_retries", r.read_retries}};
}

Result<replay::ReplayConfig> BaseConfig(const ReplayFlags& f) {
  replay::ReplayConfig c;
  c.trace_path = f.trace;
  c.allow_torn = f.allow_torn;
  c.model_dir = f.model_dir;
  c.model_verify = ToModelVerify(f.verify);
  c.storage = f.storage;
  CopyHwFlags(f.hw, &c);
  COLIBRI_ASSIGN_OR_RETURN(c.routing, replay::ParseRoutingMode(f.routing));
  COLIBRI_RETURN_IF_ERROR(ApplyRouterFlags(f.router, f.vocab, f.seed, &c.router));
  c.l1_bytes = f.tiers.l1();
  c.l2_bytes = f.tiers.l2();
  c.policy = f.tiers.policy;
  c.l1_policy = f.tiers.l1_policy;
  c.prefetch = ToPrefetchConfig(f.prefetch);
  c.prefetch_profile = f.prefetch_profile;
  c.pin_from = f.pin.from;
  c.pin_bytes = std::stoull(f.pin.bytes);
  c.queue_depth = f.tiers.queue_depth;
  c.staging_slots = f.tiers.staging_slots;
  c.threads = f.threads;
  c.hidden = f.hidden;
  c.pinned = !f.pageable;
  c.seed = f.seed;
  c.pacing = f.pacing == "open" || !f.arrivals.empty() ? replay::Pacing::kOpen : replay::Pacing::kClosed;
  c.arrivals_path = f.arrivals;
  c.time_scale = f.time_scale;
  c.repeat = f.repeat;
  c.max_arrivals = f.max_arrivals;
  c.max_batch = f.max_batch;
  c.raw_step_samples_cap = f.raw_step_samples_cap;
  c.decode_series = f.decode_series;
  COLIBRI_ASSIGN_OR_RETURN(c.faults, ParseFaultsFlag(f.faults));
  c.read_retries = f.read_retries;
  return c;
}

// Where runs are stored: one row per machine, begun before the replays start
// and finished (or failed) as each one ends.
class Storage {
 public:
  // Opens the store unless --no-store; begins a run per config (a recomputing
  // replay then writes its routing next to the database).
  Status Begin(const ReplayFlags& f, std::vector<replay::ReplayConfig>* configs) {
    if (f.store.no_store) return Status::Ok();
    COLIBRI_ASSIGN_OR_RETURN(store_, OpenStore(f.store));
    for (size_t i = 0; i < configs->size(); ++i) {
      replay::ReplayConfig& c = (*configs)[i];
      COLIBRI_ASSIGN_OR_RETURN(reports::RunInfo info, replay::ReplayRunInfo(c));
      StampRun(RerunArgs({"--hw", "--jobs", "--trace-events"}, {"--hw", f.machines[i]}), &info);
      COLIBRI_ASSIGN_OR_RETURN(const int64_t id, store_->BeginRun(info));
      run_ids_.push_back(id);
      if (c.routing == replay::RoutingMode::kRecompute) {
        c.routing_out = DbPath(f.store) + ".routing/run-" + std::to_string(id) + ".ctrace";
        std::error_code ignored;
        std::filesystem::create_directories(std::filesystem::path(c.routing_out).parent_path(), ignored);
      }
    }
    return Status::Ok();
  }

  // Stores run i's outcome and adds "run_id" to its JSON entry. Thread-safe.
  Status Finish(size_t i, const replay::ReplayConfig& c, const Result<replay::ReplayResult>& r, Json* entry) {
    if (store_ == nullptr) return Status::Ok();
    const std::lock_guard<std::mutex> lock(mutex_);
    const int64_t id = run_ids_[i];
    if (!r.ok()) return store_->FailRun(id, r.status().message(), NowUnixMs());
    (*entry)["run_id"] = id;
    reports::RunResults results = replay::ReplayRunResults(r.value(), entry->dump());
    if (!c.routing_out.empty()) {
      COLIBRI_ASSIGN_OR_RETURN(const traces::SourceFile routing, traces::DescribeSourceFile(c.routing_out));
      results.routing_path = c.routing_out;
      results.routing_digest = routing.sha256;
    }
    COLIBRI_RETURN_IF_ERROR(store_->FinishRun(id, results, NowUnixMs()));
    StoredRunIds().push_back(id);
    return Status::Ok();
  }

 private:
  std::unique_ptr<reports::RunStore> store_;
  std::vector<int64_t> run_ids_;
  std::mutex mutex_;
};

// Runs config i and stores it: its JSON entry.
Result<Json> RunOne(const replay::ReplayConfig& c, size_t i, Storage* storage) {
  const Result<replay::ReplayResult> r = replay::RunReplay(c);
  Json entry = r.ok() ? RunJson(c, r.value()) : Json();
  if (r.ok()) {
    for (const std::string& w : r.value().warnings) std::cerr << "colibri: warning: " << c.machine.label << ": " << w << "\n";
    entry["warnings"] = r.value().warnings;
  }
  COLIBRI_RETURN_IF_ERROR(storage->Finish(i, c, r, &entry));
  COLIBRI_RETURN_IF_ERROR(r.status());
  return entry;
}

// Runs every config on up to `jobs` threads, storing each as it ends; JSON entries in config order.
Result<Json> RunAll(const std::vector<replay::ReplayConfig>& configs, uint32_t jobs, Storage* storage) {
  std::vector<std::optional<Result<Json>>> results(configs.size());
  std::atomic<size_t> next{0};
  std::mutex progress_mutex;
  Progress progress("replay");
  size_t done = 0;
  auto worker = [&] {
    for (size_t i = next++; i < configs.size(); i = next++) {
      results[i] = NoThrow([&] { return RunOne(configs[i], i, storage); });
      const std::lock_guard<std::mutex> lock(progress_mutex);
      progress.Update(++done, configs.size());
    }
  };
  std::vector<std::thread> threads;
  for (uint32_t t = 1; t < std::min<size_t>(jobs, configs.size()); ++t) threads.emplace_back(worker);
  worker();
  for (std::thread& thread : threads) thread.join();
  progress.Done();
  Json runs = Json::array();
  for (auto& r : results) {
    COLIBRI_RETURN_IF_ERROR(r->status());
    runs.push_back(std::move(r->value()));
  }
  return runs;
}

Result<Json> Replay(const ReplayFlags& f) {
  COLIBRI_ASSIGN_OR_RETURN(sim::HardwareCatalog catalog, sim::HardwareCatalog::BuiltIn());
  COLIBRI_RETURN_IF_ERROR(catalog.AddFiles(f.hw_files));
  COLIBRI_ASSIGN_OR_RETURN(replay::ReplayConfig base, BaseConfig(f));
  if (f.pacing == "closed" && !f.arrivals.empty() && f.pacing_given) {
    return Status::InvalidArgument("--arrivals paces an open loop: drop --pacing closed");
  }
  if (!f.trace_events.empty() && f.jobs > 1) {
    return Status::InvalidArgument("--trace-events writes one timeline file: use --jobs 1");
  }
  std::unique_ptr<replay::TraceEventWriter> timeline;
  if (!f.trace_events.empty()) {
    COLIBRI_ASSIGN_OR_RETURN(timeline, replay::TraceEventWriter::Create(f.trace_events, ""));
  }
  std::vector<replay::ReplayConfig> configs;
  for (const std::string& name : f.machines) {
    replay::ReplayConfig c = base;
    COLIBRI_ASSIGN_OR_RETURN(c.machine, catalog.Resolve(name, sim::MachineOverrides{f.hw_nvme, f.hw_pcie, f.hw_compute}));
    configs.push_back(c);
  }
  Storage storage;
  COLIBRI_RETURN_IF_ERROR(storage.Begin(f, &configs));
  Json runs = Json::array();
  if (timeline != nullptr) {  // one machine after the other, each its own process in the timeline
    for (size_t i = 0; i < configs.size(); ++i) {
      timeline->BeginProcess(configs[i].machine.label);
      configs[i].event_sink = timeline.get();
      COLIBRI_ASSIGN_OR_RETURN(Json entry, RunOne(configs[i], i, &storage));
      runs.push_back(std::move(entry));
    }
    COLIBRI_RETURN_IF_ERROR(timeline->Finish());
  } else {
    COLIBRI_ASSIGN_OR_RETURN(runs, RunAll(configs, f.jobs, &storage));
  }
  Json out{{"trace", f.trace}, {"runs", runs}};
  if (timeline != nullptr) {
    out["trace_events"] = Json{{"path", f.trace_events}, {"spans", timeline->spans_written()},
                               {"dropped", timeline->spans_dropped()}};
  }
  return out;
}

void PrintHuman(const Json& j) {
  std::printf("%s\n", j["trace"].get<std::string>().c_str());
  std::printf("%5s %-20s %6s %9s %9s %9s %9s %9s %9s %8s %6s %6s  %s\n", "run", "machine", "pacing", "req p50", "req p99",
              "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "tok/s", "hit%", "hit%d", "digest");
  auto ms = [](const Json& h, const char* p) { return h[p].get<double>() / 1e6; };
  for (const Json& r : j["runs"]) {
    const Json &req = r["request_latency_ns"], &ttft = r["ttft_ns"], &tpot = r["tpot_ns"];
    const std::string run = r.contains("run_id") ? "#" + std::to_string(r["run_id"].get<int64_t>()) : "-";
    std::printf("%5s %-20s %6s %7.0fms %7.0fms %7.0fms %7.0fms %7.1fms %7.1fms %8.1f %5.1f%% %5.1f%%  %s\n",
                run.c_str(), r["machine"].get<std::string>().c_str(), r["pacing"]["mode"].get<std::string>().c_str(),
                ms(req, "p50"), ms(req, "p99"), ms(ttft, "p50"), ms(ttft, "p99"), ms(tpot, "p50"), ms(tpot, "p99"),
                r["throughput"]["tokens_per_s"].get<double>(), r["hit_pct_cum"].get<double>(),
                r["hit_pct_decode"].get<double>(), r["event_digest"].get<std::string>().c_str());
  }
  for (const Json& r : j["runs"]) PrintFaultsLine(r["faults"], r["read_retries"].get<uint64_t>());
  if (j.contains("trace_events")) {
    std::printf("timeline: %s (%llu spans)\n", j["trace_events"]["path"].get<std::string>().c_str(),
                static_cast<unsigned long long>(j["trace_events"]["spans"].get<uint64_t>()));
  }
}

}  // namespace

void AddReplayCommand(CLI::App* app, int* exit_code) {
  auto f = std::make_shared<ReplayFlags>();
  CLI::App* cmd = app->add_subcommand("replay", "Replay a trace through the engine core on modelled (or real) hardware");
  cmd->add_option("trace", f->trace, "Trace file")->required()->check(CLI::ExistingFile);
  AddAllowTornFlag(cmd, &f->allow_torn);
  cmd->add_option("--hw", f->machines, "Machine profile (repeatable: one run each; colibri hw list)")->required();
  cmd->add_option("--hw-nvme", f->hw_nvme, "Replace the machines' NVMe component (an id)");
  cmd->add_option("--hw-pcie", f->hw_pcie, "Replace the machines' PCIe link (an id)");
  cmd->add_option("--hw-compute", f->hw_compute, "Replace the machines' compute device (an id)");
  cmd->add_option("--hw-file", f->hw_files, "Extra profile files (components or machines)");
  cmd->add_option("--model", f->model_dir, "Model directory (needed by real backends)");
  AddModelVerifyFlag(cmd, &f->verify);
  AddTierFlags(cmd, &f->tiers, "L1 (device) budget, 0 = off", "L2 (host) budget, 0 = off");
  AddPrefetchFlags(cmd, &f->prefetch, {"none", "coact", "lookahead", "oracle"});
  cmd->add_option("--prefetch-profile", f->prefetch_profile, "coact: train on this trace first")->check(CLI::ExistingFile);
  AddPinFlags(cmd, &f->pin);
  AddRouterFlags(cmd, &f->router);
  cmd->add_option("--vocab", f->vocab, "hash-token: the vocabulary of the trace's token ids")->capture_default_str();
  cmd->add_option("--threads", f->threads, "CPU compute threads (--compute cpu)")->check(CLI::Range(1u, 256u))->capture_default_str();
  cmd->add_option("--hidden", f->hidden, "The model's hidden size, when the trace does not record it")
      ->check(CLI::Range(1u, 1u << 20));  // the model format's largest dimension
  cmd->add_flag("--pageable", f->pageable, "Host buffers are pageable, not pinned (modelled PCIe)");
  cmd->add_option("--storage", f->storage, "sim, uring or pread")->check(CLI::IsMember({"sim", "uring", "pread"}))->capture_default_str();
  AddHwFlags(cmd, &f->hw, {"sim", "auto", "cpu", "cuda"});
  cmd->add_option("--routing", f->routing, "recorded or recompute")
      ->check(CLI::IsMember({"recorded", "recompute"}))
      ->capture_default_str();
  cmd->add_option("--seed", f->seed, "Root seed of the modelled devices' random streams")->capture_default_str();
  AddFaultsFlag(cmd, &f->faults, &f->read_retries);
  CLI::Option* pacing = cmd->add_option("--pacing", f->pacing, "closed (as fast as dependencies allow) or open (arrivals)")
                            ->check(CLI::IsMember({"closed", "open"}))
                            ->capture_default_str();
  cmd->add_option("--arrivals", f->arrivals, "Request-arrival trace (Azure CSV, Mooncake JSONL): open loop")
      ->check(CLI::ExistingFile);
  cmd->add_option("--time-scale", f->time_scale, "Open loop: arrivals come this many times as fast")
      ->check(PositiveNumber())
      ->capture_default_str();
  cmd->add_flag("--repeat", f->repeat, "Open loop: cycle the trace's requests to cover every arrival");
  cmd->add_option("--max-arrivals", f->max_arrivals, "Open loop: only the first N arrivals (0 = all)")->capture_default_str();
  cmd->add_option("--max-batch", f->max_batch, "Open loop: requests per forward pass")
      ->check(CLI::Range(1u, 1000000u))
      ->capture_default_str();
  cmd->add_option("--jobs", f->jobs, "Machines replayed at once (threads)")->check(CLI::Range(1u, 256u))->capture_default_str();
  cmd->add_option("--trace-events", f->trace_events, "Write the timeline as a Chrome/Perfetto trace-event JSON file");
  cmd->add_option("--raw-sample-cap", f->raw_step_samples_cap,
                  "Raw per-step latency samples kept per run (over all steps); beyond it, histograms (1% error)")
      ->capture_default_str();
  AddStoreFlags(cmd, &f->store);
  cmd->add_flag("--decode-series", f->decode_series,
                "With --json: every decode pass's bytes read, read window, dense and elapsed ns (decode.series)");
  cmd->add_flag("--json", f->json, "Print {\"runs\": [...]} as JSON on stdout");
  cmd->callback([f, exit_code, pacing] {
    f->pacing_given = pacing->count() > 0;
    ResolveHwFlags(&f->hw);
    *exit_code = Emit(Replay(*f), f->json, &PrintHuman);
  });
}

}  // namespace colibri::cli
