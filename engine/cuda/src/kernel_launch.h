// One kernel launch that reports its own status, shared by the .cu files
// (kernels.cu, expert_kernels.cu). Free of project headers: nvcc compiles it.
//
// A `kernel<<<...>>>` launch followed by cudaGetLastError() reports any
// earlier error still pending on the thread (for instance one a failed
// runtime call left behind) as the launch's own; cudaLaunchKernelEx returns
// the status of this launch alone. A failed launch also leaves its error
// pending: callers clear it (detail::CudaFailure does).
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace colibri::cuda::detail {

// Enqueues kernel(args...) on `stream` with `grid` x `block` threads and no
// dynamic shared memory; the launch's own status (cudaSuccess when enqueued).
template <typename... Params, typename... Args>
cudaError_t LaunchKernel(dim3 grid, dim3 block, cudaStream_t stream, void (*kernel)(Params...), Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = nullptr;
  config.numAttrs = 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace colibri::cuda::detail
