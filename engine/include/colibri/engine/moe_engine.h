// MoeEngine: executes MoE layer batches over the tiered expert cache.
//
// One Execute() call is one layer batch (one forward pass at one MoE layer):
//   scheduling   the batch union (each distinct expert once, ascending id),
//                L1 then L2 lookups (ExpertCache accounting), slot choices;
//   nvme_read    L3 -> L2 reads for misses of both tiers (queue-depth bounded,
//                overlapped with compute);
//   host_to_device  L2 -> L1 copies;
//   compute      each expert's FFN over the tokens routed to it, resident
//                experts first while reads are in flight;
//   aggregation  out[t] = sum over t's slots in rank order of weight x FFN output.
// Tiers are not exclusive: a read lands in L2 and is copied to L1. A tier with
// a budget of 0 is disabled (L1 = 0: compute from L2; L2 = 0: reads go to a
// transient staging slot). An expert a tier cannot admit without evicting
// another expert of the same batch goes through a staging slot instead; with
// every staging slot busy, the rest wait for one (the batch runs in waves).
// Budgets are never exceeded.
//
// Prefetch (EngineOptions::prefetch): while a layer batch runs, once its
// demand reads are submitted, a predictor (expert_predictor.h) names up to
// `width` experts of the next MoE layer ((layer + 1) mod layers). Those
// resident in neither tier are made resident in L2 ahead of their lookup
// (ExpertCache::Prefetch: they compete with the budget, count as reads, and
// never evict an expert of the running batch) and read from NVMe into their
// L2 slots. A later lookup that finds its prefetch still in flight waits for
// it; an entry evicted while its read is in flight is waited for before its
// slot is reused. A failed prefetch read drops the entry (a batch waiting on
// it fails with the read's error). Prefetch needs an L2 tier.
//
// Memory: L1 and the device staging slot come from the transfer backend's
// CreateDevicePool; L2 and the staging slots NVMe reads land in from its
// CreateHostPool (pinned memory with a GPU transfer). A compute backend on a
// device (ComputeCaps::device_memory: CudaCompute, or a modelled GPU) gets
// every block from device memory: L1's, or, for a block L1 does not hold, a
// copy in one device staging slot made just before its FFN (copies and FFNs
// of such blocks alternate; the copy counts as host_to_device, and a modelled
// transfer charges its time). Only a compute backend that reads host memory
// (the CPU) computes straight from L2 or a staging slot.
//
// With modelled backends that keep time without moving bytes (storage or
// transfer caps delivers_data = false, compute caps reads_data = false) the
// pools only reserve address space, and expert inputs are neither gathered nor
// aggregated: `out` is not written. A compute backend that reads data needs
// storage (and, with an L1 tier, a transfer) that delivers it; a transfer
// that copies bytes (with an L1 tier) needs storage that delivers them.
//
// Invariant (tested): the output is bit-identical whatever the budgets,
// policies, queue depth or completion order, for a given compute backend:
// each expert's FFN sees the same tokens, and aggregation order is fixed.
//
// Ownership: borrows the backends (they must outlive the engine); owns the
// pools and caches. Thread-safety: one thread calls Execute at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "colibri/engine/compute.h"
#include "colibri/engine/event_loop.h"
#include "colibri/engine/expert_cache.h"
#include "colibri/engine/expert_predictor.h"
#include "colibri/engine/expert_layout.h"
#include "colibri/engine/host_work.h"
#include "colibri/engine/model.h"
#include "colibri/engine/observer.h"
#include "colibri/engine/router_modes.h"
#include "colibri/engine/slab_pool.h"
#include "colibri/engine/storage.h"
#include "colibri/engine/transfer.h"
#include "colibri/status.h"

