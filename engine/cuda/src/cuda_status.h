// CUDA errors as Status values, shared by colibri_cuda's sources (private:
// names CUDA types). Thread-safety: as the CUDA runtime (per-thread device).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "colibri/status.h"

namespace colibri::cuda::detail {

// "<description> (<cudaErrorName>)".
inline std::string CudaErrorText(cudaError_t error) {
  return std::string(cudaGetErrorString(error)) + " (" + cudaGetErrorName(error) + ")";
}

// kInternal "CUDA <what>: <error>"; clears a non-sticky error so later calls start clean.
inline Status CudaFailure(const std::string& what, cudaError_t error) {
  cudaGetLastError();
  return Status::Internal("CUDA " + what + ": " + CudaErrorText(error));
}

// Clears the thread's pending error when it is cudaErrorNotReady, the answer
// cudaEventQuery/cudaStreamQuery give for work still in flight (not a
// failure), so that it is not later read as some other call's error. Any
// other pending error is left for its owner.
inline void ConsumeNotReady() {
  if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
}

// Makes `device` current on the calling thread.
inline Status UseDevice(int device) {
  const cudaError_t error = cudaSetDevice(device);
  return error == cudaSuccess ? Status::Ok() : CudaFailure("cudaSetDevice(" + std::to_string(device) + ")", error);
}

// cudaMalloc of `bytes` on the current device (`device` names it in
// messages). Out of memory is kInvalidArgument "CUDA device D cannot hold
// <what> of N bytes (F of T bytes free): <error>"; other failures kInternal.
inline Result<void*> DeviceMalloc(int device, uint64_t bytes, const std::string& what) {
  void* memory = nullptr;
  const cudaError_t error = cudaMalloc(&memory, bytes);
  if (error == cudaSuccess) return memory;
  if (error != cudaErrorMemoryAllocation) return CudaFailure("cudaMalloc of " + std::to_string(bytes) + " bytes", error);
  cudaGetLastError();
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  cudaGetLastError();
  return Status::InvalidArgument("CUDA device " + std::to_string(device) + " cannot hold " + what + " of " +
                                 std::to_string(bytes) + " bytes (" + std::to_string(free_bytes) + " of " +
                                 std::to_string(total_bytes) + " bytes free): " + CudaErrorText(error));
}

}  // namespace colibri::cuda::detail
