#include "colibri/replay/trace_recorder.h"

#include <cstring>

namespace colibri::replay {

traces::ModelShape TraceShapeOfModel(const engine::ModelConfig& config, bool with_hidden) {
  traces::ModelShape shape;
  shape.model_name = config.model_name;
  shape.moe_layer_ids = config.layer_ids;
  shape.experts_per_layer = config.experts;
  shape.top_k = config.top_k;
  shape.expert_bytes.assign(config.layer_ids.size(), config.layout.block_bytes);
  shape.dtype = engine::DTypeName(config.dtype);
  shape.hidden_size = config.hidden;
  shape.hidden_dtype = with_hidden ? traces::HiddenDtype::kFp32 : traces::HiddenDtype::kNone;
  return shape;
}

Result<std::unique_ptr<TraceRecorder>> TraceRecorder::Create(const std::string& path, const engine::ModelConfig& config,
                                                             traces::Provenance provenance,
                                                             const RecorderOptions& options) {
  return Create(path, TraceShapeOfModel(config, options.hidden), std::move(provenance), options);
}

Result<std::unique_ptr<TraceRecorder>> TraceRecorder::Create(const std::string& path, traces::ModelShape shape,
                                                             traces::Provenance provenance,
                                                             const RecorderOptions& options) {
  traces::TraceHeader header;
  std::vector<uint32_t> layer_ids = shape.moe_layer_ids;
  header.shape = std::move(shape);
  header.provenance = std::move(provenance);
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<traces::TraceWriter> writer,
                           traces::TraceWriter::Create(path, std::move(header), options.writer));
  return std::unique_ptr<TraceRecorder>(new TraceRecorder(std::move(writer), std::move(layer_ids), options));
}

TraceRecorder::TraceRecorder(std::unique_ptr<traces::TraceWriter> writer, std::vector<uint32_t> layer_ids,
                             const RecorderOptions& options)
    : writer_(std::move(writer)), layer_ids_(std::move(layer_ids)), options_(options) {}

void TraceRecorder::BeginPass(uint64_t pass_id, bool prefill, std::vector<BatchRow> rows) {
  pass_id_ = pass_id;
  prefill_ = prefill;
  rows_ = std::move(rows);
}

void TraceRecorder::AppendRow(const engine::RoutingDecision& d, size_t row, traces::TraceRecord* record) const {
  record->positions.push_back(rows_[row].position);
  if (rows_[row].token_id) record->token_ids.push_back(*rows_[row].token_id);
  const uint32_t* ids = d.expert_ids + row * d.top_k;
  const float* weights = d.weights + row * d.top_k;
  record->expert_ids.insert(record->expert_ids.end(), ids, ids + d.top_k);
  record->gate_weights.insert(record->gate_weights.end(), weights, weights + d.top_k);
  if (options_.logits && d.logits != nullptr) {
    record->router_logits.insert(record->router_logits.end(), d.logits + row * d.experts,
                                 d.logits + (row + 1) * d.experts);
  }
  if (options_.hidden && d.hidden != nullptr) {
    const size_t bytes = d.hidden_size * sizeof(float);
    record->hidden_states.append(reinterpret_cast<const char*>(d.hidden) + row * bytes, bytes);
  }
}

void TraceRecorder::OnRouting(const engine::RoutingDecision& d) {
  if (!status_.ok()) return;
  if (d.tokens != rows_.size()) {
    status_ = Status::Internal("trace recorder: layer batch of " + std::to_string(d.tokens) + " tokens, pass has " +
                               std::to_string(rows_.size()) + " rows");
    return;
  }
  std::vector<bool> done(d.tokens, false);
  for (size_t first = 0; first < d.tokens && status_.ok(); ++first) {
    if (done[first]) continue;
    record_.clear();
    record_.request_id = rows_[first].request_id;
    record_.pass_id = pass_id_;
    record_.layer = layer_ids_.at(d.layer_index);
    record_.prefill = prefill_;
    for (size_t row = first; row < d.tokens; ++row) {
      if (done[row] || rows_[row].request_id != record_.request_id) continue;
      AppendRow(d, row, &record_);
      done[row] = true;
    }
    status_ = writer_->Append(record_);
  }
}

uint64_t TraceRecorder::records_written() const { return writer_->records_written(); }

Status TraceRecorder::Close() {
  Status closed = writer_->Close();
  return status_.ok() ? closed : status_;
}

}  // namespace colibri::replay
