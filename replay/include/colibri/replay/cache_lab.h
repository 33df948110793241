// The expert-cache policy and prefetch lab (docs/CACHE.md): a trace becomes
// the sequence of layer batches of the shared accounting (ARCHITECTURE.md,
// "Cache accounting"), and each (policy, budget, prefetcher) runs the
// engine's own ExpertCache (kEvictAfterBatch mode) and CachePolicy over it.
//
// Accounting: prefill is one batch per MoE layer holding every prompt token's
// choices in token order; decode one batch per (pass, layer), layers in order
// (for traces with several requests, a batch is one forward pass at one layer:
// the trace's pass_id). Inside a batch each distinct (layer, expert) is looked
// up once, in order of first appearance; repeats only refresh recency. A miss
// makes the entry resident at its layer's expert bytes. After the batch,
// eviction runs until the budget holds and never evicts an entry the batch
// touched. Hit rates are per lookup, decode-only and cumulative; bytes read =
// the missed entries' sizes plus prefetched bytes; MiB = 2^20 bytes.
// Policies that keep some entries whatever the total ("layer" and "layerlfu"
// hold each layer to its share, "pinned" never evicts its hot set) can stay
// above the budget after a batch whose union overflows what they may evict:
// compare them where each layer's share holds its batches' unions (pinned:
// where the hot set plus any union fits).
//
// "pinned": the hot set is inserted before the first batch, outside any batch
// (preload_bytes; neither lookups nor prefetches), so batch numbers stay the
// trace's and its first lookups may hit.
//
// Prefetch: before batch b+1 runs, a predictor names the experts it expects
// b+1 to look up, from batch b's experts; the lab prefetches those not
// resident (they compete with the budget and count as reads). The prefetch
// runs after b+1 begins and right before its lookups, so a prefetched entry
// that b+1 looks up is a hit. Predictors (replay/src/cache_lab_predictor.h):
// "coact" (learned co-activation: transition counts from batch b's (layer,
// expert) to batch b+1's, online with exponential decay, or trained on a
// profiling trace first; no proposal without evidence), "oracle" (the true
// next set, whatever the width: the ceiling of any predictor, for reference
// only). Accuracy is counted for every batch after the first.
//
// Ownership: plain values. Thread-safety: LoadLabTrace and SimulateCache are
// free functions; Sweep runs simulations on several threads over one const
// LabTrace. Errors: the trace's (with its path), an unknown policy or
// predictor, a budget of 0, "belady" without the future (never: the lab
// builds it), a pinned set larger than the budget (or with a key outside the
// trace's shape, or repeated), a coact profile of another shape, as Status
// naming the option.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "colibri/engine/cache_policy.h"
#include "colibri/status.h"

