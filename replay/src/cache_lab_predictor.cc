#include "cache_lab_predictor.h"

#include <span>
#include <string>

#include "colibri/engine/expert_predictor.h"

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

// The engine's co-activation predictor over the lab's batches (keys to expert ids).
class CoactPredictor final : public NextBatchPredictor {
 public:
  CoactPredictor(uint32_t layers, uint32_t experts, double decay) : coact_(layers, experts, decay) {}

  engine::CoactivationPredictor* coact() { return &coact_; }

  void Predict(const LabBatch& prev, const LabBatch& next, uint32_t width, std::vector<ExpertKey>* out) override {
    coact_.Propose(ExpertsOf(prev, &sources_), next.layer_index, width, &proposal_);
    out->clear();
    for (uint32_t e : proposal_) out->push_back(MakeExpertKey(next.layer_index, e));
  }

  void Observe(const LabBatch& prev, const LabBatch& next) override {
    coact_.Observe(ExpertsOf(prev, &sources_), next.layer_index, ExpertsOf(next, &targets_));
  }

 private:
  static std::span<const uint32_t> ExpertsOf(const LabBatch& batch, std::vector<uint32_t>* scratch) {
    scratch->clear();
    for (ExpertKey key : batch.keys) scratch->push_back(ExpertOf(key));
    return *scratch;
  }

  engine::CoactivationPredictor coact_;
  std::vector<uint32_t> sources_, targets_, proposal_;
};

Result<std::unique_ptr<NextBatchPredictor>> MakeCoact(const PrefetchOptions& options, const LabTrace& trace,
                                                      const LabTrace* profile) {
  COLIBRI_RETURN_IF_ERROR(engine::CheckCoactDecay(options.decay));
  auto coact = std::make_unique<CoactPredictor>(trace.moe_layers, trace.experts, options.decay);
  if (profile != nullptr) {
    COLIBRI_RETURN_IF_ERROR(CheckProfileShape(*profile, trace.moe_layers, trace.experts));
    TrainCoact(*profile, coact->coact());
  }
  return std::unique_ptr<NextBatchPredictor>(std::move(coact));
}

// The engine's view of a LabTrace's future: batch n + 1's experts at call n.
class TraceOracle final : public engine::ExpertPredictor {
 public:
  explicit TraceOracle(LabTrace trace) : trace_(std::move(trace)) {}
  Status Predict(const engine::PredictorInput& input, uint32_t, std::vector<uint32_t>* out) override {
    out->clear();
    const size_t next = ++calls_;
    if (next >= trace_.batches.size() || trace_.batches[next].layer_index != input.next_layer) return Status::Ok();
    for (ExpertKey key : trace_.batches[next].keys) out->push_back(ExpertOf(key));
    return Status::Ok();
  }

 private:
  LabTrace trace_;
  size_t calls_ = 0;
};

}  // namespace

void TrainCoact(const LabTrace& profile, engine::CoactivationPredictor* coact) {
  std::vector<uint32_t> sources, targets;
  for (size_t b = 1; b < profile.batches.size(); ++b) {
    sources.clear();
    targets.clear();
    for (ExpertKey key : profile.batches[b - 1].keys) sources.push_back(ExpertOf(key));
    for (ExpertKey key : profile.batches[b].keys) targets.push_back(ExpertOf(key));
    coact->Observe(sources, profile.batches[b].layer_index, targets);
  }
}

Status CheckProfileShape(const LabTrace& profile, uint32_t moe_layers, uint32_t experts) {
  if (profile.moe_layers == moe_layers && profile.experts == experts) return Status::Ok();
  return Status::InvalidArgument("prefetch profile trace " + profile.path + " has " + std::to_string(profile.moe_layers) +
                                 " MoE layers x " + std::to_string(profile.experts) + " experts; the trace has " +
                                 std::to_string(moe_layers) + " x " + std::to_string(experts));
}

std::shared_ptr<engine::ExpertPredictor> MakeTraceOracle(LabTrace trace) {
  return std::make_shared<TraceOracle>(std::move(trace));
}

Result<std::unique_ptr<NextBatchPredictor>> MakeNextBatchPredictor(const PrefetchOptions& options,
                                                                   const LabTrace& trace, const LabTrace* profile) {
  if (options.predictor == "none") return std::unique_ptr<NextBatchPredictor>();
  if (options.predictor == "oracle") return std::unique_ptr<NextBatchPredictor>(new OraclePredictor());
  if (options.predictor == "coact") return MakeCoact(options, trace, profile);
  return Status::InvalidArgument("unknown prefetch predictor '" + options.predictor + "' (known: none, coact, oracle)");
}

}  // namespace colibri::replay
