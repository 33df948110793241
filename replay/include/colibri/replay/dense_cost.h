// DenseCost: the modelled time of a layer batch's non-MoE part, which a
// replay on modelled compute charges before the MoE layer batch
// (replay_run.h, `step_latency_ns.dense`). Three terms, each from the trace
// header and the machine profile only:
//  - pass: SimCompute::DenseLayerNs(dense_bytes[layer]), one memory-bound
//    pass over the layer's dense weights (attention and router projections,
//    norms, shared experts);
//  - attention by context: with the header's attention shape (traces
//    ModelShape::attention), each request's tokens in the batch at positions
//    p attend to AttendedPositions(p) cached positions (the layer's window);
//    the batch's queries of one request share one pass over its KV cache (as
//    flash attention does), so the KV bytes read are the request's largest
//    attended count x KvBytesPerPosition, and the FLOPs
//    2 x q_heads x (key_dim + value_dim) per attended position per token;
//    SimCompute::AttentionNs. A header without the shape gets 0 here and one
//    warning (warnings()) when the trace has dense bytes;
//  - page faults: with the machine's host_memory (sim/host_memory.h), the
//    layer's share of the dense bytes that do not fit, faulted back from the
//    drive: HostMemoryModel::Faults with the demand L2 budget + the layers'
//    dense bytes + other_dense_bytes + the KV cache of the batch's requests at
//    their context (each request's largest position + 1, every layer up to
//    its window). Without host_memory: 0.
// A machine without host_memory and a trace without the attention shape get
// exactly the pass, as before these terms existed.
//
// Ownership: borrows the SimCompute (it must outlive this). Thread-safety:
// none needed (const after Make). Errors: Make's (the host memory model's);
// ForBatch's: a compute profile without an fp32 peak when attention is costed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "colibri/replay/layer_batches.h"
#include "colibri/sim/hardware.h"
#include "colibri/sim/host_memory.h"
#include "colibri/sim/profiles.h"
#include "colibri/sim/sim_compute.h"
#include "colibri/status.h"
#include "colibri/traces/trace.h"

namespace colibri::replay {

// One layer batch's dense part.
struct DenseCostParts {
  bool charged = false;          // false: nothing modelled for this batch (no dense bytes, attention or faults)
  engine::TimeNs pass_ns = 0;
  engine::TimeNs attention_ns = 0;
  engine::TimeNs fault_ns = 0;
  uint64_t kv_read_bytes = 0;    // KV cache bytes the attention read
  uint64_t faults = 0;
  uint64_t faulted_bytes = 0;
  uint64_t shortfall_bytes = 0;  // resident demand beyond the machine's available RAM
  engine::TimeNs total_ns() const { return pass_ns + attention_ns + fault_ns; }
};

// Sums over a run's layer batches.
struct DenseCostTotals {
  engine::TimeNs pass_ns = 0, attention_ns = 0, fault_ns = 0;
  uint64_t kv_read_bytes = 0, faults = 0, faulted_bytes = 0;
  uint64_t shortfall_bytes_max = 0;
  void Add(const DenseCostParts& p);
};

class DenseCost {
 public:
  // `compute` may be null (real compute: nothing is charged). `host_memory`
  // absent from the machine: no fault term. `l2_bytes`: the expert cache's
  // budget; `seed`: the run's (the fault reads' latency samples).
  static Result<DenseCost> Make(const traces::ModelShape& shape, const sim::SimCompute* compute,
                                const sim::ResolvedMachine& machine, uint64_t l2_bytes, uint64_t seed);

  // The dense part of `batch`.
  Result<DenseCostParts> ForBatch(const LayerBatch& batch) const;
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  DenseCost() = default;
  // The KV cache of every layer for one request whose largest position is `position`.
  uint64_t KvCacheBytes(uint64_t position) const;

  const sim::SimCompute* compute_ = nullptr;
  std::vector<uint64_t> dense_bytes_;           // per MoE layer index (empty: none recorded)
  std::vector<traces::AttentionShape> attention_;  // per MoE layer index (empty: not recorded)
  std::vector<uint64_t> kv_bytes_per_position_;    // per MoE layer index
  sim::HostMemoryDemand static_demand_;         // L2, dense and other dense bytes
  std::optional<sim::HostMemoryModel> memory_;
  std::vector<std::string> warnings_;
};

}  // namespace colibri::replay
