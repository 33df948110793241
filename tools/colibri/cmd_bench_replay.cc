// `colibri bench replay`: modelled replay throughput -- (token, layer) steps
// per second of RunReplay on one modelled machine, one core -- and the peak
// RSS of the replay, on a synthetic trace of at least --steps steps and at
// least --trace-bytes bytes (or on --trace FILE); docs/BENCHMARKS.md. The
// measurement (each phase in its own forked child) is bench/replay_bench.h;
// this file holds the flags, the machine they name, the config echo and the
// printing. The run is not stored anywhere; like `colibri replay`, it keeps
// raw per-step samples up to --raw-sample-cap.
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cache_flags.h"
#include "cli_common.h"
#include "colibri/bench/replay_bench.h"
#include "colibri/sim/profiles.h"
#include "commands.h"

namespace colibri::cli {
namespace {

constexpr const char* kDefaultModelConfig = "../shared/data/model-configs/qwen3/config.json";

struct BenchReplayFlags {
  bench::ReplayBenchOptions options;  // trace, model config, dtype, steps, synth, dir, keep, repeats
  std::string trace_bytes = "0";
  TraceOutputFlags out;
  std::string machine = "h100-p5800x-gen5";
  std::vector<std::string> hw_files;
  std::string l1_bytes = "0";
  std::string l2_bytes = "32G";  // Qwen3's experts are 54 GiB: with 16 requests decoded together, about 65% hits
  std::string policy = "lru";
  uint32_t queue_depth = 32;
  uint32_t staging_slots = 4;
  uint32_t hidden = 0;
  uint64_t raw_step_samples_cap = 10'000'000;  // as colibri replay
  uint64_t seed = 1;
  bool json = false;
};

// The flags as the suite's options: sizes parsed, the machine resolved.
Result<bench::ReplayBenchOptions> OptionsOf(const BenchReplayFlags& f) {
  bench::ReplayBenchOptions o = f.options;
  COLIBRI_ASSIGN_OR_RETURN(o.trace_bytes, ParseSizeBytes(f.trace_bytes));
  o.synth.seed = f.seed;
  o.writer = ToWriterOptions(f.out);
  COLIBRI_ASSIGN_OR_RETURN(sim::HardwareCatalog catalog, sim::HardwareCatalog::BuiltIn());
  COLIBRI_RETURN_IF_ERROR(catalog.AddFiles(f.hw_files));
  replay::ReplayConfig& c = o.replay;
  COLIBRI_ASSIGN_OR_RETURN(c.machine, catalog.Resolve(f.machine));
  COLIBRI_ASSIGN_OR_RETURN(c.l1_bytes, ParseSizeBytes(f.l1_bytes));
  COLIBRI_ASSIGN_OR_RETURN(c.l2_bytes, ParseSizeBytes(f.l2_bytes));
  c.policy = f.policy;
  c.queue_depth = f.queue_depth;
  c.staging_slots = f.staging_slots;
  c.hidden = f.hidden;
  c.seed = f.seed;
  c.raw_step_samples_cap = f.raw_step_samples_cap;
  return o;
}

Result<Json> BenchReplay(const BenchReplayFlags& f, Progress* progress) {
  COLIBRI_ASSIGN_OR_RETURN(const bench::ReplayBenchOptions o, OptionsOf(f));
  const replay::ReplayConfig& c = o.replay;
  const Json config{{"trace", o.trace},
                    {"model_config", o.model_config},
                    {"steps", o.steps},
                    {"trace_bytes", o.trace_bytes},
                    {"machine", c.machine.label},
                    {"l1_bytes", c.l1_bytes},
                    {"l2_bytes", c.l2_bytes},
                    {"policy", c.policy},
                    {"queue_depth", c.queue_depth},
                    {"staging_slots", c.staging_slots},
                    {"seed", c.seed},
                    {"raw_step_samples_cap", c.raw_step_samples_cap},
                    {"repeats", o.repeats}};
  return WithConfig(config, bench::RunReplayBench(o, StderrObserver(progress)));
}

void PrintHuman(const Json& r) {
  const Json& trace = r["trace"];
  std::printf("trace       %s: %.2f MiB%s\n", trace["path"].get<std::string>().c_str(),
              trace["file_bytes"].get<uint64_t>() / 1048576.0, trace["kept"].get<bool>() ? "" : " (removed)");
  if (!trace["synthesized"].is_null()) {
    const Json& s = trace["synthesized"];
    std::printf("            synthesized %u requests x (%u + %u tokens), %u at a time, in %.1f s; shape from %s\n",
                s["requests"].get<uint32_t>(), s["prompt_tokens"].get<uint32_t>(), s["output_tokens"].get<uint32_t>(),
                s["concurrency"].get<uint32_t>(), s["synth_s"].get<double>(),
                s["model_shape_from"].get<std::string>().c_str());
  }
  std::printf("machine     %s, L1 %" PRIu64 " bytes, L2 %" PRIu64 " bytes\n",
              r["config"]["machine"].get<std::string>().c_str(), r["config"]["l1_bytes"].get<uint64_t>(),
              r["config"]["l2_bytes"].get<uint64_t>());
  std::printf("replay      %" PRIu64 " steps in %" PRIu64 " layer batches, %" PRIu64 " events, %" PRIu64
              " reads, %.1f%% served without a read, digest %s\n",
              r["steps"].get<uint64_t>(), r["layer_batches"].get<uint64_t>(), r["events"].get<uint64_t>(),
              r["reads"].get<uint64_t>(), r["hit_pct_cum"].get<double>(), r["event_digest"].get<std::string>().c_str());
  std::printf("throughput  %.3f M steps/s (median of %zu; best %.3f), replay loop %.2f s; %.3f M steps per CPU second\n",
              r["steps_per_s"].get<double>() / 1e6, r["runs"].size(), r["best_steps_per_s"].get<double>() / 1e6,
              r["wall_s"].get<double>(), r["steps_per_cpu_s"].get<double>() / 1e6);
  std::printf("peak RSS    %.1f MiB (ru_maxrss), VmHWM %.1f MiB; the parent had %.1f MiB at fork\n",
              r["peak_rss_bytes"].get<uint64_t>() / 1048576.0, r["vm_hwm_bytes"].get<uint64_t>() / 1048576.0,
              r["parent_rss_bytes"].get<uint64_t>() / 1048576.0);
}

}  // namespace

void AddBenchReplayCommand(CLI::App* bench, int* exit_code) {
  auto f = std::make_shared<BenchReplayFlags>();
  bench::ReplayBenchOptions& r = f->options;
  r.model_config = kDefaultModelConfig;
  r.dir = std::filesystem::temp_directory_path().string();
  traces::SynthOptions& o = r.synth;
  o.concurrency = 16;
  CLI::App* cmd = bench->add_subcommand(
      "replay", "Modelled replay throughput ((token, layer) steps/s, one core) and peak RSS on a synthetic trace");
  CLI::Option* trace = cmd->add_option("--trace", r.trace, "Replay this trace instead of synthesizing one");
  cmd->add_option("--model-config", r.model_config, "config.json giving the synthetic trace's shape")
      ->capture_default_str()
      ->excludes(trace);
  cmd->add_option("--dtype", r.dtype, "Weight dtype for expert sizes")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16", "int8"}))
      ->capture_default_str()
      ->excludes(trace);
  cmd->add_option("--steps", r.steps, "Synthesize at least this many (token, layer) steps")
      ->capture_default_str()
      ->excludes(trace);
  cmd->add_option("--trace-bytes", f->trace_bytes, "Synthesize until the file has at least this many bytes (e.g. 2G)")
      ->transform(SizeValidator())
      ->capture_default_str()
      ->excludes(trace);
  cmd->add_option("--concurrency", o.concurrency, "Requests decoded together in one pass (layer batch)")
      ->check(PositiveNumber())
      ->capture_default_str()
      ->excludes(trace);
  cmd->add_option("--prompt-tokens", o.prompt_tokens, "Prompt tokens per request")
      ->check(PositiveNumber())
      ->capture_default_str()
      ->excludes(trace);
  cmd->add_option("--output-tokens", o.output_tokens, "Decode steps per request")->capture_default_str()->excludes(trace);
  cmd->add_option("--zipf", o.zipf_s, "Zipf exponent of expert popularity per layer")
      ->check(NonNegativeNumber())
      ->capture_default_str()
      ->excludes(trace);
  cmd->add_option("--decode-reuse", o.decode_reuse, "Probability that a decode slot keeps the previous token's expert")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str()
      ->excludes(trace);
  cmd->add_flag("--gate-weights", o.gate_weights, "Also write gate weights (bigger files)")->excludes(trace);
  AddTraceOutputFlags(cmd, &f->out);
  cmd->add_option("--dir", r.dir, "Directory of the synthetic trace")->capture_default_str();
  cmd->add_flag("--keep", r.keep, "Keep the synthetic trace (its path is in the output)");
  cmd->add_option("--hw", f->machine, "Modelled machine (colibri hw list)")->capture_default_str();
  cmd->add_option("--hw-file", f->hw_files, "Extra profile files (components or machines)");
  cmd->add_option("--l1-bytes", f->l1_bytes, "L1 (device) budget, 0 = off")->transform(SizeValidator())->capture_default_str();
  cmd->add_option("--l2-bytes", f->l2_bytes, "L2 (host) budget, 0 = off")->transform(SizeValidator())->capture_default_str();
  cmd->add_option("--policy", f->policy, "L2 cache policy")->check(CLI::IsMember({"lru", "layer"}))->capture_default_str();
  AddQueueFlags(cmd, &f->queue_depth, &f->staging_slots);
  cmd->add_option("--hidden", f->hidden, "The model's hidden size, when the trace does not record it")
      ->check(CLI::Range(1u, 1u << 20));  // the model format's largest dimension
  cmd->add_option("--raw-sample-cap", f->raw_step_samples_cap,
                  "Raw per-step latency samples kept, as colibri replay does (0: histograms only)")
      ->capture_default_str();
  cmd->add_option("--seed", f->seed, "Seed of the synthetic trace and of the modelled devices")->capture_default_str();
  cmd->add_option("--repeats", r.repeats, "Replay runs (each in its own process; the median is reported)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_flag("--json", f->json, "Print the result as JSON on stdout");
  cmd->callback([f, cmd, exit_code] {
    f->options.model_config_given = cmd->count("--model-config") > 0;
    Progress progress("bench replay: synthesizing");
    auto result = BenchReplay(*f, &progress);
    progress.Done();
    *exit_code = Emit(result, f->json, &PrintHuman);
  });
}

}  // namespace colibri::cli
