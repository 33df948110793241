// Prefetcher: the engine's reads ahead of demand (moe_engine.h, "Prefetch")
// and the preload of a pinned hot set.
//
// Issue: once a layer batch's demand reads are submitted, the predictor names
// up to `width` experts of the next MoE layer ((layer + 1) mod layers); those
// resident in neither tier are admitted to L2 (ExpertCache::Prefetch: never
// evicting what the running batch needs) and read into their slots, in the
// predictor's order, while L2 can admit them. Each such read is tagged
// kPrefetchTag | entry index and marks its slot's fill in flight (TierSet);
// OnReadDone clears it and, for a failed read, drops the entry. Score keeps
// the accuracy counters: the previous prediction against the next batch's
// union, when that batch is at the predicted layer.
//
// Ownership: borrows the model, the backends and the tiers (the engine's);
// shares the predictor. Thread-safety: none; the engine's thread. Errors: the
// predictor's, the storage's Submit, an event loop that ran dry with reads in
// flight, as Status.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "colibri/engine/moe_engine.h"
#include "tier_set.h"

namespace colibri::engine {

// A prefetch read's tag: this bit set, the entry index ([layer x experts + expert]) below it.
constexpr uint64_t kPrefetchTag = uint64_t{1} << 63;

class Prefetcher {
 public:
  // `predictor` null: no prefetch (Issue does nothing; Preload still works).
  // `width` 0: top_k x the batch's tokens, at most the experts.
  // `read_retries`: EngineOptions::read_retries.
  Prefetcher(const EngineModel& model, const EngineBackends& backends, TierSet& tiers,
             std::shared_ptr<ExpertPredictor> predictor, uint32_t width, uint32_t read_retries)
      : model_(model), backends_(backends), tiers_(tiers), predictor_(std::move(predictor)), width_(width),
        read_retries_(read_retries), retries_of_(static_cast<size_t>(model.moe_layers) * model.experts, 0) {}

  bool enabled() const { return predictor_ != nullptr; }
  // Scores the last prediction against the union (ascending ids) of a batch at `layer`.
  void Score(uint32_t layer, std::span<const uint32_t> union_experts);
  // Predicts the layer after `layer` from this batch (its union, ascending;
  // its tokens and hidden states) and prefetches. Adds the reads it submits
  // to `*reads` and their bytes to `*bytes`.
  Status Issue(uint32_t layer, std::span<const uint32_t> union_experts, size_t tokens, const float* hidden,
               uint32_t* reads, uint64_t* bytes);
  // A lookup found its entry's prefetch still in flight and waits for it.
  void CountWait() { ++counters_.waits; }
  // The read of entry `index` (tag kPrefetchTag | index) completed with
  // `status`. A transient error within the retry budget submits it again and
  // returns false (still in flight); else the read is done (true) with
  // `*status` its final status (a failed read's entry is dropped).
  bool OnReadDone(size_t index, Status* status);
  // Reads `pinned` into L2 (outside any batch; neither lookups nor
  // prefetches) and waits for them. Adds their bytes to `*bytes`.
  Status Preload(const std::vector<ExpertKey>& pinned, uint64_t* bytes);
  // Runs the event loop until no prefetch read is in flight.
  Status Finish();
  size_t in_flight() const { return in_flight_; }
  // Issued, waits, failed and accuracy; hits and waste come from the L2 cache.
  PrefetchCounters counters() const;

 private:
  Status Submit(ExpertKey key, int64_t slot);
  // Submits entry `index`'s read into `buffer` (its fill is marked in flight).
  Status SubmitRead(size_t index, void* buffer);

  const EngineModel& model_;
  const EngineBackends& backends_;
  TierSet& tiers_;
  std::shared_ptr<ExpertPredictor> predictor_;
  const uint32_t width_;
  const uint32_t read_retries_;
  std::vector<uint32_t> retries_of_;  // [layer x experts + expert]: retries of its read in flight
  size_t in_flight_ = 0;
  std::vector<uint32_t> prediction_;  // the last batch's prediction, ascending once issued
  uint32_t prediction_layer_ = 0;
  bool has_prediction_ = false;
  PrefetchCounters counters_;
};

}  // namespace colibri::engine
