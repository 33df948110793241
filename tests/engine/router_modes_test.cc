#include "colibri/engine/router_modes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <vector>

namespace colibri::engine {
namespace {

struct Routed {
  std::vector<uint32_t> ids;
  std::vector<float> weights;
};

std::unique_ptr<Router> MakeRouter(const RouterConfig& config, uint32_t experts, uint32_t top_k,
                                   uint32_t hidden_size = 0) {
  auto router = Router::Create(config, experts, top_k, hidden_size);
  EXPECT_TRUE(router.ok()) << router.status().message();
  return router.ok() ? std::move(router).value() : nullptr;
}

Routed RouteBatch(Router& router, const RouterInput& in) {
  Routed r{std::vector<uint32_t>(in.tokens * router.top_k()), std::vector<float>(in.tokens * router.top_k())};
  const Status status = router.Route(in, r.ids.data(), r.weights.data());
  EXPECT_TRUE(status.ok()) << status.message();
  return r;
}

Routed RouteLogits(Router& router, const std::vector<float>& logits, TimeNs time_ns = 0) {
  RouterInput in;
  in.tokens = logits.size() / router.experts();
  in.logits = logits.data();
  in.time_ns = time_ns;
  return RouteBatch(router, in);
}

Routed RouteTokens(Router& router, const std::vector<uint32_t>& token_ids) {
  RouterInput in;
  in.tokens = token_ids.size();
  in.token_ids = token_ids.data();
  return RouteBatch(router, in);
}

RouterConfig LoadAwareTokens(RouterMode mode, uint32_t window_tokens, float threshold) {
  RouterConfig config;
  config.mode = mode;
  config.load_aware.enabled = true;
  config.load_aware.unit = LoadWindowUnit::kTokens;
  config.load_aware.window_tokens = window_tokens;
  config.load_aware.threshold = threshold;
  return config;
}

uint32_t FloatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

TEST(RouterModeTest, ParsesEveryNameAndRefusesOthers) {
  for (const char* name : {"softmax-topk", "sigmoid-grouped", "hash-projection", "hash-token"}) {
    const auto mode = ParseRouterMode(name);
    ASSERT_TRUE(mode.ok()) << name;
    EXPECT_EQ(RouterModeName(mode.value()), name);
  }
  for (const char* name : {"softmax", "load-aware", "", "Hash-Token"}) {
    EXPECT_EQ(ParseRouterMode(name).status().code(), StatusCode::kInvalidArgument) << name;
  }
  EXPECT_EQ(ParseCapacityOverflow("drop").value(), CapacityOverflow::kDrop);
  EXPECT_EQ(ParseCapacityOverflow("reroute").value(), CapacityOverflow::kReroute);
  EXPECT_FALSE(ParseCapacityOverflow("spill").ok());
}

// Softmax of {1, 2, 3, 4}: e^-3, e^-2, e^-1, 1 over their sum 1.5530018, as in
// router_test.cc: top-2 = {3, 2} with p = 0.6439143, 0.2368828.
TEST(RouterSoftmaxTest, HandComputedTopTwo) {
  RouterConfig config;
  config.renormalize = false;
  auto router = MakeRouter(config, 4, 2);
  const Routed r = RouteLogits(*router, {1, 2, 3, 4});
  EXPECT_EQ(r.ids, (std::vector<uint32_t>{3, 2}));
  EXPECT_NEAR(r.weights[0], 0.6439142598, 1e-7);
  EXPECT_NEAR(r.weights[1], 0.2368828181, 1e-7);
  EXPECT_EQ(router->counters().tokens_routed, 1u);
}

// The load-aware path computes softmax itself; with no redirection it must
// equal RouteTopK bit for bit (-inf logits included).
TEST(RouterSoftmaxTest, RankingPathIsBitIdenticalToRouteTopK) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const uint32_t experts = 16;
  const size_t tokens = 64;
  std::vector<float> logits(tokens * experts);
  for (float& l : logits) l = normal(rng);
  for (size_t i = 0; i < logits.size(); i += 5) logits[i] = -std::numeric_limits<float>::infinity();
  for (const bool renormalize : {false, true}) {
    for (const uint32_t k : {1u, 2u, 5u, 16u}) {
      RouterConfig config = LoadAwareTokens(RouterMode::kSoftmaxTopK, 8, 1e30f);
      config.renormalize = renormalize;
      auto load_aware = MakeRouter(config, experts, k);
      config.load_aware.enabled = false;
      auto plain = MakeRouter(config, experts, k);
      const Routed a = RouteLogits(*load_aware, logits);
      const Routed b = RouteLogits(*plain, logits);
      for (size_t t = 0; t < tokens; ++t) {
        std::vector<uint32_t> ids(k);
        std::vector<float> weights(k);
        ASSERT_TRUE(RouteTopK(logits.data() + t * experts, experts, k, renormalize, ids.data(), weights.data()).ok());
        for (uint32_t j = 0; j < k; ++j) {
          ASSERT_EQ(a.ids[t * k + j], ids[j]) << "token " << t << " k " << k;
          ASSERT_EQ(b.ids[t * k + j], ids[j]);
          ASSERT_EQ(FloatBits(a.weights[t * k + j]), FloatBits(weights[j])) << "token " << t << " k " << k;
          ASSERT_EQ(FloatBits(b.weights[t * k + j]), FloatBits(weights[j]));
        }
      }
      EXPECT_EQ(load_aware->counters().slots_redirected, 0u);
    }
  }
}

// 8 experts in 4 groups of 2; logits, bias:
//   logits = [2.0, -1.0, 0.5, 0.4, 1.0, 0.8, -0.3, 3.0]
//   bias   = [0.0,  0.1, 0.2, 0.2, -0.1, 0.0, 0.5, -0.4]
// s = 1/(1+e^-l) = [.8807971, .2689414, .6224594, .5986876, .7310586, .6899745, .4255575, .9525741]
// b = s + bias   = [.8807971, .3689414, .8224593, .7986876, .6310586, .6899745, .9255575, .5525742]
// group score (sum of the group's two b) = [1.2497385, 1.6211469, 1.3210330, 1.4781317]
// kept_groups 2: groups 1 and 3, experts {2, 3, 6, 7}; by b: 6 (.9256), 2 (.8225),
// 3 (.7987), 7 (.5526): top-2 = [6, 2]. Expert 0 (b .8808, second overall) is
// out because its group's partner is weak; expert 7 (the largest s) because
// of its bias.
// Weights from unbiased s: S = .4255575 + .6224594 = 1.0480169;
//   w6 = .4255575 / S * 2.5 = 1.0151495, w2 = .6224594 / S * 2.5 = 1.4848506.
// Python (fp32 rounding emulated with struct.pack('f')):
//   s=[1/(1+exp(-l))]; b=[s+bias]; g=[sum of top-2 b per pair]; keep top-2 g
//   (ties lower id); top-2 b over kept experts; w = s/sum(s chosen)*2.5
RouterConfig DeepSeekFixture() {
  RouterConfig config;
  config.mode = RouterMode::kSigmoidGrouped;
  config.groups = 4;
  config.kept_groups = 2;
  config.routed_scaling_factor = 2.5f;
  config.expert_bias = {0.0f, 0.1f, 0.2f, 0.2f, -0.1f, 0.0f, 0.5f, -0.4f};
  return config;
}
const std::vector<float> kDeepSeekLogits = {2.0f, -1.0f, 0.5f, 0.4f, 1.0f, 0.8f, -0.3f, 3.0f};

TEST(RouterSigmoidGroupedTest, MatchesHandComputedFixture) {
  auto router = MakeRouter(DeepSeekFixture(), 8, 2);
  const Routed r = RouteLogits(*router, kDeepSeekLogits);
  EXPECT_EQ(r.ids, (std::vector<uint32_t>{6, 2}));
  EXPECT_NEAR(r.weights[0], 1.0151495, 2e-6);
  EXPECT_NEAR(r.weights[1], 1.4848506, 2e-6);
  EXPECT_NEAR(r.weights[0] + r.weights[1], 2.5f, 1e-6);
}

// Without renormalisation: w = s * 2.5 = .4255575 * 2.5 = 1.0638938, .6224594 * 2.5 = 1.5561484.
TEST(RouterSigmoidGroupedTest, WithoutRenormalisationScalesTheScores) {
  RouterConfig config = DeepSeekFixture();
  config.renormalize = false;
  auto router = MakeRouter(config, 8, 2);
  const Routed r = RouteLogits(*router, kDeepSeekLogits);
  EXPECT_EQ(r.ids, (std::vector<uint32_t>{6, 2}));
  EXPECT_NEAR(r.weights[0], 1.0638938, 2e-6);
  EXPECT_NEAR(r.weights[1], 1.5561484, 2e-6);
}

// Keeping all 4 groups: top-2 by b over every expert = 6 (.9256), 0 (.8808).
TEST(RouterSigmoidGroupedTest, KeepingEveryGroupIsPlainTopK) {
  RouterConfig config = DeepSeekFixture();
  config.kept_groups = 4;
  auto router = MakeRouter(config, 8, 2);
  EXPECT_EQ(RouteLogits(*router, kDeepSeekLogits).ids, (std::vector<uint32_t>{6, 0}));
}

// All logits 0: s = 0.5 everywhere, every group scores 1.0: groups 0 and 1
// kept (lower ids), experts 0 and 1 chosen (lower ids), w = 0.5 each.
TEST(RouterSigmoidGroupedTest, TiesGoToLowerGroupThenLowerExpert) {
  RouterConfig config = DeepSeekFixture();
  config.expert_bias.clear();
  config.routed_scaling_factor = 1.0f;
  auto router = MakeRouter(config, 8, 3);
  const Routed r = RouteLogits(*router, std::vector<float>(8, 0.0f));
  EXPECT_EQ(r.ids, (std::vector<uint32_t>{0, 1, 2}));
  for (float w : r.weights) EXPECT_NEAR(w, 1.0f / 3.0f, 1e-7);
}

// Margins. Softmax {1, 2, 3, 4}, k = 2: p(rank 2) - p(rank 3) = (e^-1 - e^-2)
// / 1.5530018 = 0.1497385. Softmax {5, 5, 0, 0}: p1 - p2 = (1 - e^-5) /
// (2 + 2 e^-5) = 0.4933071. The fixture: expert margin b2 - b3 = .8224593 -
// .7986876 = 0.0237717; group margin 1.4781317 - 1.3210330 = 0.1570987; the
// smaller is 0.0237717.
TEST(RouterMarginTest, HandComputedMargins) {
  auto softmax = MakeRouter(RouterConfig{}, 4, 2);
  const std::vector<float> logits = {1, 2, 3, 4, 5, 5, 0, 0};
  RouterInput in{.tokens = 2, .logits = logits.data()};
  std::vector<float> margins(2);
  ASSERT_TRUE(softmax->SelectionMargins(in, margins.data()).ok());
  EXPECT_NEAR(margins[0], 0.1497385, 1e-6);
  EXPECT_NEAR(margins[1], 0.4933071, 1e-6);
  auto grouped = MakeRouter(DeepSeekFixture(), 8, 2);
  RouterInput fixture{.tokens = 1, .logits = kDeepSeekLogits.data()};
  ASSERT_TRUE(grouped->SelectionMargins(fixture, margins.data()).ok());
  EXPECT_NEAR(margins[0], 0.0237717, 2e-6);
  auto all = MakeRouter(RouterConfig{}, 4, 4);
  ASSERT_TRUE(all->SelectionMargins(RouterInput{.tokens = 1, .logits = logits.data()}, margins.data()).ok());
  EXPECT_EQ(margins[0], std::numeric_limits<float>::infinity());
}

TEST(RouterMarginTest, HashModesHaveNoMargin) {
  RouterConfig config;
  config.mode = RouterMode::kHashToken;
  config.vocab_size = 4;
  auto router = MakeRouter(config, 4, 1);
  const uint32_t token = 1;
  float margin;
  EXPECT_EQ(router->SelectionMargins(RouterInput{.tokens = 1, .token_ids = &token}, &margin).code(),
            StatusCode::kInvalidArgument);
}

// d = 3, P = 2, all values dyadic so every product and sum is exact:
//   h = [0.5, -0.25, 1.0]; W = [[0.125, -0.5], [0.75, 0.0625], [-0.375, 1.5]]
//   r0 = 0.0625 - 0.1875 - 0.375 = -0.5;  r1 = -0.25 - 0.015625 + 1.5 = 1.234375
//   r0 * 1e6 = -500000 -> uint32 0xFFF85EE0 -> & 0xFFFFF = 0x85EE0
//   r1 * 1e6 = 1234375 = 0x12D5C7          -> & 0xFFFFF = 0x2D5C7
//   key = 0x85EE0 ^ 0x2D5C7 = 0xA8B27 = 690983; 16 experts: first = 690983 % 16 = 7.
// Slots >= 1 (python: splitmix64 output of state (key << 32) | a, mod 16):
//   a = 1: 0x072847f36248818a % 16 = 10
//   a = 2: 0x84049c951cdbe5f3 % 16 = 3
//   a = 3: 0x07b955a107acde93 % 16 = 3, taken at a = 2 -> probe to 4.
// So the ranking starts [7, 10, 3, 4].
RouterConfig ProjectionFixture() {
  RouterConfig config;
  config.mode = RouterMode::kHashProjection;
  config.projection_dims = 2;
  config.projection = {0.125f, -0.5f, 0.75f, 0.0625f, -0.375f, 1.5f};
  return config;
}
const std::vector<float> kProjectionHidden = {0.5f, -0.25f, 1.0f};

TEST(RouterHashProjectionTest, HandComputedHashAndSaltedSlots) {
  for (uint32_t k = 1; k <= 4; ++k) {
    auto router = MakeRouter(ProjectionFixture(), 16, k, 3);
    const Routed r = RouteBatch(*router, RouterInput{.tokens = 1, .hidden = kProjectionHidden.data()});
    const std::vector<uint32_t> ranking = {7, 10, 3, 4};
    EXPECT_EQ(r.ids, std::vector<uint32_t>(ranking.begin(), ranking.begin() + k));
    for (float w : r.weights) EXPECT_EQ(w, 1.0f / static_cast<float>(k));
  }
}

// Out-of-range coordinates clamp before the int32 cast: h = [1e4], W = [[1]]:
// q = 1e10 >= 2^31 -> INT32_MAX = 0x7FFFFFFF -> 0xFFFFF = 1048575; 1000
// experts: 575. h = [-1e4]: INT32_MIN = 0x80000000 -> 0 -> expert 0. h = [3e38],
// W = [[10]]: r = +inf -> INT32_MAX -> 575. Truncation toward zero: h =
// [-1.5e-6]: q = -1.5 -> -1 = 0xFFFFFFFF -> 0xFFFFF -> 575.
TEST(RouterHashProjectionTest, ClampsOutOfRangeCoordinates) {
  RouterConfig config;
  config.mode = RouterMode::kHashProjection;
  config.projection_dims = 1;
  config.projection = {1.0f};
  auto router = MakeRouter(config, 1000, 1, 1);
  const std::vector<float> hidden = {1e4f, -1e4f, -1.5e-6f, 0.0f};
  EXPECT_EQ(RouteBatch(*router, RouterInput{.tokens = 4, .hidden = hidden.data()}).ids,
            (std::vector<uint32_t>{575, 0, 575, 0}));
  config.projection = {10.0f};
  auto scaled = MakeRouter(config, 1000, 1, 1);
  const float huge = 3e38f;
  EXPECT_EQ(RouteBatch(*scaled, RouterInput{.tokens = 1, .hidden = &huge}).ids, (std::vector<uint32_t>{575}));
}

// r = 3e38 * 10 + 3e38 * -10 = inf - inf = NaN: refused, naming the coordinate.
TEST(RouterHashProjectionTest, RefusesNaNProjection) {
  RouterConfig config;
  config.mode = RouterMode::kHashProjection;
  config.projection_dims = 1;
  config.projection = {10.0f, -10.0f};
  auto router = MakeRouter(config, 8, 1, 2);
  const std::vector<float> hidden = {3e38f, 3e38f};
  uint32_t id;
  float weight;
  const Status status = router->Route(RouterInput{.tokens = 1, .hidden = hidden.data()}, &id, &weight);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("coordinate 0"), std::string::npos) << status.message();
}

