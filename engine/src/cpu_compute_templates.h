// The CpuCompute kernels, written once over an ISA's lane types and
// instantiated by each ISA translation unit (cpu_compute_{scalar,avx2,avx512}.cc).
//
// Include this header last, after the unit's COLIBRI_TARGET_BEGIN (cpu_isa_target.h) and after
// every other header, so no standard-library code is compiled for the wider
// ISA. Everything here is in an unnamed namespace on purpose: each unit gets
// its own copy, so the linker can never hand an AVX-512 instantiation to a
// caller on another path. No standard-library function is called here.
//
// A Dot16 lane type holds the 16 accumulator lanes of a dot product:
//   Vec; kRows, kTokens (register block: rows x tokens accumulators);
//   Zero(); LoadF32/LoadBf16/LoadFp16/LoadInt8(p): 16 elements converted to fp32;
//   Fma(a, b, acc) = acc + a x b per lane, fused; Reduce(v): the fixed tree sum.
// A Math lane type holds kWidth independent fp32 values:
//   Vec; kWidth; Load/Store (kWidth floats); Splat; Add, Mul, Div, Fma, Neg;
//   Min(a, b) = a < b ? a : b and Max(a, b) = a > b ? a : b (x86 semantics);
//   RoundEven (nearbyint); Pow2Halves(n, lo, hi): lo = 2^floor(n/2),
//   hi = 2^(n - floor(n/2)) for integral n in [-150, 128] (x86 cvtps2dq rules).
// Every operation is an explicit IEEE operation; no product feeds an addition
// (GCC contracts such pairs into an fma on FMA targets only, which would make
// the paths differ).
#pragma once

#include "cpu_compute_kernels.h"

namespace colibri::engine::cpu_kernels {
namespace {

// ---- fp32 exp and SiLU (the contract is in colibri/engine/fp32_math.h) ----

inline constexpr float kExpMin = -104.0f;
inline constexpr float kExpMax = 89.0f;
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kNegLn2Hi = -0.693359375f;   // 355/512: n x this is exact
inline constexpr float kNegLn2Lo = 2.12194440e-4f;  // -(ln 2 - 355/512)
// exp(r) = 1 + r + r^2 P(r) on [-ln2/2, ln2/2] (Cephes expf coefficients).
inline constexpr float kExpPoly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                      4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

// e^x = mantissa x lo x hi, the three factors kept apart so SiLU can fuse the last step.
template <class M>
struct ExpFactors {
  typename M::Vec mantissa, lo, hi;
};

template <class M>
ExpFactors<M> ExpSplit(typename M::Vec x) {
  using V = typename M::Vec;
  x = M::Max(M::Splat(kExpMin), M::Min(M::Splat(kExpMax), x));  // NaN passes through
  const V n = M::RoundEven(M::Mul(x, M::Splat(kLog2e)));
  V r = M::Fma(n, M::Splat(kNegLn2Hi), x);
  r = M::Fma(n, M::Splat(kNegLn2Lo), r);
  V p = M::Splat(kExpPoly[0]);
  for (int i = 1; i < 6; ++i) p = M::Fma(p, r, M::Splat(kExpPoly[i]));
  ExpFactors<M> f;
  f.mantissa = M::Add(M::Fma(p, M::Mul(r, r), r), M::Splat(1.0f));
  M::Pow2Halves(n, &f.lo, &f.hi);
  return f;
}

template <class M>
typename M::Vec Exp(typename M::Vec x) {
  const ExpFactors<M> f = ExpSplit<M>(x);
  return M::Mul(M::Mul(f.mantissa, f.lo), f.hi);
}

template <class M>
typename M::Vec Silu(typename M::Vec z) {
  const ExpFactors<M> f = ExpSplit<M>(M::Neg(z));
  return M::Div(z, M::Fma(M::Mul(f.mantissa, f.lo), f.hi, M::Splat(1.0f)));
}

template <class M>
void SiluMulRows(float* gate, const float* up, size_t count) {
  for (size_t i = 0; i < count; i += M::kWidth) {
    M::Store(gate + i, M::Mul(Silu<M>(M::Load(gate + i)), M::Load(up + i)));
  }
}

// ---- dot products ----

template <DType kType>
inline constexpr size_t kElementBytes = kType == DType::kFp32   ? 4
                                        : kType == DType::kInt8 ? 1
                                                                : 2;

template <class L, DType kType>
typename L::Vec Load16(const std::byte* p) {
  if constexpr (kType == DType::kFp32) {
    return L::LoadF32(p);
  } else if constexpr (kType == DType::kBf16) {
    return L::LoadBf16(p);
  } else if constexpr (kType == DType::kFp16) {
    return L::LoadFp16(p);
  } else {
    return L::LoadInt8(p);
  }
}

// acc[r][t] += w[r][c..c+16) x x[t][c..c+16), lane by lane (the pointer
// arrays stay constant across chunks so they live in registers).
template <class L, DType kType, int R, int T>
inline void AccumulateChunk(const std::byte* const (&w)[R], const float* const (&x)[T], size_t c,
                            typename L::Vec (&acc)[R][T]) {
  typename L::Vec wv[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) wv[r] = Load16<L, kType>(w[r] + c * kElementBytes<kType>);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const typename L::Vec xv = L::LoadF32(x[t] + c);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][t] = L::Fma(wv[r], xv, acc[r][t]);
  }
}

