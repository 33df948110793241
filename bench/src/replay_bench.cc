#include "colibri/engine/output_claim.h"
#include "colibri/bench/replay_bench.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "colibri/bench/call_timing.h"
#include "colibri/bench/child_process.h"
#include "colibri/bench/files.h"
#include "colibri/bench/process_memory.h"
#include "colibri/reports/latency_json.h"
#include "colibri/reports/samples.h"
#include "colibri/traces/model_config.h"
#include "colibri/traces/reader.h"

namespace colibri::bench {
namespace {

// The synthetic trace's model shape: the model config, or the bundled
// sample's header when the default config is absent (a clone without ../shared).
Result<traces::ModelShape> BenchShape(const ReplayBenchOptions& o, std::string* source) {
  if (std::filesystem::exists(o.model_config)) {
    *source = o.model_config;
    return traces::ShapeFromHfConfig(o.model_config, o.dtype);
  }
  if (!o.model_config_given && std::filesystem::exists(kReplayBenchSampleTrace)) {
    *source = std::string(kReplayBenchSampleTrace) + " (header; " + o.model_config + " is absent)";
    COLIBRI_ASSIGN_OR_RETURN(traces::TraceHeader header, traces::ReadTraceHeader(kReplayBenchSampleTrace));
    return header.shape;
  }
  return Status::NotFound(o.model_config +
                          ": no such file (a clone without ../shared/data has none): pass --model-config FILE "
                          "(a Hugging Face config.json) or --trace FILE");
}

struct SynthPlan {
  traces::SynthOptions options;
  std::string shape_source;
  uint64_t steps_per_request = 0;
  uint64_t bytes_per_request = 0;  // from a one-wave pilot
};

// Synthesizes with `options` into `path` in a child process; progress follows the file's size.
Result<Json> SynthInChild(const traces::SynthOptions& options, const std::string& path,
                          const traces::WriterOptions& writer, uint64_t expected_bytes, const Observer* observer) {
  COLIBRI_ASSIGN_OR_RETURN(
      ChildOutcome child,
      RunInChild(
          [&]() -> Result<Json> {
            COLIBRI_ASSIGN_OR_RETURN(traces::SynthReport r, traces::SynthesizeTrace(options, path, writer));
            return Json{{"records", r.records}, {"selections", r.selections}, {"tokens", r.tokens}};
          },
          [&] {
            if (observer != nullptr) observer->Progress(std::min(engine::TempOutputBytes(path), expected_bytes), expected_bytes);
          }));
  child.value["ru_maxrss_bytes"] = child.ru_maxrss_bytes;
  return child.value;
}

// The synthesis options: enough requests for the steps and for the bytes
// (measured on a one-wave pilot file), in whole waves of `concurrency`.
Result<SynthPlan> PlanSynth(const ReplayBenchOptions& o, const traces::WriterOptions& writer,
                            const std::string& pilot_path) {
  SynthPlan plan;
  plan.options = o.synth;
  COLIBRI_ASSIGN_OR_RETURN(plan.options.shape, BenchShape(o, &plan.shape_source));
  traces::SynthOptions& s = plan.options;
  plan.steps_per_request = static_cast<uint64_t>(s.prompt_tokens + s.output_tokens) * s.shape.num_moe_layers();
  traces::SynthOptions pilot = s;
  pilot.requests = s.concurrency;
  COLIBRI_RETURN_IF_ERROR(SynthInChild(pilot, pilot_path, writer, 0, nullptr).status());
  plan.bytes_per_request = std::max<uint64_t>(1, FileBytes(pilot_path) / pilot.requests);
  std::filesystem::remove(pilot_path);
  uint64_t requests = (o.steps + plan.steps_per_request - 1) / plan.steps_per_request;
  requests = std::max(requests, (o.trace_bytes + plan.bytes_per_request - 1) / plan.bytes_per_request);
  requests = (std::max<uint64_t>(requests, 1) + s.concurrency - 1) / s.concurrency * s.concurrency;  // whole waves
  if (requests > UINT32_MAX) return Status::InvalidArgument("--steps / --trace-bytes need more than 2^32 requests");
  s.requests = static_cast<uint32_t>(requests);
  return plan;
}

struct TraceInfo {
  std::string path;
  bool synthesized = false;
  Json synth = nullptr;  // what was synthesized
  uint32_t hidden = 0;   // the replay's, or the sample's when its shape was used
};

Json SynthJson(Json made, const SynthPlan& plan, const traces::WriterOptions& writer, double synth_s) {
  const traces::SynthOptions& s = plan.options;
  made["model_shape_from"] = plan.shape_source;
  made["requests"] = s.requests;
  made["concurrency"] = s.concurrency;
  made["prompt_tokens"] = s.prompt_tokens;
  made["output_tokens"] = s.output_tokens;
  made["gate_weights"] = s.gate_weights;
  made["compress"] = writer.compression == traces::Compression::kZstd ? "zstd" : "none";
  made["seed"] = s.seed;
  made["synth_s"] = synth_s;
  return made;
}

// The trace to replay: the given one, or a synthesized one of at least the steps and bytes asked for.
Result<TraceInfo> PrepareTrace(const ReplayBenchOptions& o, const Observer& observer) {
  TraceInfo info;
  info.hidden = o.replay.hidden;
  if (!o.trace.empty()) {
    if (!std::filesystem::is_regular_file(o.trace)) return Status::NotFound(o.trace + ": no such file");
    info.path = o.trace;
    return info;
  }
  const std::filesystem::path dir = o.dir;
  if (!std::filesystem::is_directory(dir)) return Status::NotFound(o.dir + ": no such directory (--dir)");
  const std::string pid = std::to_string(::getpid());
  info.path = (dir / ("colibri-bench-replay-" + pid + ".ctrace")).string();
  info.synthesized = true;
  const traces::WriterOptions& writer = o.writer;
  COLIBRI_ASSIGN_OR_RETURN(SynthPlan plan,
                           PlanSynth(o, writer, (dir / ("colibri-bench-pilot-" + pid + ".ctrace")).string()));
  if (plan.options.shape.hidden_size == 0 && info.hidden == 0 &&
      plan.shape_source.rfind(kReplayBenchSampleTrace, 0) == 0) {
    info.hidden = kReplayBenchSampleHidden;
  }
  const double start = SteadyNowS();
  Json made;
  for (int attempt = 0;; ++attempt) {  // the pilot's bytes per request are an estimate: grow until big enough
    const uint64_t expected = plan.options.requests * plan.bytes_per_request;
    COLIBRI_ASSIGN_OR_RETURN(made, SynthInChild(plan.options, info.path, writer, expected, &observer));
    const uint64_t bytes = FileBytes(info.path);
    if (bytes >= o.trace_bytes || attempt == 3) break;
    const uint64_t more = (o.trace_bytes - bytes) / plan.bytes_per_request + 1;
    const uint64_t c = plan.options.concurrency;
    plan.options.requests += static_cast<uint32_t>((more * 11 / 10 + c) / c * c);
  }
  observer.ProgressDone();
  info.synth = SynthJson(std::move(made), plan, writer, SteadyNowS() - start);
  return info;
}

// One replay in a child process: its ReplayResult figures and its own peak RSS.
Result<Json> ReplayInChild(const replay::ReplayConfig& config) {
  COLIBRI_ASSIGN_OR_RETURN(
      ChildOutcome child, RunInChild([&]() -> Result<Json> {
        COLIBRI_ASSIGN_OR_RETURN(replay::ReplayResult r, replay::RunReplay(config));
        return Json{{"steps", r.steps},
                    {"layer_batches", r.layer_batches},
                    {"requests", r.requests},
                    {"events", r.events},
                    {"event_digest", r.event_digest},
                    {"reads", r.reads},
                    {"hit_pct_cum", reports::Pct(r.served, r.lookups)},
                    {"simulated_ns", r.elapsed_ns},
                    {"wall_s", r.wall_s},
                    {"steps_per_s", static_cast<double>(r.steps) / r.wall_s},
                    {"vm_hwm_bytes", ProcStatusBytes("VmHWM")}};
      }));
  child.value["peak_rss_bytes"] = child.ru_maxrss_bytes;
  // CPU time of the whole child (set-up included): on a shared machine, steps per CPU second is the steadier figure.
  child.value["child_cpu_s"] = child.cpu_s;
  child.value["steps_per_cpu_s"] = child.value["steps"].get<double>() / child.cpu_s;
  return child.value;
}

}  // namespace

Result<Json> RunReplayBench(const ReplayBenchOptions& o, const Observer& observer) {
  COLIBRI_ASSIGN_OR_RETURN(TraceInfo trace, PrepareTrace(o, observer));
  struct Cleanup {
    const TraceInfo& trace;
    bool keep;
    ~Cleanup() {
      if (trace.synthesized && !keep) std::filesystem::remove(trace.path);
    }
  } cleanup{trace, o.keep};
  replay::ReplayConfig config = o.replay;
  config.trace_path = trace.path;
  config.hidden = trace.hidden;
  const uint64_t parent_rss = ProcStatusBytes("VmRSS");
  Json runs = Json::array();
  std::vector<double> rates;
  uint64_t peak_rss = 0, vm_hwm = 0;
  for (int i = 0; i < o.repeats; ++i) {
    COLIBRI_ASSIGN_OR_RETURN(Json run, ReplayInChild(config));
    if (!runs.empty() && run["event_digest"] != runs[0]["event_digest"]) {
      return Status::Internal("replay runs of the same trace gave different event digests");
    }
    rates.push_back(run["steps_per_s"].get<double>());
    peak_rss = std::max(peak_rss, run["peak_rss_bytes"].get<uint64_t>());
    vm_hwm = std::max(vm_hwm, run["vm_hwm_bytes"].get<uint64_t>());
    runs.push_back(run);
  }
  const Json& first = runs[0];
  std::vector<double> walls, cpu_rates;
  for (const Json& run : runs) {
    walls.push_back(run["wall_s"].get<double>());
    cpu_rates.push_back(run["steps_per_cpu_s"].get<double>());
  }
  return Json{{"trace",
               {{"path", trace.path},
                {"kept", !trace.synthesized || o.keep},
                {"file_bytes", FileBytes(trace.path)},
                {"synthesized", trace.synth}}},
              {"steps", first["steps"]},
              {"layer_batches", first["layer_batches"]},
              {"requests", first["requests"]},
              {"events", first["events"]},
              {"event_digest", first["event_digest"]},
              {"reads", first["reads"]},
              {"hit_pct_cum", first["hit_pct_cum"]},
              {"simulated_ns", first["simulated_ns"]},
              {"wall_s", reports::Median(walls)},
              {"steps_per_s", reports::Median(rates)},
              {"best_steps_per_s", *std::max_element(rates.begin(), rates.end())},
              {"steps_per_cpu_s", reports::Median(cpu_rates)},
              {"peak_rss_bytes", peak_rss},
              {"vm_hwm_bytes", vm_hwm},
              {"parent_rss_bytes", parent_rss},
              {"runs", runs}};
}

}  // namespace colibri::bench
