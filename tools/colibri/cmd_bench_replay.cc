// `colibri bench replay`: modelled replay throughput -- (token, layer) steps
// per second of RunReplay on one modelled machine, one core -- and the peak
// RSS of the replay, on a synthetic trace of at least --steps steps and at
// least --trace-bytes bytes (or on --trace FILE); docs/BENCHMARKS.md.
//
// Every phase runs in its own forked child so that each figure is its own:
// the synthesis (streaming, written to --dir, removed unless --keep), then
// each replay run. A replay child reports ReplayResult.wall_s (the replay
// loop alone) and its own peak RSS (getrusage ru_maxrss and /proc/self/status
// VmHWM), which include the pages it shares with the parent at fork (about
// the binary and its libraries: `parent_rss_bytes` says how much). The run
// is not stored anywhere; like `colibri replay`, it keeps raw per-step
// samples up to --raw-sample-cap (their memory counts in the peak RSS).
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli_common.h"
#include "colibri/replay/replay_run.h"
#include "colibri/sim/profiles.h"
#include "colibri/traces/model_config.h"
#include "colibri/traces/reader.h"
#include "colibri/traces/synth.h"
#include "commands.h"
#include "latency_json.h"

namespace colibri::cli {
namespace {

constexpr const char* kDefaultModelConfig = "../shared/data/model-configs/qwen3/config.json";
// The bundled sample's header gives the same model's shape when ../shared is absent (a fresh clone).
constexpr const char* kSampleTrace = "traces/samples/qwen3-bigmoe.ctrace";
constexpr uint32_t kSampleHidden = 2048;  // Qwen3-30B-A3B's hidden size (the sample does not record it)

struct BenchReplayFlags {
  std::string trace;  // an existing trace; empty: synthesize one
  std::string model_config = kDefaultModelConfig;
  bool model_config_given = false;  // --model-config was passed (no fallback to the sample then)
  std::string dtype = "bf16";
  uint64_t steps = 10'000'000;
  std::string trace_bytes = "0";
  traces::SynthOptions synth;  // its shape is filled in from the model config
  TraceOutputFlags out;
  std::string dir = std::filesystem::temp_directory_path().string();
  bool keep = false;
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
  int repeats = 3;
  bool json = false;
};

// The resident set of this process now (VmRSS) or at its peak (VmHWM), from /proc/self/status; 0 if unknown.
uint64_t ProcStatusBytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    return std::strtoull(line.c_str() + field.size() + 1, nullptr, 10) * 1024;  // "VmHWM:   1234 kB"
  }
  return 0;
}

uint64_t FileBytes(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// What a forked child computed, and its peak RSS as its parent saw it (wait4).
struct ChildOutcome {
  Json value;
  uint64_t ru_maxrss_bytes = 0;
  double cpu_s = 0;  // user + system time of the whole child
};

// Runs `fn` in a forked child and returns its result (sent back as JSON over a
// pipe); `tick` runs in the parent about every 200 ms while it waits.
Result<ChildOutcome> RunInChild(const std::function<Result<Json>()>& fn, const std::function<void()>& tick) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  int fds[2];
  if (::pipe(fds) != 0) return Status::IoError(std::string("pipe: ") + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::IoError(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(fds[0]);
    Result<Json> result = fn();
    Json message = result.ok() ? Json{{"ok", true}, {"value", result.value()}}
                               : Json{{"ok", false},
                                      {"code", static_cast<int>(result.status().code())},
                                      {"message", result.status().message()}};
    const std::string bytes = message.dump();
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::write(fds[1], bytes.data() + sent, bytes.size() - sent);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) ::_exit(3);
      sent += static_cast<size_t>(n);
    }
    ::_exit(0);  // no atexit handlers or stdio flushes of the parent's state
  }
  ::close(fds[1]);
  std::string received;
  char buffer[65536];
  while (true) {
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, 200);
    if (tick) tick();
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    received.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int wait_status = 0;
  struct rusage usage {};
  while (::wait4(pid, &wait_status, 0, &usage) < 0) {
    if (errno != EINTR) return Status::Internal(std::string("wait4: ") + std::strerror(errno));
  }
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    return Status::Internal(WIFSIGNALED(wait_status)
                                ? "benchmark child killed by signal " + std::to_string(WTERMSIG(wait_status))
                                : "benchmark child exited with status " + std::to_string(WEXITSTATUS(wait_status)));
  }
  const Json message = Json::parse(received, nullptr, /*allow_exceptions=*/false);
  if (!message.is_object() || !message.contains("ok")) return Status::Internal("benchmark child sent no result");
  if (!message["ok"].get<bool>()) {
    return Status(static_cast<StatusCode>(message["code"].get<int>()), message["message"].get<std::string>());
  }
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return ChildOutcome{message["value"], static_cast<uint64_t>(usage.ru_maxrss) * 1024,
                      seconds(usage.ru_utime) + seconds(usage.ru_stime)};
}

