// `colibri bench store` at small sizes (no wall-clock asserts): it stores
// --runs synthetic runs of --samples step latencies in a fresh database in
// --dir, compares them, checks the compare's percentiles against a raw-file
// reference, and removes its files unless --keep; bad flags are exit 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli_test_util.h"

namespace colibri::cli {
namespace {

using cli_testing::Outcome;
using cli_testing::RunColibri;

TEST(BenchStoreCliTest, StoresComparesAndMatchesTheReferenceThenRemovesItsFiles) {
  traces::testing::TempDir scratch;
  const std::string dir = scratch.File("bench");
  std::filesystem::create_directory(dir);
  const Outcome run = RunColibri("bench store --runs 3 --samples 80000 --json --dir " + dir, scratch.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = run.json();
  for (const char* key : {"runs", "samples_per_run", "store_s", "compare_s", "db_bytes", "bytes_per_sample",
                          "reference", "ratios", "targets", "percentiles_match", "peak_rss_bytes"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["runs"].get<int>(), 3);
  EXPECT_EQ(j["samples_per_run"].get<uint64_t>(), 80000u);
  EXPECT_EQ(j["stored_samples"].get<uint64_t>(), 3u * (80000 + 3 * 1000));  // steps + request, TTFT, TPOT
  EXPECT_TRUE(j["percentiles_match"].get<bool>());
  ASSERT_EQ(j["store_s"]["per_run"].size(), 3u);
  for (const auto& seconds : j["store_s"]["per_run"]) EXPECT_GT(seconds.get<double>(), 0.0);
  for (const char* key : {"min", "median", "max"}) {
    EXPECT_GT(j["store_s"][key].get<double>(), 0.0) << key;
    EXPECT_GT(j["reference"]["raw_write_s"][key].get<double>(), 0.0) << key;
  }
  EXPECT_GT(j["compare_s"].get<double>(), 0.0);
  EXPECT_GT(j["reference"]["raw_compare_s"].get<double>(), 0.0);
  EXPECT_GT(j["ratios"]["store_vs_raw_write"].get<double>(), 0.0);
  EXPECT_GT(j["ratios"]["compare_vs_raw_compare"].get<double>(), 0.0);
  EXPECT_GT(j["db_bytes"].get<uint64_t>(), 0u);
  EXPECT_GT(j["bytes_per_sample"].get<double>(), 0.0);
  EXPECT_GT(j["peak_rss_bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["targets"]["store_s"].get<double>(), 10.0);
  EXPECT_EQ(j["targets"]["compare_s"].get<double>(), 5.0);
  EXPECT_TRUE(j["targets"]["store_ok"].is_boolean());
  EXPECT_TRUE(j["targets"]["compare_ok"].is_boolean());
  // The first run's workload: every step, and the request, TTFT and TPOT latencies.
  EXPECT_EQ(j["first_run_percentiles"].size(), 8u + 3);
  EXPECT_TRUE(j["first_run_percentiles"].contains("step_latency_ns.nvme_read"));
  EXPECT_FALSE(std::filesystem::exists(j["db_path"].get<std::string>()));
  EXPECT_TRUE(std::filesystem::is_empty(dir));  // the database and the reference files are gone
}

TEST(BenchStoreCliTest, KeepLeavesAStoreThatListsTheRuns) {
  traces::testing::TempDir scratch;
  const Outcome run = RunColibri("bench store --runs 2 --samples 16 --keep --json --dir " + scratch.path(),
                                 scratch.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string db = run.json()["db_path"].get<std::string>();
  ASSERT_TRUE(std::filesystem::exists(db));
  const Outcome list = RunColibri("runs list --db " + db + " --json", scratch.path());
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const nlohmann::json runs = list.json()["runs"];
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0]["kind"].get<std::string>(), "bench");
}

TEST(BenchStoreCliTest, HumanOutputNamesEveryFigure) {
  traces::testing::TempDir scratch;
  const Outcome run = RunColibri("bench store --runs 1 --samples 800 --dir " + scratch.path(), scratch.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  for (const char* word : {"store", "raw write", "compare", "raw compare", "database", "percentiles", "peak RSS"}) {
    EXPECT_NE(run.out.find(word), std::string::npos) << word << "\n" << run.out;
  }
}

TEST(BenchStoreCliTest, BadFlagsAreExitTwoWithAMessage) {
  traces::testing::TempDir scratch;
  for (const char* flags : {"--samples 7", "--runs 0", "--runs x"}) {
    const Outcome run = RunColibri(std::string("bench store ") + flags + " --dir " + scratch.path(), scratch.path());
    EXPECT_EQ(run.exit_code, 2) << flags;
    EXPECT_FALSE(run.err.empty()) << flags;
  }
  const Outcome missing = RunColibri("bench store --dir " + scratch.File("nope"), scratch.path());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("nope"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace colibri::cli
