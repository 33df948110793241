// Tests of CudaCompute: the ComputeBackend contract
// (tests/engine/compute_conformance.h, included by path: every output bit for
// bit equal to the CPU oracle, errors, no-ops), and against CpuCompute on
// larger random experts (several H and I, some not multiples of 32; 1, 7 and
// 64 tokens; every dtype): within the tolerance cuda_compute.h states, and
// separately the number of elements that are not bit-identical (none
// expected); outputs bit-identical run to run; the gate GEMV likewise; device
// blocks required. Without a GPU or driver every test that needs one skips
// (with ProbeCudaDevice's reason); Create()'s kNotFound runs everywhere.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "../engine/compute_conformance.h"
#include "../engine/reference_ffn.h"
#include "colibri/cuda/cuda_compute.h"
#include "colibri/cuda/device.h"
#include "cuda_test_util.h"
#include "colibri/engine/clock.h"
#include "colibri/engine/cpu_compute.h"

namespace colibri::cuda {
namespace {

using engine::DType;
using engine::ExpertView;
using engine::conformance::ComputeConformanceTest;
using engine::conformance::ComputeHarness;
using engine::conformance::ComputeHarnessFactory;
using engine::reference::RandomActivations;
using engine::reference::RandomExpert;

// The tolerance of cuda_compute.h: |gpu - cpu| <= kTolerance x max|cpu|.
constexpr double kTolerance = 1e-4;

// Device memory holding a copy of host bytes, freed on destruction.
class DeviceCopy {
 public:
  DeviceCopy(const std::byte* host, uint64_t bytes) {
    if (cudaMalloc(&memory_, bytes) != cudaSuccess) {
      memory_ = nullptr;
      ADD_FAILURE() << "cudaMalloc of " << bytes << " bytes failed";
      return;
    }
    EXPECT_EQ(cudaMemcpy(memory_, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    // A cudaMemcpy from pageable memory may return before its last bytes
    // land, and CudaCompute's stream is non-blocking (not ordered after the
    // legacy stream): wait for the device, so its kernels see the whole block.
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  ~DeviceCopy() {
    if (memory_ != nullptr) cudaFree(memory_);
  }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  const std::byte* data() const { return static_cast<const std::byte*>(memory_); }

 private:
  void* memory_ = nullptr;
};

// CudaCompute on device 0 for the conformance suite; no device is
// Unsupported, which skips the suite. Blocks are placed in device memory.
class CudaHarness final : public ComputeHarness {
 public:
  Result<std::unique_ptr<engine::ComputeBackend>> Make() override {
    auto made = CudaCompute::Create(0);
    if (!made.ok()) {
      return testing::NoDeviceStatus(made.status());
    }
    return std::unique_ptr<engine::ComputeBackend>(std::move(made).value());
  }
  const engine::Clock& clock() const override { return clock_; }
  const std::byte* PlaceBlock(const std::byte* block, uint64_t bytes) override {
    blocks_.push_back(std::make_unique<DeviceCopy>(block, bytes));
    return blocks_.back()->data();
  }

 private:
  engine::MonotonicClock clock_;
  std::vector<std::unique_ptr<DeviceCopy>> blocks_;
};

const ComputeHarnessFactory kHarnesses[] = {
    {"cuda", [] { return std::unique_ptr<ComputeHarness>(new CudaHarness()); }},
};

INSTANTIATE_TEST_SUITE_P(Cuda, ComputeConformanceTest, ::testing::ValuesIn(kHarnesses),
                         engine::conformance::ComputeHarnessName);

// How a backend's output compares with the oracle's.
struct Agreement {
  double max_abs_oracle = 0;
  double max_abs_diff = 0;
  size_t bit_mismatches = 0;
  size_t first_mismatch = 0;
};

Agreement Compare(const std::vector<float>& got, const std::vector<float>& oracle) {
  Agreement a;
  for (size_t i = 0; i < oracle.size(); ++i) {
    a.max_abs_oracle = std::max(a.max_abs_oracle, std::fabs(double{oracle[i]}));
    const double diff = std::fabs(double{got[i]} - double{oracle[i]});
    a.max_abs_diff = std::isnan(diff) ? INFINITY : std::max(a.max_abs_diff, diff);
    if (std::memcmp(&got[i], &oracle[i], 4) != 0 && a.bit_mismatches++ == 0) a.first_mismatch = i;
  }
  return a;
}

void ExpectAgreement(const std::vector<float>& got, const std::vector<float>& oracle, const std::string& what) {
  ASSERT_EQ(got.size(), oracle.size()) << what;
  const Agreement a = Compare(got, oracle);
  EXPECT_GT(a.max_abs_oracle, 0.0) << what << ": the oracle's output is all zero";
  EXPECT_LE(a.max_abs_diff, kTolerance * a.max_abs_oracle)
      << what << ": max |gpu - cpu| " << a.max_abs_diff << " vs max |cpu| " << a.max_abs_oracle;
  EXPECT_EQ(a.bit_mismatches, 0u) << what << ": " << a.bit_mismatches << " of " << oracle.size()
                                  << " elements not bit-identical; first at " << a.first_mismatch << ": gpu "
                                  << got[a.first_mismatch] << " cpu " << oracle[a.first_mismatch]
                                  << " (max |diff| " << a.max_abs_diff << ")";
}

// A CudaCompute on device 0 and a CpuCompute oracle (the test skips without a device).
class CudaComputeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_CUDA_DEVICE();
    auto made = CudaCompute::Create(0);
    ASSERT_TRUE(made.ok()) << made.status().message();
    compute_ = std::move(made).value();
    auto oracle = engine::CpuCompute::Create(engine::CpuComputeOptions{4, std::nullopt});
    ASSERT_TRUE(oracle.ok()) << oracle.status().message();
    oracle_ = std::move(oracle).value();
  }

  std::vector<float> GpuFfn(const RandomExpert& expert, const std::byte* device_block, const std::vector<float>& x,
                            size_t tokens) {
    std::vector<float> y(tokens * expert.layout().hidden, engine::conformance::compute_detail::Untouched());
    const Status status = compute_->ExpertFfn(ExpertView{&expert.layout(), device_block}, x.data(), tokens, y.data());
    EXPECT_TRUE(status.ok()) << status.message();
    return y;
  }

  std::vector<float> CpuFfn(const RandomExpert& expert, const std::vector<float>& x, size_t tokens) {
    std::vector<float> y(tokens * expert.layout().hidden);
    const Status status = oracle_->ExpertFfn(expert.view(), x.data(), tokens, y.data());
    EXPECT_TRUE(status.ok()) << status.message();
    return y;
  }

  std::unique_ptr<CudaCompute> compute_;
  std::unique_ptr<engine::CpuCompute> oracle_;
};

constexpr DType kDTypes[] = {DType::kFp32, DType::kBf16, DType::kFp16, DType::kInt8};

std::string CaseName(DType dtype, uint32_t hidden, uint32_t intermediate, size_t tokens) {
  return std::string(engine::DTypeName(dtype)) + " H=" + std::to_string(hidden) + " I=" +
         std::to_string(intermediate) + " tokens=" + std::to_string(tokens);
}

using testing::ExpectNoDevice;

TEST(CudaComputeCreateTest, WithoutADeviceIsNotFound) {
  if (ProbeCudaDevice(0).ok()) GTEST_SKIP() << "not applicable: a CUDA device is present";
  auto made = CudaCompute::Create(0);
  ASSERT_FALSE(made.ok());
  ExpectNoDevice(made.status());
}

TEST_F(CudaComputeTest, Caps) {
  EXPECT_STREQ(compute_->caps().name, "cuda");
  EXPECT_TRUE(compute_->caps().device_memory);
  EXPECT_TRUE(compute_->caps().reads_data);
  EXPECT_EQ(compute_->device(), 0);
}

// Random experts of several shapes (H and I multiples of 32, of 16 only, of
// neither; up to a real model's 2048 x 768) against CpuCompute.
TEST_F(CudaComputeTest, ExpertFfnMatchesCpuCompute) {
  const struct {
    uint32_t hidden;
    uint32_t intermediate;
  } shapes[] = {{96, 160}, {100, 250}, {257, 129}, {1040, 368}, {2048, 768}};
  uint64_t seed = 100;
  for (DType dtype : kDTypes) {
    for (const auto& shape : shapes) {
      const RandomExpert expert(dtype, shape.hidden, shape.intermediate, ++seed);
      const DeviceCopy block(expert.view().block, expert.layout().block_bytes);
      for (size_t tokens : {size_t{1}, size_t{7}, size_t{64}}) {
        const std::string what = CaseName(dtype, shape.hidden, shape.intermediate, tokens);
        SCOPED_TRACE(what);
        const std::vector<float> x = RandomActivations(tokens * shape.hidden, ++seed);
        ExpectAgreement(GpuFfn(expert, block.data(), x, tokens), CpuFfn(expert, x, tokens), what);
      }
    }
  }
}

// The same call gives the same bits, also after other calls in between, and
// with batches that span several token tiles and blocks (200 = 3 x 64 + 8).
TEST_F(CudaComputeTest, ExpertFfnIsBitIdenticalAcrossRuns) {
  uint64_t seed = 300;
  for (DType dtype : kDTypes) {
    SCOPED_TRACE(engine::DTypeName(dtype));
    const RandomExpert expert(dtype, 257, 129, ++seed);
    const RandomExpert other(dtype, 64, 48, ++seed);
    const DeviceCopy block(expert.view().block, expert.layout().block_bytes);
    const DeviceCopy other_block(other.view().block, other.layout().block_bytes);
    const std::vector<float> x = RandomActivations(200 * 257, ++seed);
    const std::vector<float> first = GpuFfn(expert, block.data(), x, 200);
    GpuFfn(other, other_block.data(), RandomActivations(3 * 64, ++seed), 3);
    const std::vector<float> second = GpuFfn(expert, block.data(), x, 200);
    EXPECT_EQ(std::memcmp(first.data(), second.data(), 4 * first.size()), 0) << "runs differ";
    ExpectAgreement(first, CpuFfn(expert, x, 200), "200 tokens");
  }
}

// y may alias x, as CpuCompute allows.
TEST_F(CudaComputeTest, ExpertFfnOutputMayAliasInput) {
  const RandomExpert expert(DType::kBf16, 128, 96, 7);
  const DeviceCopy block(expert.view().block, expert.layout().block_bytes);
  const std::vector<float> x = RandomActivations(5 * 128, 8);
  const std::vector<float> separate = GpuFfn(expert, block.data(), x, 5);
  std::vector<float> in_place = x;
  ASSERT_TRUE(compute_->ExpertFfn(ExpertView{&expert.layout(), block.data()}, in_place.data(), 5, in_place.data()).ok());
  EXPECT_EQ(std::memcmp(separate.data(), in_place.data(), 4 * separate.size()), 0);
}

// Blocks must be device memory (a host block would fault inside a kernel and
// poison the context): rejected before any kernel runs, writing nothing.
TEST_F(CudaComputeTest, RejectsBlocksOutsideDeviceMemory) {
  const RandomExpert expert(DType::kFp32, 64, 48, 9);
  const DeviceCopy block(expert.view().block, expert.layout().block_bytes);
  const std::vector<float> x = RandomActivations(2 * 64, 10);
  std::vector<float> y(2 * 64, engine::conformance::compute_detail::Untouched());
  const ExpertView host{&expert.layout(), expert.view().block};
  EXPECT_EQ(compute_->ExpertFfn(host, x.data(), 2, y.data()).code(), StatusCode::kInvalidArgument);
  const ExpertView misaligned{&expert.layout(), block.data() + 2};
  EXPECT_EQ(compute_->ExpertFfn(misaligned, x.data(), 2, y.data()).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(engine::conformance::compute_detail::AllUntouched(y));
  // Still usable.
  ExpectAgreement(GpuFfn(expert, block.data(), x, 2), CpuFfn(expert, x, 2), "after errors");
}

TEST_F(CudaComputeTest, ScratchGrowsAndIsKept) {
  const RandomExpert small(DType::kFp16, 32, 32, 11);
  const RandomExpert large(DType::kFp16, 1024, 512, 12);
  const DeviceCopy small_block(small.view().block, small.layout().block_bytes);
  const DeviceCopy large_block(large.view().block, large.layout().block_bytes);
  GpuFfn(small, small_block.data(), RandomActivations(32, 13), 1);
  const uint64_t after_small = compute_->scratch_bytes();
  EXPECT_GT(after_small, 0u);
  GpuFfn(large, large_block.data(), RandomActivations(512 * 1024, 14), 512);
  const uint64_t after_large = compute_->scratch_bytes();
  EXPECT_GT(after_large, after_small);
  GpuFfn(small, small_block.data(), RandomActivations(32, 15), 1);
  EXPECT_EQ(compute_->scratch_bytes(), after_large) << "scratch shrank";
}

TEST_F(CudaComputeTest, GateGemvMatchesCpuCompute) {
  const struct {
    uint32_t experts;
    uint32_t hidden;
  } gates[] = {{64, 1000}, {257, 2048}, {128, 7168}};
  uint64_t seed = 500;
  for (const auto& gate : gates) {
    const std::vector<float> weight = RandomActivations(uint64_t{gate.experts} * gate.hidden, ++seed);
    const std::vector<float> bias = RandomActivations(gate.experts, ++seed);
    for (const bool with_bias : {false, true}) {
      for (size_t tokens : {size_t{1}, size_t{7}, size_t{64}}) {
        const std::string what = std::to_string(gate.experts) + "x" + std::to_string(gate.hidden) + " tokens=" +
                                 std::to_string(tokens) + (with_bias ? " with bias" : "");
        SCOPED_TRACE(what);
        const std::vector<float> x = RandomActivations(tokens * gate.hidden, ++seed);
        const float* b = with_bias ? bias.data() : nullptr;
        std::vector<float> want(tokens * gate.experts);
        ASSERT_TRUE(oracle_->GateGemv(weight.data(), b, gate.experts, gate.hidden, x.data(), tokens, want.data()).ok());
        std::vector<float> got(tokens * gate.experts, engine::conformance::compute_detail::Untouched());
        const Status status = compute_->GateGemv(weight.data(), b, gate.experts, gate.hidden, x.data(), tokens,
                                                 got.data());
        ASSERT_TRUE(status.ok()) << status.message();
        ExpectAgreement(got, want, what);
        std::vector<float> again(got.size());
        ASSERT_TRUE(
            compute_->GateGemv(weight.data(), b, gate.experts, gate.hidden, x.data(), tokens, again.data()).ok());
        EXPECT_EQ(std::memcmp(got.data(), again.data(), 4 * got.size()), 0) << "runs differ";
      }
    }
  }
}

// keep_gate_weights: the first call uploads a gate once, later calls reuse it
// (the device memory held does not grow), and the logits are the same as
// with an upload per call.
TEST_F(CudaComputeTest, KeptGateWeightsAreUploadedOnceAndGiveTheSameLogits) {
  auto made = CudaCompute::Create(0, CudaComputeOptions{/*keep_gate_weights=*/true});
  ASSERT_TRUE(made.ok()) << made.status().message();
  CudaCompute& keeping = *made.value();
  constexpr uint32_t kExperts = 128, kHidden = 2048;
  const std::vector<float> weight = RandomActivations(uint64_t{kExperts} * kHidden, 901);
  const std::vector<float> bias = RandomActivations(kExperts, 902);
  EXPECT_EQ(keeping.gate_bytes(), 0u);
  for (size_t tokens : {size_t{1}, size_t{9}, size_t{64}}) {
    SCOPED_TRACE("tokens " + std::to_string(tokens));
    const std::vector<float> x = RandomActivations(tokens * kHidden, 903 + tokens);
    std::vector<float> per_call(tokens * kExperts), kept(tokens * kExperts);
    ASSERT_TRUE(compute_->GateGemv(weight.data(), bias.data(), kExperts, kHidden, x.data(), tokens, per_call.data()).ok());
    ASSERT_TRUE(keeping.GateGemv(weight.data(), bias.data(), kExperts, kHidden, x.data(), tokens, kept.data()).ok());
    EXPECT_EQ(std::memcmp(per_call.data(), kept.data(), 4 * kept.size()), 0);
    EXPECT_EQ(keeping.gate_bytes(), (uint64_t{kExperts} * kHidden + kExperts) * 4) << "one upload, reused";
  }
  // Another gate (no bias) is kept beside the first.
  const std::vector<float> x = RandomActivations(kHidden, 990);
  std::vector<float> logits(kExperts);
  ASSERT_TRUE(keeping.GateGemv(weight.data(), nullptr, kExperts, kHidden, x.data(), 1, logits.data()).ok());
  EXPECT_EQ(keeping.gate_bytes(), (2 * uint64_t{kExperts} * kHidden + kExperts) * 4);
}

}  // namespace
}  // namespace colibri::cuda
