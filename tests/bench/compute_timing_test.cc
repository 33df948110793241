// call_timing.h, expert_set.h, cpu_ffn.h, stream_copy.h, openblas_ffn.h and
// cpu_info.h: the pieces the compute benchmarks time with, on tiny shapes.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "colibri/bench/call_timing.h"
#include "colibri/bench/cpu_ffn.h"
#include "colibri/bench/cpu_info.h"
#include "colibri/bench/expert_set.h"
#include "colibri/bench/openblas_ffn.h"
#include "colibri/bench/stream_copy.h"
#include "colibri/engine/mix.h"

namespace colibri::bench {
namespace {

using engine::DType;

TEST(CallTimingTest, BestWindowKeepsEveryCallAndCountsOnAcrossWindows) {
  std::vector<uint64_t> seen;
  auto best = TimeBestWindow(0.002, 3, [&](uint64_t i) {
    seen.push_back(i);
    return Status::Ok();
  });
  ASSERT_TRUE(best.ok());
  const CallWindow& w = best.value();
  EXPECT_GT(w.calls, 0u);
  EXPECT_GE(w.seconds, 0.002);
  ASSERT_EQ(w.call_ns.size(), w.calls);
  const double sum_s = std::accumulate(w.call_ns.begin(), w.call_ns.end(), 0.0) / 1e9;
  EXPECT_NEAR(sum_s, w.seconds, 1e-6 * static_cast<double>(w.calls) + 1e-6);
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i);  // one counter over all windows
  EXPECT_GT(seen.size(), w.calls);                                   // three windows ran
}

TEST(CallTimingTest, TheFirstErrorEndsTheTiming) {
  int calls = 0;
  auto failed = TimeBestWindow(10.0, 5, [&](uint64_t i) {
    ++calls;
    return i == 3 ? Status::IoError("boom") : Status::Ok();
  });
  EXPECT_EQ(failed.status().code(), StatusCode::kIoError);
  EXPECT_EQ(calls, 4);
}

TEST(ExpertSetTest, CopiesOfOneBlockBeyondTheWorkingSet) {
  const ExpertSet set = MakeExpertSet(DType::kInt8, 64, 32, 100'000);
  EXPECT_EQ(set.layout.hidden, 64u);
  EXPECT_EQ(set.count, 100'000 / set.layout.block_bytes + 1);
  EXPECT_EQ(MakeExpertSet(DType::kBf16, 64, 32, 0).count, 1u);
  for (uint64_t i = 1; i < set.count; ++i) {
    EXPECT_EQ(std::memcmp(set.View(i).block, set.View(0).block, set.layout.block_bytes), 0);
  }
  EXPECT_EQ(set.View(set.count).block, set.View(0).block);  // cycles
  EXPECT_EQ(reinterpret_cast<uintptr_t>(set.blocks.get()) % 64, 0u);
  float scale = 0;  // int8: per-row scales of 1 / sqrt(cols) / 127
  std::memcpy(&scale, set.View(0).block + set.layout.gate_scales_offset, 4);
  EXPECT_FLOAT_EQ(scale, 1.0f / 8.0f / 127);
}

TEST(ExpertSetTest, ValuesAreSplitMix64FromOne) {
  SyntheticValues values;
  uint64_t state = 1;
  for (int i = 0; i < 5; ++i) {
    const float expected = static_cast<float>(static_cast<double>(engine::SplitMix64Next(&state) >> 11) * 0x1p-52 - 1.0);
    const float v = values.Next();
    EXPECT_EQ(v, expected);
    EXPECT_GE(v, -1.0f);
    EXPECT_LT(v, 1.0f);
  }
  const std::vector<float> x = SyntheticActivations(3);
  SyntheticValues fresh;
  for (float v : x) EXPECT_EQ(v, fresh.Next());
  EXPECT_DOUBLE_EQ(FfnFlopsPerCall(2048, 768, 64), 2.0 * 3 * 2048 * 768 * 64);
}

TEST(CpuFfnTest, TimesExpertFfnWithTheAskedPath) {
  const ExpertSet set = MakeExpertSet(DType::kBf16, 64, 32, 64 * 1024);
  auto timing = TimeCpuExpertFfn(set, 4, 1, engine::CpuIsa::kScalar, 0.005, 2);
  ASSERT_TRUE(timing.ok()) << timing.status().message();
  EXPECT_EQ(timing.value().isa, engine::CpuIsa::kScalar);
  EXPECT_GT(timing.value().best.calls, 0u);
  EXPECT_EQ(timing.value().best.call_ns.size(), timing.value().best.calls);
  EXPECT_EQ(TimeCpuExpertFfn(set, 4, 0, std::nullopt, 0.005, 1).status().code(), StatusCode::kInvalidArgument);
}

TEST(ReferencesTest, StreamCopyAndOpenBlas) {
  const StreamCopyTiming copy = MeasureStreamCopy(1 << 20, 0.005, 2);
  EXPECT_EQ(copy.array_bytes, 512u * 1024);
  EXPECT_GT(copy.copies, 0u);
  EXPECT_GT(copy.bytes_per_s(), 0);
  const ExpertSet fp32 = MakeExpertSet(DType::kFp32, 64, 32, 0);
  auto blas = TimeOpenBlasFfn(fp32, 4, 1, 0.005, 1);
  ASSERT_TRUE(blas.ok()) << blas.status().message();
  EXPECT_GT(blas.value().calls, 0u);
  EXPECT_EQ(TimeOpenBlasFfn(MakeExpertSet(DType::kBf16, 64, 32, 0), 4, 1, 0.005, 1).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(OpenBlasCoreName().empty());
  if (const auto warning = OpenBlasFallbackWarning()) {
    EXPECT_NE(warning->find(OpenBlasCoreName()), std::string::npos);
  }
}

TEST(CpuInfoTest, NamesTheCpuAndSizesBeyondItsCache) {
  EXPECT_FALSE(CpuModelName().empty());
  EXPECT_EQ(BeyondCacheBytes(0), uint64_t{256} << 20);
  EXPECT_EQ(BeyondCacheBytes(uint64_t{100} << 20), uint64_t{400} << 20);
  (void)LastLevelCacheBytes();  // 0 is allowed (unknown)
}

}  // namespace
}  // namespace colibri::bench
