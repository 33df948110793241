// The run store through the CLI: `replay` and `run` store their runs by
// default (run_id in their JSON, --no-store skips), `runs list|show|export|
// delete|rerun`, `report compare` in every format, and `report gate` passing,
// failing on a P99 regression and on a routing change (exit 1 with reasons).
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_test_util.h"

namespace colibri::cli {
namespace {

using Json = nlohmann::json;
using cli_testing::Outcome;

using cli_testing::kReplaySample;
using cli_testing::kSampleTrace;

class RunsCliTest : public cli_testing::CliTest {
 protected:
  std::string Db() const { return dir_.File("colibri-runs.db"); }
  // Replays the sample on `machines` ("--hw a --hw b"); returns the stored run ids.
  std::vector<int64_t> Replay(const std::string& machines) const {
    const Outcome run = Colibri(kReplaySample + machines + " --json");
    EXPECT_EQ(run.exit_code, 0) << run.err;
    std::vector<int64_t> ids;
    const Json runs = run.json()["runs"];
    for (const Json& r : runs) ids.push_back(r["run_id"].get<int64_t>());
    return ids;
  }
};

TEST_F(RunsCliTest, ReplayStoresEachMachineAndNoStoreSkips) {
  const std::vector<int64_t> ids = Replay("--hw h100-p5800x-gen5 --hw phone-bigmoe");
  ASSERT_EQ(ids, (std::vector<int64_t>{1, 2}));
  const Outcome list = Colibri("runs list --json");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const Json runs = list.json()["runs"];
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0]["run_id"], 2);  // newest first
  EXPECT_EQ(runs[0]["status"], "complete");
  EXPECT_EQ(runs[0]["label"], "phone-bigmoe");

  const Outcome skipped = Colibri(kReplaySample + "--hw h100-p5800x-gen5 --no-store --json");
  ASSERT_EQ(skipped.exit_code, 0) << skipped.err;
  EXPECT_FALSE(skipped.json()["runs"][0].contains("run_id"));
  EXPECT_EQ(Colibri("runs list --json").json()["runs"].size(), 2u);
}

TEST_F(RunsCliTest, ShowHoldsWhatReRunsTheRun) {
  Replay("--hw a100-pm9a3-gen4 --seed 7");
  const Outcome show = Colibri("runs show 1 --json");
  ASSERT_EQ(show.exit_code, 0) << show.err;
  const Json r = show.json()["runs"][0];
  EXPECT_EQ(r["kind"], "replay");
  EXPECT_EQ(r["seed"], 7);
  EXPECT_EQ(r["trace_digest"].get<std::string>().size(), 64u);  // SHA-256 hex
  EXPECT_EQ(r["routing"], kSampleTrace);                                // routing followed as recorded
  EXPECT_EQ(r["hardware"]["nvme"]["id"], "samsung-pm9a3");
  EXPECT_EQ(r["config"]["l2_bytes"], 8ull << 30);
  EXPECT_EQ(r["backends"], "storage=sim transfer=sim compute=sim");
  const Json command = r["command"];
  EXPECT_EQ(command[0], "replay");
  EXPECT_EQ(std::count(command.begin(), command.end(), "--hw"), 1);
  const Json results = r["results"];
  EXPECT_EQ(results["distributions"]["request_latency_ns"]["samples"], 1);
  EXPECT_EQ(results["distributions"]["step_latency_ns.nvme_read"]["source"], "raw");
  EXPECT_EQ(results["expert_load_layers"], 48);
  EXPECT_GT(results["hit_rate_points"].get<uint64_t>(), 0u);
  EXPECT_EQ(results["texts"]["event_digest"].get<std::string>().size(), 16u);
}

TEST_F(RunsCliTest, RerunReproducesTheEventDigest) {
  Replay("--hw h100-p5800x-gen5 --hw phone-bigmoe");
  const Outcome rerun = Colibri("runs rerun 2 --json");
  ASSERT_EQ(rerun.exit_code, 0) << rerun.err;
  const Json j = rerun.json();
  EXPECT_EQ(j["rerun_run_id"], 3);
  EXPECT_TRUE(j["identical"].get<bool>());
  EXPECT_EQ(j["digest"], j["rerun_digest"]);
  EXPECT_EQ(Colibri("runs show 3 --json").json()["runs"][0]["label"], "phone-bigmoe");
}

TEST_F(RunsCliTest, ExportAndDelete) {
  Replay("--hw h100-p5800x-gen5");
  const Outcome csv = Colibri("runs export 1 --format csv -o " + dir_.File("runs.csv"));
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  const std::string text = traces::testing::ReadFileBytes(dir_.File("runs.csv"));
  EXPECT_EQ(text.rfind("run_id,kind,label,metric,value\n", 0), 0u);
  EXPECT_NE(text.find("1,replay,\"h100-p5800x-gen5\",request_latency_ns.p99,"), std::string::npos);
  const Outcome samples = Colibri("runs export 1 --samples --format json");
  ASSERT_EQ(samples.exit_code, 0) << samples.err;
  const Json s = samples.json()["runs"][0]["distributions"];
  const size_t batches = s["step_latency_ns.layer_batch"]["values"].size();
  EXPECT_GT(batches, 0u);  // one sample per layer batch, for every step
  EXPECT_EQ(s["step_latency_ns.nvme_read"]["values"].size(), batches);
  EXPECT_EQ(s["request_latency_ns"]["source"], "raw");

  ASSERT_EQ(Colibri("runs delete 1").exit_code, 0);
  EXPECT_TRUE(Colibri("runs list --json").json()["runs"].empty());
  const Outcome gone = Colibri("runs show 1");
  EXPECT_EQ(gone.exit_code, 2);
  EXPECT_NE(gone.err.find("run 1"), std::string::npos) << gone.err;
}