// Collisions: with top_k = experts every token's ids are a permutation, and
// with top_k 8 of 9 experts (many rehash collisions) never a repeated id.
TEST(RouterHashProjectionTest, SaltedRehashNeverRepeatsAnId) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const uint32_t hidden_size = 16, dims = 8, tokens = 500;
  RouterConfig config;
  config.mode = RouterMode::kHashProjection;
  config.projection_dims = dims;
  config.projection.resize(hidden_size * dims);
  for (float& w : config.projection) w = normal(rng);
  std::vector<float> hidden(tokens * hidden_size);
  for (float& h : hidden) h = normal(rng);
  for (const auto& [experts, k] : std::vector<std::pair<uint32_t, uint32_t>>{{5, 5}, {9, 8}, {64, 8}}) {
    auto router = MakeRouter(config, experts, k, hidden_size);
    const Routed r = RouteBatch(*router, RouterInput{.tokens = tokens, .hidden = hidden.data()});
    for (uint32_t t = 0; t < tokens; ++t) {
      const std::set<uint32_t> distinct(r.ids.begin() + t * k, r.ids.begin() + (t + 1) * k);
      ASSERT_EQ(distinct.size(), k) << "token " << t << " experts " << experts;
      ASSERT_LT(*distinct.rbegin(), experts);
    }
  }
}

