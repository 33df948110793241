// The cache lab's prefetch predictors (cache_lab.h): before a batch runs, a
// predictor names the experts of that batch's layer it expects the batch to
// look up, from the batch before it.
//   "coact"   learned co-activation: a transition score from each expert of
//             the preceding batch to each expert of the next batch's layer,
//             counts[next layer][source expert][target expert] (the source
//             layer is implied: the batch before a layer's batch is the
//             previous MoE layer's, or the last layer's for layer 0). Learning
//             a transition multiplies each source expert's row by `decay`,
//             then adds 1 for every expert the next batch looked up. The
//             proposal is the `width` experts with the largest positive score
//             summed over the preceding batch's experts, ties to the lower id
//             (no proposal without evidence).
//   "oracle"  the next batch's keys exactly (width ignored): the ceiling of
//             any predictor, for reference only.
// Ownership: plain values. Thread-safety: none (one per simulation).
// Memory: "coact" holds layers x experts x experts floats (Qwen3: 3 MiB).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

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

}  // namespace colibri::replay
