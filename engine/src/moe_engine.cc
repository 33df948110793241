#include "colibri/engine/moe_engine.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "colibri/engine/router.h"
#include "host_work_charge.h"
#include "layer_batch.h"
#include "prefetcher.h"
#include "tier_set.h"

namespace colibri::engine {

MoeEngine::MoeEngine(EngineModel model, EngineOptions options, EngineBackends backends)
    : model_(std::move(model)), options_(std::move(options)), backends_(backends) {}

MoeEngine::~MoeEngine() {
  // Real reads still writing into the pools must land before the pools go.
  if (prefetcher_ && prefetcher_->in_flight() > 0 && backends_.storage->caps().delivers_data) DrainStorage();
}

void MoeEngine::OnStorageDone(const ReadCompletion& c) {
  if ((c.tag & kPrefetchTag) == 0) {
    if (current_batch_ != nullptr) current_batch_->OnReadDone(c);
    return;
  }
  const size_t index = c.tag & ~kPrefetchTag;
  Status status = c.status;
  if (!prefetcher_->OnReadDone(index, &status)) return;  // submitted again
  if (current_batch_ != nullptr) current_batch_->OnPrefetchDone(index, status);
}

void MoeEngine::DrainStorage() {
  std::vector<ReadCompletion> completions;
  while (backends_.storage->outstanding() > 0) {
    completions.clear();
    if (!backends_.storage->Poll(true, &completions).ok()) break;
    for (const ReadCompletion& c : completions) OnStorageDone(c);
  }
}

Status MoeEngine::FinishPrefetches() { return prefetcher_->Finish(); }

PrefetchCounters MoeEngine::prefetch_counters() const { return prefetcher_->counters(); }

Status MoeEngine::PreloadPinned() {
  if (options_.l2_policy != "pinned" || !tiers_->l2()) return Status::Ok();
  return prefetcher_->Preload(options_.pinned, &preloaded_bytes_);
}

Status MoeEngine::Execute(uint32_t layer_index, const float* hidden, const LayerRouting& routing, float* out,
                          LayerBatchReport* report) {
  LayerBatchReport local;
  LayerBatchReport& r = report != nullptr ? *report : local;
  // A given routing costs nothing here unless a host-work model charges what computing it would have.
  TimeNs routing_ns = 0;
  if (backends_.host_work != nullptr) {
    routing_ns = backends_.host_work->RoutingNs(routing.tokens, model_.experts, model_.layout.hidden,
                                                /*gate_charged=*/false);
    ChargeHostWork(*backends_.loop, routing_ns);
  }
  COLIBRI_RETURN_IF_ERROR(Run(layer_index, hidden, routing, out, &r));
  r.step_ns.routing = routing_ns;
  r.step_ns.total += routing_ns;
  if (backends_.observer != nullptr) backends_.observer->OnLayerBatch(r);
  return Status::Ok();
}

Status MoeEngine::Run(uint32_t layer_index, const float* hidden, const LayerRouting& routing, float* out,
                      LayerBatchReport* report) {
  if (layer_index >= model_.moe_layers) {
    return Status::InvalidArgument("MoE layer index " + std::to_string(layer_index) + " out of range");
  }
  if (moves_data_) scratch_->expert_out.resize(routing.tokens * model_.top_k * model_.layout.hidden);
  *report = LayerBatchReport{};
  const BatchParts parts{model_, backends_, *tiers_, *prefetcher_, *scratch_, moves_data_, options_.read_retries,
                         options_.isolate_expert_failures};
  LayerBatch batch(parts, layer_index, hidden, routing, out);
  current_batch_ = &batch;
  const Status status = batch.Run(report);
  current_batch_ = nullptr;
  if (!status.ok()) {
    DrainStorage();  // no buffer is written after this; the batch's reads complete to no one
    batch.Abandon();
  }
  return status;
}

Status MoeEngine::Forward(uint32_t layer_index, const float* hidden, size_t tokens, float* out,
                          LayerBatchReport* report, const uint32_t* token_ids) {
  if (layer_index >= model_.moe_layers || layer_index >= model_.gate_weights.size()) {
    return Status::InvalidArgument("MoE layer index " + std::to_string(layer_index) + " out of range or without a router");
  }
  COLIBRI_RETURN_IF_ERROR(CheckRoutingCompute());
  const TimeNs start = backends_.loop->Now();
  const RouterMode mode = options_.routing.router.mode;
  const float* logits = nullptr;
  if (mode == RouterMode::kSoftmaxTopK || mode == RouterMode::kSigmoidGrouped) {  // the hash modes need no gate
    logits_.resize(tokens * model_.experts);
    COLIBRI_RETURN_IF_ERROR(backends_.compute->GateGemv(model_.gate_weights[layer_index], model_.gate_biases[layer_index],
                                                        model_.experts, model_.layout.hidden, hidden, tokens,
                                                        logits_.data()));
    logits = logits_.data();
  }
  return RouteAndRun(layer_index, RouterInput{tokens, logits, hidden, token_ids, start}, start, out, report);
}

Status MoeEngine::ExecuteLogits(uint32_t layer_index, const float* logits, const float* hidden, size_t tokens,
                                float* out, LayerBatchReport* report, const uint32_t* token_ids) {
  if (layer_index >= model_.moe_layers) {
    return Status::InvalidArgument("MoE layer index " + std::to_string(layer_index) + " out of range");
  }
  const TimeNs start = backends_.loop->Now();
  return RouteAndRun(layer_index, RouterInput{tokens, logits, hidden, token_ids, start}, start, out, report);
}

Status MoeEngine::CheckRoutingCompute() const {
  if (moves_data_) return Status::Ok();
  return Status::InvalidArgument(std::string("routing needs a compute backend that reads data; '") +
                                 backends_.compute->caps().name + "' only models time");
}

uint32_t MoeEngine::CapacityFor(size_t tokens) const {
  if (options_.routing.capacity_factor <= 0.0) return model_.expert_capacity;
  const double slots = static_cast<double>(tokens) * model_.top_k / model_.experts;
  return static_cast<uint32_t>(std::ceil(options_.routing.capacity_factor * slots));
}

Status MoeEngine::RouteAndRun(uint32_t layer_index, const RouterInput& input, TimeNs start, float* out,
                              LayerBatchReport* report) {
  const size_t tokens = input.tokens;
  const uint32_t k = model_.top_k;
  Router& router = *routers_[layer_index];
  routed_ids_.resize(tokens * k);
  routed_weights_.resize(tokens * k);
  const auto where = [layer_index] { return "routing MoE layer " + std::to_string(layer_index); };  // errors only
  const Status routed = router.Route(input, routed_ids_.data(), routed_weights_.data());
  if (!routed.ok()) return routed.WithPrefix(where());
  kept_ids_ = routed_ids_;
  kept_weights_ = routed_weights_;
  Result<CapacityCounts> capacity = router.ApplyCapacity(input, CapacityFor(tokens), options_.routing.capacity_overflow,
                                                         kept_ids_.data(), kept_weights_.data());
  if (!capacity.ok()) return capacity.status().WithPrefix(where());
  if (backends_.host_work != nullptr) {  // scoring and top-k; the gate GEMV kept its own time
    ChargeHostWork(*backends_.loop, backends_.host_work->RoutingNs(tokens, model_.experts, model_.layout.hidden,
                                                                   /*gate_charged=*/true));
  }
  const TimeNs routing_ns = backends_.loop->Now() - start;
  if (backends_.observer != nullptr) {
    backends_.observer->OnRouting(RoutingDecision{layer_index, tokens, k, model_.experts, model_.layout.hidden,
                                                  routed_ids_.data(), routed_weights_.data(), input.logits,
                                                  input.hidden, routing_ns});
  }
  LayerBatchReport local;
  LayerBatchReport& r = report != nullptr ? *report : local;
  COLIBRI_RETURN_IF_ERROR(Run(layer_index, input.hidden, LayerRouting{tokens, kept_ids_.data(), kept_weights_.data()}, out, &r));
  r.step_ns.routing = routing_ns;
  r.step_ns.total += routing_ns;
  r.dropped_assignments = static_cast<uint32_t>(capacity.value().dropped.dropped_slots);
  if (backends_.observer != nullptr) backends_.observer->OnLayerBatch(r);
  return Status::Ok();
}

RouterCounters MoeEngine::router_counters() const {
  RouterCounters sum;
  for (const auto& router : routers_) {
    const RouterCounters& c = router->counters();
    sum.tokens_routed += c.tokens_routed;
    sum.tokens_redirected += c.tokens_redirected;
    sum.slots_redirected += c.slots_redirected;
    sum.capacity_dropped_slots += c.capacity_dropped_slots;
    sum.capacity_rerouted_slots += c.capacity_rerouted_slots;
  }
  return sum;
}

std::string LruCliffWarning(const std::string& tier, const std::string& policy, uint64_t budget_bytes,
                            uint64_t token_cycle_bytes) {
  if (policy != "lru" || budget_bytes == 0 || budget_bytes >= token_cycle_bytes) return "";
  const auto mib = [](uint64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20); };
  return tier + " budget " + mib(budget_bytes) + " MiB is below the token cycle T = " + mib(token_cycle_bytes) +
         " MiB (every MoE layer's top-k experts): a global LRU evicts each expert before its next use, so its hit "
         "rate will collapse to about zero. Use at least " + mib(token_cycle_bytes) +
         " MiB, or a policy that keeps a resident set (lfu, layerlfu, layer).";
}

uint64_t MoeEngine::token_cycle_bytes() const {
  uint64_t bytes = 0;
  for (uint32_t l = 0; l < model_.moe_layers; ++l) bytes += static_cast<uint64_t>(model_.top_k) * ExpertBytes(l);
  return bytes;
}

std::vector<std::string> MoeEngine::SizingWarnings() const {
  std::vector<std::string> out;
  for (std::string w : {LruCliffWarning("L1", options_.l1_policy, options_.l1_bytes, token_cycle_bytes()),
                        LruCliffWarning("L2", options_.l2_policy, options_.l2_bytes, token_cycle_bytes())}) {
    if (!w.empty()) out.push_back(std::move(w));
  }
  return out;
}

TierCounters MoeEngine::l1_counters() const { return tiers_->l1_counters(); }
TierCounters MoeEngine::l2_counters() const { return tiers_->l2_counters(); }
std::vector<MemoryRegion> MoeEngine::read_buffer_regions() const { return tiers_->read_buffer_regions(); }
uint64_t MoeEngine::pool_bytes() const { return tiers_->pool_bytes(); }
const BatchFailures& MoeEngine::last_failures() const { return scratch_->failures; }

}  // namespace colibri::engine
