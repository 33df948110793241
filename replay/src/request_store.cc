#include "colibri/replay/request_store.h"

#include <algorithm>
#include <map>

namespace colibri::replay {
namespace {

template <typename T>
void AppendRange(const std::vector<T>& from, size_t first, size_t count, std::vector<T>* to) {
  to->insert(to->end(), from.begin() + static_cast<std::ptrdiff_t>(first),
             from.begin() + static_cast<std::ptrdiff_t>(first + count));
}

}  // namespace

Result<RequestStore> RequestStore::Load(LayerBatchReader* batches, const traces::ModelShape& shape) {
  RequestStore store;
  store.top_k_ = shape.top_k;
  store.experts_ = shape.experts_per_layer;
  std::map<uint64_t, size_t> index_of;  // trace request id -> request
  LayerBatch batch;
  while (true) {
    COLIBRI_ASSIGN_OR_RETURN(const bool more, batches->Next(&batch));
    if (!more) break;
    store.logits_everywhere_ = store.logits_everywhere_ && !batch.router_logits.empty();
    store.hidden_everywhere_ = store.hidden_everywhere_ && !batch.hidden.empty();
    if (!store.hidden_everywhere_) store.hidden_.clear();
    if (!store.logits_everywhere_) store.router_logits_.clear();
    if (store.hidden_everywhere_ && batch.tokens() > 0) store.hidden_size_ = batch.hidden.size() / batch.tokens();
    size_t first_row = 0;
    for (const RecordSpan& span : batch.records) {
      const auto [it, fresh] = index_of.try_emplace(span.request_id, store.requests_.size());
      if (fresh) store.requests_.push_back(Request{span.request_id, span.arrival_ns, batch.pass_id, {}, {0}});
      Request& request = store.requests_[it->second];
      if (request.last_pass_id != batch.pass_id) {
        request.pass_begin.push_back(request.segments.size());
        request.last_pass_id = batch.pass_id;
      }
      store.Add(batch, first_row, span.tokens, &request);
      first_row += span.tokens;
    }
  }
  store.SortPasses();
  return store;
}

void RequestStore::Add(const LayerBatch& batch, size_t first_row, uint32_t tokens, Request* request) {
  request->segments.push_back(Segment{batch.layer_index, batch.prefill, rows_.size(), tokens});
  AppendRange(batch.rows, first_row, tokens, &rows_);
  AppendRange(batch.expert_ids, first_row * top_k_, size_t{tokens} * top_k_, &expert_ids_);
  AppendRange(batch.gate_weights, first_row * top_k_, size_t{tokens} * top_k_, &gate_weights_);
  if (logits_everywhere_) AppendRange(batch.router_logits, first_row * experts_, size_t{tokens} * experts_, &router_logits_);
  if (hidden_everywhere_) AppendRange(batch.hidden, first_row * hidden_size_, tokens * hidden_size_, &hidden_);
}

void RequestStore::SortPasses() {
  for (Request& request : requests_) {
    request.pass_begin.push_back(request.segments.size());
    for (size_t p = 0; p + 1 < request.pass_begin.size(); ++p) {
      std::stable_sort(request.segments.begin() + static_cast<std::ptrdiff_t>(request.pass_begin[p]),
                       request.segments.begin() + static_cast<std::ptrdiff_t>(request.pass_begin[p + 1]),
                       [](const Segment& a, const Segment& b) { return a.layer_index < b.layer_index; });
    }
  }
}

RequestStore::Cursor RequestStore::Begin(size_t request, size_t pass) const {
  const Request& r = requests_[request];
  return Cursor{request, r.pass_begin[pass], r.pass_begin[pass + 1]};
}

std::optional<uint32_t> RequestStore::Layer(const Cursor& cursor) const {
  if (cursor.segment >= cursor.end) return std::nullopt;
  return requests_[cursor.request].segments[cursor.segment].layer_index;
}

void RequestStore::AppendSegment(Cursor* cursor, uint64_t request_key, LayerBatch* batch) const {
  const Segment& s = requests_[cursor->request].segments[cursor->segment++];
  batch->prefill = batch->prefill || s.prefill;
  for (size_t row = s.first_row; row < s.first_row + s.rows; ++row) {
    batch->rows.push_back(BatchRow{request_key, rows_[row].position, rows_[row].token_id});
  }
  AppendRange(expert_ids_, s.first_row * top_k_, size_t{s.rows} * top_k_, &batch->expert_ids);
  AppendRange(gate_weights_, s.first_row * top_k_, size_t{s.rows} * top_k_, &batch->gate_weights);
  if (logits_everywhere_) AppendRange(router_logits_, s.first_row * experts_, size_t{s.rows} * experts_, &batch->router_logits);
  if (hidden_everywhere_) AppendRange(hidden_, s.first_row * hidden_size_, s.rows * hidden_size_, &batch->hidden);
  batch->records.push_back(RecordSpan{request_key, s.rows, std::nullopt});
}

}  // namespace colibri::replay
