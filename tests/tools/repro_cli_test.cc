// `colibri repro` end to end: the committed repros exit as they expect, print
// the seed and the derived configuration first, store the run; a recomputing
// repro checks the engine's own decisions; bad specs and flags exit 2.
#include <gtest/gtest.h>

#include <fstream>

#include "cli_test_util.h"

namespace colibri::cli {
namespace {

using cli_testing::Outcome;
using ReproCliTest = cli_testing::CliTest;

const std::string kRepros = std::string(COLIBRI_SOURCE_DIR) + "/tests/repros/";

TEST_F(ReproCliTest, CommittedReprosExitAsTheyExpectAndAreStored) {
  const Outcome flip = Colibri("repro " + kRepros + "rank-flip-min/spec.json");
  EXPECT_EQ(flip.exit_code, 1) << flip.err;
  EXPECT_EQ(flip.out.rfind("seed 1\n{", 0), 0u) << flip.out;
  EXPECT_NE(flip.out.find("\"fault\": {"), std::string::npos);
  EXPECT_NE(flip.out.find("VIOLATION rank_order\n  request "), std::string::npos) << flip.out;
  const Outcome json = Colibri("repro --json " + kRepros + "duplicate-slot-min/spec.json");
  EXPECT_EQ(json.exit_code, 1) << json.err;
  const nlohmann::json j = json.json();
  EXPECT_EQ(j["outcome"], "violation");
  EXPECT_EQ(j["expected"], "violation");
  EXPECT_EQ(j["invariant"], "distinct_experts_per_token");
  EXPECT_EQ(j["config"]["fault"]["kind"], "duplicate-slot");
  const Outcome pass = Colibri("repro --json " + kRepros + "qwen3-recorded/spec.json");
  EXPECT_EQ(pass.exit_code, 0) << pass.err;
  EXPECT_EQ(pass.json()["outcome"], "pass");
  const Outcome runs = Colibri("runs list --json");
  ASSERT_EQ(runs.exit_code, 0) << runs.err;
  int repro_runs = 0;
  const nlohmann::json listed = runs.json();
  for (const auto& r : listed["runs"]) repro_runs += r["kind"] == "repro";
  EXPECT_EQ(repro_runs, 3) << runs.out;
}

// Routing recomputed from recorded logits by the engine's router: identical to what the run recorded.
TEST_F(ReproCliTest, RecomputedRoutingIsCheckedAgainstTheRecording) {
  ASSERT_EQ(Colibri("model synth --layers 3 --experts 8 --top-k 2 --hidden 64 --intermediate 32 --dtype bf16 "
                    "--seed 5 -o " + dir_.path() + "/model").exit_code, 0);
  const Outcome run = Colibri("run --model " + dir_.path() + "/model --requests 2 --prefill 4 --tokens 6 --no-store "
                              "--record " + dir_.path() + "/t.ctrace --record-logits");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::ofstream(dir_.path() + "/spec.json") << R"({"trace": "t.ctrace", "machine": "a100-pm9a3-gen4",
    "routing": "recompute", "expect": "pass",
    "invariants": ["routing_identical_to_recorded", "distinct_experts_per_token", "rank_order"]})";
  const Outcome repro = Colibri("repro --no-store " + dir_.path() + "/spec.json");
  EXPECT_EQ(repro.exit_code, 0) << repro.out << repro.err;
  EXPECT_NE(repro.out.find("PASS: every invariant held over 24 layer batches"), std::string::npos) << repro.out;
}

TEST_F(ReproCliTest, BadSpecsAndFlagsExitTwo) {
  std::ofstream(dir_.path() + "/bad.json") << R"({"trace": "t.ctrace", "expect": "pass", "invariants": ["nope"]})";
  const Outcome bad = Colibri("repro " + dir_.path() + "/bad.json");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("bad.json: invariants[0]: unknown invariant 'nope'"), std::string::npos) << bad.err;
  const Outcome missing = Colibri("repro " + dir_.path() + "/none.json");
  EXPECT_EQ(missing.exit_code, 2);
  const Outcome no_output = Colibri("repro --minimize " + kRepros + "rank-flip/spec.json");
  EXPECT_EQ(no_output.exit_code, 2);
  EXPECT_NE(no_output.err.find("pass -o"), std::string::npos) << no_output.err;
  const Outcome onto_itself = Colibri("repro --minimize " + kRepros + "rank-flip/spec.json -o " + kRepros + "rank-flip/x.ctrace");
  EXPECT_EQ(onto_itself.exit_code, 2);
  EXPECT_NE(onto_itself.err.find("holds the input spec"), std::string::npos) << onto_itself.err;
}

}  // namespace
}  // namespace colibri::cli
