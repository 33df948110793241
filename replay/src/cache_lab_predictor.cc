#include "cache_lab_predictor.h"

#include <algorithm>
#include <string>

namespace colibri::replay {
namespace {

using engine::ExpertKey;
using engine::ExpertOf;
using engine::MakeExpertKey;

class OraclePredictor final : public NextBatchPredictor {
 public:
  void Predict(const LabBatch&, const LabBatch& next, uint32_t, std::vector<ExpertKey>* out) override {
    out->assign(next.keys.begin(), next.keys.end());
  }
  void Observe(const LabBatch&, const LabBatch&) override {}
};

class CoactPredictor final : public NextBatchPredictor {
 public:
  CoactPredictor(uint32_t layers, uint32_t experts, double decay)
      : experts_(experts),
        decay_(static_cast<float>(decay)),
        counts_(static_cast<size_t>(layers) * experts * experts, 0.0f),
        scores_(experts, 0.0f) {
    order_.reserve(experts);
  }

  void Train(const LabTrace& profile) {
    for (size_t b = 1; b < profile.batches.size(); ++b) Observe(profile.batches[b - 1], profile.batches[b]);
  }

  void Predict(const LabBatch& prev, const LabBatch& next, uint32_t width, std::vector<ExpertKey>* out) override {
    out->clear();
    std::fill(scores_.begin(), scores_.end(), 0.0f);
    for (ExpertKey source : prev.keys) {
      const float* row = Row(next.layer_index, ExpertOf(source));
      for (uint32_t e = 0; e < experts_; ++e) scores_[e] += row[e];
    }
    order_.clear();
    for (uint32_t e = 0; e < experts_; ++e) {
      if (scores_[e] > 0.0f) order_.push_back(e);
    }
    const size_t take = std::min<size_t>(width, order_.size());
    std::partial_sort(
        order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(take), order_.end(),
        [this](uint32_t a, uint32_t b) { return scores_[a] != scores_[b] ? scores_[a] > scores_[b] : a < b; });
    for (size_t i = 0; i < take; ++i) out->push_back(MakeExpertKey(next.layer_index, order_[i]));
  }

  void Observe(const LabBatch& prev, const LabBatch& next) override {
    for (ExpertKey source : prev.keys) {
      float* row = Row(next.layer_index, ExpertOf(source));
      for (uint32_t e = 0; e < experts_; ++e) row[e] *= decay_;
      for (ExpertKey target : next.keys) row[ExpertOf(target)] += 1.0f;
    }
  }

 private:
  float* Row(uint32_t target_layer, uint32_t source_expert) {
    return counts_.data() + (static_cast<size_t>(target_layer) * experts_ + source_expert) * experts_;
  }

  uint32_t experts_;
  float decay_;
  std::vector<float> counts_;  // [target layer][source expert][target expert]
  std::vector<float> scores_;  // per target expert: the current prediction's sums
  std::vector<uint32_t> order_;
};

Result<std::unique_ptr<NextBatchPredictor>> MakeCoact(const PrefetchOptions& options, const LabTrace& trace,
                                                      const LabTrace* profile) {
  if (!(options.decay > 0.0 && options.decay <= 1.0)) {
    return Status::InvalidArgument("prefetch decay " + std::to_string(options.decay) + " is outside (0, 1]");
  }
  auto coact = std::make_unique<CoactPredictor>(trace.moe_layers, trace.experts, options.decay);
  if (profile != nullptr) {
    if (profile->moe_layers != trace.moe_layers || profile->experts != trace.experts) {
      return Status::InvalidArgument("prefetch profile_trace " + profile->path + " has " +
                                     std::to_string(profile->moe_layers) + " MoE layers x " +
                                     std::to_string(profile->experts) + " experts; the trace has " +
                                     std::to_string(trace.moe_layers) + " x " + std::to_string(trace.experts));
    }
    coact->Train(*profile);
  }
  return std::unique_ptr<NextBatchPredictor>(std::move(coact));
}

}  // namespace

Result<std::unique_ptr<NextBatchPredictor>> MakeNextBatchPredictor(const PrefetchOptions& options,
                                                                   const LabTrace& trace, const LabTrace* profile) {
  if (options.predictor == "none") return std::unique_ptr<NextBatchPredictor>();
  if (options.predictor == "oracle") return std::unique_ptr<NextBatchPredictor>(new OraclePredictor());
  if (options.predictor == "coact") return MakeCoact(options, trace, profile);
  return Status::InvalidArgument("unknown prefetch predictor '" + options.predictor + "' (known: none, coact, oracle)");
}

}  // namespace colibri::replay
