#include "latency_json.h"

#include <gtest/gtest.h>

namespace colibri::cli {
namespace {

TEST(LatencyJsonTest, SortsAndSummarises) {
  const Json j = LatencyJson({5, 1, 4, 2, 3});
  EXPECT_EQ(j["p50"].get<int64_t>(), 3);
  EXPECT_EQ(j["max"].get<int64_t>(), 5);
  EXPECT_EQ(j["samples"].get<uint64_t>(), 5u);
  EXPECT_EQ(j["source"].get<std::string>(), "raw");
  EXPECT_TRUE(j["low_confidence"].get<bool>());  // 5 samples < 100
  EXPECT_EQ(LatencyJson({})["p99"].get<int64_t>(), 0);
}

TEST(LatencyJsonTest, SamplesAndThroughputAsBothCommandsPrintThem) {
  const Json s = SamplesJson(reports::Samples::FromRaw({5, 1, 4, 2, 3}));
  EXPECT_EQ(s, LatencyJson({5, 1, 4, 2, 3}));
  const Json t = ThroughputJson(reports::ThroughputOf(21, 33, 99, 1'000'000'000));
  EXPECT_EQ(t, (Json{{"tokens_per_s", 21.0}, {"processed_tokens_per_s", 33.0}, {"steps_per_s", 99.0}}));
}

}  // namespace
}  // namespace colibri::cli