namespace colibri::engine {

// What the engine needs to know about the model's experts.
struct EngineModel {
  uint32_t moe_layers = 0;
  uint32_t experts = 0;
  uint32_t top_k = 0;
  ExpertLayout layout;                   // the same for every expert
  std::vector<uint64_t> expert_offsets;  // [layer_index x experts + expert]: byte offset in the experts file
  // Optional, modelled storage only: per MoE layer, the bytes of one expert
  // (read, copied and counted against the budgets; each a multiple of the
  // storage alignment, at most layout.block_bytes). Empty: block_bytes for all.
  // Pools then hold a block-sized slot for every expert of the smallest layer
  // the budget fits; the budgets themselves are kept in bytes.
  std::vector<uint64_t> layer_expert_bytes;
  // Router, for Forward(): per layer, experts x hidden fp32 weights and an
  // optional bias (borrowed: they must outlive the engine).
  std::vector<const float*> gate_weights;
  std::vector<const float*> gate_biases;
  bool renormalize = false;       // renormalise the kept top-k weights
  uint32_t expert_capacity = 0;   // tokens per expert per layer batch; 0 = unlimited
};

// The engine's view of an opened model (borrows its gating weights).
EngineModel EngineModelOf(const Model& model);

struct PrefetchConfig {
  std::string predictor = "none";  // none, coact, lookahead (expert_predictor.h)
  uint32_t width = 0;              // experts per batch; 0 = top_k x the batch's tokens (at most the experts)
  double decay = 0.99;             // coact
  // Used instead of `predictor` when set (e.g. replay's oracle, a coact trained on a profile).
  std::shared_ptr<ExpertPredictor> custom;
};

struct PrefetchCounters {
  uint64_t issued = 0, issued_bytes = 0;  // prefetch reads submitted
  uint64_t hits = 0;                      // lookups whose first use of an entry was a prefetched one
  uint64_t wasted_bytes = 0;              // prefetched, evicted before any lookup
  uint64_t waits = 0;                     // lookups that waited for a prefetch still in flight
  uint64_t failed = 0;                    // prefetch reads that failed after their retries (entries dropped)
  uint64_t retries = 0;                   // prefetch reads submitted again after a transient error
  // Accuracy against the next batch's union (when it is at the predicted layer):
  uint64_t predicted = 0, predicted_used = 0, next_lookups = 0;
};

// Routing of Forward and ExecuteLogits (router_modes.h), one Router per MoE
// layer. `router.renormalize` is the model's (EngineModel::renormalize). A
// hash-projection config without a projection gets SeededRouterProjection
// (dims projection_dims, 4 when 0; seed `seed` + layer index); hash-token's
// table of layer l is seeded router.table_seed + l.
// Expert capacity per layer batch: ceil(capacity_factor x tokens x top_k /
// experts) when capacity_factor > 0, else EngineModel::expert_capacity; the
// overflow is dropped or rerouted down the token's ranking.
struct RoutingOptions {
  RouterConfig router = {};
  uint64_t seed = 1;
  double capacity_factor = 0.0;
  CapacityOverflow capacity_overflow = CapacityOverflow::kDrop;
};

struct EngineOptions {
  uint64_t l1_bytes = 0;  // 0 disables L1 (compute straight from L2)
  uint64_t l2_bytes = 0;  // 0 disables L2 (every expert streams from NVMe)
  std::string l1_policy = "lru";
  std::string l2_policy = "lru";
  uint32_t staging_slots = 4;  // transient slots for experts no tier admits
  // A read (demand or prefetch) that completes with a transient error
  // (RetryableReadError) is submitted again, into the same buffer, up to this
  // many times; the retries are counted (LayerBatchReport::read_retries,
  // PrefetchCounters::retries). When they are spent the read fails as before.
  uint32_t read_retries = 2;
  // false: an expert whose read (after its retries), copy or kernel fails
  // fails the whole layer batch (Execute returns the error). true: only that
  // expert fails; the batch completes for every other token, Execute returns
  // OK, and MoeEngine::last_failures() names the failed experts and the
  // tokens that needed them (their outputs are zeros, not computed). A
  // failure the engine cannot confine (a storage backend that broke, a
  // request the storage rejected, a stalled batch) still fails the batch.
  bool isolate_expert_failures = false;
  // Policy "belady" (offline replay only): the future of the tier's lookups,
  // in the tier's layer batches (a closed-loop replay's batches, in order).
  std::shared_ptr<const NextUseIndex> next_use = nullptr;
  PrefetchConfig prefetch = {};
  // Policy "pinned" (L2 only): the static hot set (e.g. replay::PinnedHotSet
  // of a profiling trace); its keys never leave L2. PreloadPinned reads it.
  std::vector<ExpertKey> pinned = {};
  RoutingOptions routing = {};
};

struct EngineBackends {
  EventLoop* loop = nullptr;
  StorageBackend* storage = nullptr;
  TransferBackend* transfer = nullptr;
  ComputeBackend* compute = nullptr;
  EngineObserver* observer = nullptr;  // optional
  const HostWorkModel* host_work = nullptr;  // optional: the modelled cost of the engine's own work (host_work.h)
};

// The routing of one layer batch: tokens x top_k ids in rank order (or
// kDroppedExpert for a slot dropped by capacity) and their weights.
struct LayerRouting {
  size_t tokens = 0;
  const uint32_t* expert_ids = nullptr;
  const float* weights = nullptr;
};

// An expert of a layer batch that could not be computed (isolate_expert_failures).
struct ExpertFailure {
  uint32_t layer_index = 0;
  uint32_t expert = 0;
  Status status;  // names the step (reading, prefetching, copying, computing), the expert and the layer
};

// The failures of the last layer batch: experts in the order they failed, and
// the tokens (ascending indices into the batch) with a slot routed to one.
struct BatchFailures {
  std::vector<ExpertFailure> experts;
  std::vector<uint32_t> tokens;
  bool empty() const { return experts.empty(); }
};

struct TierCounters {
  uint64_t lookups = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
};

// The LRU cliff guard: a global LRU tier whose budget is below the token
// cycle T (the bytes of every MoE layer's top-k experts: what one token
// touches) evicts each expert before its next use, so its hit rate collapses
// to about zero. Returns the warning for `tier` ("L1", "L2") when that is the
// case (policy "lru", 0 < budget < T), naming the sizes and what avoids it;
// empty otherwise.
std::string LruCliffWarning(const std::string& tier, const std::string& policy, uint64_t budget_bytes,
                            uint64_t token_cycle_bytes);

class TierSet;
class Prefetcher;
class LayerBatch;
struct BatchScratch;

class MoeEngine {
 public:
  // Validates the model, options and backends (budgets below one expert,
  // unknown policies, missing backends are clear errors) and carves the pools.
  static Result<std::unique_ptr<MoeEngine>> Create(EngineModel model, const EngineOptions& options,
                                                   const EngineBackends& backends);
  ~MoeEngine();

