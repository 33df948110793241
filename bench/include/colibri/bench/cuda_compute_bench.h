// The `colibri bench compute --compute cuda` suite (docs/BENCHMARKS.md):
// CudaCompute's expert FFN per dtype and tokens per call as the engine calls
// it (CudaFfnBench::TimeExpertFfn, x and y copied on every call), against
// cuBLAS GEMMs of the same shapes on device-resident data measured in the
// same run (missing cuBLAS leaves the ratio null), plus the device memory
// bandwidth (a device-to-device copy). Goal: ours / cuBLAS >= 0.8 at 64
// tokens or more. With profile_out, the figures are written as hardware
// profiles (profile_out.h).
//
// Ownership: the call owns its CudaFfnBench. Thread-safety: one thread.
// Errors: kInvalidArgument for empty lists, zero sizes or a non-positive
// duration; CudaFfnBench's (kNotFound "no CUDA device: ...", kUnsupported
// "built without CUDA"); the profile writers'. cuBLAS missing or refusing a
// GEMM is a note in the figures, not an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "colibri/bench/harness.h"
#include "colibri/engine/dtype.h"
#include "colibri/status.h"

namespace colibri::bench {

struct CudaComputeBenchOptions {
  std::vector<engine::DType> dtypes;
  uint32_t hidden = 2048;
  uint32_t intermediate = 768;
  std::vector<uint32_t> batches;              // tokens per call
  std::optional<uint64_t> working_set_bytes;  // unset: BeyondCacheBytes(the GPU's L2)
  double seconds = 0.3;                       // per window
  int repeats = 5;
  int cuda_device = 0;
  std::string profile_out;                    // a directory to write profiles into; empty: none
};

// The suite's figures: device, working_set_bytes,
// timing_includes_host_device_copies, timing, int8_note, cublas, device_copy,
// goal, results (per dtype and batch: ours, cublas, ratio_over_cublas,
// goal_applies, goal_met, cublas_note when cuBLAS gave no figure),
// profiles_written. Notes: where cuBLAS was found (or every place tried).
// Progress: one step per dtype.
Result<Json> RunCudaComputeBench(const CudaComputeBenchOptions& options, const Observer& observer = {});

}  // namespace colibri::bench
