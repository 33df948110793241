// Routing stability: hand-checkable flips under bf16 rounding, zero noise and
// token-id routing that never change, determinism of the synthetic sets, and
// skipped modes with their reason.
#include "colibri/replay/route_stability.h"

#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <string>
#include <vector>

namespace colibri::replay {
namespace {

using engine::RouterMode;

constexpr RouterMode kAllModes[] = {RouterMode::kSoftmaxTopK, RouterMode::kSigmoidGrouped,
                                    RouterMode::kHashProjection, RouterMode::kHashToken};

RouteNoise Noise(const std::string& spec) {
  const Result<RouteNoise> noise = ParseRouteNoise(spec);
  EXPECT_TRUE(noise.ok()) << spec;
  return noise.ok() ? noise.value() : RouteNoise{};
}

StabilityOptions Options(std::vector<RouterMode> modes, const std::vector<std::string>& noises) {
  StabilityOptions o;
  o.modes = std::move(modes);
  for (const std::string& spec : noises) o.noises.push_back(Noise(spec));
  return o;
}

SyntheticRouteOptions SmallSynthetic() {
  SyntheticRouteOptions s;
  s.experts = {8, 16};
  s.layers = 2;
  s.tokens = 300;
  s.hidden_size = 16;
  s.vocab_size = 500;
  return s;
}

const StabilityRow& RowFor(const StabilityReport& report, RouterMode mode, const std::string& noise,
                           uint32_t experts) {
  for (const StabilityRow& r : report.rows) {
    if (r.mode == mode && r.noise == noise && r.experts == experts) return r;
  }
  ADD_FAILURE() << "no row for " << engine::RouterModeName(mode) << " " << noise << " " << experts;
  return report.rows.front();
}

TEST(RouteStabilityTest, ParsesNoiseSpecsAndRefusesBadOnes) {
  EXPECT_EQ(Noise("fp16").kind, RouteNoise::Kind::kFp16);
  EXPECT_EQ(Noise("bf16").kind, RouteNoise::Kind::kBf16);
  const RouteNoise gauss = Noise("gauss:1e-6");
  EXPECT_EQ(gauss.kind, RouteNoise::Kind::kGauss);
  EXPECT_EQ(gauss.sigma, 1e-6);
  EXPECT_EQ(gauss.spec, "gauss:1e-6");
  for (const char* bad : {"gauss:x", "gauss:", "gauss:-1", "gauss:inf", "gauss:1e-6x", "fp8", "", "Gauss:1"}) {
    const Result<RouteNoise> noise = ParseRouteNoise(bad);
    ASSERT_FALSE(noise.ok()) << bad;
    EXPECT_NE(noise.status().message().find("gauss:SIGMA"), std::string::npos) << noise.status().message();
  }
}

// Token 0: logits 1 and 1 + 2^-20 for experts 0 and 1. The baseline picks
// expert 1 with a margin of about 2.4e-7 (a near-tie); bf16 rounds both to 1,
// and the tie goes to the lower id, 0. Token 1 is far from any tie.
TEST(RouteStabilityTest, Bf16RoundingFlipsADecisionWithATinyMargin) {
  const RouteShape shape{1, 4, 1, 0};
  RouteBatch batch;
  batch.tokens = 2;
  batch.logits = {1.0f, 1.0f + std::ldexp(1.0f, -20), 0.0f, 0.0f, 0.0f, 1.0f, 3.0f, -2.0f};
  const Result<StabilityReport> report =
      MeasureStability(shape, {batch}, Options({RouterMode::kSoftmaxTopK}, {"bf16"}));
  ASSERT_TRUE(report.ok()) << report.status().message();
  ASSERT_EQ(report->rows.size(), 1u);
  const StabilityRow& r = report->rows[0];
  EXPECT_EQ(r.decisions, 2u);
  EXPECT_EQ(r.changed_set_fraction, 0.5);
  EXPECT_EQ(r.changed_ranked_fraction, 0.5);
  ASSERT_TRUE(r.near_ties.has_value());
  EXPECT_EQ(*r.near_ties, 1u);
  // Experts 1 and 2 hold one slot each, 0 and 3 none: cv = 1, max/mean = 2.
  EXPECT_DOUBLE_EQ(r.load.cv, 1.0);
  EXPECT_DOUBLE_EQ(r.load.max_over_mean, 2.0);
  EXPECT_FALSE(r.redirected_fraction.has_value());
}

TEST(RouteStabilityTest, ReorderingWithinTheSetIsARankedChangeOnly) {
  const RouteShape shape{1, 4, 2, 0};
  RouteBatch batch;
  batch.tokens = 1;
  batch.logits = {1.0f, 1.0f + std::ldexp(1.0f, -20), -5.0f, -5.0f};  // {1, 0} becomes {0, 1}
  const Result<StabilityReport> report =
      MeasureStability(shape, {batch}, Options({RouterMode::kSoftmaxTopK}, {"bf16"}));
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->rows[0].changed_set_fraction, 0.0);
  EXPECT_EQ(report->rows[0].changed_ranked_fraction, 1.0);
}

TEST(RouteStabilityTest, ZeroNoiseChangesNothing) {
  const StabilityOptions o = Options({std::begin(kAllModes), std::end(kAllModes)}, {"gauss:0"});
  const Result<StabilityReport> report = MeasureSyntheticStability(SmallSynthetic(), o);
  ASSERT_TRUE(report.ok()) << report.status().message();
  ASSERT_EQ(report->rows.size(), 2u * 4);
  for (const StabilityRow& r : report->rows) {
    EXPECT_EQ(r.decisions, 2u * 300) << engine::RouterModeName(r.mode);
    EXPECT_EQ(r.changed_set_fraction, 0.0) << engine::RouterModeName(r.mode);
    EXPECT_EQ(r.changed_ranked_fraction, 0.0) << engine::RouterModeName(r.mode);
    EXPECT_EQ(r.near_ties.has_value(), r.mode == RouterMode::kSoftmaxTopK || r.mode == RouterMode::kSigmoidGrouped);
    EXPECT_GT(r.load.cv, 0.0);
  }
}

TEST(RouteStabilityTest, HashTokenNeverChangesWhileTheProjectionHashDoes) {
  const StabilityOptions o = Options({RouterMode::kHashProjection, RouterMode::kHashToken}, {"bf16", "gauss:1"});
  const Result<StabilityReport> report = MeasureSyntheticStability(SmallSynthetic(), o);
  ASSERT_TRUE(report.ok()) << report.status().message();
  for (const uint32_t experts : {8u, 16u}) {
    for (const char* noise : {"bf16", "gauss:1"}) {
      const StabilityRow& token = RowFor(report.value(), RouterMode::kHashToken, noise, experts);
      EXPECT_EQ(token.changed_set_fraction, 0.0);
      EXPECT_EQ(token.changed_ranked_fraction, 0.0);
      EXPECT_FALSE(token.near_ties.has_value());
      // r_i x 1e6 keeps the digits bf16 rounds away, so nearly every hash moves.
      EXPECT_GT(RowFor(report.value(), RouterMode::kHashProjection, noise, experts).changed_set_fraction, 0.5);
    }
  }
}

TEST(RouteStabilityTest, SameSeedSameReportOtherSeedOtherReport) {
  StabilityOptions o = Options({std::begin(kAllModes), std::end(kAllModes)}, {"bf16", "gauss:1e-3"});
  o.load_aware.enabled = true;
  const Result<StabilityReport> a = MeasureSyntheticStability(SmallSynthetic(), o);
  const Result<StabilityReport> b = MeasureSyntheticStability(SmallSynthetic(), o);
  o.seed = 2;
  const Result<StabilityReport> c = MeasureSyntheticStability(SmallSynthetic(), o);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status().message();
  ASSERT_EQ(a->rows.size(), b->rows.size());
  bool differs = false;
  for (size_t i = 0; i < a->rows.size(); ++i) {
    const StabilityRow& x = a->rows[i];
    const StabilityRow& y = b->rows[i];
    EXPECT_EQ(x.changed_set_fraction, y.changed_set_fraction) << i;
    EXPECT_EQ(x.changed_ranked_fraction, y.changed_ranked_fraction) << i;
    EXPECT_EQ(x.near_ties, y.near_ties) << i;
    EXPECT_EQ(x.load.cv, y.load.cv) << i;
    EXPECT_EQ(x.load.gini, y.load.gini) << i;
    EXPECT_EQ(x.redirected_fraction, y.redirected_fraction) << i;
    ASSERT_TRUE(x.redirected_fraction.has_value());
    differs = differs || x.load.cv != c->rows[i].load.cv;
  }
  EXPECT_TRUE(differs);
}

TEST(RouteStabilityTest, AModeWithoutItsInputIsSkippedWithTheReason) {
  const RouteShape shape{1, 4, 1, 8};
  RouteBatch batch;
  batch.tokens = 1;
  batch.logits = {0.0f, 1.0f, 2.0f, 3.0f};
  const StabilityOptions o = Options({RouterMode::kSoftmaxTopK, RouterMode::kHashProjection}, {"bf16", "fp16"});
  const Result<StabilityReport> report = MeasureStability(shape, {batch}, o);
  ASSERT_TRUE(report.ok()) << report.status().message();
  ASSERT_EQ(report->rows.size(), 3u);  // softmax per noise, then one skipped row
  EXPECT_TRUE(report->rows[0].skipped.empty());
  EXPECT_EQ(report->rows[2].mode, RouterMode::kHashProjection);
  EXPECT_EQ(report->rows[2].skipped, "the inputs have no hidden states");
  EXPECT_EQ(report->rows[2].decisions, 0u);

  const Result<StabilityReport> none = MeasureStability(shape, {batch}, Options({RouterMode::kHashToken}, {"bf16"}));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("hash-token: the inputs have no token ids"), std::string::npos)
      << none.status().message();
}

