// Expert predictors for prefetch: while a layer batch runs, name the experts
// the next layer batch will look up, so their reads start early.
//
//   "coact"      learned co-activation (CoactivationPredictor): transition
//                counts from each expert of a batch to each expert of the
//                batch after it, online with exponential decay, optionally
//                trained on a profiling sequence first.
//   "lookahead"  router lookahead: the next MoE layer's router applied to
//                this layer's router input (the hidden state one layer early;
//                the next layer's true input differs by this layer's output),
//                top-k per token, the union. Needs the gate weights and a
//                compute backend that reads data (RouterLookaheadPredictor).
// Callers may supply their own ExpertPredictor (replay's "oracle" knows the
// trace's next batch).
//
// Ownership: plain values. Thread-safety: none (one per engine).
// Memory: coact holds layers x experts x experts floats (Qwen3: 3 MiB).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "colibri/engine/compute.h"
#include "colibri/status.h"

namespace colibri::engine {

// What a predictor sees of the running layer batch.
struct PredictorInput {
  uint32_t layer_index = 0;
  std::span<const uint32_t> experts;  // the batch union, ascending ids
  uint32_t next_layer = 0;            // the MoE layer index of the next batch
  size_t tokens = 0;
  const float* hidden = nullptr;      // tokens x hidden_size router input, or null (routing given)
  uint32_t hidden_size = 0;
};

class ExpertPredictor {
 public:
  virtual ~ExpertPredictor() = default;
  // Replaces `out` with up to `width` distinct experts of input.next_layer,
  // most likely first. Called once per layer batch, in batch order (a
  // predictor may learn from the sequence of inputs).
  virtual Status Predict(const PredictorInput& input, uint32_t width, std::vector<uint32_t>* out) = 0;
};

// Co-activation counts[next layer][source expert][target expert] (the source
// layer is implied: the batch before a layer's batch is the previous MoE
// layer's). Observe multiplies each source expert's row by `decay`, then adds
// 1 for every target expert. Predict sums the rows of the source experts and
// proposes the `width` targets with the largest positive score, ties to the
// lower id (no proposal without evidence).
class CoactivationPredictor final : public ExpertPredictor {
 public:
  CoactivationPredictor(uint32_t layers, uint32_t experts, double decay);
  void Observe(std::span<const uint32_t> sources, uint32_t target_layer, std::span<const uint32_t> targets);
  void Propose(std::span<const uint32_t> sources, uint32_t target_layer, uint32_t width,
               std::vector<uint32_t>* out);
  // Online: learns the transition from the previous call's batch to this one
  // (when this batch is at the layer that call predicted), then proposes.
  Status Predict(const PredictorInput& input, uint32_t width, std::vector<uint32_t>* out) override;

 private:
  float* Row(uint32_t target_layer, uint32_t source_expert) {
    return counts_.data() + (static_cast<size_t>(target_layer) * experts_ + source_expert) * experts_;
  }

  uint32_t experts_;
  float decay_;
  std::vector<float> counts_;  // [target layer][source expert][target expert]
  std::vector<float> scores_;  // per target expert: the current proposal's sums
  std::vector<uint32_t> order_;
  std::vector<uint32_t> previous_;  // the previous call's batch
  uint32_t previous_next_layer_ = 0;
  bool has_previous_ = false;
};

// Router lookahead: per token, the top-k of the next layer's router over this
// batch's router input (softmax top-k, ties to the lower id), proposed by the
// number of tokens choosing each expert (descending, ties to the lower id).
// Nothing is proposed without a hidden state. The gate GEMV runs on the
// compute backend (its time is the prediction's cost).
class RouterLookaheadPredictor final : public ExpertPredictor {
 public:
  // Borrows the gates (per MoE layer: experts x hidden fp32, bias or null) and the backend.
  RouterLookaheadPredictor(std::vector<const float*> gate_weights, std::vector<const float*> gate_biases,
                           uint32_t experts, uint32_t top_k, ComputeBackend* compute);
  Status Predict(const PredictorInput& input, uint32_t width, std::vector<uint32_t>* out) override;

 private:
  std::vector<const float*> gate_weights_, gate_biases_;
  uint32_t experts_, top_k_;
  ComputeBackend* compute_;
  std::vector<float> logits_, weights_;
  std::vector<uint32_t> ids_, chosen_by_, order_;
};

// Validates a coact decay: (0, 1].
Status CheckCoactDecay(double decay);

}  // namespace colibri::engine
