// The portable scalar path of CpuCompute: the 16 dot-product lanes in an
// array, std::fma per element. Also defines ExpF32 and SiluF32 (fp32_math.h):
// one lane of the very templates the vector paths instantiate.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "colibri/engine/dtype.h"
#include "colibri/engine/fp32_math.h"
#include "cpu_compute_kernels.h"
#include "cpu_compute_templates.h"

namespace colibri::engine {
namespace cpu_kernels {
namespace {

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// One fp32 value, with the x86 vector instructions' semantics.
struct ScalarMath {
  using Vec = float;
  static constexpr size_t kWidth = 1;
  static Vec Load(const float* p) { return *p; }
  static void Store(float* p, Vec v) { *p = v; }
  static Vec Splat(float v) { return v; }
  static Vec Add(Vec a, Vec b) { return a + b; }
  static Vec Mul(Vec a, Vec b) { return a * b; }
  static Vec Div(Vec a, Vec b) { return a / b; }
  static Vec Fma(Vec a, Vec b, Vec c) { return std::fma(a, b, c); }
  static Vec Neg(Vec a) { return -a; }
  static Vec Min(Vec a, Vec b) { return a < b ? a : b; }
  static Vec Max(Vec a, Vec b) { return a > b ? a : b; }
  static Vec RoundEven(Vec a) { return std::nearbyint(a); }
  static void Pow2Halves(Vec n, Vec* lo, Vec* hi) {
    const int32_t k = n == n ? static_cast<int32_t>(n) : INT32_MIN;  // cvtps2dq: NaN -> INT32_MIN
    const int32_t k_lo = k >> 1;                                     // floor(k / 2)
    *lo = FromBits(static_cast<uint32_t>(k_lo + 127) << 23);
    *hi = FromBits(static_cast<uint32_t>(k - k_lo + 127) << 23);
  }
};

// The 16 dot-product lanes as an array.
struct Scalar16 {
  struct Vec {
    float lane[kLanes];
  };
  static constexpr int kRows = 1;
  static constexpr int kTokens = 1;

  static Vec Zero() { return Vec{}; }
  static Vec LoadF32(const void* p) {
    Vec v;
    std::memcpy(v.lane, p, sizeof(v.lane));
    return v;
  }
  static Vec LoadBf16(const void* p) { return Convert<uint16_t>(p, Bf16ToFloat); }
  static Vec LoadFp16(const void* p) { return Convert<uint16_t>(p, Fp16ToFloat); }
  static Vec LoadInt8(const void* p) {
    return Convert<int8_t>(p, [](int8_t q) { return static_cast<float>(q); });
  }
  static Vec Fma(const Vec& a, const Vec& b, Vec acc) {
    for (uint32_t i = 0; i < kLanes; ++i) acc.lane[i] = std::fma(a.lane[i], b.lane[i], acc.lane[i]);
    return acc;
  }
  static float Reduce(Vec v) {
    for (uint32_t step = kLanes / 2; step >= 1; step /= 2) {
      for (uint32_t i = 0; i < step; ++i) v.lane[i] += v.lane[i + step];
    }
    return v.lane[0];
  }

 private:
  template <typename T, typename Fn>
  static Vec Convert(const void* p, Fn to_float) {
    T raw[kLanes];
    std::memcpy(raw, p, sizeof(raw));
    Vec v;
    for (uint32_t i = 0; i < kLanes; ++i) v.lane[i] = to_float(raw[i]);
    return v;
  }
};

constexpr KernelSet kScalarKernels{CpuIsa::kScalar, &DotRows<Scalar16>, &SiluMulRows<ScalarMath>};

}  // namespace

const KernelSet& ScalarKernels() { return kScalarKernels; }

}  // namespace cpu_kernels

float ExpF32(float x) { return cpu_kernels::Exp<cpu_kernels::ScalarMath>(x); }
float SiluF32(float z) { return cpu_kernels::Silu<cpu_kernels::ScalarMath>(z); }

}  // namespace colibri::engine
