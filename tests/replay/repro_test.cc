// colibri repro's library: specs parse or are refused with the file and the
// field; an injected fault is caught by its invariant at the batch where it
// first shows, with the request, token and layer; the same spec gives the same
// verdict every time; the run's figures are checked at the end; and the
// minimizer cuts a violating trace to at most 5% of its records with a spec
// that still reproduces.
#include "colibri/replay/repro.h"

#include <gtest/gtest.h>

#include <fstream>

#include "replay_test_util.h"

namespace colibri::replay {
namespace {

class ReproTest : public testing::ReplayTest {
 protected:
  ReproTest() : ReplayTest("repro") {}

  // A spec file `name` over trace.ctrace (4 requests x 10 passes, 2 layers, top-2) with `fault` and `invariants`.
  std::string WriteSpec(const std::string& name, const std::string& fault, const std::string& invariants,
                        const std::string& expect = "violation") {
    testing::TestTrace t;
    t.requests = 4;
    t.passes = 10;
    t.seed = 3;
    Write("trace.ctrace", t);
    std::ofstream(Path(name)) << R"({"trace": "trace.ctrace", "machine": "a100-pm9a3-gen4", "seed": 2,
      "engine": {"l2_bytes": 2359296}, "fault": )" << fault << R"(, "expect": ")" << expect
                              << R"(", "invariants": )" << invariants << "}";
    return Path(name);
  }

  ReproOutcome Run(const std::string& spec_path) {
    auto spec = LoadReproSpec(spec_path);
    EXPECT_TRUE(spec.ok()) << spec.status().message();
    auto outcome = RunRepro(spec.value(), catalog_);
    EXPECT_TRUE(outcome.ok()) << outcome.status().message();
    return outcome.ok() ? std::move(outcome).value() : ReproOutcome{};
  }
};

TEST_F(ReproTest, BadSpecsNameTheFileAndTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"trace": "t", "expect": "pass", "invariants": ["rank_order"],)", "not JSON at byte"},
      {R"({"trace": "t", "expect": "pass", "invariants": ["rank_order"], "colour": 1})", "unknown key 'colour'"},
      {R"({"trace": "t", "invariants": ["rank_order"]})", "missing field 'expect'"},
      {R"({"trace": "t", "expect": "maybe", "invariants": ["rank_order"]})", "'expect' must be"},
      {R"({"trace": "t", "expect": "pass", "invariants": []})", "'invariants' is empty"},
      {R"({"trace": "t", "expect": "pass", "invariants": ["routing_is_nice"]})", "unknown invariant 'routing_is_nice'"},
      {R"({"trace": "t", "expect": "pass", "invariants": ["load_cv <= x"]})", "'x' is not a number"},
      {R"({"trace": "t", "expect": "pass", "invariants": ["load_cv ~ 2"]})", "<op> one of"},
      {R"({"trace": "t", "expect": "pass", "invariants": ["rank_order <= 1"]})", "takes no comparison"},
      {R"({"trace": "t", "expect": "pass", "invariants": ["step_latency_ns.nap.p99 <= 1"]})", "unknown invariant"},
      {R"({"trace": 7, "expect": "pass", "invariants": ["rank_order"]})", "field 'trace' has the wrong type"},
      {R"({"trace": "t", "expect": "pass", "invariants": ["rank_order"], "fault": {"kind": "gremlin"}})",
       "unknown fault 'gremlin'"},
      {R"({"trace": "t", "expect": "pass", "invariants": ["rank_order"], "routing": "recompute",
           "fault": {"kind": "rank-flip", "layer": 0}})", "use \"routing\": \"recorded\""},
      // Faults that could never fire, and an engine that could not run.
      {R"({"trace": "t", "expect": "pass", "invariants": ["rank_order"], "fault": {"kind": "expert-offset"}})",
       "fault 'expert-offset' needs field 'layer'"},
      {R"({"trace": "t", "expect": "pass", "invariants": ["rank_order"],
           "fault": {"kind": "expert-offset", "layer": 0, "expert": 1}})", "needs field 'offset'"},
      {R"({"trace": "t", "expect": "pass", "invariants": ["rank_order"],
           "fault": {"kind": "expert-offset", "layer": 0, "expert": 1, "offset": 0}})", "offset 0 changes nothing"},
      {R"({"trace": "t", "expect": "pass", "invariants": ["rank_order"], "fault": {"kind": "duplicate-slot", "layer": 0}})",
       "needs field 'expert'"},
      {R"({"trace": "t", "expect": "pass", "invariants": ["rank_order"], "engine": {"queue_depth": 0}})",
       "engine.queue_depth 0 is not in 1..32768"},
  };
  for (const auto& [text, expected] : cases) {
    auto spec = ParseReproSpec(text, "dir/spec.json");
    ASSERT_FALSE(spec.ok()) << text;
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(spec.status().message().find("dir/spec.json"), std::string::npos) << spec.status().message();
    EXPECT_NE(spec.status().message().find(expected), std::string::npos) << spec.status().message();
  }
  auto ok = ParseReproSpec(R"({"trace": "sub/t.ctrace", "expect": "pass", "invariants": ["step_latency_ns.compute.p99 <= 5e6"]})",
                           "dir/spec.json");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok.value().trace, "dir/sub/t.ctrace");
  EXPECT_EQ(ok.value().invariants[0].bound, 5e6);
}

