// The `colibri bench compute` suite on the CPU (docs/BENCHMARKS.md):
// CpuCompute's expert FFN per dtype, tokens per call and thread count
// (TimeCpuExpertFfn), against references measured in the same run: the
// one-thread STREAM copy (the effective bandwidth of memory-bound calls) and
// the OpenBLAS fp32 FFN (GFLOP/s). Experts are cycled over a working set
// beyond the last-level cache. The GPU suite is cuda_compute_bench.h.
//
// Ownership: the call owns every buffer it times. Thread-safety: one call at
// a time per process (OpenBLAS's thread count is process-wide). Errors:
// kInvalidArgument for empty lists, zero sizes or a non-positive duration,
// and those of the harnesses (cpu_ffn.h, openblas_ffn.h). An OpenBLAS that
// fell back to old kernels is a warning to the Observer, not an error.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "colibri/bench/harness.h"
#include "colibri/engine/cpu_compute.h"
#include "colibri/engine/dtype.h"
#include "colibri/status.h"

namespace colibri::bench {

struct CpuComputeBenchOptions {
  std::vector<engine::DType> dtypes;
  uint32_t hidden = 2048;  // Qwen3-30B-A3B's expert
  uint32_t intermediate = 768;
  std::vector<uint32_t> batches;  // tokens per call
  std::vector<uint32_t> threads;
  std::optional<engine::CpuIsa> isa;         // unset: the best this CPU runs
  std::optional<uint64_t> working_set_bytes;  // unset: BeyondCacheBytes(the last-level cache)
  double seconds = 0.3;                       // per window
  int repeats = 5;                            // windows (the best is reported)
};

// The suite's figures: machine, working_set_bytes, stream_copy_1_thread,
// openblas_core, openblas_sgemm_fp32 (per batch and thread count), results
// (per dtype, batch and thread count, with bandwidth_over_stream and
// gflops_over_openblas). Progress: one step per dtype plus the references.
Result<Json> RunCpuComputeBench(const CpuComputeBenchOptions& options, const Observer& observer = {});

}  // namespace colibri::bench
