#include "colibri/bench/engine_streaming.h"

#include <algorithm>
#include <memory>
#include <random>

#include "colibri/engine/local_engine.h"
#include "colibri/engine/model.h"

namespace colibri::bench {
namespace {

// Random routing for one layer batch: each token's top_k distinct experts, weights 1/k.
void RandomRouting(std::mt19937_64& rng, uint32_t experts, uint32_t k, size_t tokens, std::vector<uint32_t>* ids,
                   std::vector<float>* weights) {
  ids->clear();
  weights->assign(tokens * k, 1.0f / static_cast<float>(k));
  for (size_t t = 0; t < tokens; ++t) {
    while (ids->size() < (t + 1) * k) {
      const auto id = static_cast<uint32_t>(rng() % experts);
      if (std::find(ids->begin() + static_cast<std::ptrdiff_t>(t * k), ids->end(), id) == ids->end()) ids->push_back(id);
    }
  }
}

}  // namespace

Result<ModelBlocks> ModelBlocksOf(const std::string& model_dir) {
  COLIBRI_ASSIGN_OR_RETURN(engine::Model model, engine::OpenModel(model_dir, engine::ModelVerify::kAuto));
  ModelBlocks blocks{model.experts_path(), model.config().layout.block_bytes, {}};
  for (uint32_t layer = 0; layer < model.config().layers(); ++layer) {
    for (uint32_t e = 0; e < model.config().experts; ++e) blocks.offsets.push_back(model.ExpertOffset(layer, e));
  }
  return blocks;
}

Result<EngineStreamingRun> MeasureEngineStreaming(const EngineStreamingOptions& o) {
  engine::LocalEngineOptions options;
  options.model_dir = o.model_dir;
  options.storage = o.storage;
  options.queue_depth = o.queue_depth;
  options.threads = o.threads;
  options.engine.staging_slots = o.queue_depth;
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<engine::LocalEngine> e, engine::LocalEngine::Open(options));
  if (o.storage == "uring" && !o.register_buffers) COLIBRI_RETURN_IF_ERROR(e->storage->RegisterBuffers({}));
  const engine::EngineModel& m = e->moe->model();
  std::vector<float> hidden(static_cast<size_t>(o.batch_tokens) * m.layout.hidden, 0.5f), out(hidden.size());
  std::vector<uint32_t> ids;
  std::vector<float> weights;
  std::mt19937_64 rng(o.seed);
  EngineStreamingRun run;
  const engine::TimeNs start_ns = e->loop->Now();
  const engine::TimeNs deadline_ns = start_ns + static_cast<engine::TimeNs>(o.duration_ns);
  for (uint32_t layer = 0; e->loop->Now() < deadline_ns; layer = (layer + 1) % m.moe_layers) {
    RandomRouting(rng, m.experts, m.top_k, o.batch_tokens, &ids, &weights);
    engine::LayerBatchReport report;
    COLIBRI_RETURN_IF_ERROR(e->moe->Execute(layer, hidden.data(), {o.batch_tokens, ids.data(), weights.data()},
                                            out.data(), &report));
    ++run.layer_batches;
    run.distinct_experts += report.distinct_experts;
    run.compute_ns += report.step_ns.compute;
  }
  run.elapsed_s = static_cast<double>(e->loop->Now() - start_ns) / 1e9;
  run.read_bytes = e->storage->counters().read_bytes;
  run.reads = e->storage->counters().reads;
  run.registered_reads = e->storage->counters().registered_reads;
  return run;
}

}  // namespace colibri::bench
