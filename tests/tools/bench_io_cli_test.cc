// `colibri bench io --model DIR` on a small synthetic model (1 s runs, fio
// skipped): the JSON names the block size and queue depth it used, the reads
// are the model's expert blocks, the engine streams them in the all-miss
// configuration; bad flags are exit code 2.
#include <gtest/gtest.h>

#include "cli_test_util.h"

namespace colibri::cli {
namespace {

using cli_testing::Outcome;
using cli_testing::RunColibri;

TEST(BenchIoCliTest, ModelModeStreamsExpertBlocksThroughStorageAndEngine) {
  traces::testing::TempDir dir;
  const Outcome synth = RunColibri("model synth --layers 2 --experts 16 --top-k 4 --hidden 128 --intermediate 64 "
                                   "--dtype bf16 -o " + dir.File("model"), dir.path());
  ASSERT_EQ(synth.exit_code, 0) << synth.err;
  const Outcome bench = RunColibri("bench io --model " + dir.File("model") +
                                   " --seconds 1 --queue-depth 4 --batch-tokens 8 --threads 1 --fio none --json",
                                   dir.path());
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  const nlohmann::json j = bench.json();
  EXPECT_EQ(j["block_bytes"].get<uint64_t>(), 3u * 128 * 64 * 2);  // gate, up, down in bf16: 48 KiB, 4 KiB-aligned
  EXPECT_EQ(j["queue_depth"].get<uint32_t>(), 4u);
  EXPECT_GT(j["read_bytes_per_s"].get<double>(), 0.0);
  EXPECT_EQ(j["read_bytes"].get<uint64_t>() % j["block_bytes"].get<uint64_t>(), 0u);
  const nlohmann::json& engine = j["engine"];
  ASSERT_TRUE(engine.is_object());
  EXPECT_GT(engine["layer_batches"].get<uint64_t>(), 0u);
  EXPECT_GT(engine["read_bytes_per_s"].get<double>(), 0.0);
  EXPECT_EQ(engine["read_bytes"].get<uint64_t>() % j["block_bytes"].get<uint64_t>(), 0u);
  EXPECT_TRUE(j["fio"].is_null());
}

TEST(BenchIoCliTest, ModelExcludesFileAndBlockSize) {
  traces::testing::TempDir dir;
  EXPECT_EQ(RunColibri("bench io --model x --block-bytes 4096 --fio none", dir.path()).exit_code, 2);
  EXPECT_EQ(RunColibri("bench io --model x --file y --fio none", dir.path()).exit_code, 2);
  const Outcome missing = RunColibri("bench io --model /nonexistent --fio none", dir.path());
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("/nonexistent"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace colibri::cli
