// Kernel launchers, compiled by nvcc (kernels.cu) and called from device.cc.
// Private to colibri_cuda: this is the only header that names CUDA types.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace colibri::cuda::detail {

// Enqueues y[i] += a * x[i] for i < n on `stream`; x and y are device
// pointers. Returns the launch error (cudaSuccess when enqueued).
cudaError_t LaunchScaleAdd(const float* x, float a, float* y, size_t n, cudaStream_t stream);

}  // namespace colibri::cuda::detail
