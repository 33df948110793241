// Kernel entry points of CpuCompute, one set per ISA path
// (cpu_compute_scalar.cc, cpu_compute_avx2.cc, cpu_compute_avx512.cc). The
// arithmetic contract is in colibri/engine/cpu_compute.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "colibri/engine/cpu_compute.h"
#include "colibri/engine/dtype.h"

namespace colibri::engine::cpu_kernels {

// Lanes of every dot product, and the padding unit of rows and activations.
inline constexpr uint32_t kLanes = 16;

inline constexpr size_t PaddedLength(size_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

// A row-major rows x cols weight matrix of one dtype.
struct Matrix {
  DType dtype = DType::kFp32;
  const std::byte* data = nullptr;
  const std::byte* scales = nullptr;  // int8: one fp32 per row; otherwise unused
  uint32_t cols = 0;
};

// `tokens` fp32 vectors, `stride` floats apart, each zero-padded from the
// matrix's cols to PaddedLength(cols) (stride >= that).
struct Activations {
  const float* data = nullptr;
  size_t stride = 0;
  size_t tokens = 0;
};

// Output element (token t, row r) lives at data[t * stride + r].
struct Output {
  float* data = nullptr;
  size_t stride = 0;
};

struct KernelSet {
  CpuIsa isa;
  // out[t][r] = dot(row r, x[t]) (x scale for int8) for r in [row_begin, row_end), every token.
  void (*dot_rows)(const Matrix& m, uint32_t row_begin, uint32_t row_end, const Activations& x, const Output& out);
  // gate[i] = SiluF32(gate[i]) x up[i] for i < count; count is a multiple of kLanes.
  void (*silu_mul)(float* gate, const float* up, size_t count);
};

// The getters are safe on any CPU; the kernels they return run only where
// CpuIsaSupported(isa) holds.
const KernelSet& ScalarKernels();
const KernelSet& Avx2Kernels();
const KernelSet& Avx512Kernels();

}  // namespace colibri::engine::cpu_kernels
