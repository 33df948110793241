// AVX2 lane types of CpuCompute (see cpu_compute_templates.h for the
// interface): the 16 dot-product lanes in two 8-lane registers (lanes 0-7 and
// 8-15), and 8-wide math for SiLU. Shared by the AVX2 and AVX-512 units.
// Include only after COLIBRI_TARGET_BEGIN (cpu_isa_target.h) enabling at least avx2, fma, f16c;
// unnamed namespace on purpose (one copy per unit).
#pragma once

#include <immintrin.h>

#include "cpu_compute_kernels.h"

namespace colibri::engine::cpu_kernels {
namespace {

struct Avx2Math {
  using Vec = __m256;
  static constexpr size_t kWidth = 8;
  static Vec Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
  static Vec Splat(float v) { return _mm256_set1_ps(v); }
  static Vec Add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec Mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec Div(Vec a, Vec b) { return _mm256_div_ps(a, b); }
  static Vec Fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec Neg(Vec a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
  static Vec Min(Vec a, Vec b) { return _mm256_min_ps(a, b); }
  static Vec Max(Vec a, Vec b) { return _mm256_max_ps(a, b); }
  static Vec RoundEven(Vec a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static void Pow2Halves(Vec n, Vec* lo, Vec* hi) {
    const __m256i k = _mm256_cvtps_epi32(n);
    const __m256i k_lo = _mm256_srai_epi32(k, 1);
    const __m256i bias = _mm256_set1_epi32(127);
    *lo = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k_lo, bias), 23));
    *hi = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(k, k_lo), bias), 23));
  }
};

struct Avx2Dot16 {
  struct Vec {
    __m256 lo, hi;  // lanes 0-7, 8-15
  };
  static constexpr int kRows = 2;
  static constexpr int kTokens = 3;

  static Vec Zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static Vec LoadF32(const void* p) {
    const float* f = static_cast<const float*>(p);
    return {_mm256_loadu_ps(f), _mm256_loadu_ps(f + 8)};
  }
  static Vec LoadBf16(const void* p) {
    const __m256i raw = _mm256_loadu_si256(static_cast<const __m256i*>(p));
    return {Bf16ToF32(_mm256_castsi256_si128(raw)), Bf16ToF32(_mm256_extracti128_si256(raw, 1))};
  }
  static Vec LoadFp16(const void* p) {
    const __m128i* h = static_cast<const __m128i*>(p);
    return {_mm256_cvtph_ps(_mm_loadu_si128(h)), _mm256_cvtph_ps(_mm_loadu_si128(h + 1))};
  }
  static Vec LoadInt8(const void* p) {
    const __m128i raw = _mm_loadu_si128(static_cast<const __m128i*>(p));
    return {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(raw)),
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(raw, 8)))};
  }
  static Vec Fma(const Vec& a, const Vec& b, const Vec& acc) {
    return {_mm256_fmadd_ps(a.lo, b.lo, acc.lo), _mm256_fmadd_ps(a.hi, b.hi, acc.hi)};
  }
  static float Reduce(const Vec& v) { return ReduceHalves(v.lo, v.hi); }

  // The fixed tree over lanes 0-7 (lo) and 8-15 (hi): steps 8, 4, 2, 1.
  static float ReduceHalves(__m256 lo, __m256 hi) {
    const __m256 s8 = _mm256_add_ps(lo, hi);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
  }

 private:
  static __m256 Bf16ToF32(__m128i bits) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
  }
};

}  // namespace
}  // namespace colibri::engine::cpu_kernels