// vocab 10, 4 experts, seed 42 (python, the header's shuffle):
//   table = [0, 0, 3, 1, 1, 2, 0, 2, 3, 1]  (experts 0, 1 hold 3 ids; 2, 3 hold 2)
// Token 7: first 2; rehash(7, a) % 4 for a = 1, 2, 3 = 0, 1, 0 -> 0, 1, then
//   0 taken -> 1 taken -> 2 taken -> 3: ranking [2, 0, 1, 3].
// Token 3: first 1; rehash = 2, 1, 0 -> 2, then 1 taken -> 2 taken -> 3, then 0:
//   ranking [1, 2, 3, 0].
RouterConfig TokenFixture() {
  RouterConfig config;
  config.mode = RouterMode::kHashToken;
  config.vocab_size = 10;
  config.table_seed = 42;
  return config;
}

TEST(RouterHashTokenTest, SeededBalancedTable) {
  auto router = MakeRouter(TokenFixture(), 4, 1);
  const std::vector<uint32_t> table(router->token_table().begin(), router->token_table().end());
  EXPECT_EQ(table, (std::vector<uint32_t>{0, 0, 3, 1, 1, 2, 0, 2, 3, 1}));
  EXPECT_EQ(RouteTokens(*router, {0, 2, 5, 9}).ids, (std::vector<uint32_t>{0, 3, 2, 1}));
  RouterConfig other = TokenFixture();
  other.table_seed = 43;
  auto reseeded = MakeRouter(other, 4, 1);
  EXPECT_FALSE(std::equal(table.begin(), table.end(), reseeded->token_table().begin()));
}

