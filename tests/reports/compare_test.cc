// BuildComparison and RunGate over runs stored by hand: rows, best marks and
// deltas, the baseline choice, refusal of incomplete runs, the bootstrap
// interval, routing stability through stored routing traces, and the gate's
// checks and reasons.
#include "colibri/reports/compare.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../traces/test_util.h"
#include "colibri/traces/importers.h"
#include "colibri/traces/writer.h"

namespace colibri::reports {
namespace {

using traces::testing::TempDir;

// A run whose request latencies are `base` + i for i in [0, n) and whose one layer's load is `loads`.
RunResults MakeResults(int64_t base, int n, std::vector<uint64_t> loads) {
  RunResults r;
  std::vector<int64_t> values;
  for (int i = 0; i < n; ++i) values.push_back(base + i);
  r.distributions["request_latency_ns"] = Samples::FromRaw(values);
  r.distributions["step_latency_ns.routing"] = Samples::FromRaw(std::vector<int64_t>(5, 0));  // a step never taken
  r.scalars["tokens_per_s"] = 1e9 / static_cast<double>(base);
  r.tiers.push_back(TierCounters{"all", 100, static_cast<uint64_t>(base % 100), 50, 25, 0});
  r.expert_load.push_back(std::move(loads));
  return r;
}

// A small routing trace (3 layers, 2 passes of 2 tokens); `flip` changes the
// last token's choice at the last layer.
void WriteRoutingTrace(const std::string& path, bool flip) {
  traces::TraceHeader header;
  header.shape = traces::testing::SmallShape();
  auto writer = traces::TraceWriter::Create(path, header, traces::WriterOptions{});
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  std::mt19937_64 rng(7);
  for (uint64_t pass = 0; pass < 2; ++pass) {
    for (uint32_t layer : header.shape.moe_layer_ids) {
      traces::TraceRecord r = traces::testing::RandomRecord(header.shape, rng, 0, pass, layer, 2, 2 * pass);
      if (flip && pass == 1 && layer == header.shape.moe_layer_ids.back()) {
        const uint32_t other = r.expert_ids[r.expert_ids.size() - 2], old = r.expert_ids.back();
        uint32_t fresh = 0;
        while (fresh == other || fresh == old) ++fresh;  // an expert the token did not choose
        r.expert_ids.back() = fresh;
      }
      ASSERT_TRUE(writer.value()->Append(r).ok());
    }
  }
  ASSERT_TRUE(writer.value()->Close().ok());
}

class CompareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = RunStore::Open(dir_.File("runs.db"));
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(store.value());
  }
  int64_t Store(const RunResults& results, const std::string& routing = "", const std::string& digest = "") {
    RunInfo info;
    info.kind = "replay";
    info.label = "m" + std::to_string(next_label_++);
    info.routing_path = routing;
    info.routing_digest = digest;
    auto id = store_->BeginRun(info);
    EXPECT_TRUE(id.ok());
    EXPECT_TRUE(store_->FinishRun(id.value(), results, 0).ok());
    return id.value();
  }
  static const MetricRow* Row(const Comparison& c, const std::string& key) {
    for (const MetricRow& row : c.rows) {
      if (row.key == key) return &row;
    }
    return nullptr;
  }
  TempDir dir_;
  std::unique_ptr<RunStore> store_;
  int next_label_ = 0;
};

