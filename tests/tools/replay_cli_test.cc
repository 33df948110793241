// `colibri replay` run as a process on the bundled sample: the same results
// whatever the number of threads replaying the machines, open-loop pacing
// from a real arrival trace, the Perfetto timeline, and exit code 2 with a
// clear message for contradictory flags.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_test_util.h"

namespace colibri::cli {
namespace {

using Json = nlohmann::json;
using cli_testing::Outcome;

using cli_testing::kReplaySample;
using cli_testing::kSampleTrace;

using ReplayCliTest = cli_testing::CliTest;

// The runs without wall_s (the only field that depends on the machine's load) and run_id (the store's).
Json Runs(const Outcome& run) {
  Json runs = run.json()["runs"];
  for (Json& r : runs) {
    r.erase("wall_s");
    r.erase("run_id");
  }
  return runs;
}

TEST_F(ReplayCliTest, ResultsDoNotDependOnTheNumberOfThreads) {
  const std::string machines = "--hw h100-p5800x-gen5 --hw a100-pm9a3-gen4 --hw phone-bigmoe --seed 3 --json";
  const Outcome one = Colibri(kReplaySample + machines + " --jobs 1");
  const Outcome three = Colibri(kReplaySample + machines + " --jobs 3");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  ASSERT_EQ(three.exit_code, 0) << three.err;
  const Json a = Runs(one), b = Runs(three);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a[0]["machine"], "h100-p5800x-gen5");
  EXPECT_EQ(a[2]["machine"], "phone-bigmoe");
  EXPECT_EQ(a[0]["pacing"]["mode"], "closed");
}

TEST_F(ReplayCliTest, OpenLoopFromARealArrivalTrace) {
  const std::string azure = std::string(COLIBRI_SHARED_DATA) + "/azure-llm-2023/AzureLLMInferenceTrace_code.csv";
  const Outcome run =
      Colibri(kReplaySample + "--hw h100-p5800x-gen5 --arrivals " + azure + " --repeat --max-arrivals 12 --max-batch 4 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json r = run.json()["runs"][0];
  EXPECT_EQ(r["pacing"]["mode"], "open");
  EXPECT_EQ(r["pacing"]["arrivals_total"], 8819);
  EXPECT_EQ(r["requests"], 12);
  EXPECT_EQ(r["pacing"]["max_pass_requests"], 4);
  EXPECT_EQ(r["queue_ns"]["samples"], 12);
  EXPECT_GT(r["throughput"]["tokens_per_s"].get<double>(), 0.0);
}

TEST_F(ReplayCliTest, TraceEventsFileHasEveryMachine) {
  const std::string out = dir_.path() + "/timeline.json";
  const Outcome run = Colibri(kReplaySample + "--hw h100-p5800x-gen5 --hw phone-bigmoe --trace-events " + out + " --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json timeline = Json::parse(traces::testing::ReadFileBytes(out));
  int processes = 0;
  uint64_t read_bytes = 0;
  for (const Json& e : timeline["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") ++processes;
    if (e["ph"] == "X" && e["cat"] == "nvme") read_bytes += e["args"]["bytes"].get<uint64_t>();
  }
  EXPECT_EQ(processes, 2);
  const Json runs = run.json()["runs"];
  EXPECT_EQ(read_bytes, runs[0]["read_bytes"].get<uint64_t>() + runs[1]["read_bytes"].get<uint64_t>());
}

TEST_F(ReplayCliTest, PrefetchReportsItsAccuracyAndReads) {
  const std::string base = "replay " + kSampleTrace + " --hidden 2048 --hw h100-p5800x-gen5 --l2-bytes 1G --json ";
  const Outcome none = Colibri(base);
  const Outcome oracle = Colibri(base + "--prefetch oracle");
  ASSERT_EQ(none.exit_code, 0) << none.err;
  ASSERT_EQ(oracle.exit_code, 0) << oracle.err;
  const Json a = none.json()["runs"][0], b = oracle.json()["runs"][0];
  EXPECT_TRUE(a["prefetch"].is_null());
  EXPECT_EQ(b["prefetch"]["precision"].get<double>(), 1.0);
  EXPECT_GT(b["hit_pct_decode"].get<double>(), a["hit_pct_decode"].get<double>());
  EXPECT_EQ(b["prefetch"]["wasted_bytes"].get<uint64_t>(), 0u);
  const Outcome lookahead = Colibri(base + "--prefetch lookahead");
  EXPECT_EQ(lookahead.exit_code, 2);
  EXPECT_NE(lookahead.err.find("gate weights"), std::string::npos) << lookahead.err;
}

TEST_F(ReplayCliTest, DecodeSeriesHasOneEntryPerDecodePass) {
  const Outcome run = Colibri(kReplaySample + "--hw phone-bigmoe --queue-depth 8 --decode-series --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json r = run.json()["runs"][0];
  const Json& series = r["decode"]["series"];
  const uint64_t passes = r["decode"]["passes"].get<uint64_t>();
  EXPECT_EQ(passes, 128u);
  int64_t elapsed = 0;
  uint64_t read_bytes = 0;
  for (const char* key : {"read_bytes", "nvme_read_ns", "dense_ns", "elapsed_ns"}) {
    ASSERT_EQ(series[key].size(), passes) << key;
  }
  for (size_t i = 0; i < passes; ++i) {
    elapsed += series["elapsed_ns"][i].get<int64_t>();
    read_bytes += series["read_bytes"][i].get<uint64_t>();
  }
  EXPECT_EQ(elapsed, r["decode"]["elapsed_ns"].get<int64_t>());
  EXPECT_EQ(read_bytes, r["decode"]["read_bytes"].get<uint64_t>());
  EXPECT_GT(r["dense_cost"]["attention_ns"].get<int64_t>(), 0);  // the sample carries its attention shape
  // 8 GiB of expert cache does not fit the phone's 6.6 GB: the dense weights are faulted back every pass.
  EXPECT_GT(r["dense_cost"]["faults"].get<uint64_t>(), 0u);
  EXPECT_GT(r["dense_cost"]["shortfall_bytes_max"].get<uint64_t>(), 8589934592u - 6628042752u);
  EXPECT_FALSE(Colibri(kReplaySample + "--hw phone-bigmoe --json").json()["runs"][0]["decode"].contains("series"));
}

// --faults: injected faults are printed, counted by kind in --json, and
// stored with the run (runs show); a malformed spec is exit 2 naming the byte.
TEST_F(ReplayCliTest, InjectedFaultsAreReportedAndStored) {
  const Outcome run = Colibri(kReplaySample + "--hw h100-p5800x-gen5 --faults storage.eio=1/300,storage.spike=1/50:5ms --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json r = run.json()["runs"][0];
  EXPECT_EQ(r["faults"]["spec"], "storage.eio=1/300,storage.spike=1/50:5ms");
  const uint64_t eio = r["faults"]["by_kind"]["storage.eio"], spike = r["faults"]["by_kind"]["storage.spike"];
  EXPECT_GT(eio, 0u);
  EXPECT_GT(spike, 0u);
  EXPECT_EQ(r["faults"]["injected"], eio + spike);
  EXPECT_EQ(r["read_retries"], eio);
  const Outcome show = Colibri("runs show " + std::to_string(r["run_id"].get<int64_t>()) + " --json");
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_EQ(show.json()["runs"][0]["results"]["faults"], eio + spike);
  const Outcome text = Colibri(kReplaySample + "--hw h100-p5800x-gen5 --faults storage.eio=1/300 --no-store");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("faults (storage.eio=1/300): "), std::string::npos) << text.out;
  const Outcome bad = Colibri(kReplaySample + "--hw h100-p5800x-gen5 --faults storage.eio=1/0");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--faults"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("at byte"), std::string::npos) << bad.err;
}

TEST_F(ReplayCliTest, ContradictoryFlagsExitTwoWithAMessage) {
  const Outcome open = Colibri(kReplaySample + "--hw h100-p5800x-gen5 --pacing open");
  EXPECT_EQ(open.exit_code, 2);
  EXPECT_NE(open.err.find("--arrivals"), std::string::npos) << open.err;
  const Outcome scale = Colibri(kReplaySample + "--hw h100-p5800x-gen5 --time-scale 2");
  EXPECT_EQ(scale.exit_code, 2);
  EXPECT_NE(scale.err.find("--pacing open"), std::string::npos) << scale.err;
  const Outcome timeline = Colibri(kReplaySample + "--hw h100-p5800x-gen5 --jobs 2 --trace-events " + dir_.path() + "/t.json");
  EXPECT_EQ(timeline.exit_code, 2);
  EXPECT_NE(timeline.err.find("--jobs 1"), std::string::npos) << timeline.err;
}

// The issue's `head -c 100000 sample > t.ctrace` (no whole zstd block: 0
// records), and a cut at half the file: refused by replay and cache sweep,
// replayed as its prefix with --allow-torn, the truncation stored and shown.
TEST_F(ReplayCliTest, TornTraceIsRefusedUnlessAllowedAndThenRecorded) {
  const std::string sample = traces::testing::ReadFileBytes(kSampleTrace);
  const std::string head = dir_.File("head.ctrace");
  traces::testing::WriteFileBytes(head, sample.substr(0, 100000));
  const Outcome head_refused = Colibri("replay " + head + " --hidden 2048 --hw h100-p5800x-gen5");
  EXPECT_EQ(head_refused.exit_code, 1);
  EXPECT_NE(head_refused.err.find("a prefix of 0 whole records"), std::string::npos) << head_refused.err;
  // The sample is one zstd block; uncompressed, half the file holds half the records.
  const std::string plain = dir_.File("plain.ctrace");
  ASSERT_EQ(Colibri("trace slice " + kSampleTrace + " -o " + plain + " --compress none").exit_code, 0);
  const std::string plain_bytes = traces::testing::ReadFileBytes(plain);
  const std::string torn = dir_.File("torn.ctrace");
  traces::testing::WriteFileBytes(torn, plain_bytes.substr(0, plain_bytes.size() / 2));
  const std::string args = " --hidden 2048 --l2-bytes 8G --hw h100-p5800x-gen5 --json";
  const Outcome refused = Colibri("replay " + torn + args);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("torn at byte offset"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--allow-torn"), std::string::npos) << refused.err;
  EXPECT_EQ(Colibri("cache sweep " + torn + " --budgets-mib 1000 --policies lru --json").exit_code, 1);

  const Outcome allowed = Colibri("replay " + torn + args + " --allow-torn");
  ASSERT_EQ(allowed.exit_code, 0) << allowed.err;
  const Json run = allowed.json()["runs"][0];
  EXPECT_EQ(run["trace_ending"]["complete"], false);
  EXPECT_GT(run["trace_ending"]["records"].get<uint64_t>(), 0u);
  EXPECT_LE(run["trace_ending"]["torn_at_byte"].get<uint64_t>(), plain_bytes.size() / 2);
  EXPECT_NE(allowed.err.find("torn at byte offset"), std::string::npos) << allowed.err;
  const Outcome shown = Colibri("runs show " + std::to_string(run["run_id"].get<int64_t>()));
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("trace_ending: torn at byte offset"), std::string::npos) << shown.out;

  const Outcome sweep = Colibri("cache sweep " + torn + " --budgets-mib 1000 --policies lru --json --allow-torn");
  ASSERT_EQ(sweep.exit_code, 0) << sweep.err;
  EXPECT_EQ(sweep.json()["trace_ending"]["complete"], false);

  // The whole sample is stored as complete.
  const Outcome whole = Colibri(kReplaySample + "--hw h100-p5800x-gen5 --json");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_EQ(whole.json()["runs"][0]["trace_ending"]["complete"], true);
}

}  // namespace
}  // namespace colibri::cli
