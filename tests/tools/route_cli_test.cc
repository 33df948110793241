// `colibri route stability` on a small recorded trace and on the synthetic
// sets: the JSON keys, a mode skipped for a missing input, identical synthetic
// output across runs, and bad input as exit 2 (a corrupt trace as exit 1).
#include <gtest/gtest.h>

#include "cli_test_util.h"

namespace colibri::cli {
namespace {

using Json = nlohmann::json;
using cli_testing::Outcome;
using cli_testing::RunColibri;

class RouteCliTest : public cli_testing::SynthModelTest {
 protected:
  // 3 layers x 8 experts, top-2, hidden 64; 2 requests x (4 prefill + 4 decode) tokens.
  static void SetUpTestSuite() {
    SynthModelTest::SetUpTestSuite();
    if (::testing::Test::HasFatalFailure()) return;
    Record("--record-logits --record-hidden --record-tokens", Full());
    Record("--record-logits --record-tokens", NoHidden());
  }

  static void Record(const std::string& fields, const std::string& trace) {
    const Outcome run = RunColibri("run --model " + Model() + " --requests 2 --prefill 4 --tokens 4 "
                                   "--record " + trace + " " + fields + " --no-store", dir_->path());
    ASSERT_EQ(run.exit_code, 0) << run.err;
  }
  static std::string Full() { return dir_->File("t.ctrace"); }
  static std::string NoHidden() { return dir_->File("no-hidden.ctrace"); }
  static Outcome Stability(const std::string& args) { return RunColibri("route stability " + args, dir_->path()); }
};

TEST_F(RouteCliTest, TraceJsonHasEveryModeAndNoise) {
  const Outcome run = Stability(Full() + " --noise fp16,bf16,gauss:1e-6 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json j = run.json();
  EXPECT_EQ(j["source"], "trace");
  EXPECT_EQ(j["trace"], Full());
  EXPECT_EQ(j["config"]["top_k"], 2);
  ASSERT_EQ(j["results"].size(), 4u * 3);
  for (const Json& r : j["results"]) {
    for (const char* key : {"mode", "experts", "noise", "decisions", "changed_set_fraction", "changed_ranked_fraction",
                            "near_ties", "load"}) {
      EXPECT_TRUE(r.contains(key)) << key << " in " << r.dump();
    }
    EXPECT_FALSE(r.contains("skipped")) << r.dump();
    EXPECT_EQ(r["experts"], 8);
    EXPECT_EQ(r["decisions"], 2u * (4 + 4) * 3);  // (token, layer) pairs
    for (const char* key : {"cv", "max_over_mean", "gini"}) EXPECT_TRUE(r["load"].contains(key)) << key;
    const std::string mode = r["mode"];
    EXPECT_EQ(r["near_ties"].is_null(), mode == "hash-projection" || mode == "hash-token") << mode;
    EXPECT_LE(r["changed_set_fraction"].get<double>(), r["changed_ranked_fraction"].get<double>());
    if (mode == "hash-token") {
      EXPECT_EQ(r["changed_ranked_fraction"].get<double>(), 0.0);
    }
  }
  const Outcome aware = Stability(Full() + " --modes softmax-topk --noise bf16 --load-aware --json");
  ASSERT_EQ(aware.exit_code, 0) << aware.err;
  EXPECT_TRUE(aware.json()["results"][0].contains("redirected_fraction"));
  const Outcome human = Stability(Full());
  ASSERT_EQ(human.exit_code, 0) << human.err;
  EXPECT_NE(human.out.find("sigmoid-grouped"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("gauss:1e-6"), std::string::npos) << human.out;
}

TEST_F(RouteCliTest, SkipsAModeWhoseInputTheTraceLacks) {
  const Outcome run = Stability(NoHidden() + " --noise bf16 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json j = run.json();
  const Json& results = j["results"];
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[2]["mode"], "hash-projection");
  EXPECT_EQ(results[2]["skipped"], "trace has no hidden states (record with colibri run --record-hidden)");
  EXPECT_TRUE(results[2]["noise"].is_null());
  const Outcome none = Stability(NoHidden() + " --modes hash-projection");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("trace has no hidden states (record with colibri run --record-hidden)"), std::string::npos)
      << none.err;
}

TEST_F(RouteCliTest, SyntheticOutputIsIdenticalAcrossRuns) {
  const std::string args = "--synthetic --experts 8,16 --tokens 256 --hidden 32 --layers 2 --vocab 1000 "
                           "--noise bf16,gauss:1e-3 --seed 9 --json";
  const Outcome a = Stability(args);
  const Outcome b = Stability(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  const Json j = a.json();
  EXPECT_EQ(j["source"], "synthetic");
  EXPECT_TRUE(j["trace"].is_null());
  EXPECT_EQ(j["config"]["top_k"], 4);
  ASSERT_EQ(j["results"].size(), 2u * 4 * 2);
  EXPECT_EQ(j["results"][0]["experts"], 8);
  EXPECT_EQ(j["results"].back()["experts"], 16);
  EXPECT_EQ(j["results"][0]["decisions"], 256u * 2);
}

TEST_F(RouteCliTest, BadInputIsExitCodeTwoNamingTheFlagOrFile) {
  const std::pair<std::string, std::string> cases[] = {
      {"/nonexistent/t.ctrace", "/nonexistent/t.ctrace"},
      {Full() + " --modes softmax,hash-token", "--modes"},
      {Full() + " --noise gauss:x", "--noise"},
      {Full() + " --noise fp8", "--noise"},
      {"--synthetic " + Full(), "--synthetic"},
      {"", "--synthetic"},
      {Full() + " --tokens 10", "--synthetic"},
      {"--synthetic --experts 8,x", "--experts"},
  };
  for (const auto& [args, named] : cases) {
    const Outcome run = Stability(args);
    EXPECT_EQ(run.exit_code, 2) << args << ": " << run.err;
    EXPECT_NE(run.err.find(named), std::string::npos) << args << ": " << run.err;
  }
  std::string bytes = traces::testing::ReadFileBytes(Full());
  bytes[bytes.size() / 2] ^= 0x40;
  const std::string corrupt = dir_->File("corrupt.ctrace");
  traces::testing::WriteFileBytes(corrupt, bytes);
  const Outcome run = Stability(corrupt);
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_NE(run.err.find("byte offset"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace colibri::cli