TEST(RouterHashTokenTest, SaltedSlotsWithProbing) {
  auto router = MakeRouter(TokenFixture(), 4, 4);
  const Routed r = RouteTokens(*router, {7, 3});
  EXPECT_EQ(r.ids, (std::vector<uint32_t>{2, 0, 1, 3, 1, 2, 3, 0}));
  for (float w : r.weights) EXPECT_EQ(w, 0.25f);
}

TEST(RouterHashTokenTest, LargeVocabularyIsBalanced) {
  RouterConfig config = TokenFixture();
  config.vocab_size = 1000;
  auto router = MakeRouter(config, 7, 1);
  std::vector<uint32_t> per_expert(7, 0);
  for (uint32_t e : router->token_table()) ++per_expert[e];
  for (uint32_t count : per_expert) EXPECT_TRUE(count == 142 || count == 143) << count;  // 1000 / 7 = 142.86
}

// Softmax, 4 experts, k = 1, window 4 tokens, threshold 0.35, every token's
// logits [2, 1, 0, -1] (ranking 0, 1, 2, 3). Over the limit: count * 4 > total * 1.35.
//   t0: window empty                        -> 0; counts [1,0,0,0] total 1
//   t1: 0: 4 > 1.35 over; 1: 0              -> 1; counts [1,1,0,0] total 2
//   t2: 0, 1: 4 > 2.7 over; 2: 0            -> 2; counts [1,1,1,0] total 3
//   t3: 0: 4 > 4.05? no                     -> 0; counts [2,1,1,0] total 4
//   t4: 0: 8 > 5.4 over; 1: 4 > 5.4? no     -> 1; t0 leaves: counts [1,2,1,0]
//   t5: 0: 4 > 5.4? no                      -> 0
TEST(RouterLoadAwareTest, TokenWindowRedirectsOnlyOverTheLimit) {
  auto router = MakeRouter(LoadAwareTokens(RouterMode::kSoftmaxTopK, 4, 0.35f), 4, 1);
  std::vector<float> logits;
  for (int t = 0; t < 6; ++t) logits.insert(logits.end(), {2, 1, 0, -1});
  const Routed r = RouteLogits(*router, logits);
  EXPECT_EQ(r.ids, (std::vector<uint32_t>{0, 1, 2, 0, 1, 0}));
  for (float w : r.weights) EXPECT_EQ(w, 1.0f);
  EXPECT_EQ(router->counters().tokens_redirected, 3u);
  EXPECT_EQ(router->counters().slots_redirected, 3u);
  // t3 with threshold 0: 4 > 3 over -> redirected to 3 (counts [1,1,1,0]).
  auto strict = MakeRouter(LoadAwareTokens(RouterMode::kSoftmaxTopK, 4, 0.0f), 4, 1);
  EXPECT_EQ(RouteLogits(*strict, logits).ids[3], 3u);
  // A high threshold never redirects.
  auto loose = MakeRouter(LoadAwareTokens(RouterMode::kSoftmaxTopK, 4, 10.0f), 4, 1);
  EXPECT_EQ(RouteLogits(*loose, logits).ids, std::vector<uint32_t>(6, 0));
  EXPECT_EQ(loose->counters().tokens_redirected, 0u);
}

