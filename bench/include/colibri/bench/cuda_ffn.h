// CudaCompute's expert FFN timed as the engine calls it, and the cuBLAS GEMMs
// of the same shape as its reference (`colibri bench compute --compute cuda`;
// a GPU compute calibration reuses it). The expert blocks (MakeExpertSet's
// values) live in device memory, cycled over a working set beyond the GPU's
// L2; each timed call copies x (pageable host memory) to the device and y
// back, as the engine does. The cuBLAS reference (cuda::CublasFfnReference:
// cublasGemmEx in the weight dtype on device-resident data, no copies) is
// loaded at run time; without it, cublas().available is false and its
// timing is kUnsupported. No CUDA types here: without CUDA
// (COLIBRI_HAVE_CUDA 0) Create fails with kUnsupported "built without CUDA".
//
// Ownership: a CudaFfnBench owns its CudaCompute, the cuBLAS reference and
// the loaded experts' device memory. Thread-safety: none; one thread uses an
// instance. Errors: those of OpenCudaDevice (kNotFound "no CUDA device: ..."),
// kInvalidArgument for zero sizes, a working set the device cannot hold or
// timing before LoadExperts, kUnsupported when cuBLAS is missing or refuses
// the GEMM, kInternal for other CUDA failures.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "colibri/bench/call_timing.h"
#include "colibri/engine/dtype.h"
#include "colibri/engine/expert_layout.h"
#include "colibri/status.h"

namespace colibri::bench {

// Where cuBLAS came from, or why it is missing.
struct CublasInfo {
  bool available = false;
  std::string library;             // the path opened, or the name the loader resolved; empty when missing
  int version = 0;                 // cublasGetVersion; 0 when unknown
  std::string unavailable_reason;  // every place tried, when missing
};

// The best window of cuBLAS FFNs (three GEMMs each).
struct GemmFfnWindow {
  uint64_t ffns = 0;
  double seconds = 0;
  double seconds_per_ffn() const { return ffns > 0 ? seconds / static_cast<double>(ffns) : 0; }
};

class CudaFfnBench {
 public:
  // CudaCompute and the cuBLAS reference on device `device`.
  static Result<std::unique_ptr<CudaFfnBench>> Create(int device);
  ~CudaFfnBench();
  CudaFfnBench(const CudaFfnBench&) = delete;
  CudaFfnBench& operator=(const CudaFfnBench&) = delete;

  const CublasInfo& cublas() const { return cublas_; }
  // "cublasGemmEx: A=... B=... C=..., CUBLAS_COMPUTE_..." for `dtype`.
  static std::string DescribeCublasGemm(engine::DType dtype);

  // Uploads working_set_bytes / block_bytes + 1 copies of one synthetic expert
  // of `dtype` (replacing those loaded before); returns how many.
  Result<uint64_t> LoadExperts(engine::DType dtype, uint32_t hidden, uint32_t intermediate,
                               uint64_t working_set_bytes);
  const engine::ExpertLayout& layout() const { return layout_; }  // of the loaded experts

  // One warm-up call (it sizes the device scratch), then the best of
  // `repeats` windows of `seconds` of ExpertFfn calls over the loaded experts.
  Result<CallWindow> TimeExpertFfn(uint32_t tokens, double seconds, int repeats);
  // The cuBLAS GEMMs of the loaded shape and dtype over as many weight sets
  // as experts are loaded: warm-up, then the best of `repeats` windows.
  Result<GemmFfnWindow> TimeCublasFfn(uint32_t tokens, double seconds, int repeats);

 private:
  struct Impl;
  explicit CudaFfnBench(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  CublasInfo cublas_;
  engine::ExpertLayout layout_;
};

}  // namespace colibri::bench
