// `colibri run`: the production engine end to end on this machine
// (replay/local_run.h runs the workload: R requests, each a prefill pass of P
// tokens, then N decode passes over all requests together, experts streamed
// from experts.bin through the L2 and L1 caches). This file holds the flags,
// the options they make, the text and JSON output and the run's row in the
// run store (docs/RUNS.md).

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cache_flags.h"
#include "version.h"
#include "cli_common.h"
#include "colibri/replay/local_run.h"
#include "colibri/replay/run_record.h"
#include "colibri/bench/process_memory.h"
#include "colibri/reports/latency_json.h"
#include "commands.h"
#include "fault_flags.h"
#include "hw_flags.h"
#include "router_flags.h"
#include "run_storage.h"

namespace colibri::cli {
namespace {

struct RunFlags {
  std::string model_dir;
  uint32_t requests = 4;
  uint32_t prefill = 32;
  uint32_t tokens = 32;
  uint64_t seed = 1;
  TierFlags tiers{.l2_bytes = std::to_string(1ull << 30)};
  std::string faults = "none";  // a fault spec (sim/fault_spec.h)
  uint32_t read_retries = 2;
  bool isolate_failures = false;
  PrefetchFlags prefetch;
  PinFlags pin;
  RouterFlags router;
  std::string log_level = "warn";
  uint32_t threads = 1;
  HwFlags hw;
  std::string storage = "auto";
  bool direct_io = true;
  double correlation = 0.9;
  uint32_t vocab = 32000;
  std::string verify = "auto";
  std::string record;
  bool record_logits = false;
  bool record_hidden = false;
  bool record_tokens = false;
  TraceOutputFlags record_output;
  uint64_t raw_step_samples_cap = 10'000'000;
  StoreFlags store;
  bool force = false;
  bool json = false;
};

// The library's options from the flags (the router's may be refused).
Result<replay::LocalRunOptions> ToOptions(const RunFlags& f) {
  replay::LocalRunOptions o;
  o.model_dir = f.model_dir;
  o.verify = ToModelVerify(f.verify);
  o.force = f.force;
  COLIBRI_ASSIGN_OR_RETURN(o.faults, ParseFaultsFlag(f.faults));
  o.read_retries = f.read_retries;
  o.isolate_failures = f.isolate_failures;
  o.requests = f.requests;
  o.prefill_tokens = f.prefill;
  o.decode_passes = f.tokens;
  o.seed = f.seed;
  o.correlation = f.correlation;
  o.vocab = f.vocab;
  o.l1_bytes = f.tiers.l1();
  o.l2_bytes = f.tiers.l2();
  o.l2_policy = f.tiers.policy;
  o.l1_policy = f.tiers.l1_policy;
  o.prefetch = ToPrefetchConfig(f.prefetch);
  o.pin_from = f.pin.from;
  o.pin_bytes = std::stoull(f.pin.bytes);
  COLIBRI_RETURN_IF_ERROR(ApplyRouterFlags(f.router, f.vocab, f.seed, &o.router));
  o.queue_depth = f.tiers.queue_depth;
  o.staging_slots = f.tiers.staging_slots;
  o.threads = f.threads;
  o.storage = f.storage;
  o.direct_io = f.direct_io;
  CopyHwFlags(f.hw, &o);
  o.raw_step_samples_cap = f.raw_step_samples_cap;
  o.record_path = f.record;
  o.record_logits = f.record_logits;
  o.record_hidden = f.record_hidden;
  o.record_tokens = f.record_tokens;
  o.record_writer = ToWriterOptions(f.record_output);
  o.record_provenance.source_engine = std::string("colibri ") + ColibriVersion() + " (" + ColibriGitCommit() + ")";
  o.record_provenance.importer = "colibri run";
  o.record_provenance.notes = "model " + f.model_dir + ", seed " + std::to_string(f.seed);
  if (f.log_level == "debug") o.routing_log = stderr;
  return o;
}

Json ConfigJson(const RunFlags& f) {
  Json config{{"model", f.model_dir},       {"requests", f.requests},
              {"prefill", f.prefill},       {"tokens", f.tokens},
              {"seed", f.seed},             {"l1_bytes", f.tiers.l1()},
              {"l2_bytes", f.tiers.l2()}, {"policy", f.tiers.policy},
              {"l1_policy", f.tiers.l1_policy},
              {"prefetch", {{"predictor", f.prefetch.predictor}, {"width", f.prefetch.width}, {"decay", f.prefetch.decay}}},
              {"pin_from", f.pin.from},     {"pin_bytes", std::stoull(f.pin.bytes)},
              {"router", RouterConfigJson(f.router)},
              {"queue_depth", f.tiers.queue_depth},
              {"staging_slots", f.tiers.staging_slots},
              {"threads", f.threads},       {"storage", f.storage},
              {"direct_io", f.direct_io},   {"correlation", f.correlation}, {"vocab", f.vocab},
              {"verify", f.verify},         {"record", f.record},
              {"record_logits", f.record_logits}, {"record_hidden", f.record_hidden},
              {"record_tokens", f.record_tokens}, {"faults", f.faults},
              {"read_retry_budget", f.read_retries}, {"isolate_failures", f.isolate_failures}};
  config.update(ToJson(f.record_output));
  config.update(HwJson(f.hw));
  return config;
}

Json FailedRequestsJson(const std::vector<replay::FailedRequest>& failed) {
  Json out = Json::array();
  for (const replay::FailedRequest& f : failed) {
    out.push_back(Json{{"request", f.request}, {"pass", f.pass}, {"layer_index", f.layer_index},
                       {"expert", f.expert}, {"at_ns", f.at_ns}, {"error", f.error}});
  }
  return out;
}

Json ResultJson(const RunFlags& f, const replay::LocalRunOptions& o, const replay::LocalRunResult& r) {
  Json steps_json = Json::object();
  for (size_t i = 0; i < r.step_ns.size(); ++i) steps_json[replay::LocalRunResult::kStepNames[i]] = reports::SamplesJson(r.step_ns[i]);
  Json out{{"config", ConfigJson(f)},
           {"storage_backend", r.storage_backend},
           {"transfer_backend", r.transfer_backend},
           {"compute_backend", r.compute_backend},
           {"output_digest", r.output_digest},
           {"wall_s", static_cast<double>(r.elapsed_ns) / 1e9},
           {"elapsed_ns", r.elapsed_ns},
           {"requests", r.requests},
           {"passes", r.passes},
           {"forward_passes", r.forward_passes},
           {"tokens", r.prefill_tokens + r.decode_tokens},
           {"prefill_tokens", r.prefill_tokens},
           {"decode_tokens", r.decode_tokens},
           {"tokens_per_s", r.throughput.tokens_per_s},
           {"processed_tokens_per_s", r.throughput.processed_tokens_per_s},
           {"steps", r.steps},
           {"hit_pct_decode", reports::Pct(r.served_decode, r.lookups_decode)},
           {"hit_pct_cum", reports::Pct(r.served, r.lookups)},
           {"cache", {{"l1", TierJson(r.l1)}, {"l2", TierJson(r.l2)}}},
           {"router", RouterJson(o.router, r.router)},
           {"prefetch", PrefetchJson(f.prefetch.predictor, r.prefetch, r.l2.misses)},
           {"read_bytes", r.read_bytes},
           {"preload_bytes", r.preload_bytes},
           {"staged_experts", r.staged},
           {"device_staged_experts", r.device_staged},
           {"dropped_assignments", r.dropped_assignments},
           {"pool_bytes", r.pool_bytes},
           {"peak_rss_bytes", bench::PeakRssBytes()},
           {"step_latency_ns", steps_json},
           {"request_latency_ns", reports::SamplesJson(r.request_latency_ns)},
           {"ttft_ns", reports::SamplesJson(r.ttft_ns)},
           {"tpot_ns", reports::SamplesJson(r.tpot_ns)},
           {"throughput", reports::ThroughputJson(r.throughput)},
           {"warnings", r.warnings},
           {"faults", FaultsJson(o.faults, r.faults)},
           {"read_retries", r.read_retries},
           {"failed_requests", FailedRequestsJson(r.failed_requests)},
           {"requests_completed", r.requests - r.failed_requests.size()},
           {"request_output_digests", r.request_output_digests}};
  if (r.recording) out["recorded_records"] = r.recording->records;
  return out;
}

void PrintHuman(const Json& r) {
  auto u64 = [&r](const char* key) { return static_cast<unsigned long long>(r[key].get<uint64_t>()); };
  auto ms = [&r](const char* key, const char* p) { return r[key][p].get<double>() / 1e6; };
  std::printf("output digest %s\n", r["output_digest"].get<std::string>().c_str());
  PrintFaultsLine(r["faults"], r["read_retries"].get<uint64_t>());
  for (const Json& failed : r["failed_requests"]) {
    std::printf("request %llu failed in pass %llu: %s\n", static_cast<unsigned long long>(failed["request"].get<uint64_t>()),
                static_cast<unsigned long long>(failed["pass"].get<uint64_t>()), failed["error"].get<std::string>().c_str());
  }
  std::printf("%llu requests, %llu generated tokens (one per request pass) in %.3f s: %.1f tokens/s; "
              "%llu tokens processed (prompt + decode): %.1f tokens/s\n",
              u64("requests"), u64("passes"), r["wall_s"].get<double>(), r["tokens_per_s"].get<double>(), u64("tokens"),
              r["processed_tokens_per_s"].get<double>());
  std::printf("request p50 %.2f ms p99 %.2f ms; TTFT p50 %.2f ms p99 %.2f ms; TPOT p50 %.3f ms p99 %.3f ms "
              "(%s storage, %s transfer, %s compute)\n",
              ms("request_latency_ns", "p50"), ms("request_latency_ns", "p99"), ms("ttft_ns", "p50"),
              ms("ttft_ns", "p99"), ms("tpot_ns", "p50"), ms("tpot_ns", "p99"),
              r["storage_backend"].get<std::string>().c_str(), r["transfer_backend"].get<std::string>().c_str(),
              r["compute_backend"].get<std::string>().c_str());
  std::printf("served without an NVMe read: %.1f%% (decode %.1f%%); L1 %llu/%llu hits, L2 %llu/%llu hits\n",
              r["hit_pct_cum"].get<double>(), r["hit_pct_decode"].get<double>(),
              static_cast<unsigned long long>(r["cache"]["l1"]["hits"].get<uint64_t>()),
              static_cast<unsigned long long>(r["cache"]["l1"]["lookups"].get<uint64_t>()),
              static_cast<unsigned long long>(r["cache"]["l2"]["hits"].get<uint64_t>()),
              static_cast<unsigned long long>(r["cache"]["l2"]["lookups"].get<uint64_t>()));
  std::printf("read %.1f MiB; peak RSS %.1f MiB (pools %.1f MiB)\n", u64("read_bytes") / 1048576.0,
              u64("peak_rss_bytes") / 1048576.0, u64("pool_bytes") / 1048576.0);
  std::printf("%-16s %12s %12s %12s\n", "step (ns)", "p50", "p99", "max");
  for (const auto& [name, d] : r["step_latency_ns"].items()) {
    std::printf("%-16s %12lld %12lld %12lld\n", name.c_str(), static_cast<long long>(d["p50"].get<int64_t>()),
                static_cast<long long>(d["p99"].get<int64_t>()), static_cast<long long>(d["max"].get<int64_t>()));
  }
}

// The run's row in the store, begun before the run so that a killed run stays "incomplete".
struct StoredRun {
  std::unique_ptr<reports::RunStore> store;
  int64_t id = 0;
};

// Begins the run's row (unless --no-store); without --record the routing is recorded next to the database.
Result<StoredRun> BeginStoredRun(RunFlags* f) {
  StoredRun s;
  if (f->store.no_store) return s;
  COLIBRI_ASSIGN_OR_RETURN(s.store, OpenStore(f->store));
  reports::RunInfo info;
  info.kind = "run";
  info.label = f->model_dir;
  info.config_json = ConfigJson(*f).dump();
  info.hardware_json = "{}";
  info.backends = "storage=" + f->storage + " transfer=" + f->hw.transfer + " compute=" + f->hw.compute;
  info.seed = f->seed;
  StampRun(RerunArgs({}, {}), &info);
  COLIBRI_ASSIGN_OR_RETURN(s.id, s.store->BeginRun(info));
  if (f->record.empty()) {
    f->record = DbPath(f->store) + ".routing/run-" + std::to_string(s.id) + ".ctrace";
    std::error_code ignored;
    std::filesystem::create_directories(std::filesystem::path(f->record).parent_path(), ignored);
  }
  return s;
}

// The workload of the flags (`options`: what it ran with), a progress line on stderr.
Result<replay::LocalRunResult> RunWorkload(const RunFlags& f, replay::LocalRunOptions* options) {
  COLIBRI_ASSIGN_OR_RETURN(*options, ToOptions(f));
  Progress progress("run");
  options->on_pass = [&progress](uint64_t done, uint64_t total) { progress.Update(done, total); };
  Result<replay::LocalRunResult> r = replay::RunLocal(*options);
  options->on_pass = nullptr;
  progress.Done();
  return r;
}

Result<Json> Run(RunFlags f) {
  COLIBRI_ASSIGN_OR_RETURN(StoredRun stored, BeginStoredRun(&f));
  replay::LocalRunOptions options;
  const Result<replay::LocalRunResult> r = RunWorkload(f, &options);
  if (!r.ok()) {
    if (stored.store) (void)stored.store->FailRun(stored.id, r.status().message(), NowUnixMs());
    return r.status();
  }
  for (const std::string& w : r.value().warnings) std::cerr << "colibri: warning: " << w << "\n";
  Json out = ResultJson(f, options, r.value());
  if (!stored.store) return out;
  Json with_id{{"run_id", stored.id}};
  with_id.update(out);
  out = std::move(with_id);
  COLIBRI_ASSIGN_OR_RETURN(const reports::RunResults results, replay::LocalRunStoredResults(r.value(), out.dump()));
  COLIBRI_RETURN_IF_ERROR(stored.store->FinishRun(stored.id, results, NowUnixMs()));
  StoredRunIds().push_back(stored.id);
  return out;
}

}  // namespace

void AddRunCommand(CLI::App* app, int* exit_code) {
  auto f = std::make_shared<RunFlags>();
  CLI::App* cmd = app->add_subcommand("run", "Run the MoE engine on a model: prefill + decode, experts streamed from disk");
  cmd->add_option("--model", f->model_dir, "Model directory (colibri model synth/export)")->required();
  cmd->add_option("--requests", f->requests, "Concurrent requests")->check(CLI::Range(1u, 4096u))->capture_default_str();
  cmd->add_option("--prefill", f->prefill, "Prompt tokens per request (one prefill pass each)")
      ->check(CLI::Range(1u, 1u << 20))
      ->capture_default_str();
  cmd->add_option("--tokens", f->tokens, "Decode steps (each one pass over all requests)")->capture_default_str();
  cmd->add_flag("--force", f->force, "Run even a workload above 1e15 expert FLOPs (refused otherwise, with the estimate)");
  cmd->add_option("--seed", f->seed, "Seed of the hidden states (and of --faults)")->capture_default_str();
  AddFaultsFlag(cmd, &f->faults, &f->read_retries);
  cmd->add_flag("--isolate-failures", f->isolate_failures,
                "An expert that cannot be read, copied or computed fails only the requests that need it; the others finish");
  AddTierFlags(cmd, &f->tiers, "L1 pool budget (the device pool; host memory with CPU compute), 0 = off",
               "L2 host cache budget, 0 = off (every expert streams from disk)");
  AddPrefetchFlags(cmd, &f->prefetch, {"none", "coact", "lookahead"});
  AddPinFlags(cmd, &f->pin);
  AddRouterFlags(cmd, &f->router);
  cmd->add_option("--log-level", f->log_level, "warn, info or debug (debug: one [ROUTER] line per routing decision)")
      ->check(CLI::IsMember({"warn", "info", "debug"}))
      ->capture_default_str();
  cmd->add_option("--threads", f->threads, "CPU compute threads (--compute cpu)")->check(CLI::Range(1u, 256u))->capture_default_str();
  AddHwFlags(cmd, &f->hw, {"auto", "cpu", "cuda"});
  cmd->add_option("--storage", f->storage, "Storage backend: auto (io_uring, else pread), uring, pread")
      ->check(CLI::IsMember(engine::StorageBackendNames()))
      ->capture_default_str();
  cmd->add_flag("!--no-direct", f->direct_io, "Read through the page cache instead of O_DIRECT");
  cmd->add_option("--correlation", f->correlation, "Temporal correlation of a request's hidden states (0..1)")
      ->check(CLI::Range(0.0, 0.9999))
      ->capture_default_str();
  cmd->add_option("--vocab", f->vocab, "Vocabulary of the seeded token ids (Zipf distributed)")
      ->check(CLI::Range(1u, 1u << 24))
      ->capture_default_str();
  AddModelVerifyFlag(cmd, &f->verify);
  cmd->add_option("--record", f->record, "Record every layer's routing to this trace file");
  cmd->add_flag("--record-logits", f->record_logits, "Record raw router logits (with --record)");
  cmd->add_flag("--record-hidden", f->record_hidden, "Record the router inputs, fp32 (with --record)");
  cmd->add_flag("--record-tokens", f->record_tokens, "Record the seeded token ids (with --record)");
  AddTraceOutputFlags(cmd, &f->record_output);
  cmd->add_option("--raw-sample-cap", f->raw_step_samples_cap,
                  "Raw per-step latency samples kept (over all steps); beyond it, histograms (1% error)")
      ->capture_default_str();
  AddStoreFlags(cmd, &f->store);
  cmd->add_flag("--json", f->json, "Print the result as JSON on stdout");
  cmd->callback([f, exit_code] {
    ResolveHwFlags(&f->hw);
    *exit_code = Emit(Run(*f), f->json, &PrintHuman);
  });
}

}  // namespace colibri::cli