// Tokens per panel and columns per slice of the blocked loop below: a row
// group's slice (R x 512 weights) stays in L1 while every token block of the
// panel passes over it; the accumulators of the panel wait in `state`.
inline constexpr size_t kPanelTokens = 64;
inline constexpr size_t kSliceCols = 512;

// Rows [row, row + R) x tokens [token, token + T), columns [begin, end) (end
// is a multiple of 16 or m.cols): continues the lanes held in
// state[t * R + r]. Columns past m.cols are zero-padded (the activations are
// padded already). With `prefetch`, also prefetches the same columns of the
// next row group: short rows (int8, bf16) otherwise leave the hardware
// prefetcher too little time to ramp up on each new row.
template <class L, DType kType, int R, int T>
void AccumulateSlice(const Matrix& m, uint32_t row, const Activations& x, size_t token, size_t begin, size_t end,
                     bool prefetch, typename L::Vec* state) {
  constexpr size_t kBytes = kElementBytes<kType>;
  const std::byte* w[R];
  const float* xt[T];
  typename L::Vec acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    w[r] = m.data + size_t{row + r} * m.cols * kBytes;
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = state[t * R + r];
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) xt[t] = x.data + (token + t) * x.stride;
  const size_t full_end = end - end % kLanes;
  const size_t next_group_bytes = size_t{R} * m.cols * kBytes;
  for (size_t c = begin; c < full_end; c += kLanes) {
    if (prefetch && (c * kBytes) % 64 == 0) {  // once per cache line: the next row group, same column
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) __builtin_prefetch(w[r] + next_group_bytes + c * kBytes);
    }
    AccumulateChunk<L, kType, R, T>(w, xt, c, acc);
  }
  if (full_end != end) {  // the row's last elements, zero-padded to 16
    const size_t tail = end - full_end;
    alignas(64) std::byte padded[R][kLanes * kBytes];
    const std::byte* wp[R];
    const float* xp[T];
    for (int r = 0; r < R; ++r) {
      __builtin_memset(padded[r], 0, sizeof(padded[r]));
      __builtin_memcpy(padded[r], w[r] + full_end * kBytes, tail * kBytes);
      wp[r] = padded[r];
    }
    for (int t = 0; t < T; ++t) xp[t] = xt[t] + full_end;
    AccumulateChunk<L, kType, R, T>(wp, xp, 0, acc);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) state[t * R + r] = acc[r][t];
  }
}

// One group of R rows against every token: per panel of tokens, per column
// slice, per block of L::kTokens tokens. Each (row, token) lane still sees its
// columns in increasing order, so the blocking changes the speed only.
template <class L, DType kType, int R>
void DotRowGroup(const Matrix& m, uint32_t row, const Activations& x, const Output& out) {
  constexpr int T = L::kTokens;
  typename L::Vec state[kPanelTokens * R];
  for (size_t panel = 0; panel < x.tokens; panel += kPanelTokens) {
    const size_t tokens = x.tokens - panel < kPanelTokens ? x.tokens - panel : kPanelTokens;
    for (size_t i = 0; i < tokens * R; ++i) state[i] = L::Zero();
    for (size_t begin = 0; begin < m.cols; begin += kSliceCols) {
      const size_t end = m.cols - begin < kSliceCols ? m.cols : begin + kSliceCols;
      size_t t = 0;
      for (; t + T <= tokens; t += T) {
        AccumulateSlice<L, kType, R, T>(m, row, x, panel + t, begin, end, t == 0, state + t * R);
      }
      for (; t < tokens; ++t) AccumulateSlice<L, kType, R, 1>(m, row, x, panel + t, begin, end, t == 0, state + t * R);
    }
    for (int r = 0; r < R; ++r) {
      float scale = 1.0f;
      if constexpr (kType == DType::kInt8) __builtin_memcpy(&scale, m.scales + 4 * size_t{row + r}, 4);
      for (size_t t = 0; t < tokens; ++t) {
        float sum = L::Reduce(state[t * R + r]);
        if constexpr (kType == DType::kInt8) sum = sum * scale;
        out.data[(panel + t) * out.stride + row + r] = sum;
      }
    }
  }
}

template <class L, DType kType>
void DotRowsOfType(const Matrix& m, uint32_t row_begin, uint32_t row_end, const Activations& x, const Output& out) {
  constexpr int R = L::kRows;
  uint32_t row = row_begin;
  for (; row + R <= row_end; row += R) DotRowGroup<L, kType, R>(m, row, x, out);
  for (; row < row_end; ++row) DotRowGroup<L, kType, 1>(m, row, x, out);
}

template <class L>
void DotRows(const Matrix& m, uint32_t row_begin, uint32_t row_end, const Activations& x, const Output& out) {
  switch (m.dtype) {
    case DType::kFp32:
      return DotRowsOfType<L, DType::kFp32>(m, row_begin, row_end, x, out);
    case DType::kBf16:
      return DotRowsOfType<L, DType::kBf16>(m, row_begin, row_end, x, out);
    case DType::kFp16:
      return DotRowsOfType<L, DType::kFp16>(m, row_begin, row_end, x, out);
    case DType::kInt8:
      return DotRowsOfType<L, DType::kInt8>(m, row_begin, row_end, x, out);
  }
}

}  // namespace
}  // namespace colibri::engine::cpu_kernels
