#include "colibri/replay/engine_replay.h"

namespace colibri::replay {

Result<RoutingMode> ParseRoutingMode(const std::string& name) {
  if (name == "recorded") return RoutingMode::kRecorded;
  if (name == "recompute") return RoutingMode::kRecompute;
  return Status::InvalidArgument("routing '" + name + "': expected recorded or recompute");
}

Result<EngineReplayer> EngineReplayer::Create(engine::MoeEngine* engine, const traces::ModelShape& shape,
                                              RoutingMode mode, TraceRecorder* recorder) {
  const engine::EngineModel& m = engine->model();
  if (shape.moe_layer_ids.size() != m.moe_layers || shape.experts_per_layer != m.experts || shape.top_k != m.top_k) {
    return Status::InvalidArgument(
        "trace shape (" + std::to_string(shape.moe_layer_ids.size()) + " MoE layers x " +
        std::to_string(shape.experts_per_layer) + " experts, top-" + std::to_string(shape.top_k) +
        ") does not match the model (" + std::to_string(m.moe_layers) + " x " + std::to_string(m.experts) + ", top-" +
        std::to_string(m.top_k) + ")");
  }
  if (mode == RoutingMode::kRecompute && recorder != nullptr) engine->set_observer(recorder);
  return EngineReplayer(engine, mode, recorder, engine->moves_data());
}

EngineReplayer::EngineReplayer(engine::MoeEngine* engine, RoutingMode mode, TraceRecorder* recorder, bool moves_data)
    : engine_(engine), mode_(mode), recorder_(recorder), moves_data_(moves_data) {}

Status EngineReplayer::Run(const LayerBatch& batch, engine::LayerBatchReport* report) {
  const size_t values = batch.tokens() * engine_->model().layout.hidden;
  const float* hidden = nullptr;
  if (moves_data_) {
    out_.resize(values);
    if (batch.hidden.size() == values) {
      hidden = batch.hidden.data();
    } else {
      if (zeros_.size() < values) zeros_.assign(values, 0.0f);  // stays zero: only grown, never written
      hidden = zeros_.data();
    }
  }
  if (recorder_ != nullptr) recorder_->BeginPass(batch.pass_id, batch.prefill, batch.rows);
  Status status = mode_ == RoutingMode::kRecompute ? Recompute(batch, hidden, report) : Replay(batch, hidden, report);
  if (status.ok() && recorder_ != nullptr) status = recorder_->status();
  return status;
}

Status EngineReplayer::Recompute(const LayerBatch& batch, const float* hidden, engine::LayerBatchReport* report) {
  float* out = moves_data_ ? out_.data() : nullptr;
  token_ids_.clear();
  for (const BatchRow& row : batch.rows) {
    if (row.token_id) token_ids_.push_back(*row.token_id);
  }
  const uint32_t* token_ids = token_ids_.size() == batch.tokens() ? token_ids_.data() : nullptr;
  if (moves_data_ && !batch.hidden.empty()) {
    return engine_->Forward(batch.layer_index, hidden, batch.tokens(), out, report, token_ids);
  }
  const engine::RouterMode mode = engine_->routing().router.mode;
  const bool needs_logits = mode == engine::RouterMode::kSoftmaxTopK || mode == engine::RouterMode::kSigmoidGrouped;
  const auto where = [&batch] {
    return "routing recompute: pass " + std::to_string(batch.pass_id) + " at MoE layer index " +
           std::to_string(batch.layer_index);
  };
  if (mode == engine::RouterMode::kHashProjection && batch.hidden.empty()) {
    return Status::InvalidArgument(where() + ": hash-projection needs the trace's hidden states (colibri run --record-hidden)");
  }
  if (mode == engine::RouterMode::kHashToken && token_ids == nullptr) {
    return Status::InvalidArgument(where() + ": hash-token needs the trace's token ids (colibri run --record-tokens)");
  }
  if (batch.router_logits.empty() && needs_logits) {
    return Status::InvalidArgument(where() + " has no recorded router logits" +
                                   (moves_data_ ? " or hidden states" : " (hidden states need a compute backend that reads data)"));
  }
  // The router may read the recorded hidden states even where compute only models time.
  const float* router_input = batch.hidden.empty() ? hidden : batch.hidden.data();
  return engine_->ExecuteLogits(batch.layer_index, needs_logits ? batch.router_logits.data() : nullptr, router_input,
                                batch.tokens(), out, report, token_ids);
}

Status EngineReplayer::Replay(const LayerBatch& batch, const float* hidden, engine::LayerBatchReport* report) {
  const engine::EngineModel& m = engine_->model();
  if (recorder_ != nullptr) {
    recorder_->OnRouting(engine::RoutingDecision{
        batch.layer_index, batch.tokens(), m.top_k, m.experts, m.layout.hidden, batch.expert_ids.data(),
        batch.gate_weights.data(), batch.router_logits.empty() ? nullptr : batch.router_logits.data(),
        batch.hidden.empty() ? nullptr : batch.hidden.data()});
  }
  const engine::LayerRouting routing{batch.tokens(), batch.expert_ids.data(), batch.gate_weights.data()};
  return engine_->Execute(batch.layer_index, hidden, routing, moves_data_ ? out_.data() : nullptr, report);
}

}  // namespace colibri::replay
