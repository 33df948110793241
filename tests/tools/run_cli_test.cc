// `colibri run` end to end on a small synthetic model: the output digest is
// the same whatever the placement (budgets, policy, queue depth, threads,
// storage backend), the JSON has the documented keys, the recorded trace
// re-reads, and bad input is exit code 2 with a clear message.
#include <gtest/gtest.h>

#include "cli_test_util.h"

namespace colibri::cli {
namespace {

using cli_testing::Outcome;
using cli_testing::RunColibri;

class RunCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new traces::testing::TempDir();
    // 3 layers x 8 experts, top-2, H=64 I=32 bf16: 12 KiB blocks.
    const Outcome synth = RunColibri("model synth --layers 3 --experts 8 --top-k 2 --hidden 64 --intermediate 32 "
                                     "--dtype bf16 --seed 5 -o " + dir_->File("model"), dir_->path());
    ASSERT_EQ(synth.exit_code, 0) << synth.err;
  }
  static void TearDownTestSuite() { delete dir_; }

  Outcome Run(const std::string& flags) const {
    return RunColibri("run --model " + dir_->File("model") + " --requests 3 --prefill 5 --tokens 6 --json " + flags,
                      dir_->path());
  }
  static traces::testing::TempDir* dir_;
};
traces::testing::TempDir* RunCliTest::dir_ = nullptr;

TEST_F(RunCliTest, OutputDigestDoesNotDependOnPlacement) {
  const Outcome base = Run("--l2-bytes 1G");
  ASSERT_EQ(base.exit_code, 0) << base.err;
  const nlohmann::json j = base.json();
  for (const char* key : {"output_digest", "tokens_per_s", "steps", "hit_pct_decode", "hit_pct_cum", "read_bytes",
                          "peak_rss_bytes", "config"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["steps"].get<uint64_t>(), (3u * 5 + 3u * 6) * 3);  // (token, layer) steps
  EXPECT_TRUE(j["step_latency_ns"]["nvme_read"].contains("p99"));
  EXPECT_TRUE(j["cache"]["l2"].contains("hit_pct_cum"));
  EXPECT_GT(j["hit_pct_cum"].get<double>(), 0.0);
  for (const char* flags : {"--l2-bytes 0", "--l2-bytes 48K --policy layer", "--l1-bytes 24K --l2-bytes 96K",
                            "--l2-bytes 1G --queue-depth 1 --storage pread --threads 2", "--l2-bytes 0 --no-direct",
                            "--l1-bytes 1M --l2-bytes 0 --staging-slots 1", "--l2-bytes 48K --prefetch coact",
                            "--l1-bytes 24K --l2-bytes 96K --prefetch lookahead --prefetch-width 3"}) {
    const Outcome other = Run(flags);
    ASSERT_EQ(other.exit_code, 0) << flags << ": " << other.err;
    EXPECT_EQ(other.json()["output_digest"], j["output_digest"]) << flags;
  }
}

TEST_F(RunCliTest, PrefetchIsReportedAndItsReadsCounted) {
  const Outcome none = Run("--l2-bytes 48K");
  const Outcome coact = Run("--l2-bytes 48K --prefetch coact");
  ASSERT_EQ(none.exit_code, 0) << none.err;
  ASSERT_EQ(coact.exit_code, 0) << coact.err;
  EXPECT_TRUE(none.json()["prefetch"].is_null());
  const nlohmann::json p = coact.json()["prefetch"];
  for (const char* key : {"issued", "issued_bytes", "hits", "wasted_bytes", "waits", "precision", "recall", "coverage"}) {
    EXPECT_TRUE(p.contains(key)) << key;
  }
  EXPECT_GT(p["issued"].get<uint64_t>(), 0u);
  // Every byte read is a demand miss or a prefetch: 12 KiB blocks.
  EXPECT_EQ(coact.json()["read_bytes"].get<uint64_t>(),
            coact.json()["cache"]["l2"]["misses"].get<uint64_t>() * 12288 + p["issued_bytes"].get<uint64_t>());
  const Outcome no_l2 = Run("--l2-bytes 0 --prefetch coact");
  EXPECT_EQ(no_l2.exit_code, 2);
  EXPECT_NE(no_l2.err.find("needs an L2 budget"), std::string::npos) << no_l2.err;
}

TEST_F(RunCliTest, RecordsATraceThatReReads) {
  const std::string trace = dir_->File("run.ctrace");
  const Outcome run = Run("--record " + trace + " --record-logits --record-hidden --record-tokens");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Outcome stats = RunColibri("trace stats --json " + trace, dir_->path());
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_EQ(stats.json()["tokens"].get<uint64_t>(), 3u * 5 + 3u * 6);
  EXPECT_EQ(stats.json()["requests"].get<uint64_t>(), 3u);
  const Outcome inspect = RunColibri("trace inspect --json " + trace, dir_->path());
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  for (const char* field : {"gate_weights", "router_logits", "token_ids", "hidden_states"}) {
    EXPECT_TRUE(inspect.json()["optional_fields"][field]["present"].get<bool>()) << field;
  }
  EXPECT_EQ(RunColibri("trace validate " + trace, dir_->path()).exit_code, 0);
}

TEST_F(RunCliTest, BadInputIsExitCodeTwoWithAClearMessage) {
  const Outcome missing = RunColibri("run --model /nonexistent/model", dir_->path());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("/nonexistent/model"), std::string::npos) << missing.err;
  const Outcome small = Run("--l2-bytes 100");
  EXPECT_EQ(small.exit_code, 2);
  EXPECT_NE(small.err.find("below one expert"), std::string::npos) << small.err;
  const Outcome depth = Run("--queue-depth 0");
  EXPECT_EQ(depth.exit_code, 2);
  const Outcome size = Run("--l2-bytes 12Q");
  EXPECT_EQ(size.exit_code, 2);
  EXPECT_NE(size.err.find("unknown unit"), std::string::npos) << size.err;
}

}  // namespace
}  // namespace colibri::cli
