// RunReplay: one trace replayed through the engine core on one machine --
// modelled (SimStorage, SimTransfer, SimCompute on a SimEventLoop) or partly
// real (io_uring / pread reads of a model's experts.bin, memcpy or CUDA
// transfers, CpuCompute or CudaCompute, on the real clock: emulation).
//
// Pacing: closed loop (default) -- layer batches run in trace order, each as
// soon as the previous one finished; open loop -- requests arrive at their
// recorded (or an arrival trace's) times and continuous batching forms the
// forward passes (continuous_batching.h). Before each MoE layer batch, the non-MoE part of the
// layer (attention, shared experts) runs as a memory-bound pass over the
// trace's dense bytes for that layer, on the modelled compute device (sim
// compute only; latencies are then end to end, `moe_only` figures beside).
//
// Metrics: per layer batch step times (raw up to raw_step_samples_cap values
// over all steps, then histograms only: reports::Samples), per request
// latency (from its arrival -- open loop -- or its first batch's start --
// closed loop -- to its last batch's end), time to first token (to the end of
// its first pass), time per output token (the mean gap between its later
// passes' ends), queueing (arrival to first batch), tier hits per lookup, bytes read,
// queue-full events, per-layer expert load (counts and deviation), the hit
// rate over time (at most 2048 points), and the event-log digest (every
// modelled read, copy and kernel plus every layer batch's end).
//
// Ownership: the result is a plain value. Thread-safety: one run per call.
// Errors: bad configuration (unknown backend names, a real backend without a
// model, a shape mismatch), the trace's and the engine's errors, as Status.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "colibri/engine/model.h"
#include "colibri/replay/dense_cost.h"
#include "colibri/replay/engine_replay.h"
#include "colibri/reports/latency_histogram.h"
#include "colibri/reports/run_store.h"
#include "colibri/reports/samples.h"
#include "colibri/sim/event_log.h"
#include "colibri/sim/fault_injection.h"
#include "colibri/sim/fault_spec.h"
#include "colibri/sim/hardware.h"
#include "colibri/sim/profiles.h"
#include "colibri/traces/stats.h"