// k = 2, window 1 token. t0 logits [2, -1, -1, 1] -> [0, 3]; counts [1,0,0,1],
// total 2. t1 logits [2, 1, 0, -1] -> top-2 [0, 1]; 0: 4 > 2.7 over ->
// [1, 2]; weights softmax renormalised: p1 / (p1 + p2) = e / (e + 1) = 0.7310586.
TEST(RouterLoadAwareTest, RedirectedWeightsAreTheModesWeightsOfTheNewSet) {
  auto router = MakeRouter(LoadAwareTokens(RouterMode::kSoftmaxTopK, 1, 0.35f), 4, 2);
  const Routed r = RouteLogits(*router, {2, -1, -1, 1, 2, 1, 0, -1});
  EXPECT_EQ(r.ids, (std::vector<uint32_t>{0, 3, 1, 2}));
  EXPECT_NEAR(r.weights[2], 0.7310585786, 1e-7);
  EXPECT_NEAR(r.weights[3], 0.2689414214, 1e-7);
  EXPECT_EQ(router->counters().tokens_redirected, 1u);
  EXPECT_EQ(router->counters().slots_redirected, 1u);
}

// k = 3, threshold 0, window 1 token. t0 [3, 2, 1, 0] -> [0, 1, 2]; counts
// [1,1,1,0], total 3: experts 0, 1, 2 over (4 > 3), only 3 is not. t1 the
// same logits: 3, then the best over-limit experts 0, 1 fill: [0, 1, 3]; one
// slot (expert 2) moved.
TEST(RouterLoadAwareTest, FillsWithBestOverLimitWhenTooFewAreUnder) {
  auto router = MakeRouter(LoadAwareTokens(RouterMode::kSoftmaxTopK, 1, 0.0f), 4, 3);
  const Routed r = RouteLogits(*router, {3, 2, 1, 0, 3, 2, 1, 0});
  EXPECT_EQ(r.ids, (std::vector<uint32_t>{0, 1, 2, 0, 1, 3}));
  EXPECT_EQ(router->counters().slots_redirected, 1u);
}

// Hash modes redirect to the next salted rehash: token 7's ranking is
// [2, 0, 1, 3] (TokenFixture); threshold 0, window 1: second time 2 is over -> 0.
TEST(RouterLoadAwareTest, HashModeRedirectsToNextRehash) {
  RouterConfig config = TokenFixture();
  config.load_aware = LoadAwareTokens(RouterMode::kHashToken, 1, 0.0f).load_aware;
  auto router = MakeRouter(config, 4, 1);
  EXPECT_EQ(RouteTokens(*router, {7, 7, 7}).ids, (std::vector<uint32_t>{2, 0, 2}));
}

// sigmoid-grouped redirects inside the kept groups first: the fixture's
// ranking is [6, 2, 3, 7, ...]; threshold 0, window 1: t1 finds 6 and 2 over
// -> [3, 7]; weights s3, s7 renormalised x 2.5.
TEST(RouterLoadAwareTest, SigmoidGroupedRedirectsWithinKeptGroups) {
  RouterConfig config = DeepSeekFixture();
  config.load_aware = LoadAwareTokens(RouterMode::kSigmoidGrouped, 1, 0.0f).load_aware;
  auto router = MakeRouter(config, 8, 2);
  std::vector<float> logits = kDeepSeekLogits;
  logits.insert(logits.end(), kDeepSeekLogits.begin(), kDeepSeekLogits.end());
  const Routed r = RouteLogits(*router, logits);
  EXPECT_EQ(r.ids, (std::vector<uint32_t>{6, 2, 3, 7}));
  // s3 = .5986877, s7 = .9525741: w = s / 1.5512618 * 2.5 = 0.9648398, 1.5351602.
  EXPECT_NEAR(r.weights[2], 0.9648398, 2e-6);
  EXPECT_NEAR(r.weights[3], 1.5351602, 2e-6);
}