TEST(RouteStabilityTest, LoadAwareReportsRedirectionsAndBadInputIsAnError) {
  StabilityOptions o = Options({RouterMode::kHashToken}, {"bf16"});
  o.load_aware.enabled = true;
  o.load_aware.threshold = 0.0f;
  const Result<StabilityReport> report = MeasureSyntheticStability(SmallSynthetic(), o);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_GT(report->rows[0].redirected_fraction.value_or(0), 0.0);  // Zipf-frequent ids overload their expert

  const RouteShape shape{1, 4, 1, 0};
  RouteBatch batch;
  batch.tokens = 2;
  batch.logits = {0.0f, 1.0f, 2.0f};  // not tokens x experts
  EXPECT_FALSE(MeasureStability(shape, {batch}, Options({RouterMode::kSoftmaxTopK}, {"bf16"})).ok());
  batch.token_ids = {3, 9};
  StabilityOptions small_vocab = Options({RouterMode::kHashToken}, {"bf16"});
  small_vocab.vocab_size = 5;
  const Result<StabilityReport> uncovered = MeasureStability(shape, {batch}, small_vocab);
  ASSERT_FALSE(uncovered.ok());
  EXPECT_NE(uncovered.status().message().find("token id 9"), std::string::npos) << uncovered.status().message();
  EXPECT_FALSE(MeasureStability(shape, {}, Options({}, {"bf16"})).ok());
}

}  // namespace
}  // namespace colibri::replay