namespace colibri::replay {

struct LabBatch {
  uint32_t layer_index = 0;   // position in the header's moe_layer_ids
  bool prefill = false;
  uint64_t pass_id = 0;
  uint32_t tokens = 0;        // rows routed in the batch
  std::vector<engine::ExpertKey> keys;  // the batch union: distinct, in order of first appearance
  // Per key: the capture's recorded cache outcome of the key's first row in
  // the batch (0 miss, 1 hit, 2 prefetch hit); empty when the trace has none.
  std::vector<uint8_t> recorded;
};

struct LabTrace {
  std::string path;
  std::vector<LabBatch> batches;
  std::vector<uint64_t> layer_expert_bytes;  // per MoE layer index (the header's expert_bytes)
  uint32_t moe_layers = 0, experts = 0, top_k = 0;
  uint64_t token_cycle_bytes = 0;            // sum over layers of top_k x expert bytes (docs/METRICS.md)
  bool has_recorded = false;                 // every batch has recorded outcomes
  // The recorded outcomes counted like the lab counts (per lookup, first row
  // of each distinct key in its batch; 1 and 2 are hits).
  uint64_t recorded_lookups = 0, recorded_hits = 0, recorded_lookups_decode = 0, recorded_hits_decode = 0;
  uint64_t records = 0;            // trace records read
  bool torn = false;              // allow_torn and the file is torn: the batches are its prefix
  uint64_t torn_at_byte = 0;
};

// Reads the whole trace into its batch sequence (memory: one key per lookup).
// A torn trace is an error (traces::TraceReader) unless `allow_torn`.
Result<LabTrace> LoadLabTrace(const std::string& path, bool allow_torn = false);

struct PrefetchOptions {
  std::string predictor = "none";  // "none", "coact", "oracle"
  uint32_t width = 0;              // experts predicted per batch; 0 = top_k x the predicted batch's tokens
  double decay = 0.99;             // coact: a source expert's counts decay by this each time it is learned from
  std::string profile_trace;       // coact: train on this trace first (then keep learning online)
};

struct LabRun {
  std::string policy = "lru";      // engine::CachePolicyNames()
  uint64_t budget_bytes = 0;
  uint64_t seed = 1;               // "random"
  std::vector<engine::ExpertKey> pinned;  // "pinned": the hot set (see PinnedHotSet)
  PrefetchOptions prefetch;
};

struct LabResult {
  std::string policy;
  uint64_t budget_bytes = 0;
  std::string predictor;                       // "none" without prefetch
  uint64_t lookups = 0, hits = 0;              // hits = demand hits + prefetch hits
  uint64_t lookups_decode = 0, hits_decode = 0;
  uint64_t prefetch_hits = 0, prefetch_hits_decode = 0;
  uint64_t demand_read_bytes = 0;              // misses
  uint64_t prefetch_read_bytes = 0;            // prefetches issued
  uint64_t preload_bytes = 0;                  // "pinned": the hot set read before the first batch
  uint64_t prefetch_wasted_bytes = 0;          // prefetched, evicted before any lookup
  uint64_t read_bytes = 0;                     // demand + prefetch + preload
  // Prefetch accuracy against the true next-batch sets, summed over batches:
  uint64_t predicted = 0;                      // keys predicted
  uint64_t predicted_used = 0;                 // of them, looked up by the next batch
  uint64_t next_lookups = 0;                   // keys the next batches looked up
  std::vector<uint64_t> layer_lookups, layer_hits;  // per MoE layer index, cumulative
  double hit_pct_decode() const;
  double hit_pct_cum() const;
  double precision() const;  // predicted_used / predicted
  double recall() const;     // predicted_used / next_lookups
  double coverage() const;   // prefetch_hits / (prefetch_hits + misses)
};

// One simulation. "belady" reads the future from `next_use` (BuildNextUse).
// Allocation-free per batch once warm; a coact profile is loaded per call.
Result<LabResult> SimulateCache(const LabTrace& trace, const LabRun& run,
                                const std::shared_ptr<const engine::NextUseIndex>& next_use);

// The future of every key in batch numbers of the trace's sequence.
std::shared_ptr<const engine::NextUseIndex> BuildNextUse(const LabTrace& trace);

// The static hot set learned from a profiling trace: its keys by lookups
// (descending, ties to the lower key), the longest prefix of that order that
// fits in `pin_bytes`; keys never looked up are not in it.
std::vector<engine::ExpertKey> PinnedHotSet(const LabTrace& profile, uint64_t pin_bytes);

// Policy "pinned" with its hot set learned from a profiling trace, as every
// command takes it (--pin-from TRACE --pin-bytes B): the two flags come with
// the policy (an error names them otherwise), and the profile must have
// `moe_layers` x `experts`. Empty when the policy is not used.
Result<std::vector<engine::ExpertKey>> LearnHotSet(bool policy_pinned, const std::string& pin_from, uint64_t pin_bytes,
                                                   uint32_t moe_layers, uint32_t experts);

struct SweepOptions {
  std::vector<uint64_t> budgets_bytes;
  std::vector<std::string> policies;
  // One row set per prefetcher (default: none alone); "belady" gets one row
  // set without prefetch, whatever these (it is the ceiling of demand caching).
  // Each profile trace is loaded once.
  std::vector<PrefetchOptions> prefetchers{PrefetchOptions{}};
  uint64_t seed = 1;
  std::vector<engine::ExpertKey> pinned;
  uint32_t threads = 2;
};

// Every (policy, prefetcher, budget), in that nesting order (policy 0 with
// prefetcher 0 at every budget, then with prefetcher 1, ...), run on
// `threads` threads; the same results whatever the thread count.
Result<std::vector<LabResult>> Sweep(const LabTrace& trace, const SweepOptions& options);

}  // namespace colibri::replay
