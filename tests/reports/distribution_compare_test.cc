// Comparing distributions (reports/distribution_compare.h) by hand.
#include "colibri/reports/distribution_compare.h"

#include <gtest/gtest.h>

namespace colibri::reports {
namespace {

TEST(DistributionCompareTest, SignedError) {
  EXPECT_DOUBLE_EQ(*SignedError(110, 100), 0.10);
  EXPECT_DOUBLE_EQ(*SignedError(80, 100), -0.20);
  EXPECT_DOUBLE_EQ(*SignedError(0, 0), 0.0);
  EXPECT_FALSE(SignedError(5, 0).has_value());
}

TEST(DistributionCompareTest, KsDistance) {
  EXPECT_DOUBLE_EQ(KsDistance({1, 2, 3}, {1, 2, 3}), 0.0);
  EXPECT_DOUBLE_EQ(KsDistance({1, 2, 3}, {10, 20, 30}), 1.0);
  // F_a jumps to 0.5 at 1 and 1 at 3; F_b to 0.5 at 2 and 1 at 4: the gap is 0.5.
  EXPECT_DOUBLE_EQ(KsDistance({1, 3}, {2, 4}), 0.5);
  EXPECT_DOUBLE_EQ(KsDistance({}, {1}), 0.0);
}

TEST(DistributionCompareTest, Pearson) {
  EXPECT_NEAR(*PearsonCorrelation({1, 2, 3, 4}, {2, 4, 6, 8}), 1.0, 1e-12);
  EXPECT_NEAR(*PearsonCorrelation({1, 2, 3, 4}, {8, 6, 4, 2}), -1.0, 1e-12);
  EXPECT_FALSE(PearsonCorrelation({1, 2}, {1, 2}).has_value());
  EXPECT_FALSE(PearsonCorrelation({5, 5, 5}, {1, 2, 3}).has_value());
}

TEST(DistributionCompareTest, EmpiricalCdf) {
  auto cdf = EmpiricalCdf({10, 20, 30, 40}, 0, 40, 5);
  ASSERT_EQ(cdf.size(), 5u);
  EXPECT_EQ(cdf[0].first, 0);
  EXPECT_DOUBLE_EQ(cdf[0].second, 0.0);
  EXPECT_DOUBLE_EQ(cdf[2].second, 0.5);  // x = 20
  EXPECT_DOUBLE_EQ(cdf[4].second, 1.0);
}

}  // namespace
}  // namespace colibri::reports
