// EngineObserver: how the engine reports what it did, without depending on
// anything outside engine/. replay/ and the CLI implement it (trace writer,
// run store); the engine calls it synchronously on its own thread, once per
// layer batch. Pointers in the events are valid only during the call.
#pragma once

#include <cstddef>
#include <cstdint>

#include "colibri/engine/clock.h"

namespace colibri::engine {

// In a LayerRouting given to MoeEngine::Execute, a slot dropped by expert
// capacity holds kDroppedExpert (its weight is ignored).
inline constexpr uint32_t kDroppedExpert = UINT32_MAX;

// The router's decision for one layer batch, in token order: its top-k as
// chosen, before capacity drops (those are counted in LayerBatchReport), so
// that replaying the decision reproduces the same selections.
struct RoutingDecision {
  uint32_t layer_index = 0;
  size_t tokens = 0;
  uint32_t top_k = 0;
  uint32_t experts = 0;
  uint32_t hidden_size = 0;
  const uint32_t* expert_ids = nullptr;  // tokens x top_k, rank order
  const float* weights = nullptr;        // tokens x top_k
  const float* logits = nullptr;         // tokens x experts, or null (routing given, not computed)
  const float* hidden = nullptr;         // tokens x hidden_size: the router's input
  TimeNs routing_ns = 0;                 // the routing step's time (0 when routing was given)
};

// Wall (or simulated) time spent in each step of one layer batch, in ns. Steps
// overlap (reads run while resident experts compute), so they need not sum to
// the batch's duration.
struct StepTimes {
  TimeNs routing = 0;
  TimeNs scheduling = 0;
  TimeNs nvme_read = 0;       // first read submitted -> last read completed
  TimeNs host_to_device = 0;  // sum of copy durations
  TimeNs compute = 0;         // sum of expert FFN durations
  TimeNs aggregation = 0;
  TimeNs total = 0;           // batch start -> batch end
};

struct LayerBatchReport {
  uint32_t layer_index = 0;
  size_t tokens = 0;
  uint32_t distinct_experts = 0;  // the batch union
  uint32_t l1_hits = 0;
  uint32_t l2_hits = 0;           // L1 misses served from L2
  uint32_t nvme_reads = 0;        // misses of both tiers
  uint32_t staged = 0;            // experts streamed through a staging slot (a tier could not admit them)
  uint32_t device_staged = 0;     // experts copied to the device staging slot (device compute, not in L1)
  uint64_t read_bytes = 0;
  TimeNs read_latency_sum_ns = 0;  // sum over the batch's reads of submit -> complete (queueing included)
  uint32_t dropped_assignments = 0;  // (token, slot) pairs dropped by expert capacity
  uint32_t failed_experts = 0;       // experts not computed (EngineOptions::isolate_expert_failures)
  uint32_t failed_tokens = 0;        // tokens with a slot routed to one (outputs zeros)
  uint32_t read_retries = 0;         // demand reads submitted again after a transient error (EngineOptions::read_retries)
  uint32_t prefetch_reads = 0;       // prefetches for the next layer submitted during the batch
  uint64_t prefetch_bytes = 0;
  uint32_t prefetch_waits = 0;       // lookups that waited for a prefetch still in flight
  StepTimes step_ns;
};

class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  virtual void OnRouting(const RoutingDecision&) {}
  virtual void OnLayerBatch(const LayerBatchReport&) {}
};

}  // namespace colibri::engine
