// TraceRecorder: an EngineObserver that writes the engine's routing decisions
// as a Colibri trace (docs/TRACE_FORMAT.md), one record per (request, pass,
// MoE layer).
//
// The engine knows layer batches, not requests: before each forward pass the
// driver calls BeginPass with the request and position of every row of the
// batch; OnRouting then splits each layer batch into records by request (in
// order of first appearance in the batch). Logits and hidden states are
// recorded when asked and when the engine provides them.
// Ownership: owns its writer. Thread-safety: called on the engine's thread.
// Errors: the first write error is kept (status()) and later events are
// ignored; Close() returns it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "colibri/engine/model.h"
#include "colibri/engine/observer.h"
#include "colibri/status.h"
#include "colibri/traces/writer.h"

namespace colibri::replay {

struct BatchRow {
  uint64_t request_id = 0;
  uint64_t position = 0;
  std::optional<uint32_t> token_id = std::nullopt;  // recorded when set (set it for every row of a pass or for none)
};

struct RecorderOptions {
  bool logits = false;  // record raw router logits
  bool hidden = false;  // record the router's input (fp32)
  traces::WriterOptions writer;
};

// The trace header's model shape for a Colibri model: MoE layer ids, experts,
// top-k, expert bytes = one expert block, dtype, hidden size.
traces::ModelShape TraceShapeOfModel(const engine::ModelConfig& config, bool with_hidden);

class TraceRecorder final : public engine::EngineObserver {
 public:
  static Result<std::unique_ptr<TraceRecorder>> Create(const std::string& path, const engine::ModelConfig& config,
                                                       traces::Provenance provenance, const RecorderOptions& options);
  // With the header's shape given (a replay's modelled engine has no ModelConfig).
  static Result<std::unique_ptr<TraceRecorder>> Create(const std::string& path, traces::ModelShape shape,
                                                       traces::Provenance provenance, const RecorderOptions& options);

  // The next layer batches belong to pass `pass_id`; `rows` gives each batch row's request and position.
  void BeginPass(uint64_t pass_id, bool prefill, std::vector<BatchRow> rows);
  void OnRouting(const engine::RoutingDecision& decision) override;

  const Status& status() const { return status_; }
  uint64_t records_written() const;
  Status Close();

 private:
  TraceRecorder(std::unique_ptr<traces::TraceWriter> writer, std::vector<uint32_t> layer_ids,
                const RecorderOptions& options);
  void AppendRow(const engine::RoutingDecision& d, size_t row, traces::TraceRecord* record) const;

  std::unique_ptr<traces::TraceWriter> writer_;
  std::vector<uint32_t> layer_ids_;
  RecorderOptions options_;
  uint64_t pass_id_ = 0;
  bool prefill_ = false;
  std::vector<BatchRow> rows_;
  traces::TraceRecord record_;
  Status status_;
};

}  // namespace colibri::replay
