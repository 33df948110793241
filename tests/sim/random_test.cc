#include "colibri/sim/random.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace colibri::sim {
namespace {

std::vector<uint64_t> Draw(uint64_t seed, int n) {
  Rng rng(seed);
  std::vector<uint64_t> out;
  for (int i = 0; i < n; ++i) out.push_back(rng.NextU64());
  return out;
}

TEST(RandomTest, KnownValues) {
  // splitmix64's published first output for state 0 (Vigna's splitmix64.c): x = 0 + golden gamma, mixed.
  EXPECT_EQ(SplitMix64(0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(Fnv1a64(""), 0xCBF29CE484222325ull);
  EXPECT_EQ(Fnv1a64("a"), 0xAF63DC4C8601EC8Cull);
}

TEST(RandomTest, SameSeedSameStream) {
  EXPECT_EQ(Draw(7, 100), Draw(7, 100));
  EXPECT_NE(Draw(7, 100), Draw(8, 100));
}

TEST(RandomTest, ComponentsGetDifferentStreams) {
  EXPECT_EQ(DeriveSeed(1, "sim_storage"), DeriveSeed(1, "sim_storage"));
  EXPECT_NE(DeriveSeed(1, "sim_storage"), DeriveSeed(1, "sim_transfer"));
  EXPECT_NE(DeriveSeed(1, "sim_storage"), DeriveSeed(2, "sim_storage"));
  EXPECT_NE(Draw(DeriveSeed(1, "a"), 10), Draw(DeriveSeed(1, "b"), 10));
}

TEST(RandomTest, NextDoubleIsInUnitIntervalWithMeanOneHalf) {
  Rng rng(3);
  double sum = 0;
  for (int i = 0; i < 100'000; ++i) {
    const double u = rng.NextDouble();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 100'000, 0.5, 0.005);
}

TEST(LatencySamplerTest, WithoutJitterEverySampleIsP50AndDrawsNothing) {
  auto sampler = LatencySampler::Make({12'345, 12'345}, "test");
  ASSERT_TRUE(sampler.ok()) << sampler.status().message();
  Rng rng(5);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(sampler->Sample(&rng), 12'345);
  Rng fresh(5);
  EXPECT_EQ(rng.NextU64(), fresh.NextU64());  // the stream was not advanced
  auto below = LatencySampler::Make({1'000, 500}, "test");  // p99 < p50: no jitter either
  ASSERT_TRUE(below.ok());
  EXPECT_EQ(below->Sample(&rng), 1'000);
}

// Over 100k samples, the empirical median and 99th percentile match the fit.
TEST(LatencySamplerTest, FitsP50AndP99) {
  auto sampler = LatencySampler::Make({10'000, 40'000}, "test");
  ASSERT_TRUE(sampler.ok());
  Rng rng(DeriveSeed(11, "latency"));
  std::vector<TimeNs> samples;
  for (int i = 0; i < 100'000; ++i) samples.push_back(sampler->Sample(&rng));
  std::sort(samples.begin(), samples.end());
  EXPECT_GT(samples.front(), 0);
  EXPECT_NEAR(static_cast<double>(samples[50'000]), 10'000.0, 10'000.0 * 0.02);
  EXPECT_NEAR(static_cast<double>(samples[99'000]), 40'000.0, 40'000.0 * 0.04);
}

TEST(LatencySamplerTest, SameSeedSameSamples) {
  auto sampler = LatencySampler::Make({1'000, 5'000}, "test");
  ASSERT_TRUE(sampler.ok());
  Rng a(9);
  Rng b(9);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sampler->Sample(&a), sampler->Sample(&b));
}

TEST(LatencySamplerTest, RejectsDistributionsItCannotFit) {
  auto zero_median = LatencySampler::Make({0, 100}, "nvme profile 'x': read_latency");
  ASSERT_FALSE(zero_median.ok());
  EXPECT_EQ(zero_median.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(zero_median.status().message().find("nvme profile 'x': read_latency"), std::string::npos);
  EXPECT_FALSE(LatencySampler::Make({-1, -1}, "test").ok());
  EXPECT_TRUE(LatencySampler::Make({0, 0}, "test").ok());
}

}  // namespace
}  // namespace colibri::sim
