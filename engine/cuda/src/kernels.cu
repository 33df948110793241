// Colibri's CUDA kernels. Keep this file free of project headers: it is the
// only translation unit nvcc compiles.
#include <algorithm>

#include "kernel_launch.h"
#include "kernels.h"

namespace colibri::cuda::detail {
namespace {

__global__ void ScaleAddKernel(const float* __restrict__ x, float a, float* __restrict__ y, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] += a * x[i];
  }
}

}  // namespace

cudaError_t LaunchScaleAdd(const float* x, float a, float* y, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  constexpr unsigned kThreads = 256;
  constexpr size_t kMaxBlocks = 1 << 16;  // the grid-stride loop covers the rest
  const auto blocks = static_cast<unsigned>(std::min((n + kThreads - 1) / kThreads, kMaxBlocks));
  return LaunchKernel(dim3(blocks), dim3(kThreads), stream, ScaleAddKernel, x, a, y, n);
}

}  // namespace colibri::cuda::detail
