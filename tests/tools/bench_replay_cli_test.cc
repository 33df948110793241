// `colibri bench replay` at small sizes (no wall-clock asserts): it
// synthesizes a trace of at least --steps steps (or --trace-bytes bytes) from
// the bundled model config, replays it on one modelled machine in child
// processes, and reports steps, steps/s and the replay's peak RSS; --trace
// replays a given file; bad flags and missing files are clear errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli_test_util.h"

namespace colibri::cli {
namespace {

using cli_testing::Outcome;
using cli_testing::RunColibri;

const std::string kQwen3Config = std::string(COLIBRI_SHARED_DATA) + "/model-configs/qwen3/config.json";

TEST(BenchReplayCliTest, SynthesizesAtLeastTheRequestedStepsAndReportsThroughputAndRss) {
  if (!std::filesystem::exists(kQwen3Config)) GTEST_SKIP() << kQwen3Config << " is absent";
  traces::testing::TempDir dir;
  // 48 MoE layers x (4 + 4 tokens) = 384 steps per request; 2 at a time: 2000 steps need 6 requests.
  const Outcome run = RunColibri("bench replay --model-config " + kQwen3Config +
                                     " --steps 2000 --concurrency 2 --prompt-tokens 4 --output-tokens 4 --repeats 2 "
                                     "--l2-bytes 2G --dir " + dir.path() + " --json",
                                 dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = run.json();
  EXPECT_EQ(j["steps"].get<uint64_t>(), 6u * 384);
  EXPECT_GE(j["steps"].get<uint64_t>(), 2000u);
  EXPECT_EQ(j["trace"]["synthesized"]["requests"].get<uint32_t>(), 6u);
  EXPECT_EQ(j["config"]["machine"].get<std::string>(), "h100-p5800x-gen5");
  EXPECT_GT(j["steps_per_s"].get<double>(), 0.0);
  EXPECT_GT(j["wall_s"].get<double>(), 0.0);
  EXPECT_GT(j["trace"]["file_bytes"].get<uint64_t>(), 0u);
  EXPECT_GT(j["peak_rss_bytes"].get<uint64_t>(), 0u);
  EXPECT_GT(j["vm_hwm_bytes"].get<uint64_t>(), 0u);
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][0]["event_digest"], j["runs"][1]["event_digest"]);  // the same replay twice
  EXPECT_FALSE(j["trace"]["kept"].get<bool>());
  EXPECT_FALSE(std::filesystem::exists(j["trace"]["path"].get<std::string>()));  // removed without --keep
}

TEST(BenchReplayCliTest, TraceBytesGrowsTheTraceAndKeepLeavesIt) {
  if (!std::filesystem::exists(kQwen3Config)) GTEST_SKIP() << kQwen3Config << " is absent";
  traces::testing::TempDir dir;
  const Outcome run = RunColibri("bench replay --model-config " + kQwen3Config +
                                     " --steps 1 --trace-bytes 300K --concurrency 2 --prompt-tokens 4 "
                                     "--output-tokens 4 --gate-weights --repeats 1 --keep --dir " + dir.path() +
                                     " --json",
                                 dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = run.json();
  const std::string path = j["trace"]["path"].get<std::string>();
  ASSERT_TRUE(std::filesystem::exists(path));
  EXPECT_GE(std::filesystem::file_size(path), 300u * 1024);
  EXPECT_EQ(j["trace"]["file_bytes"].get<uint64_t>(), std::filesystem::file_size(path));
  EXPECT_TRUE(j["trace"]["synthesized"]["gate_weights"].get<bool>());

  // The kept file replayed again with --trace: the same steps and digest.
  const Outcome again = RunColibri("bench replay --trace " + path + " --repeats 1 --json", dir.path());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const nlohmann::json k = again.json();
  EXPECT_EQ(k["steps"], j["steps"]);
  EXPECT_EQ(k["event_digest"], j["event_digest"]);
  EXPECT_TRUE(std::filesystem::exists(path));  // a given trace is never removed
}

TEST(BenchReplayCliTest, BadInputsAreClearErrors) {
  traces::testing::TempDir dir;
  const Outcome missing = RunColibri("bench replay --trace " + dir.File("nope.ctrace"), dir.path());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("nope.ctrace"), std::string::npos) << missing.err;
  const Outcome config = RunColibri("bench replay --model-config " + dir.File("none.json"), dir.path());
  EXPECT_EQ(config.exit_code, 2);
  EXPECT_NE(config.err.find("none.json"), std::string::npos) << config.err;
  const Outcome machine =
      RunColibri("bench replay --trace " + std::string(COLIBRI_SOURCE_DIR) + "/traces/samples/qwen3-bigmoe.ctrace "
                 "--hidden 2048 --hw no-such-machine",
                 dir.path());
  EXPECT_EQ(machine.exit_code, 2);
  EXPECT_NE(machine.err.find("no-such-machine"), std::string::npos) << machine.err;
  EXPECT_EQ(RunColibri("bench replay --trace x --steps 5", dir.path()).exit_code, 2);  // a given trace is not synthesized
  EXPECT_EQ(RunColibri("bench replay --repeats 0", dir.path()).exit_code, 2);
}

}  // namespace
}  // namespace colibri::cli
