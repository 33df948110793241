// HostWorkModel: how long the engine's own host work takes, on a modelled
// clock. The real engine spends real time routing (scoring and top-k),
// scheduling (the batch union, lookups, slot choices, read submission),
// gathering and scattering each expert's rows, and aggregating outputs; on a
// SimEventLoop that work is instant unless a model says otherwise. With
// EngineBackends::host_work set, the engine moves its loop's clock
// (EventLoop::WaitUntil) by each step's modelled cost where the real engine
// does that work, and reports it in the step's time:
//  - routing: Execute with a given (replayed) routing charges RoutingNs with
//    gate_charged = false (the gate GEMV the recorded run computed, plus
//    scoring); Forward charges it with gate_charged = true after the compute
//    backend's GateGemv (which keeps its own time);
//  - scheduling: after the lookups, before the reads are submitted;
//  - read submission: before each read (demand or prefetch) that the storage
//    issues at once (fewer than its queue depth outstanding); a read that
//    waits inside the backend is issued, on the real engine, while the engine
//    waits for a completion, which this does not charge;
//  - gather: before each expert's FFN (its inputs gathered, outputs scattered);
//  - aggregation: at the end of the batch.
// Meant for modelled runs (a model has no business on the real loop, whose
// clock moves by itself). sim/ implements it from a machine profile's
// measured host_work (sim_host_work.h).
// Ownership: the engine borrows it. Thread-safety: const methods, called on
// the engine's thread.
#pragma once

#include <cstddef>
#include <cstdint>

#include "colibri/engine/clock.h"

namespace colibri::engine {

class HostWorkModel {
 public:
  virtual ~HostWorkModel() = default;
  // Routing `tokens` over `experts` with hidden size `hidden`; the gate GEMV
  // is included unless `gate_charged` (the compute backend already kept its time).
  virtual TimeNs RoutingNs(size_t tokens, uint32_t experts, uint32_t hidden, bool gate_charged) const = 0;
  // Scheduling a batch of `tokens` x `top_k` assignments over `distinct_experts`
  // of which `reads` need an NVMe read.
  virtual TimeNs SchedulingNs(size_t tokens, uint32_t top_k, uint32_t distinct_experts, uint32_t reads) const = 0;
  // Handing one read of `bytes` to the storage (the submission system call)
  // while `in_flight` other reads are outstanding.
  virtual TimeNs ReadSubmitNs(uint64_t bytes, size_t in_flight) const = 0;
  // Gathering `rows` input rows of `hidden` floats for one expert and scattering its outputs.
  virtual TimeNs GatherNs(size_t rows, uint32_t hidden) const = 0;
  // Summing `tokens` x `top_k` weighted expert outputs of `hidden` floats.
  virtual TimeNs AggregationNs(size_t tokens, uint32_t top_k, uint32_t hidden) const = 0;
};

}  // namespace colibri::engine
