#include "latency_json.h"

#include <gtest/gtest.h>

namespace colibri::cli {
namespace {

TEST(LatencyJsonTest, NearestRankByHand) {
  std::vector<int64_t> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i * 10);  // 10 .. 1000
  EXPECT_EQ(NearestRank(v, 50), 500);   // rank ceil(50) = 50
  EXPECT_EQ(NearestRank(v, 90), 900);
  EXPECT_EQ(NearestRank(v, 99), 990);
  EXPECT_EQ(NearestRank(v, 99.9), 1000);  // rank ceil(99.9) = 100
  EXPECT_EQ(NearestRank({7}, 50), 7);
  EXPECT_EQ(NearestRank({1, 2, 3}, 50), 2);   // ceil(1.5) = 2
  EXPECT_EQ(NearestRank({1, 2, 3, 4}, 50), 2);  // ceil(2) = 2
}

TEST(LatencyJsonTest, SortsAndSummarises) {
  const Json j = LatencyJson({5, 1, 4, 2, 3});
  EXPECT_EQ(j["p50"].get<int64_t>(), 3);
  EXPECT_EQ(j["max"].get<int64_t>(), 5);
  EXPECT_EQ(j["samples"].get<uint64_t>(), 5u);
  EXPECT_EQ(LatencyJson({})["p99"].get<int64_t>(), 0);
}

}  // namespace
}  // namespace colibri::cli
