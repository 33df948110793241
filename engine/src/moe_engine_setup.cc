// MoeEngine set-up: the checks of a model, options and backends, and the
// parts an engine is made of (tiers, prefetcher, routers). moe_engine.h has the contract.
#include <algorithm>
#include <cmath>
#include <utility>

#include "colibri/engine/moe_engine.h"
#include "colibri/engine/router.h"
#include "layer_batch.h"
#include "prefetcher.h"
#include "storage_event_source.h"
#include "tier_set.h"

namespace colibri::engine {
namespace {

// Per-layer expert sizes: one per layer, each a positive multiple of the
// alignment no larger than the block, and only where storage models time
// (a partial block of real weights would be computed on).
Status CheckLayerExpertBytes(const EngineModel& m, const EngineBackends& b) {
  if (m.layer_expert_bytes.empty()) return Status::Ok();
  if (m.layer_expert_bytes.size() != m.moe_layers) {
    return Status::InvalidArgument("engine model: layer_expert_bytes must hold one size per MoE layer");
  }
  if (b.storage->caps().delivers_data) {
    return Status::InvalidArgument("engine model: per-layer expert sizes need storage that only models time");
  }
  const uint32_t alignment = b.storage->caps().alignment_bytes;
  for (uint64_t bytes : m.layer_expert_bytes) {
    if (bytes == 0 || bytes > m.layout.block_bytes || bytes % alignment != 0) {
      return Status::InvalidArgument("engine model: layer expert size " + std::to_string(bytes) +
                                     " must be a positive multiple of " + std::to_string(alignment) + " up to the block (" +
                                     std::to_string(m.layout.block_bytes) + ")");
    }
  }
  return Status::Ok();
}

// A compute backend that reads expert data needs backends that deliver it.
Status CheckDataFlow(const EngineBackends& b, const EngineOptions& options) {
  const bool copies = options.l1_bytes > 0 || b.compute->caps().device_memory;  // L1 admissions, device staging
  if (copies && b.transfer->caps().delivers_data && !b.storage->caps().delivers_data) {
    return Status::InvalidArgument(std::string("transfer backend '") + b.transfer->caps().name +
                                   "' copies expert bytes, but storage backend '" + b.storage->caps().name +
                                   "' only models time: there are none to copy (use a modelled transfer, real "
                                   "storage, or an L1 budget of 0 with a compute device that reads host memory)");
  }
  if (!b.compute->caps().reads_data) return Status::Ok();
  if (!b.storage->caps().delivers_data) {
    return Status::InvalidArgument(std::string("compute backend '") + b.compute->caps().name +
                                   "' reads expert data, but storage backend '" + b.storage->caps().name +
                                   "' only models time");
  }
  const char* compute = b.compute->caps().name;
  const char* transfer = b.transfer->caps().name;
  const bool on_device = b.compute->caps().device_memory;
  if (on_device && !b.transfer->caps().delivers_data) {
    return Status::InvalidArgument(std::string("compute backend '") + compute +
                                   "' reads expert blocks in device memory, but transfer backend '" + transfer +
                                   "' only models time");
  }
  if (options.l1_bytes > 0 && !b.transfer->caps().delivers_data) {
    return Status::InvalidArgument(std::string("compute backend '") + compute +
                                   "' reads expert data, but transfer backend '" + transfer +
                                   "' only models time (or use an L1 budget of 0)");
  }
  if (on_device && b.transfer->caps().device_is_host) {
    return Status::InvalidArgument(std::string("compute backend '") + compute +
                                   "' reads expert blocks in device memory, but transfer backend '" + transfer +
                                   "' keeps its pool in host memory (use the device's own transfer backend)");
  }
  if (!on_device && options.l1_bytes > 0 && !b.transfer->caps().device_is_host) {
    return Status::InvalidArgument(std::string("compute backend '") + compute +
                                   "' reads host memory, but transfer backend '" + transfer +
                                   "' puts the L1 pool in device memory (use a host-memory transfer backend, or "
                                   "an L1 budget of 0)");
  }
  return Status::Ok();
}

// The predictor `config` names for the engine (null for "none"). Errors: an
// unknown name, prefetch without an L2 tier, lookahead without gates or data.
Result<std::shared_ptr<ExpertPredictor>> MakePredictor(const PrefetchConfig& config, const EngineModel& model,
                                                       const EngineOptions& options, ComputeBackend* compute) {
  if (config.predictor == "none" && !config.custom) return std::shared_ptr<ExpertPredictor>();
  if (options.l2_bytes == 0) return Status::InvalidArgument("prefetch fills the L2 tier: it needs an L2 budget");
  if (config.custom) return config.custom;
  if (config.predictor == "coact") {
    COLIBRI_RETURN_IF_ERROR(CheckCoactDecay(config.decay));
    return std::shared_ptr<ExpertPredictor>(
        std::make_shared<CoactivationPredictor>(model.moe_layers, model.experts, config.decay));
  }
  if (config.predictor == "lookahead") {
    if (model.gate_weights.size() != model.moe_layers || !compute->caps().reads_data) {
      return Status::InvalidArgument(std::string("prefetch 'lookahead' runs the next layer's router: it needs the "
                                                 "model's gate weights and a compute backend that reads data ('") +
                                     compute->caps().name + "' " + (compute->caps().reads_data ? "does" : "only models time") + ")");
    }
    return std::shared_ptr<ExpertPredictor>(std::make_shared<RouterLookaheadPredictor>(
        model.gate_weights, model.gate_biases, model.experts, model.top_k, compute));
  }
  return Status::InvalidArgument("unknown prefetch predictor '" + config.predictor + "' (known: none, coact, lookahead)");
}

// Policy "pinned" runs on L2, with a hot set of distinct keys of the model
// that fits the L2 budget.
Status CheckPinned(const EngineModel& model, const EngineOptions& options, uint64_t expert_bytes_of_layer0,
                   const std::vector<uint64_t>& layer_expert_bytes) {
  if (options.l1_policy == "pinned" && options.l1_bytes > 0) {
    return Status::InvalidArgument("policy 'pinned' runs on L2 (EngineOptions::l2_policy), not on L1");
  }
  if (options.l2_policy != "pinned" || options.l2_bytes == 0) return Status::Ok();
  std::vector<ExpertKey> sorted = options.pinned;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    return Status::InvalidArgument("pinned: the hot set repeats a key");
  }
  uint64_t bytes = 0;
  for (ExpertKey key : sorted) {
    if (LayerIndexOf(key) >= model.moe_layers || ExpertOf(key) >= model.experts) {
      return Status::InvalidArgument("pinned: key (layer index " + std::to_string(LayerIndexOf(key)) + ", expert " +
                                     std::to_string(ExpertOf(key)) + ") is outside the model");
    }
    bytes += layer_expert_bytes.empty() ? expert_bytes_of_layer0 : layer_expert_bytes[LayerIndexOf(key)];
  }
  if (bytes > options.l2_bytes) {
    return Status::InvalidArgument("pinned: the hot set (" + std::to_string(bytes) + " bytes) is larger than the L2 budget (" +
                                   std::to_string(options.l2_bytes) + " bytes)");
  }
  return Status::Ok();
}

// One Router per MoE layer (EngineOptions::router).
Result<std::vector<std::unique_ptr<Router>>> MakeRouters(const EngineModel& model, const RoutingOptions& options) {
  if (options.capacity_factor < 0.0 || !std::isfinite(options.capacity_factor)) {
    return Status::InvalidArgument("capacity factor " + std::to_string(options.capacity_factor) + " must be finite and >= 0");
  }
  std::vector<std::unique_ptr<Router>> routers;
  for (uint32_t layer = 0; layer < model.moe_layers; ++layer) {
    RouterConfig config = options.router;
    config.renormalize = model.renormalize;
    config.table_seed += layer;  // hash-token: one table per layer, as Hash Layers do
    if (config.mode == RouterMode::kHashProjection && config.projection.empty()) {
      if (config.projection_dims == 0) config.projection_dims = 4;
      config.projection = SeededRouterProjection(model.layout.hidden, config.projection_dims, options.seed + layer);
    }
    auto router = Router::Create(std::move(config), model.experts, model.top_k, model.layout.hidden);
    if (!router.ok()) return router.status().WithPrefix("router");
    routers.push_back(std::move(router).value());
  }
  return routers;
}

}  // namespace

