// ComputeBackend: runs expert FFNs and the router's gate GEMV.
//
// Implementations: CpuCompute (the reference oracle, engine/src/cpu_compute),
// CudaCompute (engine/cuda, when built with CUDA) and the modelled SimCompute. Every implementation of one
// dtype must give bit-identical outputs for the same inputs whatever the
// thread count (fixed reduction order, no atomics in sums).
// Thread-safety: one backend is used by one engine thread at a time; it may
// use worker threads internally.
#pragma once

#include <cstddef>
#include <cstdint>

#include "colibri/engine/expert_layout.h"
#include "colibri/status.h"

namespace colibri::engine {

struct ComputeCaps {
  const char* name = "";
  bool device_memory = false;  // true when expert blocks must be in device memory (L1)
  bool reads_data = true;      // false: a model that only keeps time (inputs, weights and outputs untouched)
};

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;
  virtual const ComputeCaps& caps() const = 0;

  // SwiGLU expert FFN for `tokens` rows: y[t] = W_down (silu(W_gate x[t]) * (W_up x[t])).
  // x: tokens x H fp32, y: tokens x H fp32 (overwritten). fp32 accumulation;
  // int8 weights are dequantised in the kernel with their per-row scales.
  virtual Status ExpertFfn(const ExpertView& expert, const float* x, size_t tokens, float* y) = 0;

  // Router logits: logits[t][e] = bias[e] + sum_h weight[e][h] x[t][h], fp32,
  // weight E x H row-major, bias E (may be null).
  virtual Status GateGemv(const float* weight, const float* bias, uint32_t experts, uint32_t hidden, const float* x,
                          size_t tokens, float* logits) = 0;
};

// The argument checks every ComputeBackend applies, so all reject the same
// calls alike: an expert view with a layout and a block, a non-empty shape and
// a known dtype (InvalidArgument / Unsupported); input and output vectors
// present whenever tokens > 0 (InvalidArgument).
Status ValidateExpertView(const ExpertView& expert);
Status ValidateComputeVectors(const float* x, size_t tokens, const float* out);

}  // namespace colibri::engine
