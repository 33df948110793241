// The expert FFN and gate GEMV kernels (contract in expert_kernels.h). Keep
// this file free of project headers: nvcc compiles it as C++17.
//
// Work split: a block of 256 threads is 16 half-warps; half-warp w of block
// (bx, by) owns output row 16 bx + w, thread j of it owns dot-product lane j.
// grid.y splits the tokens into spans of 64 (a grid-stride loop covers more
// than 65535 spans); within a span, tokens go in tiles of 8, each thread
// keeping 8 (or, for gate and up, 16) accumulators. Threads whose row is past
// the end compute nothing but still take part in the shuffles, so every
// __shfl_down_sync runs with the whole warp converged.
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "expert_kernels.h"
#include "kernel_launch.h"

namespace colibri::cuda::detail {
namespace {

constexpr uint32_t kLanes = 16;  // CpuCompute's dot-product lanes (cpu_kernels::kLanes)
constexpr uint32_t kThreads = 256;
constexpr uint32_t kRowsPerBlock = kThreads / kLanes;
constexpr int kTileTokens = 8;
constexpr size_t kTokensPerBlock = 64;
constexpr size_t kMaxGridY = 65535;
constexpr unsigned kFullMask = 0xFFFFFFFFu;

// ExpF32's constants (engine/src/cpu_compute_templates.h), digit for digit.
constexpr float kExpMin = -104.0f;
constexpr float kExpMax = 89.0f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kNegLn2Hi = -0.693359375f;
constexpr float kNegLn2Lo = 2.12194440e-4f;
constexpr float kExpPoly0 = 1.9875691500e-4f;
constexpr float kExpPoly1 = 1.3981999507e-3f;
constexpr float kExpPoly2 = 8.3334519073e-3f;
constexpr float kExpPoly3 = 4.1665795894e-2f;
constexpr float kExpPoly4 = 1.6666665459e-1f;
constexpr float kExpPoly5 = 5.0000001201e-1f;

__host__ __device__ constexpr size_t MinSize(size_t a, size_t b) { return a < b ? a : b; }

// One weight, converted exactly to fp32.
template <WeightType kType>
__device__ __forceinline__ float LoadWeight(const void* data, size_t index) {
  if constexpr (kType == WeightType::kFp32) {
    return static_cast<const float*>(data)[index];
  } else if constexpr (kType == WeightType::kBf16) {
    return __uint_as_float(static_cast<uint32_t>(static_cast<const uint16_t*>(data)[index]) << 16);
  } else if constexpr (kType == WeightType::kFp16) {
    return __half2float(__ushort_as_half(static_cast<const unsigned short*>(data)[index]));
  } else {
    return static_cast<float>(static_cast<const int8_t*>(data)[index]);
  }
}

// int8 rows: the lane sum x the row's scale (CpuCompute: sum = sum * scale).
template <WeightType kType>
__device__ __forceinline__ float ScaleRow(float sum, const float* scales, size_t row) {
  if constexpr (kType == WeightType::kInt8) {
    return __fmul_rn(sum, scales[row]);
  } else {
    return sum;
  }
}

// Adds row `row`'s products with tokens [tile, tile + count) of x into this
// thread's lane: columns lane, lane + 16, ... in increasing order.
template <WeightType kType>
__device__ __forceinline__ void AccumulateRow(const void* data, size_t row, uint32_t cols,
                                              const float* __restrict__ x, size_t tile, int count, uint32_t lane,
                                              float (&acc)[kTileTokens]) {
  const size_t row_begin = row * cols;
  for (size_t i = lane; i < cols; i += kLanes) {
    const float w = LoadWeight<kType>(data, row_begin + i);
#pragma unroll
    for (int k = 0; k < kTileTokens; ++k) {
      if (k < count) acc[k] = __fmaf_rn(w, x[(tile + k) * cols + i], acc[k]);
    }
  }
}

// The fixed tree over the 16 lanes of this half-warp: lane[i] += lane[i + s]
// for s = 8, 4, 2, 1; lane 0 ends with the sum. Called by the whole warp.
__device__ __forceinline__ float LaneTreeSum(float v) {
#pragma unroll
  for (int s = kLanes / 2; s >= 1; s /= 2) v = __fadd_rn(v, __shfl_down_sync(kFullMask, v, s, kLanes));
  return v;
}

// e^x as mantissa x lo x hi (ExpSplit of cpu_compute_templates.h).
struct ExpFactors {
  float mantissa;
  float lo;
  float hi;
};

__device__ __forceinline__ ExpFactors ExpSplit(float x) {
  x = kExpMax < x ? kExpMax : x;  // Min(kExpMax, x), x86 rules: NaN passes through
  x = kExpMin > x ? kExpMin : x;  // Max(kExpMin, x)
  const float n = rintf(__fmul_rn(x, kLog2e));  // round half to even
  float r = __fmaf_rn(n, kNegLn2Hi, x);
  r = __fmaf_rn(n, kNegLn2Lo, r);
  float p = kExpPoly0;
  p = __fmaf_rn(p, r, kExpPoly1);
  p = __fmaf_rn(p, r, kExpPoly2);
  p = __fmaf_rn(p, r, kExpPoly3);
  p = __fmaf_rn(p, r, kExpPoly4);
  p = __fmaf_rn(p, r, kExpPoly5);
  ExpFactors f;
  f.mantissa = __fadd_rn(__fmaf_rn(p, __fmul_rn(r, r), r), 1.0f);
  // cvtps2dq: NaN -> INT32_MIN (a GPU conversion would give 0). n is in [-150, 128] otherwise.
  const int32_t k = n != n ? INT32_MIN : static_cast<int32_t>(n);
  const int32_t k_lo = k >> 1;  // floor(k / 2)
  f.lo = __uint_as_float(static_cast<uint32_t>(k_lo + 127) << 23);
  f.hi = __uint_as_float(static_cast<uint32_t>(k - k_lo + 127) << 23);
  return f;
}

// SiluF32 (fp32_math.h): z / fma(mantissa x lo, hi, 1) with the parts of e^-z.
__device__ __forceinline__ float Silu(float z) {
  const ExpFactors f = ExpSplit(-z);
  return __fdiv_rn(z, __fmaf_rn(__fmul_rn(f.mantissa, f.lo), f.hi, 1.0f));
}

template <WeightType kType>
__global__ void __launch_bounds__(kThreads)
    GateUpSiluKernel(DeviceMatrix gate, DeviceMatrix up, const float* __restrict__ x, size_t tokens,
                     float* __restrict__ h) {
  const uint32_t lane = threadIdx.x % kLanes;
  const size_t row = static_cast<size_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kLanes;
  const bool active = row < gate.rows;
  const size_t span_step = static_cast<size_t>(gridDim.y) * kTokensPerBlock;
  for (size_t begin = static_cast<size_t>(blockIdx.y) * kTokensPerBlock; begin < tokens; begin += span_step) {
    const size_t end = MinSize(begin + kTokensPerBlock, tokens);
    for (size_t tile = begin; tile < end; tile += kTileTokens) {
      const int count = static_cast<int>(MinSize(end - tile, kTileTokens));
      float g[kTileTokens] = {};  // +0, as CpuCompute's lanes start
      float u[kTileTokens] = {};
      if (active) {
        AccumulateRow<kType>(gate.data, row, gate.cols, x, tile, count, lane, g);
        AccumulateRow<kType>(up.data, row, up.cols, x, tile, count, lane, u);
      }
#pragma unroll
      for (int k = 0; k < kTileTokens; ++k) {
        const float gate_sum = LaneTreeSum(g[k]);
        const float up_sum = LaneTreeSum(u[k]);
        if (active && lane == 0 && k < count) {
          const float gate_value = ScaleRow<kType>(gate_sum, gate.scales, row);
          const float up_value = ScaleRow<kType>(up_sum, up.scales, row);
          h[(tile + k) * gate.rows + row] = __fmul_rn(Silu(gate_value), up_value);
        }
      }
    }
  }
}

template <WeightType kType>
__global__ void __launch_bounds__(kThreads)
    DotRowsKernel(DeviceMatrix m, const float* __restrict__ x, size_t tokens, const float* __restrict__ bias,
                  float* __restrict__ out) {
  const uint32_t lane = threadIdx.x % kLanes;
  const size_t row = static_cast<size_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kLanes;
  const bool active = row < m.rows;
  const size_t span_step = static_cast<size_t>(gridDim.y) * kTokensPerBlock;
  for (size_t begin = static_cast<size_t>(blockIdx.y) * kTokensPerBlock; begin < tokens; begin += span_step) {
    const size_t end = MinSize(begin + kTokensPerBlock, tokens);
    for (size_t tile = begin; tile < end; tile += kTileTokens) {
      const int count = static_cast<int>(MinSize(end - tile, kTileTokens));
      float acc[kTileTokens] = {};
      if (active) AccumulateRow<kType>(m.data, row, m.cols, x, tile, count, lane, acc);
#pragma unroll
      for (int k = 0; k < kTileTokens; ++k) {
        const float sum = LaneTreeSum(acc[k]);
        if (active && lane == 0 && k < count) {
          float value = ScaleRow<kType>(sum, m.scales, row);
          if (bias != nullptr) value = __fadd_rn(bias[row], value);
          out[(tile + k) * m.rows + row] = value;
        }
      }
    }
  }
}

dim3 GridFor(uint32_t rows, size_t tokens) {
  const uint64_t row_blocks = (uint64_t{rows} + kRowsPerBlock - 1) / kRowsPerBlock;  // < 2^28
  const size_t spans = MinSize((tokens + kTokensPerBlock - 1) / kTokensPerBlock, kMaxGridY);
  return dim3(static_cast<unsigned>(row_blocks), static_cast<unsigned>(spans));
}

bool Usable(const DeviceMatrix& m) {
  return m.data != nullptr && m.rows > 0 && m.cols > 0 &&
         (m.type != WeightType::kInt8 || m.scales != nullptr);
}

// Calls `launch` with the weight type as a compile-time constant
// (std::integral_constant), so each kernel is instantiated per type; the
// launch's own status (LaunchKernel), or cudaErrorInvalidValue for an
// unknown type.
template <typename Launch>
cudaError_t LaunchForType(WeightType type, Launch&& launch) {
  switch (type) {
    case WeightType::kFp32:
      return launch(std::integral_constant<WeightType, WeightType::kFp32>{});
    case WeightType::kBf16:
      return launch(std::integral_constant<WeightType, WeightType::kBf16>{});
    case WeightType::kFp16:
      return launch(std::integral_constant<WeightType, WeightType::kFp16>{});
    case WeightType::kInt8:
      return launch(std::integral_constant<WeightType, WeightType::kInt8>{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t LaunchGateUpSilu(const DeviceMatrix& gate, const DeviceMatrix& up, const float* x, size_t tokens,
                             float* h, cudaStream_t stream) {
  if (tokens == 0) return cudaSuccess;
  if (!Usable(gate) || !Usable(up) || gate.type != up.type || gate.rows != up.rows || gate.cols != up.cols ||
      x == nullptr || h == nullptr) {
    return cudaErrorInvalidValue;
  }
  const dim3 grid = GridFor(gate.rows, tokens);
  return LaunchForType(gate.type, [&](auto type) {
    return LaunchKernel(grid, dim3(kThreads), stream, GateUpSiluKernel<decltype(type)::value>, gate, up, x, tokens, h);
  });
}

cudaError_t LaunchDotRows(const DeviceMatrix& m, const float* x, size_t tokens, const float* bias, float* out,
                          cudaStream_t stream) {
  if (tokens == 0) return cudaSuccess;
  if (!Usable(m) || x == nullptr || out == nullptr) return cudaErrorInvalidValue;
  const dim3 grid = GridFor(m.rows, tokens);
  return LaunchForType(m.type, [&](auto type) {
    return LaunchKernel(grid, dim3(kThreads), stream, DotRowsKernel<decltype(type)::value>, m, x, tokens, bias, out);
  });
}

}  // namespace colibri::cuda::detail
