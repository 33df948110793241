// The cache lab's prefetch predictors (cache_lab.h): before a batch runs, a
// predictor names the experts of that batch's layer it expects the batch to
// look up, from the batch before it.
//   "coact"   the engine's learned co-activation predictor
//             (engine::CoactivationPredictor, expert_predictor.h) from the
//             preceding batch's experts to the next batch's layer (the
//             previous MoE layer's batch, or the last layer's for layer 0).
//   "oracle"  the next batch's keys exactly (width ignored): the ceiling of
//             any predictor, for reference only.
// Ownership: plain values. Thread-safety: none (one per simulation).
// Memory: "coact" holds layers x experts x experts floats (Qwen3: 3 MiB).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "colibri/engine/expert_predictor.h"
#include "colibri/replay/cache_lab.h"
#include "colibri/status.h"

namespace colibri::replay {

class NextBatchPredictor {
 public:
  virtual ~NextBatchPredictor() = default;
  // Replaces `out` with up to `width` distinct keys of `next`'s layer, from
  // `prev` (only the oracle reads `next`'s keys). Allocation-free once warm.
  virtual void Predict(const LabBatch& prev, const LabBatch& next, uint32_t width,
                       std::vector<engine::ExpertKey>* out) = 0;
  // Learns that `next` followed `prev`.
  virtual void Observe(const LabBatch& prev, const LabBatch& next) = 0;
};

// The predictor named by `options` for `trace` (null for "none"). "coact"
// trains on `profile` first when given (its shape must match the trace's).
// Errors: an unknown predictor, a decay outside (0, 1], a profile of another
// shape (InvalidArgument naming the option).
Result<std::unique_ptr<NextBatchPredictor>> MakeNextBatchPredictor(const PrefetchOptions& options,
                                                                   const LabTrace& trace, const LabTrace* profile);

// Trains `coact` on every transition of `profile`'s batch sequence.
void TrainCoact(const LabTrace& profile, engine::CoactivationPredictor* coact);

// Errors unless `profile` has the trace's MoE layers and experts (names the profile's path).
Status CheckProfileShape(const LabTrace& profile, uint32_t moe_layers, uint32_t experts);

// The engine-side oracle for a closed-loop replay of `trace`: its n-th call
// (the engine's n-th layer batch) proposes the experts of batch n + 1, in
// order of first appearance, when that batch is at the predicted layer.
std::shared_ptr<engine::ExpertPredictor> MakeTraceOracle(LabTrace trace);

}  // namespace colibri::replay