  // Routes one layer batch (the gate GEMV on the compute backend for the
  // score modes, the layer's Router, expert capacity), tells the observer,
  // then executes it. `hidden` and `out` are tokens x hidden fp32;
  // `token_ids` (tokens, or null) feed hash-token routing. Load-aware routing
  // with a time window reads the event loop's clock.
  Status Forward(uint32_t layer_index, const float* hidden, size_t tokens, float* out,
                 LayerBatchReport* report = nullptr, const uint32_t* token_ids = nullptr);

  // Routes one layer batch from given router logits (tokens x experts fp32,
  // e.g. recorded in a trace) exactly as Forward routes the gate's, then
  // executes it. `hidden` may be null when the compute backend only models
  // time (and the mode does not read it).
  Status ExecuteLogits(uint32_t layer_index, const float* logits, const float* hidden, size_t tokens, float* out,
                       LayerBatchReport* report = nullptr, const uint32_t* token_ids = nullptr);

  // Runs one layer batch: `hidden` and `out` are routing.tokens x hidden fp32.
  // `report` (optional) receives the batch's counts and step times; the
  // observer, if any, gets it too.
  Status Execute(uint32_t layer_index, const float* hidden, const LayerRouting& routing, float* out,
                 LayerBatchReport* report = nullptr);

