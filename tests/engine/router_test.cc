#include "colibri/engine/router.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "colibri/engine/fp32_math.h"

namespace colibri::engine {
namespace {

struct Routed {
  std::vector<uint32_t> ids;
  std::vector<float> weights;
};

Routed Route(const std::vector<float>& logits, uint32_t top_k, bool renormalize) {
  Routed r{std::vector<uint32_t>(top_k), std::vector<float>(top_k)};
  const Status status = RouteTopK(logits.data(), static_cast<uint32_t>(logits.size()), top_k, renormalize, r.ids.data(),
                                  r.weights.data());
  EXPECT_TRUE(status.ok()) << status.message();
  return r;
}

// Softmax of {1, 2, 3, 4}: e^-3, e^-2, e^-1, 1 over their sum 1.5530018.
TEST(RouterTest, SoftmaxTopTwo) {
  const Routed r = Route({1, 2, 3, 4}, 2, false);
  EXPECT_EQ(r.ids, (std::vector<uint32_t>{3, 2}));
  EXPECT_NEAR(r.weights[0], 0.6439142598, 1e-7);
  EXPECT_NEAR(r.weights[1], 0.2368828181, 1e-7);
}

// Renormalised: 0.6439 / (0.6439 + 0.2369) = sigmoid(1) = 0.7310586.
TEST(RouterTest, RenormalisesKeptWeights) {
  const Routed r = Route({1, 2, 3, 4}, 2, true);
  EXPECT_EQ(r.ids, (std::vector<uint32_t>{3, 2}));
  EXPECT_NEAR(r.weights[0], 0.7310585786, 1e-7);
  EXPECT_NEAR(r.weights[1], 0.2689414214, 1e-7);
  EXPECT_EQ(r.weights[0] + r.weights[1], 1.0f);
}

TEST(RouterTest, TopOneRenormalisedIsExactlyOne) {
  const Routed r = Route({0.25f, -1.0f, 0.5f}, 1, true);
  EXPECT_EQ(r.ids, (std::vector<uint32_t>{2}));
  EXPECT_EQ(r.weights[0], 1.0f);
  EXPECT_LT(Route({0.25f, -1.0f, 0.5f}, 1, false).weights[0], 0.5f);
}

TEST(RouterTest, TiesGoToTheLowerExpertId) {
  const std::vector<float> logits = {0.5f, 2, 2, 0.5f, 2};
  EXPECT_EQ(Route(logits, 2, false).ids, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(Route(logits, 3, false).ids, (std::vector<uint32_t>{1, 2, 4}));
  EXPECT_EQ(Route(logits, 4, false).ids, (std::vector<uint32_t>{1, 2, 4, 0}));
  const Routed all_equal = Route({7, 7, 7, 7}, 4, false);
  EXPECT_EQ(all_equal.ids, (std::vector<uint32_t>{0, 1, 2, 3}));
  for (float w : all_equal.weights) EXPECT_EQ(w, 0.25f);
}

TEST(RouterTest, MaskedExpertsGetZeroWeight) {
  const float inf = std::numeric_limits<float>::infinity();
  const Routed r = Route({-inf, 1, -inf}, 3, false);
  EXPECT_EQ(r.ids, (std::vector<uint32_t>{1, 0, 2}));
  EXPECT_EQ(r.weights, (std::vector<float>{1, 0, 0}));
}

TEST(RouterTest, RejectsBadInput) {
  uint32_t ids[4];
  float weights[4];
  const float inf = std::numeric_limits<float>::infinity();
  const float good[3] = {1, 2, 3};
  EXPECT_EQ(RouteTopK(good, 3, 0, false, ids, weights).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RouteTopK(good, 3, 4, false, ids, weights).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RouteTopK(nullptr, 3, 1, false, ids, weights).code(), StatusCode::kInvalidArgument);
  const float with_nan[3] = {1, std::nanf(""), 3};
  EXPECT_EQ(RouteTopK(with_nan, 3, 1, false, ids, weights).code(), StatusCode::kInvalidArgument);
  const float with_inf[3] = {1, inf, 3};
  EXPECT_EQ(RouteTopK(with_inf, 3, 1, false, ids, weights).code(), StatusCode::kInvalidArgument);
  const float all_masked[2] = {-inf, -inf};
  EXPECT_EQ(RouteTopK(all_masked, 2, 1, false, ids, weights).code(), StatusCode::kInvalidArgument);
}

// Against a brute-force ranking (stable sort by weight, so equal weights keep id order).
TEST(RouterTest, MatchesStableSortOnRandomLogits) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 500; ++round) {
    const uint32_t experts = 1 + rng() % 160;
    const uint32_t top_k = 1 + rng() % experts;
    std::vector<float> logits(experts);
    for (float& l : logits) l = static_cast<float>(static_cast<int>(rng() % 64) - 32) / 8;  // many ties
    const Routed r = Route(logits, top_k, false);
    const float max = *std::max_element(logits.begin(), logits.end());
    float sum = 0;
    for (float l : logits) sum += ExpF32(l - max);
    std::vector<uint32_t> order(experts);
    std::iota(order.begin(), order.end(), 0);
    auto p = [&](uint32_t e) { return ExpF32(logits[e] - max) / sum; };
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return p(a) > p(b); });
    for (uint32_t j = 0; j < top_k; ++j) {
      ASSERT_EQ(r.ids[j], order[j]) << "round " << round << " rank " << j;
      ASSERT_EQ(r.weights[j], p(order[j]));
    }
  }
}

