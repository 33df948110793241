// The per-request latencies and throughput both `colibri replay` and
// `colibri run` record (docs/METRICS.md): TTFT to the first pass's end, TPOT
// the mean gap of the later pass ends, tokens/s one token per request pass.
#include "colibri/reports/run_recording.h"

#include <gtest/gtest.h>

namespace colibri::reports {
namespace {

TEST(RequestLatencies, FromThePassEnds) {
  Samples latency, ttft, tpot;
  AddRequestLatencies({100, 400, 1000, 4}, &latency, &ttft, &tpot);  // 3 later passes over 600 ns
  AddRequestLatencies({50, 0, 250, 1}, &latency, &ttft, &tpot);      // one pass: TTFT = latency, no TPOT
  AddRequestLatencies({7, 0, 0, 0}, &latency, &ttft, &tpot);         // never ran: nothing
  EXPECT_EQ(latency.raw(), (std::vector<int64_t>{900, 200}));
  EXPECT_EQ(ttft.raw(), (std::vector<int64_t>{300, 200}));
  EXPECT_EQ(tpot.raw(), (std::vector<int64_t>{200}));
}

TEST(Throughput, PerSecondOfTheRunsClock) {
  const Throughput t = ThroughputOf(21, 33, 99, 500'000'000);
  EXPECT_DOUBLE_EQ(t.tokens_per_s, 42.0);
  EXPECT_DOUBLE_EQ(t.processed_tokens_per_s, 66.0);
  EXPECT_DOUBLE_EQ(t.steps_per_s, 198.0);
  const Throughput none = ThroughputOf(21, 33, 99, 0);
  EXPECT_EQ(none.tokens_per_s, 0.0);
  EXPECT_EQ(none.steps_per_s, 0.0);
}

}  // namespace
}  // namespace colibri::reports