TEST_F(CompareTest, RowsMarkTheBestAndSkipStepsNeverTaken) {
  const int64_t fast = Store(MakeResults(1000, 200, {5, 5, 5, 5}));
  const int64_t slow = Store(MakeResults(3000, 200, {20, 0, 0, 0}));
  auto c = BuildComparison(*store_, {slow, fast}, CompareOptions{});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c.value().baseline, 0u);  // the first run named
  const MetricRow* p99 = Row(c.value(), "request_latency_ns.p99");
  ASSERT_NE(p99, nullptr);
  // 200 values base .. base + 199: rank ceil(0.99 x 200) = 198 -> base + 197.
  EXPECT_EQ(*p99->values[0], 3197);
  EXPECT_EQ(*p99->values[1], 1197);
  EXPECT_EQ(p99->best, 1);
  EXPECT_FALSE(p99->low_confidence);
  const MetricRow* tps = Row(c.value(), "tokens_per_s");
  ASSERT_NE(tps, nullptr);
  EXPECT_EQ(tps->best, 1);  // higher is better
  EXPECT_EQ(Row(c.value(), "step_latency_ns.routing.p99"), nullptr);
  const MetricRow* cv = Row(c.value(), "load_cv_mean");
  ASSERT_NE(cv, nullptr);
  EXPECT_DOUBLE_EQ(*cv->values[1], 0.0);            // even load
  EXPECT_DOUBLE_EQ(*cv->values[0], std::sqrt(3.0));  // one hot expert of 4: sqrt(E - 1)
  EXPECT_EQ(cv->best, 1);
  const nlohmann::json j = nlohmann::json::parse(RenderJson(c.value()));
  EXPECT_EQ(j["baseline"], slow);
}

TEST_F(CompareTest, BaselineOptionAndLowConfidence) {
  const int64_t a = Store(MakeResults(1000, 10, {1, 1}));
  const int64_t b = Store(MakeResults(2000, 10, {1, 1}));
  CompareOptions o;
  o.baseline_run_id = b;
  auto c = BuildComparison(*store_, {a}, o);  // the baseline is added to the runs
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c.value().runs.size(), 2u);
  EXPECT_EQ(c.value().runs[c.value().baseline].info.run_id, b);
  EXPECT_TRUE(Row(c.value(), "request_latency_ns.p99")->low_confidence);  // 10 samples
  EXPECT_FALSE(Row(c.value(), "request_latency_ns.p50")->low_confidence);
}