// 4 tokens, top-2, 3 experts, capacity 2. Visiting in token order:
// expert 0 keeps t0, t1 (drops t2, t3); expert 1 keeps t0, t2 (drops t3); expert 2 keeps t1.
TEST(ExpertCapacityTest, DropsLaterTokensFirst) {
  std::vector<uint32_t> ids = {0, 1, 0, 2, 0, 1, 1, 0};
  std::vector<float> weights = {0.6f, 0.4f, 0.7f, 0.3f, 0.8f, 0.2f, 0.9f, 0.1f};
  const auto stats = ApplyExpertCapacity(ids.data(), weights.data(), 4, 2, 3, 2);
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  const uint32_t x = kDroppedExpert;
  EXPECT_EQ(ids, (std::vector<uint32_t>{0, 1, 0, 2, x, 1, x, x}));
  EXPECT_EQ(weights, (std::vector<float>{0.6f, 0.4f, 0.7f, 0.3f, 0, 0.2f, 0, 0}));
  EXPECT_EQ(stats->dropped_slots, 3u);
  EXPECT_EQ(stats->tokens_with_drops, 2u);
  EXPECT_EQ(stats->tokens_fully_dropped, 1u);
}

TEST(ExpertCapacityTest, ZeroCapacityIsUnlimitedAndDroppedSlotsAreSkipped) {
  std::vector<uint32_t> ids = {0, 1, 0, 1, 0, 1};
  std::vector<float> weights(6, 0.5f);
  auto stats = ApplyExpertCapacity(ids.data(), weights.data(), 3, 2, 2, 0);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->dropped_slots, 0u);
  EXPECT_EQ(ids, (std::vector<uint32_t>{0, 1, 0, 1, 0, 1}));
  ids = {kDroppedExpert, 1, 0, 1};
  stats = ApplyExpertCapacity(ids.data(), weights.data(), 2, 2, 2, 1);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(ids, (std::vector<uint32_t>{kDroppedExpert, 1, 0, kDroppedExpert}));
  EXPECT_EQ(stats->dropped_slots, 1u);
  EXPECT_EQ(stats->tokens_fully_dropped, 0u);
}

TEST(ExpertCapacityTest, RejectsOutOfRangeIdsWithoutChangingAnything) {
  std::vector<uint32_t> ids = {0, 0, 5, 1};
  std::vector<float> weights = {1, 1, 1, 1};
  const auto stats = ApplyExpertCapacity(ids.data(), weights.data(), 4, 1, 3, 1);
  EXPECT_EQ(stats.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ids, (std::vector<uint32_t>{0, 0, 5, 1}));
  EXPECT_EQ(ApplyExpertCapacity(ids.data(), weights.data(), 4, 0, 3, 1).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace colibri::engine