Result<std::unique_ptr<MoeEngine>> MoeEngine::Create(EngineModel model, const EngineOptions& options,
                                                     const EngineBackends& backends) {
  if (!backends.loop || !backends.storage || !backends.transfer || !backends.compute) {
    return Status::InvalidArgument("engine needs an event loop, storage, transfer and compute backend");
  }
  if (model.moe_layers == 0 || model.experts == 0 || model.top_k == 0 || model.top_k > model.experts) {
    return Status::InvalidArgument("engine model: layers, experts and top_k must be positive, top_k <= experts");
  }
  if (model.expert_offsets.size() != static_cast<size_t>(model.moe_layers) * model.experts) {
    return Status::InvalidArgument("engine model: expert_offsets must hold layers x experts entries");
  }
  const uint64_t block = model.layout.block_bytes;
  const uint32_t alignment = backends.storage->caps().alignment_bytes;
  if (block == 0 || block % alignment != 0) {
    return Status::InvalidArgument("expert block of " + std::to_string(block) + " bytes is not a multiple of the storage alignment (" +
                                   std::to_string(alignment) + ")");
  }
  for (uint64_t offset : model.expert_offsets) {
    if (offset % alignment != 0) return Status::InvalidArgument("expert offset " + std::to_string(offset) + " is not aligned to " + std::to_string(alignment));
  }
  if (options.staging_slots == 0) return Status::InvalidArgument("staging_slots must be at least 1");
  COLIBRI_RETURN_IF_ERROR(CheckDataFlow(backends, options));
  COLIBRI_RETURN_IF_ERROR(CheckLayerExpertBytes(model, backends));
  COLIBRI_RETURN_IF_ERROR(CheckPinned(model, options, block, model.layer_expert_bytes));
  std::unique_ptr<MoeEngine> engine(new MoeEngine(std::move(model), options, backends));
  MoeEngine& e = *engine;
  e.moves_data_ = backends.compute->caps().reads_data;
  COLIBRI_ASSIGN_OR_RETURN(e.tiers_, TierSet::Create(e.model_, options, e.backends_));
  e.scratch_ = std::make_unique<BatchScratch>(e.model_.experts);
  COLIBRI_ASSIGN_OR_RETURN(e.routers_, MakeRouters(e.model_, options.routing));
  COLIBRI_ASSIGN_OR_RETURN(std::shared_ptr<ExpertPredictor> predictor,
                           MakePredictor(options.prefetch, e.model_, options, backends.compute));
  e.prefetcher_ = std::make_unique<Prefetcher>(e.model_, e.backends_, *e.tiers_, std::move(predictor),
                                               options.prefetch.width, options.read_retries);
  e.storage_source_ = std::make_unique<StorageEventSource>(backends.storage, [&e](const ReadCompletion& c) {
    e.OnStorageDone(c);
  });
  backends.loop->AddSource(e.storage_source_.get());
  return engine;
}

EngineModel EngineModelOf(const Model& model) {
  const ModelConfig& c = model.config();
  EngineModel m;
  m.moe_layers = c.layers();
  m.experts = c.experts;
  m.top_k = c.top_k;
  m.layout = c.layout;
  m.renormalize = c.norm_topk_prob;
  m.expert_capacity = c.expert_capacity;
  for (uint32_t l = 0; l < c.layers(); ++l) {
    for (uint32_t e = 0; e < c.experts; ++e) m.expert_offsets.push_back(model.ExpertOffset(l, e));
    m.gate_weights.push_back(model.GateWeight(l));
    m.gate_biases.push_back(model.GateBias(l));
  }
  return m;
}

}  // namespace colibri::engine