// The synthetic trace's model shape: --model-config, or the bundled sample's
// header when the default config is absent (a clone without ../shared).
Result<traces::ModelShape> BenchShape(const BenchReplayFlags& f, std::string* source) {
  if (std::filesystem::exists(f.model_config)) {
    *source = f.model_config;
    return traces::ShapeFromHfConfig(f.model_config, f.dtype);
  }
  if (!f.model_config_given && std::filesystem::exists(kSampleTrace)) {
    *source = std::string(kSampleTrace) + " (header; " + f.model_config + " is absent)";
    COLIBRI_ASSIGN_OR_RETURN(traces::TraceHeader header, traces::ReadTraceHeader(kSampleTrace));
    return header.shape;
  }
  return Status::NotFound(f.model_config +
                          ": no such file (a clone without ../shared/data has none): pass --model-config FILE "
                          "(a Hugging Face config.json) or --trace FILE");
}

struct SynthPlan {
  traces::SynthOptions options;
  std::string shape_source;
  uint64_t steps_per_request = 0;
  uint64_t bytes_per_request = 0;  // from a one-wave pilot
};

// Synthesizes with `options` into `path` in a child process; the progress line follows the file's size.
Result<Json> SynthInChild(const traces::SynthOptions& options, const std::string& path,
                          const traces::WriterOptions& writer, uint64_t expected_bytes, Progress* progress) {
  const std::string partial = path + ".partial";  // where an atomic TraceWriter writes until Close
  COLIBRI_ASSIGN_OR_RETURN(
      ChildOutcome child,
      RunInChild(
          [&]() -> Result<Json> {
            COLIBRI_ASSIGN_OR_RETURN(traces::SynthReport r, traces::SynthesizeTrace(options, path, writer));
            return Json{{"records", r.records}, {"selections", r.selections}, {"tokens", r.tokens}};
          },
          [&] {
            if (progress != nullptr) progress->Update(std::min(FileBytes(partial), expected_bytes), expected_bytes);
          }));
  child.value["ru_maxrss_bytes"] = child.ru_maxrss_bytes;
  return child.value;
}

// The synthesis options: enough requests for --steps and for --trace-bytes
// (measured on a one-wave pilot file), in whole waves of `concurrency`.
Result<SynthPlan> PlanSynth(const BenchReplayFlags& f, uint64_t target_bytes, const traces::WriterOptions& writer,
                            const std::string& pilot_path) {
  SynthPlan plan;
  plan.options = f.synth;
  COLIBRI_ASSIGN_OR_RETURN(plan.options.shape, BenchShape(f, &plan.shape_source));
  traces::SynthOptions& o = plan.options;
  plan.steps_per_request = static_cast<uint64_t>(o.prompt_tokens + o.output_tokens) * o.shape.num_moe_layers();
  traces::SynthOptions pilot = o;
  pilot.requests = o.concurrency;
  COLIBRI_RETURN_IF_ERROR(SynthInChild(pilot, pilot_path, writer, 0, nullptr).status());
  plan.bytes_per_request = std::max<uint64_t>(1, FileBytes(pilot_path) / pilot.requests);
  std::filesystem::remove(pilot_path);
  uint64_t requests = (f.steps + plan.steps_per_request - 1) / plan.steps_per_request;
  requests = std::max(requests, (target_bytes + plan.bytes_per_request - 1) / plan.bytes_per_request);
  requests = (std::max<uint64_t>(requests, 1) + o.concurrency - 1) / o.concurrency * o.concurrency;  // whole waves
  if (requests > UINT32_MAX) return Status::InvalidArgument("--steps / --trace-bytes need more than 2^32 requests");
  o.requests = static_cast<uint32_t>(requests);
  return plan;
}

