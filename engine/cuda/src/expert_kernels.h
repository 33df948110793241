// Launchers of the expert FFN and gate GEMV kernels (expert_kernels.cu),
// called by CudaCompute (cuda_compute.cc). Private to colibri_cuda; names
// CUDA types, so only colibri_cuda's own sources include it.
//
// The arithmetic is CpuCompute's, operation for operation (the contract is in
// colibri/engine/cpu_compute.h and fp32_math.h), so the outputs are meant to
// be bit-identical to the CPU oracle:
//  - one output element (row r, token t) is a dot product kept in 16 fp32
//    lanes: element i goes to lane i mod 16 by a fused multiply-add, in
//    increasing i (16 threads of a half-warp, thread j owning lane j); the
//    lanes are then summed in the tree lane[i] += lane[i + s], s = 8, 4, 2, 1
//    (register shuffles within the half-warp); int8: the sum x the row scale;
//  - SwiGLU: h = SiluF32(gate) x up with ExpF32's exact operation sequence;
//  - every operation is an explicit round-to-nearest IEEE intrinsic
//    (__fmaf_rn, __fadd_rn, __fmul_rn, __fdiv_rn), so nvcc cannot contract or
//    reorder anything, and denormals are kept (no fast math, no flush to zero).
// No atomics and no data-dependent order: outputs are bit-identical run to run.
// Weights are read once per row per tile of up to 8 tokens.
//
// Pointers are device pointers. Errors: the launch error (cudaSuccess when
// enqueued); faults inside a kernel surface at the next synchronisation.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace colibri::cuda::detail {

// Weight element types; the numeric values are engine::DType's (this header
// is compiled by nvcc, which does not see the engine headers).
enum class WeightType : uint8_t { kFp32 = 0, kBf16 = 1, kFp16 = 2, kInt8 = 3 };

// A row-major rows x cols weight matrix in device memory. `data` is aligned
// to its element size; int8 matrices have `rows` fp32 scales (4-byte aligned).
struct DeviceMatrix {
  WeightType type = WeightType::kFp32;
  const void* data = nullptr;
  const float* scales = nullptr;  // int8 only
  uint32_t rows = 0;
  uint32_t cols = 0;
};

// h[t * gate.rows + r] = SiluF32(dot(gate row r, x[t])) x dot(up row r, x[t])
// for r < gate.rows, t < tokens; x is tokens x gate.cols fp32, dense. gate and
// up must have the same type and shape.
cudaError_t LaunchGateUpSilu(const DeviceMatrix& gate, const DeviceMatrix& up, const float* x, size_t tokens,
                             float* h, cudaStream_t stream);

// out[t * m.rows + r] = dot(m row r, x[t]), plus bias[r] first when bias is
// not null (bias + dot, one rounding), for r < m.rows, t < tokens; x is
// tokens x m.cols fp32, dense.
cudaError_t LaunchDotRows(const DeviceMatrix& m, const float* x, size_t tokens, const float* bias, float* out,
                          cudaStream_t stream);

}  // namespace colibri::cuda::detail