RouterConfig LoadAwareTime(TimeNs window_ns, float threshold) {
  RouterConfig config;
  config.load_aware.enabled = true;
  config.load_aware.unit = LoadWindowUnit::kTime;
  config.load_aware.window_ns = window_ns;
  config.load_aware.threshold = threshold;
  return config;
}

// 2 experts, k = 1, threshold 0, each batch one token preferring expert 0
// ([1, 0]). Batch 1 at t = 0 -> 0. Batch 2: if batch 1 is in the window
// (counts [1, 0]: 2 > 1 over) -> 1, else -> 0. A 100 ns window keeps batch 1
// at t = 99, not at t = 100; a 1-token window keeps it whatever the time.
TEST(RouterLoadAwareTest, TimeWindowDependsOnTimestampsTokenWindowDoesNot) {
  const std::vector<float> prefers_zero = {1, 0};
  for (const auto& [second_time, want] : std::vector<std::pair<TimeNs, uint32_t>>{{99, 1}, {100, 0}, {1000, 0}}) {
    auto timed = MakeRouter(LoadAwareTime(100, 0.0f), 2, 1);
    EXPECT_EQ(RouteLogits(*timed, prefers_zero, 0).ids[0], 0u);
    EXPECT_EQ(RouteLogits(*timed, prefers_zero, second_time).ids[0], want) << "t = " << second_time;
    auto counted = MakeRouter(LoadAwareTokens(RouterMode::kSoftmaxTopK, 1, 0.0f), 2, 1);
    EXPECT_EQ(RouteLogits(*counted, prefers_zero, 0).ids[0], 0u);
    EXPECT_EQ(RouteLogits(*counted, prefers_zero, second_time).ids[0], 1u);
  }
}

// The time window's ring grows past its initial 1024 tokens and still evicts
// the right tokens. Threshold 0, 2 experts, k = 1:
//   batch t = 0: 1501 tokens preferring 0 alternate 0, 1, 0, ... -> counts [751, 750]
//   batch t = 50: a token preferring 1: 1500 > 1501? no -> 1; counts [751, 751]
//   batch t = 120 (batch 1 evicted, counts [0, 1]): a token preferring 1: 2 > 1 over -> 0.
//   (Had batch 1 stayed: 1502 > 1502? no -> 1.)
TEST(RouterLoadAwareTest, TimeWindowGrowsAndEvictsByTime) {
  auto router = MakeRouter(LoadAwareTime(100, 0.0f), 2, 1);
  std::vector<float> first;
  for (int t = 0; t < 1501; ++t) first.insert(first.end(), {1, 0});
  const Routed r = RouteLogits(*router, first, 0);
  for (size_t t = 0; t < r.ids.size(); ++t) ASSERT_EQ(r.ids[t], t % 2) << t;
  EXPECT_EQ(RouteLogits(*router, {0, 1}, 50).ids[0], 1u);
  EXPECT_EQ(RouteLogits(*router, {0, 1}, 120).ids[0], 0u);
}