struct TraceInfo {
  std::string path;
  bool synthesized = false;
  Json synth = nullptr;  // what was synthesized
  uint32_t hidden = 0;   // --hidden, or the sample's when its shape was used
};

// The trace to replay: --trace, or a synthesized one of at least --steps steps and --trace-bytes bytes.
Result<TraceInfo> PrepareTrace(const BenchReplayFlags& f, uint64_t target_bytes) {
  TraceInfo info;
  info.hidden = f.hidden;
  if (!f.trace.empty()) {
    if (!std::filesystem::is_regular_file(f.trace)) return Status::NotFound(f.trace + ": no such file");
    info.path = f.trace;
    return info;
  }
  const std::filesystem::path dir = f.dir;
  if (!std::filesystem::is_directory(dir)) return Status::NotFound(f.dir + ": no such directory (--dir)");
  const std::string pid = std::to_string(::getpid());
  info.path = (dir / ("colibri-bench-replay-" + pid + ".ctrace")).string();
  info.synthesized = true;
  traces::WriterOptions writer = ToWriterOptions(f.out);
  writer.atomic = true;
  COLIBRI_ASSIGN_OR_RETURN(SynthPlan plan,
                           PlanSynth(f, target_bytes, writer, (dir / ("colibri-bench-pilot-" + pid + ".ctrace")).string()));
  if (plan.options.shape.hidden_size == 0 && info.hidden == 0 && plan.shape_source.rfind(kSampleTrace, 0) == 0) {
    info.hidden = kSampleHidden;
  }
  Progress progress("bench replay: synthesizing");
  const auto start = std::chrono::steady_clock::now();
  Json made;
  for (int attempt = 0;; ++attempt) {  // the pilot's bytes per request are an estimate: grow until big enough
    const uint64_t expected = plan.options.requests * plan.bytes_per_request;
    COLIBRI_ASSIGN_OR_RETURN(made, SynthInChild(plan.options, info.path, writer, expected, &progress));
    const uint64_t bytes = FileBytes(info.path);
    if (bytes >= target_bytes || attempt == 3) break;
    const uint64_t more = (target_bytes - bytes) / plan.bytes_per_request + 1;
    const uint64_t c = plan.options.concurrency;
    plan.options.requests += static_cast<uint32_t>((more * 11 / 10 + c) / c * c);
  }
  progress.Done();
  const double synth_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const traces::SynthOptions& o = plan.options;
  made["model_shape_from"] = plan.shape_source;
  made["requests"] = o.requests;
  made["concurrency"] = o.concurrency;
  made["prompt_tokens"] = o.prompt_tokens;
  made["output_tokens"] = o.output_tokens;
  made["gate_weights"] = o.gate_weights;
  made["compress"] = f.out.compress;
  made["seed"] = o.seed;
  made["synth_s"] = synth_s;
  info.synth = made;
  return info;
}

