#include "colibri/engine/cpu_compute.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "colibri/engine/fp32_math.h"
#include "cpu_compute_kernels.h"
#include "reference_ffn.h"

namespace colibri::engine {
namespace {

using reference::RandomActivations;
using reference::RandomExpert;
using reference::RelativeNormError;

// Accuracy against the fp64 reference, for every dtype: the reference reads
// the same (exactly dequantised) weights, so the error is fp32 arithmetic
// only. Bound on ||y - y_ref||_2 / ||y_ref||_2 per call; measured worst on
// these shapes is 1.8e-7 (bf16); the bound leaves 10x margin.
constexpr double kMaxRelativeError = 2e-6;

struct Shape {
  uint32_t hidden;
  uint32_t intermediate;
};
constexpr Shape kShapes[] = {{24, 40}, {100, 37}, {64, 256}};  // H, I: not multiples of 16 except 64 x 256
constexpr size_t kBatches[] = {1, 3, 17, 64};
constexpr DType kDTypes[] = {DType::kFp32, DType::kBf16, DType::kFp16, DType::kInt8};
constexpr CpuIsa kIsas[] = {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512};
constexpr uint32_t kThreadCounts[] = {1, 2, 4};

std::unique_ptr<CpuCompute> MakeCompute(uint32_t threads, std::optional<CpuIsa> isa = std::nullopt) {
  auto compute = CpuCompute::Create(CpuComputeOptions{threads, isa});
  EXPECT_TRUE(compute.ok()) << compute.status().message();
  return std::move(compute).value();
}

std::vector<float> RunFfn(CpuCompute* compute, const RandomExpert& expert, const std::vector<float>& x, size_t tokens) {
  std::vector<float> y(tokens * expert.layout().hidden, -1.0f);
  const Status status = compute->ExpertFfn(expert.view(), x.data(), tokens, y.data());
  EXPECT_TRUE(status.ok()) << status.message();
  return y;
}

std::string Sci(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g", v);
  return text;
}

std::string CaseName(DType dtype, Shape shape, size_t tokens) {
  return std::string(DTypeName(dtype)) + " " + std::to_string(shape.hidden) + "x" + std::to_string(shape.intermediate) +
         " batch " + std::to_string(tokens);
}

TEST(CpuComputeTest, ExpertFfnMatchesFp64Reference) {
  auto compute = MakeCompute(2);
  uint64_t seed = 1;
  for (DType dtype : kDTypes) {
    double worst = 0;
    for (Shape shape : kShapes) {
      for (size_t tokens : kBatches) {
        const RandomExpert expert(dtype, shape.hidden, shape.intermediate, ++seed);
        const std::vector<float> x = RandomActivations(tokens * shape.hidden, ++seed);
        const std::vector<float> y = RunFfn(compute.get(), expert, x, tokens);
        const double error =
            RelativeNormError(y.data(), reference::ReferenceExpertFfn(expert.view(), x.data(), tokens));
        EXPECT_LE(error, kMaxRelativeError) << CaseName(dtype, shape, tokens);
        worst = std::max(worst, error);
      }
    }
    RecordProperty(std::string("worst_relative_error_") + DTypeName(dtype), Sci(worst));
  }
}

TEST(CpuComputeTest, ExpertFfnBitIdenticalAcrossPathsAndThreadCounts) {
  auto scalar = MakeCompute(1, CpuIsa::kScalar);
  uint64_t seed = 100;
  for (DType dtype : kDTypes) {
    for (Shape shape : kShapes) {
      for (size_t tokens : kBatches) {
        const RandomExpert expert(dtype, shape.hidden, shape.intermediate, ++seed);
        const std::vector<float> x = RandomActivations(tokens * shape.hidden, ++seed);
        const std::vector<float> want = RunFfn(scalar.get(), expert, x, tokens);
        for (CpuIsa isa : kIsas) {
          if (!CpuIsaSupported(isa)) continue;
          for (uint32_t threads : kThreadCounts) {
            auto compute = MakeCompute(threads, isa);
            const std::vector<float> got = RunFfn(compute.get(), expert, x, tokens);
            EXPECT_EQ(std::memcmp(got.data(), want.data(), 4 * want.size()), 0)
                << CaseName(dtype, shape, tokens) << " on " << CpuIsaName(isa) << " x" << threads;
          }
        }
      }
    }
  }
  for (CpuIsa isa : kIsas) {
    RecordProperty(std::string("compared_") + CpuIsaName(isa), CpuIsaSupported(isa) ? "yes" : "no (unsupported CPU)");
  }
}

// Rows longer than one 512-column slice and batches beyond one 64-token panel
// exercise the blocked loop's slice and panel boundaries (and their tails).
TEST(CpuComputeTest, SlicesAndPanelsKeepAccuracyAndBitIdentity) {
  constexpr Shape kShape{530, 520};
  constexpr size_t kTokens = 67;
  uint64_t seed = 200;
  for (DType dtype : kDTypes) {
    const RandomExpert expert(dtype, kShape.hidden, kShape.intermediate, ++seed);
    const std::vector<float> x = RandomActivations(kTokens * kShape.hidden, ++seed);
    const std::vector<float> want = RunFfn(MakeCompute(1, CpuIsa::kScalar).get(), expert, x, kTokens);
    EXPECT_LE(RelativeNormError(want.data(), reference::ReferenceExpertFfn(expert.view(), x.data(), kTokens)),
              kMaxRelativeError)
        << CaseName(dtype, kShape, kTokens);
    for (CpuIsa isa : kIsas) {
      if (!CpuIsaSupported(isa) || isa == CpuIsa::kScalar) continue;
      for (uint32_t threads : kThreadCounts) {
        const std::vector<float> got = RunFfn(MakeCompute(threads, isa).get(), expert, x, kTokens);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), 4 * want.size()), 0)
            << CaseName(dtype, kShape, kTokens) << " on " << CpuIsaName(isa) << " x" << threads;
      }
    }
  }
}

