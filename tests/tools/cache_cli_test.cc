// `colibri cache sweep` on the bundled sample: the JSON the issue names, the
// Belady ceiling above every policy, the LRU cliff warning below the token
// cycle, the recorded outcome beside the curves, the curves as an HTML page, and
// bad input as exit 2.
#include <gtest/gtest.h>

#include "cli_test_util.h"

namespace colibri::cli {
namespace {

using Json = nlohmann::json;
using cli_testing::kSampleTrace;
using cli_testing::Outcome;
using CacheCliTest = cli_testing::CliTest;

TEST_F(CacheCliTest, SweepJsonHasEveryRowAndBeladyOnTop) {
  const Outcome run = Colibri("cache sweep " + kSampleTrace +
                              " --budgets-mib 500,2000,4000 --policies lru,lfu,layer,belady --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json j = run.json();
  const uint64_t t = j["token_cycle_bytes"].get<uint64_t>();
  EXPECT_GT(t, 500ull << 20);  // Qwen3 Q4_K_M: 48 layers x top-6 x about 3 MiB
  ASSERT_EQ(j["results"].size(), 12u);
  for (const Json& r : j["results"]) {
    for (const char* key : {"policy", "budget_mib", "hit_pct_decode", "hit_pct_cum", "read_bytes", "belady_gap_pts"}) {
      EXPECT_TRUE(r.contains(key)) << key;
    }
    EXPECT_GE(r["belady_gap_pts"].get<double>(), -1e-9) << r.dump();  // no policy beats the optimum
    EXPECT_EQ(r["below_token_cycle"].get<bool>(), r["budget_bytes"].get<uint64_t>() < t);
  }
  EXPECT_TRUE(j.contains("recorded"));  // the capture's residency column
  EXPECT_NE(run.err.find("token cycle"), std::string::npos) << run.err;  // 500 MiB of global LRU is below T
}

TEST_F(CacheCliTest, CsvAndMarkdown) {
  const Outcome csv = Colibri("cache sweep " + kSampleTrace + " --budgets-mib 4000 --policies lru --format csv");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_EQ(csv.out.rfind("policy,prefetch,budget_mib,", 0), 0u) << csv.out;
  const Outcome md = Colibri("cache sweep " + kSampleTrace + " --budgets-mib 4000 --policies lru --format md");
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("| lru | 4000 |"), std::string::npos) << md.out;
}

TEST_F(CacheCliTest, HtmlWritesBothChartsWithTheTokenCycle) {
  const std::string page = dir_.File("sweep.html");
  const Outcome run = Colibri("cache sweep " + kSampleTrace + " --budgets-mib 500,4000 --policies lru,belady " +
                              "--format html -o " + page);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string html = traces::testing::ReadFileBytes(page);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  const std::string chart = "<svg class=\"chart\"";
  size_t charts = 0;
  for (size_t at = html.find(chart); at != std::string::npos; at = html.find(chart, at + 1)) ++charts;
  EXPECT_EQ(charts, 2u);  // decode and cumulative
  EXPECT_NE(html.find(">T = "), std::string::npos);
  EXPECT_NE(html.find("<td>500 &lt;T</td>"), std::string::npos);  // the table, escaped
}

TEST_F(CacheCliTest, BadInputIsExitCodeTwo) {
  for (const char* flags : {"--policies nope", "--budgets-mib 0", "--budgets-mib 12x", "--policies pinned",
                            "--prefetch psychic"}) {
    const Outcome run = Colibri("cache sweep " + kSampleTrace + " " + flags);
    EXPECT_EQ(run.exit_code, 2) << flags << ": " << run.err;
    EXPECT_FALSE(run.err.empty()) << flags;
  }
}

}  // namespace
}  // namespace colibri::cli