// One replay in a child process: its ReplayResult figures and its own peak RSS.
Result<Json> ReplayInChild(const replay::ReplayConfig& config) {
  COLIBRI_ASSIGN_OR_RETURN(
      ChildOutcome child, RunInChild(
                              [&]() -> Result<Json> {
                                COLIBRI_ASSIGN_OR_RETURN(replay::ReplayResult r, replay::RunReplay(config));
                                return Json{{"steps", r.steps},
                                            {"layer_batches", r.layer_batches},
                                            {"requests", r.requests},
                                            {"events", r.events},
                                            {"event_digest", r.event_digest},
                                            {"reads", r.reads},
                                            {"hit_pct_cum", Pct(r.served, r.lookups)},
                                            {"simulated_ns", r.elapsed_ns},
                                            {"wall_s", r.wall_s},
                                            {"steps_per_s", static_cast<double>(r.steps) / r.wall_s},
                                            {"vm_hwm_bytes", ProcStatusBytes("VmHWM")}};
                              },
                              nullptr));
  child.value["peak_rss_bytes"] = child.ru_maxrss_bytes;
  // CPU time of the whole child (set-up included): on a shared machine, steps per CPU second is the steadier figure.
  child.value["child_cpu_s"] = child.cpu_s;
  child.value["steps_per_cpu_s"] = child.value["steps"].get<double>() / child.cpu_s;
  return child.value;
}

Result<replay::ReplayConfig> ReplayConfigOf(const BenchReplayFlags& f, const TraceInfo& trace) {
  COLIBRI_ASSIGN_OR_RETURN(sim::HardwareCatalog catalog, sim::HardwareCatalog::BuiltIn());
  COLIBRI_RETURN_IF_ERROR(catalog.AddFiles(f.hw_files));
  replay::ReplayConfig c;
  c.trace_path = trace.path;
  COLIBRI_ASSIGN_OR_RETURN(c.machine, catalog.Resolve(f.machine));
  COLIBRI_ASSIGN_OR_RETURN(c.l1_bytes, ParseSizeBytes(f.l1_bytes));
  COLIBRI_ASSIGN_OR_RETURN(c.l2_bytes, ParseSizeBytes(f.l2_bytes));
  c.policy = f.policy;
  c.queue_depth = f.queue_depth;
  c.staging_slots = f.staging_slots;
  c.hidden = trace.hidden;
  c.seed = f.seed;
  c.raw_step_samples_cap = f.raw_step_samples_cap;
  return c;
}

