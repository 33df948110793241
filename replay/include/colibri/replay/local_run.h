// RunLocal: the `colibri run` workload on this machine's real engine
// (engine::LocalEngine): R requests, each a prefill pass of P tokens (request
// after request), then N decode passes with one token of every request each.
// Experts stream from the model's experts.bin (io_uring or pread) through the
// L2 host cache and the L1 pool into the compute backend (hw_backends.h:
// CpuCompute, or the CUDA backends). Inputs are seeded: token ids (Zipf over
// a vocabulary) drive per-(request, layer) hidden states with a tunable
// temporal correlation, so routing has locality. Optionally records every
// layer's routing as a trace (trace_recorder.h).
//
// Determinism: everything runs on the calling thread, in a fixed order; the
// output digest (FNV-1a 64 over every layer's output, in pass and layer
// order) depends on the model, the seed, the correlation, the vocabulary, the
// routing options and the workload's shape only -- never on budgets, policies,
// prefetch, queue depth, threads or backends. Time is read from the engine's
// clock (LocalEngine::loop) for measurement only, never for a decision.
//
// Timing (docs/METRICS.md, "Latencies"; the replay's closed-loop
// definitions) is on the engine's timeline: the loop's clock from the run's
// start (after the engine is open and a pinned hot set preloaded) less the
// harness's own work, which is not the engine's and which no model charges:
// making the seeded inputs, the observers (load counting, the routing log,
// the recorder) and the output digest. A request starts at the start of its first layer batch
// (its prefill pass), TTFT ends at the end of that pass, TPOT is (last pass
// end - first pass end) / (passes - 1), request latency ends at the end of its
// last pass. Throughput: reports::ThroughputOf (generated tokens = one per
// request pass).
//
// Ownership: the options borrow routing_log; the result is a plain value (the
// engine is closed before RunLocal returns). Thread-safety: one run per call;
// calls on distinct threads share nothing but the model's files (and a
// routing_log, if the same). Errors (as Status, nothing thrown): bad options
// (zero requests or prefill tokens, unknown storage, backend or policy names,
// budgets below one expert, pinned without a hot set), opening the model, the
// storage or the backends, the engine's and the recorder's errors.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "colibri/sim/fault_injection.h"
#include "colibri/sim/hardware.h"
#include "colibri/sim/fault_spec.h"
#include "colibri/engine/moe_engine.h"
#include "colibri/reports/run_recording.h"
#include "colibri/reports/samples.h"
#include "colibri/status.h"
#include "colibri/traces/trace.h"
#include "colibri/traces/writer.h"