TEST_F(ReproTest, EachFaultIsCaughtByItsInvariantWithItsContext) {
  const auto identical = Run(WriteSpec("offset.json", R"({"kind": "expert-offset", "layer": 1, "expert": 5, "offset": 1})",
                                       R"(["distinct_experts_per_token", "routing_identical_to_recorded"])"));
  // Expert 5's slots at layer 1 move to 6: no repeat within a token unless 6 was there too, but never as recorded.
  EXPECT_TRUE(identical.violated);
  EXPECT_EQ(identical.invariant, "routing_identical_to_recorded");
  EXPECT_NE(identical.violation.find("MoE layer index 1: recorded experts ["), std::string::npos) << identical.violation;
  EXPECT_FALSE(identical.result);  // the replay stopped at the violation

  const auto duplicate = Run(WriteSpec("dup.json", R"({"kind": "duplicate-slot", "layer": 0, "expert": 3})",
                                       R"(["rank_order", "distinct_experts_per_token"])"));
  EXPECT_TRUE(duplicate.violated);
  EXPECT_EQ(duplicate.invariant, "distinct_experts_per_token");
  EXPECT_NE(duplicate.violation.find("expert 3 in slots 0 and 1"), std::string::npos) << duplicate.violation;

  // The test traces have no gate weights (1/k each): a rank flip leaves the order of equal weights alone.
  const auto flip = Run(WriteSpec("flip.json", R"({"kind": "rank-flip", "layer": 0})", R"(["rank_order"])"));
  EXPECT_FALSE(flip.violated);
  ASSERT_TRUE(flip.result);
  EXPECT_EQ(flip.layer_batches, 4u * 10 * 2);
}

TEST_F(ReproTest, AFaultOutsideTheTraceIsRefusedBeforeTheRun) {
  const struct {
    const char* fault;
    const char* says;
  } cases[] = {{R"({"kind": "expert-offset", "layer": 1, "expert": 100000, "offset": 1})", "expert 100000 is not an expert"},
               {R"({"kind": "duplicate-slot", "layer": 9, "expert": 1})", "layer 9 is not a MoE layer index"},
               {R"({"kind": "expert-offset", "layer": 0, "expert": 1, "offset": 1600})", "is a multiple of the"}};
  for (const auto& c : cases) {
    auto spec = LoadReproSpec(WriteSpec("bad.json", c.fault, R"(["distinct_experts_per_token"])"));
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    auto outcome = RunRepro(spec.value(), catalog_);
    ASSERT_FALSE(outcome.ok()) << c.fault;
    EXPECT_EQ(outcome.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(outcome.status().message().find(c.says), std::string::npos) << outcome.status().message();
  }
}

TEST_F(ReproTest, TheSameSpecGivesTheSameVerdictAndTheRunIsChecked) {
  const std::string spec = WriteSpec("run.json", "null", R"(["routing_identical_to_recorded", "hit_pct_cum >= 99"])");
  const ReproOutcome a = Run(spec), b = Run(spec);
  EXPECT_TRUE(a.violated);
  EXPECT_EQ(a.invariant, "hit_pct_cum >= 99");
  EXPECT_EQ(a.violation.rfind("run: hit_pct_cum = ", 0), 0u) << a.violation;
  EXPECT_EQ(a.violation, b.violation);
  ASSERT_TRUE(a.result && b.result);
  EXPECT_EQ(a.result->event_digest, b.result->event_digest);
  const ReproOutcome pass = Run(WriteSpec("pass.json", "null",
                                          R"(["routing_identical_to_recorded", "max_tokens_per_expert <= 4",
                                              "step_latency_ns.layer_batch.max <= 1e12", "queue_full_events == 0"])",
                                          "pass"));
  EXPECT_FALSE(pass.violated) << pass.invariant << ": " << pass.violation;
}

TEST_F(ReproTest, MinimizeKeepsAFewRecordsThatStillViolate) {
  const std::string spec_path = WriteSpec("min.json", R"({"kind": "expert-offset", "layer": 1, "expert": 5, "offset": -1})",
                                          R"(["routing_identical_to_recorded"])");
  auto spec = LoadReproSpec(spec_path);
  ASSERT_TRUE(spec.ok());
  std::filesystem::create_directories(Path("out"));
  auto report = MinimizeRepro(spec.value(), catalog_, Path("out/trace.ctrace"), Path("out/spec.json"));
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report.value().records_before, 4u * 10 * 2);
  EXPECT_LE(report.value().records_after * 20, report.value().records_before);  // at most 5%
  EXPECT_GE(report.value().records_after, 1u);
  EXPECT_EQ(report.value().invariant, "routing_identical_to_recorded");
  EXPECT_FALSE(std::filesystem::exists(Path("out/trace.ctrace.slice.tmp")));
  auto small = LoadReproSpec(Path("out/spec.json"));
  ASSERT_TRUE(small.ok()) << small.status().message();
  EXPECT_EQ(small.value().trace_as_written, "trace.ctrace");
  EXPECT_TRUE(small.value().expect_violation);
  const ReproOutcome again = Run(Path("out/spec.json"));
  EXPECT_TRUE(again.violated);
  EXPECT_EQ(again.violation, report.value().violation);

  auto clean = LoadReproSpec(WriteSpec("clean.json", "null", R"(["routing_identical_to_recorded"])", "pass"));
  ASSERT_TRUE(clean.ok());
  auto nothing = MinimizeRepro(clean.value(), catalog_, Path("out/x.ctrace"), Path("out/x.json"));
  ASSERT_FALSE(nothing.ok());
  EXPECT_NE(nothing.status().message().find("nothing to minimize"), std::string::npos);
}

}  // namespace
}  // namespace colibri::replay
