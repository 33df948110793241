// `colibri fidelity --grid quick` against the committed fixture profile (a
// calibration of a development machine, tests/data/profiles/): the report's
// structure, and that every error is computed -- never thresholds (timings
// on these shared machines are noisy). `colibri calibrate`'s refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "cli_test_util.h"

namespace colibri::cli {
namespace {

using cli_testing::CliTest;

const std::string kFixtureProfile = std::string(COLIBRI_TEST_DATA) + "/profiles/measured-fixture";

TEST_F(CliTest, FidelityQuickGridReportsEveryStatistic) {
#if COLIBRI_SANITIZED
  GTEST_SKIP() << "not applicable: timing runs belong to the default preset";
#endif
  const auto run = Colibri("fidelity --profile " + kFixtureProfile + " --grid quick --json --work-dir " +
                           dir_.File("work"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json r = run.json();
  EXPECT_EQ(r["grid"], "quick");
  EXPECT_EQ(r["repeats"], 2);
  ASSERT_EQ(r["cases"].size(), 12u);
  std::set<std::string> names, dtypes, prefetch;
  std::set<uint32_t> depths, requests, threads;
  for (const auto& c : r["cases"]) {
    names.insert(c["name"].get<std::string>());
    dtypes.insert(c["dtype"].get<std::string>());
    prefetch.insert(c["prefetch"].get<std::string>());
    depths.insert(c["queue_depth"].get<uint32_t>());
    requests.insert(c["requests"].get<uint32_t>());
    threads.insert(c["threads"].get<uint32_t>());
    for (const char* step : {"routing", "scheduling", "nvme_read", "host_to_device", "compute", "aggregation",
                             "layer_batch"}) {
      ASSERT_TRUE(c["steps"].contains(step)) << c["name"] << " " << step;
      for (const char* q : {"p50", "p90", "p99"}) {
        const auto& s = c["steps"][step][q];
        ASSERT_EQ(s["measured"].size(), 2u) << "one value per real run";
        const double measured = s["measured_median"].get<double>(), predicted = s["predicted"].get<double>();
        // An error exists whenever the measured median is not 0.
        EXPECT_EQ(s["error"].is_null(), measured == 0 && predicted != 0) << c["name"] << " " << step << " " << q;
        EXPECT_FALSE(s["noise_floor"].is_null() && measured != 0) << c["name"] << " " << step << " " << q;
      }
      EXPECT_GE(c["steps"][step]["ks_distance"].get<double>(), 0.0);
      EXPECT_LE(c["steps"][step]["ks_distance"].get<double>(), 1.0);
    }
    for (const char* e2e : {"ttft_ns", "tpot_ns", "request_latency_ns"}) {
      EXPECT_FALSE(c[e2e]["p50"]["error"].is_null()) << c["name"] << " " << e2e;
    }
    EXPECT_FALSE(c["tokens_per_s"]["error"].is_null());
    EXPECT_GT(c["steps"]["layer_batch"]["p50"]["measured_median"].get<double>(), 0);
    EXPECT_GT(c["steps"]["layer_batch"]["p50"]["predicted"].get<double>(), 0);
    EXPECT_TRUE(c["misses"].is_array());
    // Two storage probes (before and after the real runs) where the configuration reads, none where all is resident.
    const size_t probes = c["l2_over_token_cycle"].get<double>() > 0 ? 2 : 0;
    ASSERT_EQ(c["storage_drift"].size(), probes) << c["name"];
    for (const auto& d : c["storage_drift"]) {
      EXPECT_GT(d["reads"].get<uint64_t>(), 0u);
      EXPECT_GT(d["measured_p50_ns"].get<int64_t>(), 0);
      EXPECT_GT(d["profile_p50_ns"].get<int64_t>(), 0);
      EXPECT_EQ(d["queue_depth"].get<uint32_t>(), std::min<uint32_t>(c["queue_depth"].get<uint32_t>(), 4));
    }
  }
  EXPECT_EQ(names.size(), 12u);
  EXPECT_EQ(dtypes, (std::set<std::string>{"bf16", "int8"}));
  EXPECT_EQ(prefetch, (std::set<std::string>{"none", "coact"}));
  EXPECT_EQ(depths, (std::set<uint32_t>{1, 8, 32}));
  EXPECT_EQ(requests, (std::set<uint32_t>{1, 4, 16}));
  EXPECT_EQ(threads, (std::set<uint32_t>{1, 2}));
  EXPECT_GT(r["report_run_id"].get<int64_t>(), 0) << "stored, with every run linked";
  const auto listed = Colibri("runs list --json");
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_GE(listed.json()["runs"].size(), 12u * 3 + 1);

  // The report, from the store, in each rendering.
  const std::string id = std::to_string(r["report_run_id"].get<int64_t>());
  const auto stored = Colibri("report fidelity " + id + " --json");
  ASSERT_EQ(stored.exit_code, 0) << stored.err;
  EXPECT_EQ(stored.json()["cases"].size(), 12u);
  EXPECT_EQ(stored.json()["cases"][0]["name"], r["cases"][0]["name"]);
  const auto md = Colibri("report fidelity " + id + " --format md");
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_EQ(md.out.rfind("# Fidelity", 0), 0u) << md.out.substr(0, 200);
  EXPECT_NE(md.out.find("| layer_batch P50 |"), std::string::npos);
  const auto html = Colibri("report fidelity " + id + " --format html -o " + dir_.File("f.html"));
  ASSERT_EQ(html.exit_code, 0) << html.err;
  std::ifstream page(dir_.File("f.html"));
  const std::string text((std::istreambuf_iterator<char>(page)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("<svg"), std::string::npos) << "the CDF overlays";
  const auto not_fidelity = Colibri("report fidelity " + std::to_string(r["cases"][0]["measured_run_ids"][0].get<int64_t>()));
  EXPECT_EQ(not_fidelity.exit_code, 2);
  EXPECT_NE(not_fidelity.err.find("not a fidelity run"), std::string::npos) << not_fidelity.err;
}

TEST_F(CliTest, FidelityRefusesBadInput) {
  auto run = Colibri("fidelity --profile /nonexistent --no-store");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--profile /nonexistent: not a directory"), std::string::npos) << run.err;
  run = Colibri("fidelity --grid medium --no-store");
  EXPECT_EQ(run.exit_code, 2);
  run = Colibri("fidelity --repeats 0 --no-store");
  EXPECT_EQ(run.exit_code, 2);
  std::filesystem::create_directories(dir_.File("bad"));
  {
    std::ofstream bad(dir_.File("bad/m.json"));
    bad << R"({"kind": "machine", "name": "x", "description": "d", "nvme": "nope", "pcie": "none", "compute": "cpu-local"})";
  }
  run = Colibri("fidelity --profile " + dir_.File("bad") + " --no-store");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("m.json: field nvme"), std::string::npos) << run.err;
}

TEST_F(CliTest, ReportFidelityRefusesAMissingRun) {
  const auto run = Colibri("report fidelity 7");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("colibri-runs.db: no such run store"), std::string::npos) << run.err;  // nothing stored yet
  EXPECT_EQ(Colibri("report fidelity 7 --format pdf").exit_code, 2);
}

TEST_F(CliTest, CalibrateRefusesBadInput) {
  auto run = Colibri("calibrate");
  EXPECT_EQ(run.exit_code, 2) << "-o is required";
  run = Colibri("calibrate -o " + dir_.File("out") + " --dir /nonexistent/dir --quick");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("/nonexistent/dir"), std::string::npos) << run.err;
  run = Colibri("calibrate -o " + dir_.File("out") + " --threads 0 --quick");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--threads"), std::string::npos) << run.err;
  run = Colibri("calibrate -o " + dir_.File("out") + " --model /nonexistent/model --like x.json --quick");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("exclusive"), std::string::npos) << run.err;
  EXPECT_FALSE(std::filesystem::exists(dir_.File("out"))) << "nothing written";
}

}  // namespace
}  // namespace colibri::cli