TEST(RouterLoadAwareTest, RefusesTimeGoingBackwardsWithoutChangingState) {
  auto router = MakeRouter(LoadAwareTime(100, 0.0f), 2, 1);
  const std::vector<float> logits = {1, 0};
  EXPECT_EQ(RouteLogits(*router, logits, 10).ids[0], 0u);
  uint32_t id = 99;
  float weight = -1;
  EXPECT_EQ(router->Route(RouterInput{.tokens = 1, .logits = logits.data(), .time_ns = 9}, &id, &weight).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(router->Route(RouterInput{.tokens = 1, .logits = logits.data(), .time_ns = -1}, &id, &weight).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(id, 99u);
  EXPECT_EQ(router->counters().tokens_routed, 1u);
  EXPECT_EQ(RouteLogits(*router, logits, 10).ids[0], 1u);  // the t = 10 token is still in the window
}

// A batch with a NaN in its last token is refused before any token is
// routed: the window is unchanged, so the next batch routes as if it never came.
TEST(RouterLoadAwareTest, ErrorLeavesTheWindowUnchanged) {
  auto router = MakeRouter(LoadAwareTokens(RouterMode::kSoftmaxTopK, 4, 0.0f), 2, 1);
  auto fresh = MakeRouter(LoadAwareTokens(RouterMode::kSoftmaxTopK, 4, 0.0f), 2, 1);
  const std::vector<float> bad = {1, 0, 1, std::nanf("")};
  std::vector<uint32_t> ids(2);
  std::vector<float> weights(2);
  const Status status = router->Route(RouterInput{.tokens = 2, .logits = bad.data()}, ids.data(), weights.data());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("token 1"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("expert 1"), std::string::npos) << status.message();
  const std::vector<float> good = {1, 0, 1, 0, 1, 0};
  EXPECT_EQ(RouteLogits(*router, good).ids, RouteLogits(*fresh, good).ids);
}

// Capacity 1, softmax, 4 experts, k = 2, three tokens with logits [3, 2, 1, 0]
// (ranking 0, 1, 2, 3; weights p0, p1 renormalised).
//   drop:    t0 [0, 1]; t1 both full -> dropped; t2 dropped: 4 dropped slots.
//   reroute: t0 [0, 1]; t1 slot 0 (0 full) -> 2 (1 full), slot 1 (1 full) ->
//            3 (2 now held); t2: every expert full -> both dropped.
TEST(RouterCapacityTest, RerouteMovesOverflowToNextBestWithRoom) {
  auto router = MakeRouter(RouterConfig{}, 4, 2);
  std::vector<float> logits;
  for (int t = 0; t < 3; ++t) logits.insert(logits.end(), {3, 2, 1, 0});
  const RouterInput in{.tokens = 3, .logits = logits.data()};
  const Routed routed = RouteBatch(*router, in);

  Routed dropped = routed;
  auto drop = router->ApplyCapacity(in, 1, CapacityOverflow::kDrop, dropped.ids.data(), dropped.weights.data());
  ASSERT_TRUE(drop.ok());
  EXPECT_EQ(drop->dropped.dropped_slots, 4u);
  EXPECT_EQ(drop->dropped.tokens_fully_dropped, 2u);
  EXPECT_EQ(drop->rerouted_slots, 0u);

  Routed rerouted = routed;
  auto reroute =
      router->ApplyCapacity(in, 1, CapacityOverflow::kReroute, rerouted.ids.data(), rerouted.weights.data());
  ASSERT_TRUE(reroute.ok());
  EXPECT_EQ(rerouted.ids, (std::vector<uint32_t>{0, 1, 2, 3, kDroppedExpert, kDroppedExpert}));
  EXPECT_EQ(rerouted.weights[2], routed.weights[2]);  // a moved slot keeps its weight
  EXPECT_EQ(rerouted.weights[3], routed.weights[3]);
  EXPECT_EQ(rerouted.weights[4], 0.0f);
  EXPECT_EQ(reroute->rerouted_slots, 2u);
  EXPECT_EQ(reroute->dropped.dropped_slots, 2u);
  EXPECT_EQ(reroute->dropped.tokens_with_drops, 1u);
  EXPECT_EQ(reroute->dropped.tokens_fully_dropped, 1u);
  EXPECT_EQ(router->counters().capacity_dropped_slots, 6u);
  EXPECT_EQ(router->counters().capacity_rerouted_slots, 2u);
}

// hash-token, k = 2, capacity 1: token 7 (ranking [2, 0, 1, 3]) twice: the
// second's slots go to 1 and 3, the next rehashes with room.
TEST(RouterCapacityTest, HashModeReroutesAlongItsRanking) {
  auto router = MakeRouter(TokenFixture(), 4, 2);
  const std::vector<uint32_t> tokens = {7, 7};
  const RouterInput in{.tokens = 2, .token_ids = tokens.data()};
  Routed r = RouteBatch(*router, in);
  EXPECT_EQ(r.ids, (std::vector<uint32_t>{2, 0, 2, 0}));
  auto counts = router->ApplyCapacity(in, 1, CapacityOverflow::kReroute, r.ids.data(), r.weights.data());
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(r.ids, (std::vector<uint32_t>{2, 0, 1, 3}));
  EXPECT_EQ(counts->rerouted_slots, 2u);
}

TEST(RouterCapacityTest, RefusesBadIds) {
  auto router = MakeRouter(RouterConfig{}, 4, 1);
  const std::vector<float> logits = {1, 2, 3, 4};
  uint32_t id = 4;
  float weight = 1;
  for (CapacityOverflow overflow : {CapacityOverflow::kDrop, CapacityOverflow::kReroute}) {
    EXPECT_EQ(router->ApplyCapacity(RouterInput{.tokens = 1, .logits = logits.data()}, 1, overflow, &id, &weight)
                  .status()
                  .code(),
              StatusCode::kInvalidArgument);
  }
}

TEST(RouterInputTest, RefusesBadConfigs) {
  const auto refused = [](const RouterConfig& config, uint32_t experts, uint32_t top_k, uint32_t hidden = 0) {
    const auto router = Router::Create(config, experts, top_k, hidden);
    return !router.ok() && router.status().code() == StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(refused(RouterConfig{}, 0, 1));
  EXPECT_TRUE(refused(RouterConfig{}, 4, 0));
  EXPECT_TRUE(refused(RouterConfig{}, 4, 5));
  RouterConfig grouped = DeepSeekFixture();
  EXPECT_TRUE(refused(grouped, 6, 2));  // 6 % 4 groups
  EXPECT_TRUE(refused(grouped, 8, 5));  // 5 > 2 kept groups x 2 experts
  grouped.kept_groups = 5;
  EXPECT_TRUE(refused(grouped, 8, 2));
  grouped = DeepSeekFixture();
  grouped.expert_bias.pop_back();
  EXPECT_TRUE(refused(grouped, 8, 2));
  grouped = DeepSeekFixture();
  grouped.expert_bias[3] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(refused(grouped, 8, 2));
  grouped = DeepSeekFixture();
  grouped.routed_scaling_factor = std::nanf("");
  EXPECT_TRUE(refused(grouped, 8, 2));
  RouterConfig projection = ProjectionFixture();
  EXPECT_TRUE(refused(projection, 16, 1, 4));  // 6 values, want 8
  projection.projection_dims = 9;
  EXPECT_TRUE(refused(projection, 16, 1, 3));
  projection = ProjectionFixture();
  projection.projection[0] = std::nanf("");
  EXPECT_TRUE(refused(projection, 16, 1, 3));
  RouterConfig token = TokenFixture();
  token.vocab_size = 0;
  EXPECT_TRUE(refused(token, 4, 1));
  EXPECT_TRUE(refused(LoadAwareTokens(RouterMode::kSoftmaxTopK, 0, 0.35f), 4, 1));
  EXPECT_TRUE(refused(LoadAwareTokens(RouterMode::kSoftmaxTopK, 1u << 20, 0.35f), 128, 65));  // 2^20 x 65 slots
  EXPECT_TRUE(refused(LoadAwareTokens(RouterMode::kSoftmaxTopK, 4, -0.1f), 4, 1));
  EXPECT_TRUE(refused(LoadAwareTime(0, 0.35f), 4, 1));
}

TEST(RouterInputTest, RefusesBadInputs) {
  uint32_t ids[2];
  float weights[2];
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  auto grouped = MakeRouter(DeepSeekFixture(), 8, 2);
  for (const float bad : {nan, inf, -inf}) {
    std::vector<float> logits = kDeepSeekLogits;
    logits[3] = bad;
    const Status status = grouped->Route(RouterInput{.tokens = 1, .logits = logits.data()}, ids, weights);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find("expert 3"), std::string::npos) << status.message();
  }
  EXPECT_EQ(grouped->Route(RouterInput{.tokens = 1}, ids, weights).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(grouped->Route(RouterInput{.tokens = 1, .logits = kDeepSeekLogits.data()}, nullptr, weights).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(grouped->Route(RouterInput{.tokens = 0}, nullptr, nullptr).ok());

  auto softmax = MakeRouter(RouterConfig{}, 2, 1);
  const std::vector<float> all_masked = {-inf, -inf};
  EXPECT_EQ(softmax->Route(RouterInput{.tokens = 1, .logits = all_masked.data()}, ids, weights).code(),
            StatusCode::kInvalidArgument);

  auto projection = MakeRouter(ProjectionFixture(), 16, 1, 3);
  const std::vector<float> hidden = {0.5f, nan, 1.0f};
  EXPECT_EQ(projection->Route(RouterInput{.tokens = 1, .hidden = hidden.data()}, ids, weights).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(projection->Route(RouterInput{.tokens = 1, .logits = hidden.data()}, ids, weights).code(),
            StatusCode::kInvalidArgument);

  auto token = MakeRouter(TokenFixture(), 4, 1);
  const uint32_t out_of_vocab = 10;
  EXPECT_EQ(token->Route(RouterInput{.tokens = 1, .token_ids = &out_of_vocab}, ids, weights).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(token->Route(RouterInput{.tokens = 1}, ids, weights).code(), StatusCode::kInvalidArgument);
}

// Same config and inputs -> the same ids, weights and counters, bit for bit,
// for every mode with load-aware routing and reroute capacity on.
TEST(RouterDeterminismTest, SameInputsSameOutputs) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const uint32_t experts = 16, k = 4, hidden_size = 8;
  const size_t tokens = 300;
  std::vector<float> logits(tokens * experts), hidden(tokens * hidden_size);
  std::vector<uint32_t> token_ids(tokens);
  for (float& l : logits) l = normal(rng);
  for (float& h : hidden) h = normal(rng);
  for (uint32_t& id : token_ids) id = rng() % 100;
  const RouterInput in{.tokens = tokens, .logits = logits.data(), .hidden = hidden.data(), .token_ids = token_ids.data()};
  for (RouterMode mode : {RouterMode::kSoftmaxTopK, RouterMode::kSigmoidGrouped, RouterMode::kHashProjection,
                          RouterMode::kHashToken}) {
    RouterConfig config = LoadAwareTokens(mode, 32, 0.1f);
    config.groups = 4;
    config.kept_groups = 2;
    config.expert_bias.assign(experts, 0.05f);
    config.projection_dims = 4;
    config.projection.resize(hidden_size * 4);
    for (float& w : config.projection) w = normal(rng);
    config.vocab_size = 100;
    config.table_seed = 5;
    std::vector<Routed> runs;
    std::vector<RouterCounters> counters;
    for (int run = 0; run < 2; ++run) {
      auto router = MakeRouter(config, experts, k, hidden_size);
      Routed r = RouteBatch(*router, in);
      ASSERT_TRUE(router->ApplyCapacity(in, 60, CapacityOverflow::kReroute, r.ids.data(), r.weights.data()).ok());
      runs.push_back(r);
      counters.push_back(router->counters());
    }
    EXPECT_EQ(runs[0].ids, runs[1].ids) << RouterModeName(mode);
    for (size_t i = 0; i < runs[0].weights.size(); ++i) {
      ASSERT_EQ(FloatBits(runs[0].weights[i]), FloatBits(runs[1].weights[i])) << RouterModeName(mode);
    }
    EXPECT_EQ(counters[0].slots_redirected, counters[1].slots_redirected);
    EXPECT_GT(counters[0].slots_redirected, 0u) << RouterModeName(mode);
    EXPECT_EQ(counters[0].capacity_rerouted_slots, counters[1].capacity_rerouted_slots);
  }
}

}  // namespace
}  // namespace colibri::engine