TEST_F(RunsCliTest, CompareInEveryFormat) {
  Replay("--hw h100-p5800x-gen5 --hw phone-bigmoe");
  const Outcome json = Colibri("report compare 1 2 --format json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const Json c = json.json();
  EXPECT_EQ(c["baseline"], 1);
  bool found = false;
  for (const Json& row : c["rows"]) {
    if (row["key"] != "request_latency_ns.p99") continue;
    found = true;
    EXPECT_EQ(row["best_run_id"], 1);  // the H100 machine is faster
    EXPECT_GT(row["delta_pct"][1].get<double>(), 0.0);
    EXPECT_TRUE(row["low_confidence"].get<bool>());  // one request
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(c["runs"][1]["stability"]["set_identical_fraction"], 1.0);
  EXPECT_EQ(c["runs"][1]["stability"]["compared"], 7461);

  const Outcome md = Colibri("report compare 1 2 --format md");
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("| request_latency_ns.p99 ~ |"), std::string::npos) << md.out;
  const Outcome html = Colibri("report compare --last 2 --format html -o " + dir_.File("report.html"));
  ASSERT_EQ(html.exit_code, 0) << html.err;
  const std::string page = traces::testing::ReadFileBytes(dir_.File("report.html"));
  EXPECT_NE(page.find("<svg"), std::string::npos);
  EXPECT_EQ(page.find("http://"), std::string::npos);
}

TEST_F(RunsCliTest, GatePassesAndFailsOnP99) {
  Replay("--hw h100-p5800x-gen5 --hw phone-bigmoe");
  const Outcome pass = Colibri("report gate --baseline 2 --candidate 1 --json");
  EXPECT_EQ(pass.exit_code, 0) << pass.out << pass.err;
  EXPECT_TRUE(pass.json()["pass"].get<bool>());
  const Outcome fail = Colibri("report gate --baseline 1 --candidate 2 --metric step_latency_ns.nvme_read");
  EXPECT_EQ(fail.exit_code, 1) << fail.out << fail.err;
  EXPECT_NE(fail.out.find("FAIL: step_latency_ns.nvme_read P99"), std::string::npos) << fail.out;
  const Outcome cv = Colibri("report gate --baseline 2 --candidate 1 --max-load-cv 0.5 --json");
  EXPECT_EQ(cv.exit_code, 1) << cv.out;
  EXPECT_NE(cv.json()["reasons"][0].get<std::string>().find("load CV"), std::string::npos);
}

TEST_F(RunsCliTest, BadInputIsExitCodeTwoWithAClearMessage) {
  const Outcome none = Colibri("report compare 5");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("no such run store"), std::string::npos) << none.err;  // reading never creates the store
  const std::string garbage = dir_.File("garbage.db");
  traces::testing::WriteFileBytes(garbage, std::string(4096, 'x'));
  const Outcome bad_db = Colibri("runs list --db " + garbage);
  EXPECT_NE(bad_db.exit_code, 0);
  EXPECT_NE(bad_db.err.find(garbage), std::string::npos) << bad_db.err;
  Replay("--hw h100-p5800x-gen5 --hw phone-bigmoe");
  const Outcome metric = Colibri("report gate --baseline 1 --candidate 2 --metric nope_ns");
  EXPECT_EQ(metric.exit_code, 2);
  EXPECT_NE(metric.err.find("--metric nope_ns"), std::string::npos) << metric.err;
}

// `colibri run` computes its routing: it records it next to the database, so a
// run with another seed shows as a routing change with its first divergence.
class RunsEngineCliTest : public RunsCliTest {
 protected:
  void SetUp() override {
    const Outcome synth = Colibri("model synth --layers 3 --experts 8 --top-k 2 --hidden 64 --intermediate 32 "
                                  "--dtype bf16 --seed 5 -o " + dir_.File("model"));
    ASSERT_EQ(synth.exit_code, 0) << synth.err;
  }
  Outcome Run(const std::string& flags) const {
    return Colibri("run --model " + dir_.File("model") + " --requests 2 --prefill 4 --tokens 5 --json " + flags);
  }
};

TEST_F(RunsEngineCliTest, RunStoresAndGateCatchesARoutingChange) {
  const Outcome a = Run("--seed 1"), b = Run("--seed 1"), c = Run("--seed 2");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(a.json()["run_id"], 1);
  EXPECT_EQ(c.json()["run_id"], 3);
  EXPECT_TRUE(std::filesystem::exists(Db() + ".routing/run-1.ctrace"));
  const Outcome same = Colibri("report gate --baseline 1 --candidate 2 --max-p99-regression 1000000 "
                               "--require-identical-routing --json");
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
  EXPECT_EQ(same.json()["stability"]["compared"], 3 * (2 * 4 + 2 * 5));  // layers x (prefill + decode tokens)
  const Outcome changed = Colibri("report gate --baseline 1 --candidate 3 --max-p99-regression 1000000 "
                                  "--require-identical-routing --json");
  EXPECT_EQ(changed.exit_code, 1) << changed.out << changed.err;
  const Json g = changed.json();
  EXPECT_FALSE(g["pass"].get<bool>());
  EXPECT_TRUE(g["stability"]["first_divergence"].is_object());
  EXPECT_NE(g["reasons"][0].get<std::string>().find("first divergence at request"), std::string::npos);
  ASSERT_EQ(Colibri("runs delete 3").exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(Db() + ".routing/run-3.ctrace"));
}

}  // namespace
}  // namespace colibri::cli
