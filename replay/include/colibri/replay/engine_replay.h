// EngineReplayer: drives the engine core (MoeEngine: scheduler, caches,
// backends -- the same code as `colibri run`) with a trace's layer batches.
//
// Routing source:
//   kRecorded   the trace's expert ids and gate weights are executed as they
//               are (MoeEngine::Execute);
//   kRecompute  the engine's router runs again: on the recorded hidden states
//               (gate GEMV + top-k, MoeEngine::Forward) when the trace has
//               them and the compute backend reads data, else on the recorded
//               router logits (top-k, MoeEngine::ExecuteLogits).
// Expert inputs are the recorded hidden states when present, zeros otherwise
// (then the MoE output is not meaningful; cache and timing behaviour are).
// A recorder, when given, re-records the routing that was executed.
//
// Ownership: borrows the engine and the recorder. Thread-safety: none.
// Errors: a trace whose shape does not match the engine's model, a batch that
// cannot be recomputed (no logits, no hidden states), and the engine's.
#pragma once

#include <string>
#include <vector>

#include "colibri/engine/moe_engine.h"
#include "colibri/replay/layer_batches.h"
#include "colibri/replay/trace_recorder.h"
#include "colibri/traces/trace.h"

namespace colibri::replay {

enum class RoutingMode { kRecorded, kRecompute };

// "recorded" or "recompute"; InvalidArgument otherwise.
Result<RoutingMode> ParseRoutingMode(const std::string& name);

class EngineReplayer {
 public:
  // Checks that the trace's shape (MoE layers, experts, top-k) matches the engine's model.
  static Result<EngineReplayer> Create(engine::MoeEngine* engine, const traces::ModelShape& shape, RoutingMode mode,
                                       TraceRecorder* recorder);

  // Executes one layer batch; `report` receives its counts and step times.
  Status Run(const LayerBatch& batch, engine::LayerBatchReport* report);
  // The last batch's MoE output (tokens x hidden), empty when compute only models time.
  const std::vector<float>& output() const { return out_; }

 private:
  EngineReplayer(engine::MoeEngine* engine, RoutingMode mode, TraceRecorder* recorder, bool moves_data);
  Status Recompute(const LayerBatch& batch, const float* hidden, engine::LayerBatchReport* report);
  Status Replay(const LayerBatch& batch, const float* hidden, engine::LayerBatchReport* report);

  engine::MoeEngine* engine_;
  RoutingMode mode_;
  TraceRecorder* recorder_;
  bool moves_data_;
  std::vector<float> zeros_;
  std::vector<uint32_t> token_ids_;  // the batch's recorded token ids (hash-token)
  std::vector<float> out_;
};

}  // namespace colibri::replay
