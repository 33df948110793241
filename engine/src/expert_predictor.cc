#include "colibri/engine/expert_predictor.h"

#include <algorithm>
#include <string>
#include <utility>

#include "colibri/engine/router.h"

namespace colibri::engine {
namespace {

// Replaces `out` with the ids of the `width` largest positive scores, largest
// first, ties to the lower id (`order` is scratch).
template <typename Score>
void TakeTop(const std::vector<Score>& scores, uint32_t width, std::vector<uint32_t>* order, std::vector<uint32_t>* out) {
  order->clear();
  for (uint32_t id = 0; id < scores.size(); ++id) {
    if (scores[id] > 0) order->push_back(id);
  }
  const auto take = static_cast<std::ptrdiff_t>(std::min<size_t>(width, order->size()));
  std::partial_sort(order->begin(), order->begin() + take, order->end(),
                    [&scores](uint32_t a, uint32_t b) { return scores[a] != scores[b] ? scores[a] > scores[b] : a < b; });
  out->assign(order->begin(), order->begin() + take);
}

}  // namespace

CoactivationPredictor::CoactivationPredictor(uint32_t layers, uint32_t experts, double decay)
    : experts_(experts),
      decay_(static_cast<float>(decay)),
      counts_(static_cast<size_t>(layers) * experts * experts, 0.0f),
      scores_(experts, 0.0f) {
  order_.reserve(experts);
}

void CoactivationPredictor::Observe(std::span<const uint32_t> sources, uint32_t target_layer,
                                    std::span<const uint32_t> targets) {
  for (uint32_t source : sources) {
    float* row = Row(target_layer, source);
    for (uint32_t e = 0; e < experts_; ++e) row[e] *= decay_;
    for (uint32_t target : targets) row[target] += 1.0f;
  }
}

void CoactivationPredictor::Propose(std::span<const uint32_t> sources, uint32_t target_layer, uint32_t width,
                                    std::vector<uint32_t>* out) {
  std::fill(scores_.begin(), scores_.end(), 0.0f);
  for (uint32_t source : sources) {
    const float* row = Row(target_layer, source);
    for (uint32_t e = 0; e < experts_; ++e) scores_[e] += row[e];
  }
  TakeTop(scores_, width, &order_, out);
}

Status CoactivationPredictor::Predict(const PredictorInput& input, uint32_t width, std::vector<uint32_t>* out) {
  if (has_previous_ && previous_next_layer_ == input.layer_index) Observe(previous_, input.layer_index, input.experts);
  previous_.assign(input.experts.begin(), input.experts.end());
  previous_next_layer_ = input.next_layer;
  has_previous_ = true;
  Propose(input.experts, input.next_layer, width, out);
  return Status::Ok();
}

RouterLookaheadPredictor::RouterLookaheadPredictor(std::vector<const float*> gate_weights,
                                                   std::vector<const float*> gate_biases, uint32_t experts,
                                                   uint32_t top_k, ComputeBackend* compute)
    : gate_weights_(std::move(gate_weights)), gate_biases_(std::move(gate_biases)), experts_(experts), top_k_(top_k),
      compute_(compute), chosen_by_(experts, 0) {}

Status RouterLookaheadPredictor::Predict(const PredictorInput& input, uint32_t width, std::vector<uint32_t>* out) {
  out->clear();
  if (input.hidden == nullptr || input.tokens == 0) return Status::Ok();
  const uint32_t layer = input.next_layer;
  logits_.resize(input.tokens * experts_);
  COLIBRI_RETURN_IF_ERROR(compute_->GateGemv(gate_weights_[layer], gate_biases_[layer], experts_, input.hidden_size,
                                             input.hidden, input.tokens, logits_.data()));
  ids_.resize(top_k_);
  weights_.resize(top_k_);
  std::fill(chosen_by_.begin(), chosen_by_.end(), 0);
  for (size_t t = 0; t < input.tokens; ++t) {
    COLIBRI_RETURN_IF_ERROR(RouteTopK(logits_.data() + t * experts_, experts_, top_k_, false, ids_.data(), weights_.data())
                                .WithPrefix("router lookahead to MoE layer " + std::to_string(layer)));
    for (uint32_t id : ids_) ++chosen_by_[id];
  }
  TakeTop(chosen_by_, width, &order_, out);
  return Status::Ok();
}

Status CheckCoactDecay(double decay) {
  if (decay > 0.0 && decay <= 1.0) return Status::Ok();
  return Status::InvalidArgument("prefetch decay " + std::to_string(decay) + " is outside (0, 1]");
}

}  // namespace colibri::engine