namespace colibri::replay {

using reports::LatencyHistogram;

enum class Pacing { kClosed, kOpen };

// Called around every layer batch of a replay (colibri repro: fault injection
// and invariant checks). BeforeBatch may change the batch's routing (a
// recorded-routing replay executes what it leaves); a non-OK status from
// either ends the replay with that status. As the engine's observer it also
// sees the decisions a recomputing replay makes (OnRouting). Borrowed; called
// on the replay's thread.
class BatchHook : public engine::EngineObserver {
 public:
  virtual Status BeforeBatch(LayerBatch* batch) = 0;
  virtual Status AfterBatch(const LayerBatch& batch, const engine::LayerBatchReport& report) = 0;
};

struct ReplayConfig {
  std::string trace_path;
  // Faults injected by wrappers over the backends (sim/fault_injection.h),
  // seeded by `seed`; each goes to the event log and ReplayResult::faults.
  // Transient read errors are retried by the engine (EngineOptions::read_retries).
  sim::FaultSpec faults;
  uint32_t read_retries = 2;  // engine::EngineOptions::read_retries
  bool allow_torn = false;      // a torn trace replays its prefix (ReplayResult::trace says so); else an error
  std::string model_dir;        // required by real backends (the bytes to read and compute)
  engine::ModelVerify model_verify = engine::ModelVerify::kAuto;  // how model_dir's bytes are checked
  sim::ResolvedMachine machine;
  std::string storage = "sim";  // sim, uring, pread
  std::string transfer = "sim"; // sim, cpu, cuda (hw_backends.h)
  std::string compute = "sim";  // sim, cpu, cuda
  RoutingMode routing = RoutingMode::kRecorded;
  engine::RoutingOptions router;  // kRecompute: the mode, load-aware rebalancing and capacity
  uint64_t l1_bytes = 0;
  uint64_t l2_bytes = 0;
  std::string policy = "lru";
  std::string l1_policy = "lru";
  // Prefetch into L2 (MoeEngine): predictor none, coact, lookahead (needs a
  // model and --compute cpu) or oracle (the trace's next batch; closed loop).
  engine::PrefetchConfig prefetch;
  std::string prefetch_profile;  // coact: train on this trace first
  // Policy "pinned" (L2): the hot set learned from this profiling trace, pin_bytes of it (LearnHotSet).
  std::string pin_from;
  uint64_t pin_bytes = 0;
  uint32_t queue_depth = 32;
  uint32_t staging_slots = 4;
  uint32_t threads = 1;         // CpuCompute threads
  int cuda_device = 0;          // --transfer/--compute cuda: the device and the copy streams
  uint32_t copy_streams = 2;
  uint32_t hidden = 0;          // the model's hidden size when the trace does not record it (sim compute)
  bool pinned = true;           // host memory pinned for host-to-device copies
  uint64_t seed = 1;
  sim::EventSink* event_sink = nullptr;  // optional, borrowed: every modelled read, copy, kernel and layer batch as a span
  Pacing pacing = Pacing::kClosed;
  // Open loop only:
  std::string arrivals_path;    // a request-arrival trace; empty: the trace's recorded arrivals
  double time_scale = 1.0;      // arrivals come time_scale times as fast
  bool repeat = false;          // cycle the trace's requests over every arrival
  uint64_t max_arrivals = 0;    // the first N arrivals only; 0 = all
  uint32_t max_batch = 256;     // requests per forward pass
  // Raw per-step samples kept (over every step kind, one per layer batch each);
  // beyond it every step keeps its histogram only. Request samples stay raw.
  uint64_t raw_step_samples_cap = 10'000'000;
  bool decode_series = false;   // keep every decode pass's figures in DecodePasses::series
  std::string routing_out;      // kRecompute: write the routing the engine computed as a trace here
  BatchHook* hook = nullptr;    // optional, borrowed (not with routing_out)
};

// Decode passes (forward passes without prefill tokens), summed per pass: for
// a single-request trace, per decode token (what the capture's .metrics files
// report per step).
struct DecodePasses {
  uint64_t passes = 0;
  uint64_t tokens = 0;        // tokens at the pass's first MoE layer
  uint64_t read_bytes = 0;
  int64_t nvme_read_ns = 0;   // sum over the pass's layer batches of first read submitted -> last completed
  int64_t read_latency_ns = 0;  // sum over every read of submit -> complete (as if each read had its own lane)
  int64_t compute_ns = 0;     // expert kernels
  int64_t elapsed_ns = 0;     // layer batches, dense parts included
  LatencyHistogram read_bytes_per_pass, nvme_read_ns_per_pass, elapsed_ns_per_pass;
  // With ReplayConfig::decode_series: one entry per decode pass, in run order.
  struct Pass {
    uint64_t read_bytes = 0;
    int64_t nvme_read_ns = 0;
    int64_t dense_ns = 0;     // the pass's dense parts (dense_cost.h)
    int64_t elapsed_ns = 0;
  };
  std::vector<Pass> series;
};

// How the replayed trace ended (traces::TraceReader): stored with the run.
struct TraceEnding {
  bool torn = false;           // only with ReplayConfig::allow_torn
  uint64_t torn_at_byte = 0;   // where the whole records end
  uint64_t records = 0;        // records replayed
  uint64_t file_bytes = 0;
};

struct ReplayResult {
  std::string event_digest;
  TraceEnding trace;
  uint64_t events = 0;
  bool simulated = true;          // on the simulated clock (false: real clock, emulation)
  uint64_t steps = 0;             // (token, layer) steps
  uint64_t processed_tokens = 0;  // tokens of the first MoE layer's batches (prompt and decode)
  uint64_t layer_batches = 0;
  uint64_t passes = 0;            // request passes: one generated token each
  uint64_t requests = 0;
  double wall_s = 0;              // the replay loop itself
  int64_t elapsed_ns = 0;         // on the run's clock (simulated_ns when simulated)
  int64_t moe_ns = 0;             // the MoE layer batches alone
  uint64_t lookups = 0, served = 0, lookups_decode = 0, served_decode = 0;
  uint64_t l1_hits_decode = 0, l2_hits_decode = 0;
  engine::TierCounters l1, l2;
  engine::PrefetchCounters prefetch;
  engine::RouterCounters router;  // recompute: load-aware redirects and capacity
  uint64_t preload_bytes = 0;     // policy pinned: the hot set read before the first batch
  uint64_t read_bytes = 0;
  uint64_t reads = 0;
  uint64_t queue_full_events = 0;
  uint64_t staged = 0;
  // Per step of the layer batch (kStepNames), one sample per layer batch.
  static constexpr std::array<const char*, 8> kStepNames = {
      "routing", "scheduling", "nvme_read", "host_to_device", "compute", "aggregation", "dense", "layer_batch"};
  std::array<reports::Samples, kStepNames.size()> step_ns;
  // The samples of a step by name (one of kStepNames).
  const reports::Samples& step(std::string_view name) const;
  reports::Samples request_latency_ns, ttft_ns, tpot_ns;
  reports::Samples queue_ns;      // arrival to the first batch (open loop)
  DecodePasses decode;
  DenseCostTotals dense_cost;     // the dense parts' terms, summed over every layer batch (dense_cost.h)
  bool open_loop = false;
  uint64_t arrivals_total = 0;    // open loop: arrivals available (before the request count and limits cut them)
  uint64_t max_pass_requests = 0; // open loop: the most requests one forward pass carried
  std::vector<traces::LoadDeviation> expert_load;   // per MoE layer
  std::vector<std::vector<uint64_t>> expert_load_counts;  // [MoE layer index][expert] selections
  std::vector<reports::HitRatePoint> hit_rate;      // cumulative, in run order
  std::string modelled_layout;    // how the expert shape was modelled (dtype, H, I, block bytes)
  std::vector<std::string> warnings;  // the engine's sizing warnings (the LRU cliff guard), the dense cost's
  std::vector<sim::InjectedFault> faults;  // ReplayConfig::faults, in injection order
  uint64_t read_retries = 0;          // reads the engine submitted again after a transient error (demand + prefetch)
};

Result<ReplayResult> RunReplay(const ReplayConfig& config);

}  // namespace colibri::replay
