#include "colibri/reports/latency_json.h"

#include <gtest/gtest.h>

namespace colibri::reports {
namespace {

TEST(LatencyJsonTest, SortsAndSummarises) {
  const nlohmann::ordered_json j = LatencyJson({5, 1, 4, 2, 3});
  EXPECT_EQ(j["p50"].get<int64_t>(), 3);
  EXPECT_EQ(j["max"].get<int64_t>(), 5);
  EXPECT_EQ(j["samples"].get<uint64_t>(), 5u);
  EXPECT_EQ(j["source"].get<std::string>(), "raw");
  EXPECT_TRUE(j["low_confidence"].get<bool>());  // 5 samples < 100
  EXPECT_EQ(LatencyJson({})["p99"].get<int64_t>(), 0);
}

TEST(LatencyJsonTest, TiersAndPercent) {
  EXPECT_EQ(Pct(1, 4), 25.0);
  EXPECT_EQ(Pct(1, 0), 0.0);
  const nlohmann::ordered_json tier = TierJson(10, 7);
  EXPECT_EQ(tier["misses"].get<uint64_t>(), 3u);
  EXPECT_EQ(tier["hit_pct_cum"].get<double>(), 70.0);
}

TEST(LatencyJsonTest, SamplesAndThroughputAsBothCommandsPrintThem) {
  using Json = nlohmann::ordered_json;
  const Json s = SamplesJson(Samples::FromRaw({5, 1, 4, 2, 3}));
  EXPECT_EQ(s, LatencyJson({5, 1, 4, 2, 3}));
  const Json t = ThroughputJson(ThroughputOf(21, 33, 99, 1'000'000'000));
  EXPECT_EQ(t, (Json{{"tokens_per_s", 21.0}, {"processed_tokens_per_s", 33.0}, {"steps_per_s", 99.0}}));
}

}  // namespace
}  // namespace colibri::reports
