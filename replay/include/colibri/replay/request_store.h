// RequestStore: a routing trace's requests held in memory, one request at a
// time addressable, for open-loop replay (continuous batching re-forms the
// forward passes, so a request's passes are needed out of trace order).
//
// Each request keeps its passes in trace order (a new pass_id starts a new
// pass), each pass its per-layer segments sorted by MoE layer index. The
// routing (expert ids, gate weights, and router logits / hidden states when
// every record has them) is kept in flat arrays: about 8 bytes per selection
// plus 24 per token, so a trace of N selections takes about 8N bytes.
//
// Ownership: a plain value. Thread-safety: const methods may be called from
// several threads. Errors: the reader's (corruption with byte offset).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "colibri/replay/layer_batches.h"
#include "colibri/status.h"

namespace colibri::replay {

class RequestStore {
 public:
  // Reads every layer batch of `batches` and splits it by request.
  static Result<RequestStore> Load(LayerBatchReader* batches, const traces::ModelShape& shape);

  // Requests in the order of their first record in the trace.
  size_t requests() const { return requests_.size(); }
  uint64_t trace_request_id(size_t request) const { return requests_[request].trace_request_id; }
  // The request's arrival as recorded (its first record's arrival_ns), when recorded.
  std::optional<uint64_t> arrival_ns(size_t request) const { return requests_[request].arrival_ns; }
  size_t passes(size_t request) const { return requests_[request].pass_begin.size() - 1; }
  bool has_router_logits() const { return logits_everywhere_; }
  bool has_hidden() const { return hidden_everywhere_; }

  // Position of a walk over one pass's segments in layer order.
  struct Cursor {
    size_t request = 0;
    size_t segment = 0;
    size_t end = 0;
  };
  Cursor Begin(size_t request, size_t pass) const;
  // The MoE layer index of the cursor's segment; nullopt past the pass's end.
  std::optional<uint32_t> Layer(const Cursor& cursor) const;
  // Appends the cursor's segment to `batch` (rows keyed to `request_key`) and advances.
  void AppendSegment(Cursor* cursor, uint64_t request_key, LayerBatch* batch) const;

 private:
  struct Segment {
    uint32_t layer_index = 0;
    bool prefill = false;
    uint64_t first_row = 0;  // into the flat arrays
    uint32_t rows = 0;
  };
  struct Request {
    uint64_t trace_request_id = 0;
    std::optional<uint64_t> arrival_ns;
    uint64_t last_pass_id = 0;
    std::vector<Segment> segments;
    std::vector<size_t> pass_begin{0};  // segments of pass p: [pass_begin[p], pass_begin[p + 1])
  };

  void Add(const LayerBatch& batch, size_t first_row, uint32_t tokens, Request* request);
  void SortPasses();

  uint32_t top_k_ = 0;
  uint32_t experts_ = 0;
  size_t hidden_size_ = 0;
  bool logits_everywhere_ = true;
  bool hidden_everywhere_ = true;
  std::vector<Request> requests_;
  std::vector<BatchRow> rows_;
  std::vector<uint32_t> expert_ids_;  // rows x top_k
  std::vector<float> gate_weights_;
  std::vector<float> router_logits_;  // rows x experts, when every batch had them
  std::vector<float> hidden_;         // rows x hidden, when every batch had them
};

}  // namespace colibri::replay
