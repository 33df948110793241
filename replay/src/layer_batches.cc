#include "colibri/replay/layer_batches.h"

#include <algorithm>
#include <cstring>

#include "colibri/engine/dtype.h"

namespace colibri::replay {
namespace {

// Appends a record's hidden states, converted to fp32, to `out`.
void AppendHidden(const std::string& bytes, traces::HiddenDtype dtype, std::vector<float>* out) {
  const size_t width = traces::HiddenDtypeBytes(dtype);
  const size_t values = bytes.size() / width;
  const size_t first = out->size();
  out->resize(first + values);
  float* dst = out->data() + first;
  if (dtype == traces::HiddenDtype::kFp32) {
    std::memcpy(dst, bytes.data(), values * sizeof(float));
    return;
  }
  for (size_t i = 0; i < values; ++i) {
    uint16_t v;
    std::memcpy(&v, bytes.data() + i * 2, 2);
    dst[i] = dtype == traces::HiddenDtype::kBf16 ? engine::Bf16ToFloat(v) : engine::Fp16ToFloat(v);
  }
}

}  // namespace

LayerBatchReader::LayerBatchReader(traces::TraceReader* reader) : reader_(reader) {}

void LayerBatch::Clear() {
  pass_id = 0;
  layer_index = 0;
  prefill = false;
  rows.clear();
  expert_ids.clear();
  gate_weights.clear();
  router_logits.clear();
  hidden.clear();
  cache_outcomes.clear();
  records.clear();
}

Result<bool> LayerBatchReader::Fill() {
  if (ended_) return false;
  COLIBRI_ASSIGN_OR_RETURN(const bool more, reader_->Next(&pending_));
  ended_ = !more;
  has_pending_ = more;
  return more;
}

Result<bool> LayerBatchReader::Next(LayerBatch* batch) {
  if (!has_pending_) {
    COLIBRI_ASSIGN_OR_RETURN(const bool more, Fill());
    if (!more) return false;
  }
  const uint64_t pass_id = pending_.pass_id;
  const uint32_t layer = pending_.layer;
  batch->Clear();
  logits_everywhere_ = hidden_everywhere_ = outcomes_everywhere_ = true;
  while (has_pending_ && pending_.pass_id == pass_id && pending_.layer == layer) {
    COLIBRI_RETURN_IF_ERROR(Append(batch));
    COLIBRI_RETURN_IF_ERROR(Fill().status());
  }
  if (!logits_everywhere_) batch->router_logits.clear();
  if (!hidden_everywhere_) batch->hidden.clear();
  if (!outcomes_everywhere_) batch->cache_outcomes.clear();
  return true;
}

Status LayerBatchReader::Append(LayerBatch* batch) {
  const traces::ModelShape& shape = reader_->header().shape;
  const traces::TraceRecord& r = pending_;
  const int layer_index = shape.LayerIndex(r.layer);  // moe_layer_ids are ascending
  if (layer_index < 0) {
    return Status::InvalidArgument(reader_->path() + ": record " + std::to_string(reader_->records_read() - 1) +
                                   ": layer " + std::to_string(r.layer) + " is not one of the header's MoE layers");
  }
  batch->layer_index = static_cast<uint32_t>(layer_index);
  batch->pass_id = r.pass_id;
  batch->prefill = r.prefill;
  const size_t first_row = batch->rows.size();
  batch->rows.resize(first_row + r.token_count());
  BatchRow* rows = batch->rows.data() + first_row;
  for (size_t t = 0; t < r.token_count(); ++t) {
    rows[t].request_id = r.request_id;
    rows[t].position = r.positions[t];
    if (!r.token_ids.empty()) rows[t].token_id = r.token_ids[t];
  }
  batch->expert_ids.insert(batch->expert_ids.end(), r.expert_ids.begin(), r.expert_ids.end());
  if (r.gate_weights.empty()) {
    batch->gate_weights.insert(batch->gate_weights.end(), r.expert_ids.size(), 1.0f / static_cast<float>(shape.top_k));
  } else {
    batch->gate_weights.insert(batch->gate_weights.end(), r.gate_weights.begin(), r.gate_weights.end());
  }
  logits_everywhere_ = logits_everywhere_ && !r.router_logits.empty();
  if (logits_everywhere_) {
    batch->router_logits.insert(batch->router_logits.end(), r.router_logits.begin(), r.router_logits.end());
  }
  hidden_everywhere_ = hidden_everywhere_ && !r.hidden_states.empty();
  if (hidden_everywhere_) AppendHidden(r.hidden_states, shape.hidden_dtype, &batch->hidden);
  outcomes_everywhere_ = outcomes_everywhere_ && !r.cache_outcomes.empty();
  if (outcomes_everywhere_) {
    batch->cache_outcomes.insert(batch->cache_outcomes.end(), r.cache_outcomes.begin(), r.cache_outcomes.end());
  }
  batch->records.push_back(RecordSpan{r.request_id, static_cast<uint32_t>(r.token_count()), r.arrival_ns});
  return Status::Ok();
}

}  // namespace colibri::replay
