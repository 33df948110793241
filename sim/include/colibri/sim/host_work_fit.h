// Fitting a machine's host work (hardware.h, HostWorkProfile) to the real
// engine's step times: `colibri calibrate` runs the engine on a synthetic
// model and hands every layer batch here. Each step's cost is linear in what
// it handles (sim_host_work.h); each is fitted by non-negative least squares
// (Lawson-Hanson) of the relative error (each batch weighted by 1 / its time)
// over the batches:
//   routing     routing_ns            ~ fixed + ps_per_logit x tokens x experts (gate GEMV included)
//   scheduling  scheduling_ns         ~ fixed + ps_per_expert x distinct
//                                       + ps_per_assignment x tokens x top_k + ps_per_read x reads
//                                       + read_fixed x (reads > 0)
//   gather      gather_ns             ~ fixed x distinct + ps_per_element x tokens x top_k x hidden
//               (the batch's time outside the other steps, the FFNs and the copies: measure it on
//                batches without reads, where nothing else waits)
//   aggregation aggregation_ns        ~ fixed + ps_per_element x tokens x top_k x hidden
// A fit reports its error: the median and largest |predicted - measured| /
// measured over the batches, per step.
// Thread-safety: free functions. Errors: too few batches for a step (fewer
// than its unknowns), non-finite inputs.
#pragma once

#include <cstdint>
#include <vector>

#include "colibri/engine/clock.h"
#include "colibri/sim/hardware.h"
#include "colibri/status.h"

namespace colibri::sim {

// One real layer batch, as the engine reported it, with the gate GEMV's
// measured time for its token count.
struct HostWorkSample {
  uint64_t tokens = 0;
  uint32_t top_k = 0;
  uint32_t experts = 0;
  uint32_t hidden = 0;
  uint32_t distinct = 0;
  uint32_t reads = 0;
  engine::TimeNs routing_ns = 0;      // the routing step (gate GEMV included)
  engine::TimeNs gate_ns = 0;         // the gate GEMV alone (CpuCompute, measured apart)
  engine::TimeNs scheduling_ns = 0;
  engine::TimeNs gather_ns = 0;       // total - routing - scheduling - compute - host_to_device - aggregation
  engine::TimeNs aggregation_ns = 0;
  bool use_for_gather = true;         // false for batches whose gap also holds waits for reads
};

struct StepFitError {
  double median = 0;  // of |predicted - measured| / measured over the batches fitted (measured > 0)
  double max = 0;
  uint64_t batches = 0;
};

struct HostWorkFit {
  HostWorkProfile profile;  // present, figure left for the caller
  StepFitError routing, scheduling, gather, aggregation;
};

// Non-negative least squares: x >= 0 minimising |A x - b|, A rows x columns
// (row-major, rows >= 1). Lawson-Hanson's active set; exact for small problems.
Result<std::vector<double>> NonNegativeLeastSquares(const std::vector<std::vector<double>>& a, const std::vector<double>& b);

Result<HostWorkFit> FitHostWork(const std::vector<HostWorkSample>& samples);

}  // namespace colibri::sim