namespace colibri::replay {

struct LocalRunOptions {
  std::string model_dir;
  engine::ModelVerify verify = engine::ModelVerify::kAuto;  // the model's checksums at open (engine/model.h)
  // The workload.
  uint32_t requests = 4;
  uint32_t prefill_tokens = 32;  // per request, one prefill pass each
  uint32_t decode_passes = 32;   // each one token of every request
  uint64_t seed = 1;             // the token ids and hidden states
  double correlation = 0.9;      // temporal correlation of a request's hidden states, in [0, 1)
  uint32_t vocab = 32000;        // the seeded token ids' vocabulary (Zipf distributed)
  // The engine.
  uint64_t l1_bytes = 0;               // 0: no L1
  uint64_t l2_bytes = 1ull << 30;      // 0: no L2 (every expert streams from storage)
  std::string l2_policy = "lru";       // engine::CachePolicyNames(); "pinned" needs pin_from and pin_bytes
  std::string l1_policy = "lru";
  engine::PrefetchConfig prefetch;     // into L2: none, coact, lookahead
  std::string pin_from;                // policy "pinned": the profiling trace of the hot set (LearnHotSet)
  uint64_t pin_bytes = 0;
  engine::RoutingOptions router;       // mode, load-aware rebalancing, capacity
  uint32_t queue_depth = 32;           // storage reads in flight
  uint32_t staging_slots = 4;          // transient expert slots for reads no tier admits
  uint32_t threads = 1;                // CpuCompute threads
  std::string storage = "auto";        // auto (io_uring, else pread), uring, pread
  bool direct_io = true;               // O_DIRECT reads
  std::string transfer = "auto";       // hw_backends.h names: auto, cpu, cuda
  std::string compute = "auto";
  int cuda_device = 0;
  uint32_t copy_streams = 2;
  // Per-step latency samples kept raw (over all steps); beyond it histograms only (docs/RUNS.md).
  uint64_t raw_step_samples_cap = 10'000'000;
  // Recording (empty path: none): every layer's routing as a trace at record_path.
  std::string record_path;
  bool record_logits = false;  // raw router logits
  bool record_hidden = false;  // the router inputs, fp32
  bool record_tokens = false;  // the seeded token ids
  traces::WriterOptions record_writer;
  traces::Provenance record_provenance;  // the trace header's, as given
  // Optional: one `[ROUTER] 0x<request id> | EXPERT:<id> | LOAD:<0..1> |
  // LATENCY:<n>us` line per (token, slot) decision (docs/ROUTING.md). Borrowed.
  std::FILE* routing_log = nullptr;
  // Optional: called on the calling thread after every forward pass.
  std::function<void(uint64_t passes_done, uint64_t passes_total)> on_pass;
  // Run even when EstimateLocalRun is above kLocalRunFlopsWithoutForce.
  bool force = false;
  // Faults injected over the storage, transfer and compute backends
  // (sim/fault_injection.h), on streams derived from `seed`; storage.corrupt
  // turns the block check on for every read (it needs a format 2 model).
  sim::FaultSpec faults;
  uint32_t read_retries = 2;  // engine::EngineOptions::read_retries
  // An expert that cannot be read (after its retries), copied or computed
  // fails only the requests with a token routed to it (engine isolation,
  // EngineOptions::isolate_expert_failures): they leave the later passes and
  // are listed in LocalRunResult::failed_requests; the others finish, their
  // outputs as in a run without the failure. false: the run fails.
  bool isolate_failures = false;
  // When set, the experts are read by the modelled drive (SimStorage, on
  // streams of `seed`) from the model's experts file, on a simulated clock
  // (SimEventLoop): the real bytes, computed by the real compute backend, in
  // modelled time. Everything is then deterministic, faults included (on a
  // real drive the order reads complete in varies). `storage` is ignored.
  std::optional<sim::NvmeProfile> modelled_storage;
};

// A request that failed (LocalRunOptions::isolate_failures).
struct FailedRequest {
  uint32_t request = 0;
  uint64_t pass = 0;         // the forward pass it failed in
  uint32_t layer_index = 0;  // the MoE layer, and the expert it needed
  uint32_t expert = 0;
  int64_t at_ns = 0;         // on the run's clock
  std::string error;         // the engine's: the step, the expert and the layer
};

// The size of a run before it starts: tokens through the MoE layers and the
// expert FLOPs they cost (3 matrices of H x I, 2 FLOPs a multiply-add).
struct LocalRunEstimate {
  uint64_t tokens = 0;         // requests x (prefill + decode passes)
  uint64_t expert_calls = 0;   // tokens x MoE layers x top-k
  double expert_flops = 0;     // expert_calls x 6 x H x I
  std::string text;            // the sentence a refusal states
};
// Above this a run needs `force` (hours on a CPU; the default workload is about 3e12).
inline constexpr double kLocalRunFlopsWithoutForce = 1e15;
// Reads the model's config.json only (engine::ReadModelConfig).
Result<LocalRunEstimate> EstimateLocalRun(const LocalRunOptions& options);

// What a recording wrote.
struct LocalRunRecording {
  std::string path;
  uint64_t records = 0;
};

struct LocalRunResult {
  std::string output_digest;  // 16 hex digits
  std::string storage_backend, transfer_backend, compute_backend;  // the backends' names as opened
  std::vector<std::string> warnings;  // opening (io_uring, O_DIRECT) and sizing (the LRU cliff guard)
  // The workload as run.
  uint64_t requests = 0;
  uint64_t forward_passes = 0;  // requests + decode passes
  uint64_t passes = 0;          // request passes: one generated token each
  uint64_t prefill_tokens = 0, decode_tokens = 0;  // the tokens the passes carried
  uint64_t steps = 0;           // (token, MoE layer) steps
  uint64_t layer_batches = 0;
  int64_t elapsed_ns = 0;       // on the engine's clock: the run's start to its last pass's end
  reports::Throughput throughput;
  // Caches, per lookup (one distinct expert of a layer batch); "served" = by any tier.
  uint64_t lookups = 0, served = 0, lookups_decode = 0, served_decode = 0;
  uint64_t l1_hits_decode = 0, l2_hits_decode = 0;
  engine::TierCounters l1, l2;
  engine::PrefetchCounters prefetch;
  engine::RouterCounters router;
  uint64_t read_bytes = 0;      // demand reads and prefetches of the layer batches
  uint64_t preload_bytes = 0;   // policy pinned: the hot set, read before the run's clock starts
  std::vector<sim::InjectedFault> faults;  // LocalRunOptions::faults, in injection order
  std::vector<FailedRequest> failed_requests;  // in the order they failed
  // Per request, the digest of its outputs over every pass and layer (FNV-1a
  // 64, hex); empty for a failed request. A completed request's digest does
  // not depend on the others failing.
  std::vector<std::string> request_output_digests;
  uint64_t read_retries = 0;    // reads the engine submitted again after a transient error (demand + prefetch)
  uint64_t staged = 0, device_staged = 0, dropped_assignments = 0;
  uint64_t pool_bytes = 0;      // the engine's pools
  // Per step of the layer batch, one sample per layer batch.
  static constexpr std::array<const char*, 7> kStepNames = {
      "routing", "scheduling", "nvme_read", "host_to_device", "compute", "aggregation", "layer_batch"};
  std::array<reports::Samples, kStepNames.size()> step_ns;
  // Per request (index = request id), relative to the run's start; and their distributions (raw).
  std::vector<reports::RequestTimes> request_times;
  reports::Samples request_latency_ns, ttft_ns, tpot_ns;
  std::vector<std::vector<uint64_t>> expert_load_counts;  // [MoE layer index][expert] selections
  std::vector<reports::HitRatePoint> hit_rate;            // cumulative, in run order
  std::optional<LocalRunRecording> recording;             // set when record_path was
};

// Refuses (kInvalidArgument, stating the estimate) a run above
// kLocalRunFlopsWithoutForce unless options.force.
Result<LocalRunResult> RunLocal(const LocalRunOptions& options);

}  // namespace colibri::replay