Result<Json> BenchReplay(const BenchReplayFlags& f) {
  COLIBRI_ASSIGN_OR_RETURN(const uint64_t target_bytes, ParseSizeBytes(f.trace_bytes));
  COLIBRI_ASSIGN_OR_RETURN(TraceInfo trace, PrepareTrace(f, target_bytes));
  struct Cleanup {
    const TraceInfo& trace;
    bool keep;
    ~Cleanup() {
      if (trace.synthesized && !keep) std::filesystem::remove(trace.path);
    }
  } cleanup{trace, f.keep};
  COLIBRI_ASSIGN_OR_RETURN(replay::ReplayConfig config, ReplayConfigOf(f, trace));
  const uint64_t parent_rss = ProcStatusBytes("VmRSS");
  Json runs = Json::array();
  std::vector<double> rates;
  uint64_t peak_rss = 0, vm_hwm = 0;
  for (int i = 0; i < f.repeats; ++i) {
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
  return Json{{"config",
               {{"trace", f.trace},
                {"model_config", f.model_config},
                {"steps", f.steps},
                {"trace_bytes", target_bytes},
                {"machine", config.machine.label},
                {"l1_bytes", config.l1_bytes},
                {"l2_bytes", config.l2_bytes},
                {"policy", f.policy},
                {"queue_depth", f.queue_depth},
                {"staging_slots", f.staging_slots},
                {"seed", f.seed},
                {"raw_step_samples_cap", f.raw_step_samples_cap},
                {"repeats", f.repeats}}},
              {"trace",
               {{"path", trace.path},
                {"kept", !trace.synthesized || f.keep},
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
              {"wall_s", Median(walls)},
              {"steps_per_s", Median(rates)},
              {"best_steps_per_s", *std::max_element(rates.begin(), rates.end())},
              {"steps_per_cpu_s", Median(cpu_rates)},
              {"peak_rss_bytes", peak_rss},
              {"vm_hwm_bytes", vm_hwm},
              {"parent_rss_bytes", parent_rss},
              {"runs", runs}};
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
  traces::SynthOptions& o = f->synth;
  o.concurrency = 16;
  CLI::App* cmd = bench->add_subcommand(
      "replay", "Modelled replay throughput ((token, layer) steps/s, one core) and peak RSS on a synthetic trace");
  CLI::Option* trace = cmd->add_option("--trace", f->trace, "Replay this trace instead of synthesizing one");
  cmd->add_option("--model-config", f->model_config, "config.json giving the synthetic trace's shape")
      ->capture_default_str()
      ->excludes(trace);
  cmd->add_option("--dtype", f->dtype, "Weight dtype for expert sizes")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16", "int8"}))
      ->capture_default_str()
      ->excludes(trace);
  cmd->add_option("--steps", f->steps, "Synthesize at least this many (token, layer) steps")
      ->capture_default_str()
      ->excludes(trace);
  cmd->add_option("--trace-bytes", f->trace_bytes, "Synthesize until the file has at least this many bytes (e.g. 2G)")
      ->transform(SizeValidator())
      ->capture_default_str()
      ->excludes(trace);
  cmd->add_option("--concurrency", o.concurrency, "Requests decoded together in one pass (layer batch)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str()
      ->excludes(trace);
  cmd->add_option("--prompt-tokens", o.prompt_tokens, "Prompt tokens per request")
      ->check(CLI::PositiveNumber)
      ->capture_default_str()
      ->excludes(trace);
  cmd->add_option("--output-tokens", o.output_tokens, "Decode steps per request")->capture_default_str()->excludes(trace);
  cmd->add_option("--zipf", o.zipf_s, "Zipf exponent of expert popularity per layer")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str()
      ->excludes(trace);
  cmd->add_option("--decode-reuse", o.decode_reuse, "Probability that a decode slot keeps the previous token's expert")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str()
      ->excludes(trace);
  cmd->add_flag("--gate-weights", o.gate_weights, "Also write gate weights (bigger files)")->excludes(trace);
  AddTraceOutputFlags(cmd, &f->out);
  cmd->add_option("--dir", f->dir, "Directory of the synthetic trace")->capture_default_str();
  cmd->add_flag("--keep", f->keep, "Keep the synthetic trace (its path is in the output)");
  cmd->add_option("--hw", f->machine, "Modelled machine (colibri hw list)")->capture_default_str();
  cmd->add_option("--hw-file", f->hw_files, "Extra profile files (components or machines)");
  cmd->add_option("--l1-bytes", f->l1_bytes, "L1 (device) budget, 0 = off")->transform(SizeValidator())->capture_default_str();
  cmd->add_option("--l2-bytes", f->l2_bytes, "L2 (host) budget, 0 = off")->transform(SizeValidator())->capture_default_str();
  cmd->add_option("--policy", f->policy, "L2 cache policy")->check(CLI::IsMember({"lru", "layer"}))->capture_default_str();
  cmd->add_option("--queue-depth", f->queue_depth, "NVMe reads in flight")
      ->check(CLI::Range(1u, 32768u))
      ->capture_default_str();
  cmd->add_option("--staging-slots", f->staging_slots, "Transient expert slots")
      ->check(CLI::Range(1u, 4096u))
      ->capture_default_str();
  cmd->add_option("--hidden", f->hidden, "The model's hidden size, when the trace does not record it");
  cmd->add_option("--raw-sample-cap", f->raw_step_samples_cap,
                  "Raw per-step latency samples kept, as colibri replay does (0: histograms only)")
      ->capture_default_str();
  cmd->add_option("--seed", f->seed, "Seed of the synthetic trace and of the modelled devices")->capture_default_str();
  cmd->add_option("--repeats", f->repeats, "Replay runs (each in its own process; the median is reported)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_flag("--json", f->json, "Print the result as JSON on stdout");
  cmd->callback([f, cmd, exit_code] {
    f->model_config_given = cmd->count("--model-config") > 0;
    f->synth.seed = f->seed;
    *exit_code = Emit(BenchReplay(*f), f->json, &PrintHuman);
  });
}

}  // namespace colibri::cli
