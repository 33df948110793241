// The `colibri bench replay` suite (docs/BENCHMARKS.md): modelled replay
// throughput -- (token, layer) steps per second of replay::RunReplay on one
// modelled machine, one core -- and the replay's peak RSS, on a synthetic
// trace of at least `steps` steps and `trace_bytes` bytes (or an existing
// trace). Every phase runs in its own forked child (child_process.h) so that
// each figure is its own: the synthesis (streamed to `dir`, removed unless
// `keep`), sized from a one-wave pilot file, then each replay run. A replay
// child reports ReplayResult.wall_s (the replay loop alone), its own peak
// RSS (ru_maxrss and VmHWM, which include the pages it shares with the
// parent at fork: parent_rss_bytes says how much) and its CPU time.
//
// Ownership: the call owns the synthetic trace until it returns (removed
// unless keep). Thread-safety: call from a single-threaded process (it
// forks). Errors: kNotFound for a missing trace, directory or model config
// (the message says how to do without ../shared), kInvalidArgument for a
// size that needs more than 2^32 requests, those of synthesis and RunReplay,
// kInternal when runs of the same trace give different event digests.
#pragma once

#include <cstdint>
#include <string>

#include "colibri/bench/harness.h"
#include "colibri/replay/replay_run.h"
#include "colibri/status.h"
#include "colibri/traces/synth.h"
#include "colibri/traces/writer.h"

namespace colibri::bench {

// The bundled sample trace whose header gives the synthetic trace's shape
// when the default model config is absent (a clone without ../shared), and
// its model's hidden size (Qwen3-30B-A3B's; the sample does not record it).
inline constexpr const char* kReplayBenchSampleTrace = "traces/samples/qwen3-bigmoe.ctrace";
inline constexpr uint32_t kReplayBenchSampleHidden = 2048;

struct ReplayBenchOptions {
  std::string trace;                // replay this trace; empty: synthesize one
  std::string model_config;         // a Hugging Face config.json: the synthetic trace's shape
  bool model_config_given = false;  // false: an absent model_config falls back to the sample's header
  std::string dtype = "bf16";       // of the expert sizes
  uint64_t steps = 10'000'000;      // synthesize at least this many (token, layer) steps
  uint64_t trace_bytes = 0;         // and at least this many bytes
  traces::SynthOptions synth;       // requests, tokens, popularity; the shape and request count are filled in
  traces::WriterOptions writer;     // the synthetic trace's framing (written atomically)
  std::string dir;                  // of the synthetic trace
  bool keep = false;                // keep the synthetic trace
  // The replay: machine, budgets, policy, queue depth, staging slots, seed,
  // raw sample cap, hidden (0: the sample's when its shape is used); the
  // trace path is filled in.
  replay::ReplayConfig replay;
  int repeats = 3;                  // replay runs (the median is reported)
};

// The suite's figures: trace {path, kept, file_bytes, synthesized}, steps,
// layer_batches, requests, events, event_digest, reads, hit_pct_cum,
// simulated_ns, wall_s and steps_per_s (medians), best_steps_per_s,
// steps_per_cpu_s, peak_rss_bytes, vm_hwm_bytes, parent_rss_bytes, runs.
// Progress: the synthetic file's bytes while it is written.
Result<Json> RunReplayBench(const ReplayBenchOptions& options, const Observer& observer = {});

}  // namespace colibri::bench