TEST(CpuComputeTest, GateGemvMatchesReferenceAndIsBitIdentical) {
  constexpr uint32_t kExperts = 37;
  constexpr uint32_t kHidden = 100;
  const std::vector<float> weight = RandomActivations(kExperts * kHidden, 7);
  const std::vector<float> bias = RandomActivations(kExperts, 8);
  for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
    for (size_t tokens : kBatches) {
      const std::vector<float> x = RandomActivations(tokens * kHidden, 9 + tokens);
      std::vector<float> want(tokens * kExperts);
      auto scalar = MakeCompute(1, CpuIsa::kScalar);
      ASSERT_TRUE(scalar->GateGemv(weight.data(), b, kExperts, kHidden, x.data(), tokens, want.data()).ok());
      const auto ref = reference::ReferenceGateGemv(weight.data(), b, kExperts, kHidden, x.data(), tokens);
      EXPECT_LE(RelativeNormError(want.data(), ref), kMaxRelativeError);
      for (CpuIsa isa : kIsas) {
        if (!CpuIsaSupported(isa)) continue;
        for (uint32_t threads : kThreadCounts) {
          std::vector<float> got(tokens * kExperts);
          ASSERT_TRUE(MakeCompute(threads, isa)
                          ->GateGemv(weight.data(), b, kExperts, kHidden, x.data(), tokens, got.data())
                          .ok());
          EXPECT_EQ(std::memcmp(got.data(), want.data(), 4 * want.size()), 0)
              << "batch " << tokens << " bias " << (b != nullptr) << " on " << CpuIsaName(isa) << " x" << threads;
        }
      }
    }
  }
}

TEST(CpuComputeTest, OutputMayAliasInput) {
  const RandomExpert expert(DType::kBf16, 64, 40, 3);
  std::vector<float> x = RandomActivations(3 * 64, 4);
  auto compute = MakeCompute(2);
  const std::vector<float> want = RunFfn(compute.get(), expert, x, 3);
  ASSERT_TRUE(compute->ExpertFfn(expert.view(), x.data(), 3, x.data()).ok());
  EXPECT_EQ(x, want);
}