  const EngineModel& model() const { return model_; }
  const RoutingOptions& routing() const { return options_.routing; }
  // The last Forward / ExecuteLogits decision: tokens x top_k expert ids in
  // rank order, before capacity (valid until the next call).
  std::span<const uint32_t> last_routed_ids() const { return routed_ids_; }
  // The bytes of one expert of MoE layer `layer_index` (read, copied, counted against the budgets).
  uint64_t ExpertBytes(uint32_t layer_index) const {
    return model_.layer_expert_bytes.empty() ? model_.layout.block_bytes : model_.layer_expert_bytes[layer_index];
  }
  // T = sum over MoE layers of top_k x ExpertBytes(layer).
  uint64_t token_cycle_bytes() const;
  // LruCliffWarning for L1 and L2 as configured (none, one or two lines).
  std::vector<std::string> SizingWarnings() const;
  // With isolate_expert_failures: what the last Forward / ExecuteLogits /
  // Execute could not compute (empty when everything was; valid until the next call).
  const BatchFailures& last_failures() const;
  // Whether the compute backend reads data (inputs gathered, outputs aggregated).
  bool moves_data() const { return moves_data_; }
  // Replaces the observer (null: none); e.g. a recorder made after the engine.
  void set_observer(EngineObserver* observer) { backends_.observer = observer; }
  TierCounters l1_counters() const;
  TierCounters l2_counters() const;
  PrefetchCounters prefetch_counters() const;
  // The routers' counters summed over layers (load-aware redirects, capacity).
  RouterCounters router_counters() const;
  // Reads the pinned hot set into L2 before the first batch (policy
  // "pinned"; outside any batch: neither lookups nor prefetches). Call once,
  // before any Execute. Errors: a failed read, as Status.
  Status PreloadPinned();
  uint64_t preloaded_bytes() const { return preloaded_bytes_; }
  // Runs the event loop until no prefetch read is in flight (call before
  // reading final timings or counters; the destructor waits for real reads).
  Status FinishPrefetches();
  // Bytes of every pool the engine allocated (L1 + L2 + staging, host and device): its memory footprint for weights.
  uint64_t pool_bytes() const;
  // The memory NVMe reads land in (the L2 pool and the staging slots), split
  // at slot boundaries into regions of at most 1 GiB (io_uring's limit per
  // registered buffer), for StorageBackend::RegisterBuffers. Empty when the
  // storage backend only models time.
  std::vector<MemoryRegion> read_buffer_regions() const;

 private:
  MoeEngine(EngineModel model, EngineOptions options, EngineBackends backends);
  Status CheckRoutingCompute() const;
  // The expert capacity of a batch of `tokens` (EngineOptions::capacity_factor).
  uint32_t CapacityFor(size_t tokens) const;
  // Top-k and capacity over `logits`, the observer's OnRouting, then Run; `start` is when routing began.
  Status RouteAndRun(uint32_t layer_index, const RouterInput& input, TimeNs start, float* out,
                     LayerBatchReport* report);
  // Execute without telling the observer.
  Status Run(uint32_t layer_index, const float* hidden, const LayerRouting& routing, float* out,
             LayerBatchReport* report);
  // Every storage completion: prefetch reads to the prefetcher, demand reads to the running batch.
  void OnStorageDone(const ReadCompletion& c);
  // Waits for every outstanding read, handing each completion to OnStorageDone.
  void DrainStorage();

  // The parts (engine/src): tier_set.h, prefetcher.h, layer_batch.h; set-up in moe_engine_setup.cc.
  EngineModel model_;
  EngineOptions options_;
  EngineBackends backends_;
  bool moves_data_ = true;                 // compute reads data: gather inputs, aggregate outputs
  std::unique_ptr<TierSet> tiers_;         // pools, caches, slot maps
  std::unique_ptr<Prefetcher> prefetcher_;
  std::unique_ptr<EventSource> storage_source_;
  LayerBatch* current_batch_ = nullptr;    // the batch inside Execute, if any
  uint64_t preloaded_bytes_ = 0;
  std::unique_ptr<BatchScratch> scratch_;  // a layer batch's work lists, kept between batches
  std::vector<std::unique_ptr<Router>> routers_;  // per MoE layer
  std::vector<float> logits_;         // routing scratch: tokens x experts
  std::vector<uint32_t> routed_ids_;  // tokens x top_k
  std::vector<float> routed_weights_;
  std::vector<uint32_t> kept_ids_;    // after capacity drops
  std::vector<float> kept_weights_;
};

}  // namespace colibri::engine
