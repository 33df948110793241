// LayerBatchReader: a trace's records grouped into the engine's unit of work,
// the layer batch (ARCHITECTURE.md, cache accounting): consecutive records
// with the same (pass_id, layer) are one forward pass at one MoE layer, their
// tokens concatenated in record order. The recorder writes one record per
// request of a layer batch, so a recorded run groups back into the batches
// the engine ran; a single-request trace gives one batch per (pass, layer).
//
// Ownership: borrows the reader (it must outlive this). Thread-safety: none.
// Errors: the reader's (corruption with byte offset), and a record whose layer
// is not one of the header's MoE layer ids.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "colibri/replay/trace_recorder.h"
#include "colibri/status.h"
#include "colibri/traces/reader.h"

namespace colibri::replay {

// One trace record's share of a layer batch: `tokens` consecutive rows of one request.
struct RecordSpan {
  uint64_t request_id = 0;
  uint32_t tokens = 0;
  std::optional<uint64_t> arrival_ns;  // the request's arrival, when recorded
};

struct LayerBatch {
  uint64_t pass_id = 0;
  uint32_t layer_index = 0;  // position of the layer in the header's moe_layer_ids
  bool prefill = false;
  std::vector<BatchRow> rows;        // per token: request, position, token id when recorded
  std::vector<uint32_t> expert_ids;  // tokens x top_k, rank order
  std::vector<float> gate_weights;   // tokens x top_k; 1/top_k each where the trace has none
  std::vector<float> router_logits;  // tokens x experts; empty unless every record has them
  std::vector<float> hidden;         // tokens x hidden_size, fp32; empty unless every record has them
  std::vector<uint8_t> cache_outcomes;  // tokens x top_k; empty unless every record has them
  std::vector<RecordSpan> records;  // the batch's records in order: which rows came from which request
  size_t tokens() const { return rows.size(); }
  // Empties every field (a new field is reset here too), keeping the vectors'
  // capacity: a reader that reuses one batch stops allocating once warm.
  void Clear();
};

class LayerBatchReader {
 public:
  explicit LayerBatchReader(traces::TraceReader* reader);
  // The next layer batch. true: `batch` holds it; false: end of the trace.
  Result<bool> Next(LayerBatch* batch);

 private:
  Result<bool> Fill();  // reads the next record into pending_ (false at the end)
  Status Append(LayerBatch* batch);

  traces::TraceReader* reader_;
  traces::TraceRecord pending_;
  bool has_pending_ = false;
  bool ended_ = false;
  bool logits_everywhere_ = true;
  bool hidden_everywhere_ = true;
  bool outcomes_everywhere_ = true;
  std::vector<float> hidden_row_;
};

}  // namespace colibri::replay