TEST(CpuComputeTest, RejectsBadArguments) {
  EXPECT_EQ(CpuCompute::Create(CpuComputeOptions{0, std::nullopt}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CpuCompute::Create(CpuComputeOptions{257, std::nullopt}).status().code(), StatusCode::kInvalidArgument);
  auto compute = MakeCompute(1);
  float x[4] = {}, y[4] = {};
  EXPECT_EQ(compute->ExpertFfn(ExpertView{}, x, 1, y).code(), StatusCode::kInvalidArgument);
  const RandomExpert expert(DType::kFp32, 4, 4, 1);
  EXPECT_EQ(compute->ExpertFfn(expert.view(), nullptr, 1, y).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(compute->ExpertFfn(expert.view(), nullptr, 0, nullptr).ok());
  EXPECT_EQ(compute->GateGemv(nullptr, nullptr, 4, 4, x, 1, y).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(compute->GateGemv(x, nullptr, 0, 4, x, 1, y).code(), StatusCode::kInvalidArgument);
}

TEST(CpuComputeTest, IsaNamesAndCaps) {
  for (CpuIsa isa : kIsas) EXPECT_EQ(ParseCpuIsa(CpuIsaName(isa)).value(), isa);
  EXPECT_FALSE(ParseCpuIsa("neon").ok());
  EXPECT_TRUE(CpuIsaSupported(CpuIsa::kScalar));
  EXPECT_TRUE(CpuIsaSupported(BestCpuIsa()));
  auto compute = MakeCompute(1, CpuIsa::kScalar);
  EXPECT_STREQ(compute->caps().name, "cpu-scalar");
  EXPECT_FALSE(compute->caps().device_memory);
  EXPECT_EQ(MakeCompute(3)->threads(), 3u);
}

// Units in the last place between a float and the exact value.
double UlpError(float got, double want) {
  const double ulp = std::ldexp(1.0, std::max(std::ilogb(static_cast<float>(want)), -126) - 23);
  return std::abs(got - want) / ulp;
}

TEST(Fp32MathTest, ExpWithinTwoUlp) {
  double worst = 0;
  for (double x = -87.0; x <= 88.5; x += 0.000731) {
    const float xf = static_cast<float>(x);
    worst = std::max(worst, UlpError(ExpF32(xf), std::exp(static_cast<double>(xf))));
  }
  EXPECT_LE(worst, 2.0);
  RecordProperty("exp_worst_ulp", Sci(worst));
  EXPECT_EQ(ExpF32(0.0f), 1.0f);
  EXPECT_EQ(ExpF32(-200.0f), 0.0f);
  EXPECT_EQ(ExpF32(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(ExpF32(100.0f), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(ExpF32(std::nanf(""))));
}

TEST(Fp32MathTest, SiluValues) {
  EXPECT_EQ(SiluF32(0.0f), 0.0f);
  EXPECT_EQ(SiluF32(100.0f), 100.0f);
  EXPECT_EQ(SiluF32(-200.0f), -0.0f);
  EXPECT_EQ(SiluF32(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(SiluF32(std::nanf(""))));
  for (double z = -20; z <= 20; z += 0.0137) {
    const float zf = static_cast<float>(z);
    EXPECT_LE(UlpError(SiluF32(zf), reference::SiluF64(zf)), 4.0) << z;
  }
}

// Every ISA's vector SiLU equals SiluF32 bit for bit, special values included.
TEST(Fp32MathTest, SiluKernelsMatchScalarBitForBit) {
  std::vector<float> gate;
  for (float z : {0.0f, -0.0f, 1e-40f, -1e-40f, 1e30f, -1e30f, 88.5f, -88.5f, 103.9f, -103.9f, 104.5f, -104.5f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
    gate.push_back(z);
  }
  for (double z = -110; z <= 110; z += 0.0173) gate.push_back(static_cast<float>(z));
  gate.resize(cpu_kernels::PaddedLength(gate.size()), 0.5f);
  const std::vector<float> up = RandomActivations(gate.size(), 5);
  for (CpuIsa isa : kIsas) {
    if (!CpuIsaSupported(isa)) continue;
    const cpu_kernels::KernelSet& kernels =
        isa == CpuIsa::kScalar ? cpu_kernels::ScalarKernels()
                               : (isa == CpuIsa::kAvx2 ? cpu_kernels::Avx2Kernels() : cpu_kernels::Avx512Kernels());
    std::vector<float> got = gate;
    kernels.silu_mul(got.data(), up.data(), got.size());
    for (size_t i = 0; i < gate.size(); ++i) {
      const float want = SiluF32(gate[i]) * up[i];
      EXPECT_EQ(std::memcmp(&got[i], &want, 4), 0)
          << CpuIsaName(isa) << " z " << gate[i] << ": " << got[i] << " vs " << want;
    }
  }
}

}  // namespace
}  // namespace colibri::engine
