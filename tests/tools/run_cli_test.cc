// `colibri run` end to end on a small synthetic model: the output digest is
// the same whatever the placement (budgets, policy, queue depth, threads,
// storage backend) and the library's (replay::RunLocal) for the same
// workload, the JSON has the documented keys, per-request latencies and
// throughput follow docs/METRICS.md and are stored, the recorded trace
// re-reads, and bad input is exit code 2 with a clear message.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "cli_test_util.h"
#include "colibri/replay/local_run.h"

namespace colibri::cli {
namespace {

using cli_testing::Outcome;
using cli_testing::RunColibri;

// The model: 3 layers x 8 experts, top-2, H=64 I=32 bf16 (12 KiB blocks).
class RunCliTest : public cli_testing::SynthModelTest {
 protected:
  Outcome Run(const std::string& flags) const {
    return RunColibri("run --model " + Model() + " --requests 3 --prefill 5 --tokens 6 --json " + flags,
                      dir_->path());
  }
};

TEST_F(RunCliTest, OutputDigestDoesNotDependOnPlacement) {
  const Outcome base = Run("--l2-bytes 1G");
  ASSERT_EQ(base.exit_code, 0) << base.err;
  const nlohmann::json j = base.json();
  for (const char* key : {"output_digest", "tokens_per_s", "processed_tokens_per_s", "throughput", "steps",
                          "hit_pct_decode", "hit_pct_cum", "read_bytes", "peak_rss_bytes", "config", "request_latency_ns",
                          "ttft_ns", "tpot_ns"}) {
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

// The CLI is the library's workload: the same options, the same digest and load.
TEST_F(RunCliTest, OutputDigestIsTheLibrarys) {
  const Outcome cli = Run("--l2-bytes 48K --storage pread --transfer cpu --compute cpu --no-store");
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  replay::LocalRunOptions o;
  o.model_dir = Model();
  o.requests = 3;
  o.prefill_tokens = 5;
  o.decode_passes = 6;
  o.l2_bytes = 48 * 1024;
  o.storage = "pread";
  o.transfer = o.compute = "cpu";
  const Result<replay::LocalRunResult> lib = replay::RunLocal(o);
  ASSERT_TRUE(lib.ok()) << lib.status().message();
  EXPECT_EQ(cli.json()["output_digest"], lib.value().output_digest);
  EXPECT_EQ(cli.json()["steps"], lib.value().steps);
  EXPECT_EQ(cli.json()["cache"]["l2"]["hits"], lib.value().l2.hits);
  EXPECT_EQ(cli.json()["read_bytes"], lib.value().read_bytes);
}

// Per request: TTFT to its prefill's end, TPOT over its 6 decode passes,
// latency to the last pass; tokens/s counts generated tokens (one per request
// pass), processed_tokens_per_s prompt + decode tokens; all stored raw.
TEST_F(RunCliTest, PerRequestLatenciesAndThroughputAsReplayDefinesThem) {
  const Outcome run = Run("--l2-bytes 1G");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = run.json();
  EXPECT_EQ(j["requests"].get<uint64_t>(), 3u);
  EXPECT_EQ(j["passes"].get<uint64_t>(), 3u * 7);
  EXPECT_EQ(j["forward_passes"].get<uint64_t>(), 3u + 6);
  EXPECT_EQ(j["tokens"].get<uint64_t>(), 3u * 5 + 3u * 6);
  for (const char* key : {"request_latency_ns", "ttft_ns", "tpot_ns"}) {
    for (const char* p : {"p50", "p90", "p99", "p999", "max", "samples", "source"}) EXPECT_TRUE(j[key].contains(p)) << key << p;
    EXPECT_EQ(j[key]["samples"].get<uint64_t>(), 3u) << key;
    EXPECT_EQ(j[key]["source"], "raw") << key;
  }
  EXPECT_LT(j["ttft_ns"]["max"].get<int64_t>(), j["request_latency_ns"]["max"].get<int64_t>());
  EXPECT_LE(j["tpot_ns"]["max"].get<int64_t>() * 6, j["request_latency_ns"]["max"].get<int64_t>());
  const double seconds = j["elapsed_ns"].get<double>() / 1e9;
  EXPECT_DOUBLE_EQ(j["wall_s"].get<double>(), seconds);
  EXPECT_DOUBLE_EQ(j["tokens_per_s"].get<double>(), 21 / seconds);
  EXPECT_DOUBLE_EQ(j["processed_tokens_per_s"].get<double>(), 33 / seconds);
  EXPECT_EQ(j["throughput"]["tokens_per_s"], j["tokens_per_s"]);
  EXPECT_EQ(j["throughput"]["processed_tokens_per_s"], j["processed_tokens_per_s"]);
  EXPECT_DOUBLE_EQ(j["throughput"]["steps_per_s"].get<double>(), 99 / seconds);
  // Stored as replay stores its requests: one raw sample per request.
  const std::string id = std::to_string(j["run_id"].get<int64_t>());
  const Outcome samples = RunColibri("runs export " + id + " --samples --format json", dir_->path());
  ASSERT_EQ(samples.exit_code, 0) << samples.err;
  const nlohmann::json d = samples.json()["runs"][0]["distributions"];
  for (const char* key : {"request_latency_ns", "ttft_ns", "tpot_ns"}) {
    ASSERT_EQ(d[key]["values"].size(), 3u) << key;
    EXPECT_EQ(*std::max_element(d[key]["values"].begin(), d[key]["values"].end()), j[key]["max"]) << key;
  }
  const Outcome shown = RunColibri("runs show " + id + " --json", dir_->path());
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  const nlohmann::json scalars = shown.json()["runs"][0]["results"]["scalars"];
  EXPECT_EQ(scalars["tokens_per_s"], j["tokens_per_s"]);
  EXPECT_EQ(scalars["processed_tokens_per_s"], j["processed_tokens_per_s"]);
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

TEST_F(RunCliTest, PinnedHotSetFromARecordedProfile) {
  const std::string profile = dir_->File("profile.ctrace");
  const Outcome record = Run("--l2-bytes 1G --record " + profile);
  ASSERT_EQ(record.exit_code, 0) << record.err;
  const Outcome pinned = Run("--l2-bytes 96K --policy pinned --pin-from " + profile + " --pin-bytes 48K");
  ASSERT_EQ(pinned.exit_code, 0) << pinned.err;
  EXPECT_EQ(pinned.json()["preload_bytes"].get<uint64_t>(), 4u * 12288);
  EXPECT_EQ(pinned.json()["output_digest"], record.json()["output_digest"]);
  const Outcome alone = Run("--l2-bytes 96K --policy pinned");
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_NE(alone.err.find("--pin-from TRACE --pin-bytes B"), std::string::npos) << alone.err;
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

// Every routing mode runs through the engine; placement still never changes
// the output, and --log-level debug prints the documents' router log line.
TEST_F(RunCliTest, RoutingModesAreDeterministicWhateverThePlacement) {
  for (const char* router : {"--router sigmoid-grouped --n-group 4 --topk-group 2 --routed-scaling-factor 2.5",
                             "--router hash-projection", "--router hash-token --vocab 100",
                             "--router softmax-topk --load-aware --load-window-tokens 64",
                             "--router hash-token --vocab 100 --capacity-factor 1 --capacity-overflow reroute"}) {
    const Outcome a = Run(std::string(router) + " --l2-bytes 1G");
    const Outcome b = Run(std::string(router) + " --l2-bytes 48K --policy lfu --queue-depth 1");
    ASSERT_EQ(a.exit_code, 0) << router << ": " << a.err;
    ASSERT_EQ(b.exit_code, 0) << router << ": " << b.err;
    EXPECT_EQ(a.json()["output_digest"], b.json()["output_digest"]) << router;
    EXPECT_EQ(a.json()["router"], b.json()["router"]) << router;
    EXPECT_EQ(a.json()["router"]["tokens_routed"].get<uint64_t>(), (3u * 5 + 3u * 6) * 3);
  }
  const Outcome rerouted = Run("--router hash-token --vocab 100 --capacity-factor 1 --capacity-overflow reroute");
  EXPECT_GT(rerouted.json()["router"]["capacity_rerouted_slots"].get<uint64_t>(), 0u);
  const Outcome debug = Run("--router hash-token --vocab 100 --log-level debug");
  ASSERT_EQ(debug.exit_code, 0) << debug.err;
  const std::regex line(R"(\[ROUTER\] 0x[0-9a-f]{16} \| EXPERT:[0-9]+ \| LOAD:[01]\.[0-9]{2} \| LATENCY:[0-9]+us)");
  size_t lines = 0;
  std::istringstream err(debug.err);
  for (std::string l; std::getline(err, l);) lines += std::regex_match(l, line);
  EXPECT_EQ(lines, (3u * 5 + 3u * 6) * 3 * 2);  // one per (token, layer, slot)
}

// A trace recorded under a hash mode, routed again by replay in the same mode
// (same seed: the same W_r), reproduces every recorded decision.
TEST_F(RunCliTest, ReplayRecomputesTheRecordedHashRouting) {
  for (const std::string router : {"hash-projection", "hash-token --vocab 100"}) {
    const std::string trace = dir_->File("hash.ctrace");
    const Outcome run = Run("--router " + router + " --record " + trace + " --record-hidden --record-tokens");
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const std::string replay = "replay " + trace + " --hw h100-p5800x-gen5 --l2-bytes 1G --no-store --json ";
    const Outcome recorded = RunColibri(replay, dir_->path());
    const Outcome recomputed = RunColibri(replay + "--routing recompute --router " + router, dir_->path());
    ASSERT_EQ(recorded.exit_code, 0) << recorded.err;
    ASSERT_EQ(recomputed.exit_code, 0) << recomputed.err;
    EXPECT_EQ(recorded.json()["runs"][0]["expert_load"], recomputed.json()["runs"][0]["expert_load"]) << router;
    EXPECT_EQ(recorded.json()["runs"][0]["event_digest"], recomputed.json()["runs"][0]["event_digest"]) << router;
    // Another W_r or table: the recomputed load (what the engine routed, not the trace) differs.
    const Outcome other = RunColibri(replay + "--routing recompute --seed 2 --hash-table-seed 2 --router " + router, dir_->path());
    ASSERT_EQ(other.exit_code, 0) << other.err;
    EXPECT_NE(other.json()["runs"][0]["expert_load"], recorded.json()["runs"][0]["expert_load"]) << router;
  }
}

// --faults over the real storage: retried faults leave the output digest as
// it is fault-free, and are counted, printed and stored.
TEST_F(RunCliTest, InjectedReadFaultsLeaveTheOutputDigestAsItIs) {
  const Outcome clean = Run("--l2-bytes 48K --storage pread --no-store");
  ASSERT_EQ(clean.exit_code, 0) << clean.err;
  const Outcome faulty = Run("--l2-bytes 48K --storage pread --faults storage.eio=1/10,storage.corrupt=1/10 --read-retries 6");
  ASSERT_EQ(faulty.exit_code, 0) << faulty.err;
  const nlohmann::json j = faulty.json();
  EXPECT_EQ(j["output_digest"], clean.json()["output_digest"]);
  const uint64_t eio = j["faults"]["by_kind"]["storage.eio"], corrupt = j["faults"]["by_kind"]["storage.corrupt"];
  EXPECT_GT(eio, 0u);
  EXPECT_GT(corrupt, 0u);
  EXPECT_EQ(j["read_retries"], eio + corrupt);
  EXPECT_EQ(j["config"]["faults"], "storage.eio=1/10,storage.corrupt=1/10");
  const Outcome show = RunColibri("runs show 1 --json", dir_->path());
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_EQ(show.json()["runs"][0]["results"]["faults"], eio + corrupt);
  // --isolate-failures with no retries: the failed requests are listed and stored, the others complete.
  const Outcome isolated = Run("--l2-bytes 48K --storage pread --faults storage.eio=1/12 --read-retries 0 --isolate-failures");
  ASSERT_EQ(isolated.exit_code, 0) << isolated.err;
  const nlohmann::json k = isolated.json();
  const size_t failed = k["failed_requests"].size();
  EXPECT_EQ(k["requests_completed"].get<size_t>() + failed, 3u);
  for (size_t q = 0; q < 3; ++q) {
    const std::string digest = k["request_output_digests"][q];
    if (!digest.empty()) EXPECT_EQ(digest, clean.json()["request_output_digests"][q]) << q;
  }
  const Outcome stored = RunColibri("runs show 2 --json", dir_->path());
  ASSERT_EQ(stored.exit_code, 0) << stored.err;
  EXPECT_EQ(stored.json()["runs"][0]["results"]["faults"].get<size_t>(),
            k["faults"]["injected"].get<size_t>() + failed);  // the failed requests are stored with the faults
  const Outcome retries = Run("--read-retries 17");
  EXPECT_EQ(retries.exit_code, 2);
  EXPECT_NE(retries.err.find("--read-retries"), std::string::npos) << retries.err;
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
  const Outcome groups = Run("--router sigmoid-grouped --n-group 3");
  EXPECT_EQ(groups.exit_code, 2);
  EXPECT_NE(groups.err.find("router"), std::string::npos) << groups.err;
}

// Without a usable CUDA device (or in a build without CUDA) --compute/--transfer
// cuda is exit code 2 with the reason and auto picks the CPU; with one, the
// CUDA backends give the CPU's output digest whatever the placement.
TEST_F(RunCliTest, CudaBackendsGiveTheCpuDigestOrAClearError) {
  const Outcome cpu = Run("--l2-bytes 1G --transfer cpu --compute cpu");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  EXPECT_EQ(cpu.json()["transfer_backend"], "cpu");
  EXPECT_EQ(cpu.json()["config"]["compute"], "cpu");
  const Outcome cuda = Run("--l2-bytes 1G --compute cuda");
  const bool no_device = cuda.err.find("no CUDA device") != std::string::npos ||
                         cuda.err.find("built without CUDA") != std::string::npos;
  if (cuda.exit_code != 0 && no_device) {
    EXPECT_EQ(cuda.exit_code, 2) << cuda.err;
    const Outcome transfer = Run("--l1-bytes 24K --transfer cuda --compute cpu");
    EXPECT_EQ(transfer.exit_code, 2);
    const Outcome automatic = Run("--l2-bytes 1G");
    ASSERT_EQ(automatic.exit_code, 0) << automatic.err;
    EXPECT_EQ(automatic.json()["transfer_backend"], "cpu");
    EXPECT_EQ(automatic.json()["config"]["compute"], "cpu") << "auto without a device is the CPU";
    EXPECT_EQ(automatic.json()["output_digest"], cpu.json()["output_digest"]);
    return;
  }
  ASSERT_EQ(cuda.exit_code, 0) << cuda.err;
  EXPECT_EQ(cuda.json()["transfer_backend"], "cuda");
  EXPECT_EQ(cuda.json()["compute_backend"], "cuda");
  EXPECT_EQ(cuda.json()["output_digest"], cpu.json()["output_digest"]);
  for (const char* flags : {"--l2-bytes 0 --compute cuda", "--l1-bytes 24K --l2-bytes 96K --compute cuda",
                            "--l1-bytes 1M --l2-bytes 0 --staging-slots 1 --compute cuda --copy-streams 1"}) {
    const Outcome other = Run(flags);
    ASSERT_EQ(other.exit_code, 0) << flags << ": " << other.err;
    EXPECT_EQ(other.json()["output_digest"], cpu.json()["output_digest"]) << flags;
  }
  const Outcome mixed = Run("--l1-bytes 24K --transfer cpu --compute cuda");
  EXPECT_EQ(mixed.exit_code, 2);
  EXPECT_NE(mixed.err.find("keeps its pool in host memory"), std::string::npos) << mixed.err;
}

// Replay on real backends: the recorded trace over the model's weights, on the
// CPU or (with a device) the CUDA backends: the same cache decisions and load.
TEST_F(RunCliTest, ReplayRunsOnTheCudaBackendsOrSaysWhyNot) {
  const std::string trace = dir_->File("real.ctrace");
  ASSERT_EQ(Run("--record " + trace).exit_code, 0);
  const std::string replay = "replay " + trace + " --hw h100-p5800x-gen5 --model " + Model() +
                             " --storage pread --l1-bytes 24K --l2-bytes 96K --no-store --json ";
  const Outcome cpu = RunColibri(replay + "--transfer cpu --compute cpu", dir_->path());
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  const Outcome automatic = RunColibri(replay + "--transfer auto --compute auto", dir_->path());
  ASSERT_EQ(automatic.exit_code, 0) << automatic.err;
  const Outcome cuda = RunColibri(replay + "--transfer cuda --compute cuda", dir_->path());
  if (cuda.exit_code != 0) {
    EXPECT_EQ(cuda.exit_code, 2);
    EXPECT_TRUE(cuda.err.find("no CUDA device") != std::string::npos ||
                cuda.err.find("built without CUDA") != std::string::npos)
        << cuda.err;
    EXPECT_EQ(automatic.json()["runs"][0]["backends"]["compute"], "cpu");
    return;
  }
  const nlohmann::json c = cpu.json()["runs"][0];
  const nlohmann::json g = cuda.json()["runs"][0];
  EXPECT_EQ(g["backends"]["compute"], "cuda");
  EXPECT_EQ(automatic.json()["runs"][0]["backends"]["compute"], "cuda");
  for (const char* key : {"expert_load", "read_bytes", "steps"}) EXPECT_EQ(g[key], c[key]) << key;
}

}  // namespace
}  // namespace colibri::cli
