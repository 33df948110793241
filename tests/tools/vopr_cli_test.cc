// `colibri vopr` as a process: the seed printed first, each run named before
// it starts and reported after, the runs and their faults stored, --json,
// and bad flags exit 2.
#include <gtest/gtest.h>

#include "cli_test_util.h"

namespace colibri::cli {
namespace {

using cli_testing::Outcome;
using VoprCliTest = cli_testing::CliTest;

TEST_F(VoprCliTest, PrintsTheSeedFirstAndStoresEveryRun) {
  const Outcome run = Colibri("vopr --seed 4242 --runs 3 --work-dir " + dir_.path() + "/work");
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  EXPECT_EQ(run.out.rfind("vopr seed 4242\n", 0), 0u) << run.out;
  EXPECT_NE(run.out.find("run 0: "), std::string::npos);
  EXPECT_NE(run.out.find("run 2 ok: "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("3 runs, 0 failed; faults: "), std::string::npos) << run.out;
  const Outcome list = Colibri("runs list --json");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(list.json()["runs"].size(), 6u);  // an oracle and a faulty run each
  const Outcome json = Colibri("vopr --seed 4242 --run 1 --no-store --json --work-dir " + dir_.path() + "/work");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.err.find("vopr seed 4242"), std::string::npos);  // first, on stderr: stdout is the document
  const nlohmann::json j = json.json();
  ASSERT_EQ(j["runs"].size(), 1u);
  EXPECT_EQ(j["runs"][0]["run"], 1);
  EXPECT_EQ(j["runs"][0]["repro"], "colibri vopr --seed 4242 --run 1");
  EXPECT_EQ(j["runs_failed"], 0);
  EXPECT_EQ(Colibri("vopr --runs 3").exit_code, 2);  // --seed is required
  EXPECT_EQ(Colibri("vopr --seed 1 --runs 0").exit_code, 2);
}

}  // namespace
}  // namespace colibri::cli