TEST_F(CompareTest, IncompleteAndUnknownRunsAreRefused) {
  RunInfo info;
  info.kind = "replay";
  const int64_t open = store_->BeginRun(info).value();
  const int64_t done = Store(MakeResults(1000, 10, {1}));
  auto c = BuildComparison(*store_, {done, open}, CompareOptions{});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("incomplete"), std::string::npos) << c.status().message();
  EXPECT_EQ(BuildComparison(*store_, {done, 999}, CompareOptions{}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(BuildComparison(*store_, {done, done}, CompareOptions{}).status().code(), StatusCode::kInvalidArgument);
}

// A run of a torn trace's prefix (replay --allow-torn) says so in every
// rendering, and the gate refuses it.
TEST_F(CompareTest, ATornTraceIsShownAndFailsTheGate) {
  RunResults whole = MakeResults(1000, 200, {5, 5});
  whole.texts["trace_ending"] = "complete";
  RunResults torn = MakeResults(1000, 200, {5, 5});
  const std::string ending = "torn at byte offset 100000: its first 412 records only (--allow-torn)";
  torn.texts["trace_ending"] = ending;
  const int64_t base = Store(whole), cand = Store(torn), plain = Store(MakeResults(1000, 200, {5, 5}));
  auto c = BuildComparison(*store_, {base, cand, plain}, CompareOptions{});
  ASSERT_TRUE(c.ok()) << c.status().message();
  const std::string line = "trace of #" + std::to_string(cand) + ": " + ending;
  EXPECT_NE(RenderTable(*c).find(line), std::string::npos) << RenderTable(*c);
  EXPECT_NE(RenderMarkdown(*c).find(line), std::string::npos);
  EXPECT_EQ(RenderTable(*c).find("trace of #" + std::to_string(base)), std::string::npos);
  EXPECT_NE(RenderHtml(*c).find(ending), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(RenderJson(*c));
  EXPECT_EQ(j["runs"][0]["trace_ending"], "complete");
  EXPECT_EQ(j["runs"][1]["trace_ending"], ending);
  EXPECT_TRUE(j["runs"][2]["trace_ending"].is_null());  // not recorded

  auto passed = RunGate(*store_, base, plain, GateOptions{});
  ASSERT_TRUE(passed.ok()) << passed.status().message();
  EXPECT_TRUE(passed->pass);
  auto refused = RunGate(*store_, base, cand, GateOptions{});
  ASSERT_TRUE(refused.ok()) << refused.status().message();
  EXPECT_FALSE(refused->pass);
  ASSERT_EQ(refused->reasons.size(), 1u);
  EXPECT_EQ(refused->reasons[0], "trace: run " + std::to_string(cand) + " replayed a torn trace, " + ending +
                                     "; the gate compares runs of whole traces");
}

TEST_F(CompareTest, BootstrapIntervalBracketsTheP99) {
  const int64_t a = Store(MakeResults(1000, 1000, {1}));
  CompareOptions o;
  o.bootstrap_resamples = 500;
  auto c = BuildComparison(*store_, {a}, o);
  ASSERT_TRUE(c.ok()) << c.status().message();
  const double low = *Row(c.value(), "request_latency_ns.p99_ci_low")->values[0];
  const double high = *Row(c.value(), "request_latency_ns.p99_ci_high")->values[0];
  EXPECT_LE(low, 1989);  // P99 of 1000 .. 1999 is 1989
  EXPECT_GE(high, 1989);
  EXPECT_GE(low, 1900);
  EXPECT_LE(high, 1999);
}

TEST_F(CompareTest, StabilityAndGateFromRoutingTraces) {
  // Two routing traces: the second differs in one decision.
  const std::string base_trace = dir_.File("a.ctrace"), flipped_trace = dir_.File("b.ctrace");
  WriteRoutingTrace(base_trace, /*flip=*/false);
  WriteRoutingTrace(flipped_trace, /*flip=*/true);
  const std::string base_digest = traces::DescribeSourceFile(base_trace).value().sha256;
  const std::string flipped_digest = traces::DescribeSourceFile(flipped_trace).value().sha256;
  const int64_t a = Store(MakeResults(1000, 200, {1}), base_trace, base_digest);
  const int64_t same = Store(MakeResults(1010, 200, {1}), base_trace, base_digest);
  const int64_t b = Store(MakeResults(1000, 200, {1}), flipped_trace, flipped_digest);

  GateOptions o;
  o.require_identical_routing = true;
  auto pass = RunGate(*store_, a, same, o);
  ASSERT_TRUE(pass.ok()) << pass.status().message();
  EXPECT_TRUE(pass.value().pass);  // +1.0% P99, identical routing
  auto fail = RunGate(*store_, a, b, o);
  ASSERT_TRUE(fail.ok()) << fail.status().message();
  EXPECT_FALSE(fail.value().pass);
  ASSERT_EQ(fail.value().reasons.size(), 1u);
  EXPECT_NE(fail.value().reasons[0].find("first divergence"), std::string::npos) << fail.value().reasons[0];
  EXPECT_TRUE(fail.value().stability->diverged);
  EXPECT_EQ(fail.value().stability->compared, 12u);  // 3 layers x 4 tokens
  EXPECT_EQ(fail.value().stability->set_identical, 11u);

  o.require_identical_routing = false;
  o.max_p99_regression_pct = 0.5;
  auto slower = RunGate(*store_, a, same, o);
  ASSERT_TRUE(slower.ok());
  EXPECT_FALSE(slower.value().pass);  // 1197 -> 1207 is +0.84%
  EXPECT_NEAR(slower.value().regression_pct, 100.0 * 10 / 1197, 1e-9);
  EXPECT_NE(slower.value().reasons[0].find("request_latency_ns P99"), std::string::npos);
}

}  // namespace
}  // namespace colibri::reports
