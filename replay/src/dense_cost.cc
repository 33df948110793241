#include "colibri/replay/dense_cost.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace colibri::replay {
namespace {

// Each request of the batch with its largest position (requests in first-seen order).
std::vector<std::pair<uint64_t, uint64_t>> RequestPositions(const LayerBatch& batch) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const BatchRow& row : batch.rows) {
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == row.request_id; });
    if (it == out.end()) {
      out.emplace_back(row.request_id, row.position);
    } else {
      it->second = std::max(it->second, row.position);
    }
  }
  return out;
}

}  // namespace

void DenseCostTotals::Add(const DenseCostParts& p) {
  pass_ns += p.pass_ns;
  attention_ns += p.attention_ns;
  fault_ns += p.fault_ns;
  kv_read_bytes += p.kv_read_bytes;
  faults += p.faults;
  faulted_bytes += p.faulted_bytes;
  shortfall_bytes_max = std::max(shortfall_bytes_max, p.shortfall_bytes);
}

Result<DenseCost> DenseCost::Make(const traces::ModelShape& shape, const sim::SimCompute* compute,
                                  const sim::ResolvedMachine& machine, uint64_t l2_bytes, uint64_t seed) {
  DenseCost cost;
  cost.compute_ = compute;
  if (compute == nullptr) return cost;
  cost.dense_bytes_ = shape.dense_bytes;
  cost.attention_ = shape.attention;
  for (const traces::AttentionShape& a : shape.attention) {
    cost.kv_bytes_per_position_.push_back(a.KvBytesPerPosition(shape.kv_element_bytes));
  }
  if (shape.attention.empty() && !shape.dense_bytes.empty()) {
    cost.warnings_.push_back(
        "the trace records no attention shape: attention by context length is not modelled (0 ns); "
        "import the capture with its model facts (colibri trace import --llama-log, docs/TRACE_FORMAT.md)");
  }
  if (machine.machine.host_memory.present) {
    COLIBRI_ASSIGN_OR_RETURN(sim::HostMemoryModel memory,
                             sim::HostMemoryModel::Make(machine.machine.name, machine.machine.host_memory, machine.nvme, seed));
    cost.memory_ = std::move(memory);
    cost.static_demand_.expert_cache_bytes = l2_bytes;
    cost.static_demand_.layer_dense_bytes = std::accumulate(shape.dense_bytes.begin(), shape.dense_bytes.end(), uint64_t{0});
    cost.static_demand_.other_dense_bytes = shape.other_dense_bytes;
  }
  return cost;
}

uint64_t DenseCost::KvCacheBytes(uint64_t position) const {
  uint64_t bytes = 0;
  for (size_t l = 0; l < attention_.size(); ++l) bytes += kv_bytes_per_position_[l] * attention_[l].AttendedPositions(position);
  return bytes;
}

Result<DenseCostParts> DenseCost::ForBatch(const LayerBatch& batch) const {
  DenseCostParts parts;
  if (compute_ == nullptr) return parts;
  const uint32_t layer = batch.layer_index;
  const bool has_dense = layer < dense_bytes_.size();
  if (has_dense) {
    parts.pass_ns = compute_->DenseLayerNs(dense_bytes_[layer]);
    parts.charged = true;
  }
  const bool attention = layer < attention_.size();
  if (!attention && !memory_) return parts;
  const std::vector<std::pair<uint64_t, uint64_t>> requests = RequestPositions(batch);
  if (attention) {
    const traces::AttentionShape& a = attention_[layer];
    uint64_t flops = 0;
    const uint64_t flops_per_position = 2 * uint64_t{a.q_heads} * (uint64_t{a.key_dim} + a.value_dim);
    for (const BatchRow& row : batch.rows) flops += flops_per_position * a.AttendedPositions(row.position);
    for (const auto& [request, position] : requests) {
      parts.kv_read_bytes += kv_bytes_per_position_[layer] * a.AttendedPositions(position);
    }
    COLIBRI_ASSIGN_OR_RETURN(parts.attention_ns, compute_->AttentionNs(parts.kv_read_bytes, flops));
    parts.charged = true;
  }
  if (memory_ && has_dense) {
    sim::HostMemoryDemand demand = static_demand_;
    for (const auto& [request, position] : requests) demand.kv_cache_bytes += KvCacheBytes(position);
    parts.shortfall_bytes = memory_->ShortfallBytes(demand);
    const sim::LayerFaults faults = memory_->Faults(demand, dense_bytes_[layer]);
    parts.faults = faults.faults;
    parts.faulted_bytes = faults.faulted_bytes;
    parts.fault_ns = faults.fault_ns;
  }
  return parts;
}

}  // namespace colibri::replay
