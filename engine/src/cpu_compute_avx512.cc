// The AVX-512F path of CpuCompute: the 16 dot-product lanes in one register
// (reduced with the AVX2 tree over its two halves); SiLU uses the AVX2 math
// (8 wide; it is a small fraction of the work).
#if defined(__x86_64__) || defined(__i386__)
// GCC 12's AVX-512 conversion intrinsics start from _mm512_undefined_*(),
// which -Wuninitialized reports at every use (GCC bug 105593).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu_compute_kernels.h"
#include "cpu_isa_target.h"

COLIBRI_TARGET_BEGIN("avx512f,avx2,fma,f16c")
#include "cpu_compute_avx2_lanes.h"
#include "cpu_compute_templates.h"

namespace colibri::engine::cpu_kernels {
namespace {

struct Avx512Dot16 {
  using Vec = __m512;
  static constexpr int kRows = 6;
  static constexpr int kTokens = 4;

  static Vec Zero() { return _mm512_setzero_ps(); }
  static Vec LoadF32(const void* p) { return _mm512_loadu_ps(p); }
  static Vec LoadBf16(const void* p) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  static Vec LoadFp16(const void* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(static_cast<const __m256i*>(p))); }
  static Vec LoadInt8(const void* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p))));
  }
  static Vec Fma(Vec a, Vec b, Vec acc) { return _mm512_fmadd_ps(a, b, acc); }
  static float Reduce(Vec v) {
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    return Avx2Dot16::ReduceHalves(_mm512_castps512_ps256(v), hi);
  }
};

constexpr KernelSet kAvx512Kernels{CpuIsa::kAvx512, &DotRows<Avx512Dot16>, &SiluMulRows<Avx2Math>};

}  // namespace
}  // namespace colibri::engine::cpu_kernels
COLIBRI_TARGET_END

namespace colibri::engine::cpu_kernels {

const KernelSet& Avx512Kernels() { return kAvx512Kernels; }

}  // namespace colibri::engine::cpu_kernels
#else  // not x86: never selected (CpuIsaSupported is false), defined for the link only
#include "cpu_compute_kernels.h"

namespace colibri::engine::cpu_kernels {

const KernelSet& Avx512Kernels() { return ScalarKernels(); }

}  // namespace colibri::engine::cpu_kernels
#endif
