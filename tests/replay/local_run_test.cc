// RunLocal on a small synthetic model (3 layers x 8 experts, top-2, H=64
// I=32 bf16): every request's times follow its passes (TTFT < latency, TPOT
// = the mean gap of its later pass ends), the passes and tokens are counted,
// throughput is generated tokens (one per request pass) over the run's clock,
// the output digest does not depend on placement, a recording re-reads as
// the stored routing and replays as the same passes, tokens and requests, and
// bad options are errors.
#include "colibri/replay/local_run.h"

#include <gtest/gtest.h>

#include "colibri/engine/model.h"
#include "colibri/replay/replay_run.h"
#include "colibri/replay/run_record.h"
#include "colibri/traces/reader.h"
#include "colibri/sim/profiles.h"
#include "replay_test_util.h"

namespace colibri::replay {
namespace {

class LocalRunTest : public testing::ReplayTest {
 protected:
  LocalRunTest() : ReplayTest("local-run") {}
  void SetUp() override {
    ReplayTest::SetUp();
    engine::ModelConfig shape;
    shape.dtype = engine::DType::kBf16;
    shape.layer_ids = {0, 1, 2};
    shape.experts = 8;
    shape.top_k = 2;
    shape.hidden = 64;
    shape.intermediate = 32;
    ASSERT_TRUE(engine::SynthModel(shape, 5, Path("model")).ok());
  }

  // 3 requests, 5 prompt tokens each, 6 decode passes, pread, CPU backends.
  LocalRunOptions Options() const {
    LocalRunOptions o;
    o.model_dir = Path("model");
    o.requests = 3;
    o.prefill_tokens = 5;
    o.decode_passes = 6;
    o.storage = "pread";
    o.transfer = "cpu";
    o.compute = "cpu";
    return o;
  }

  // A 4 x 16-expert bf16 model (H=256, I=128: 192 KiB blocks, large enough that
  // reads overlap delayed completions) in `name`, and 4 requests x (8 prompt +
  // 16 decode) tokens over it with an L2 of 10 experts (misses on every pass).
  LocalRunOptions FaultsWorkload(const std::string& name) const {
    engine::ModelConfig shape;
    shape.dtype = engine::DType::kBf16;
    shape.layer_ids = {0, 1, 2, 3};
    shape.experts = 16;
    shape.top_k = 2;
    shape.hidden = 256;
    shape.intermediate = 128;
    EXPECT_TRUE(engine::SynthModel(shape, 1, Path(name)).ok());
    LocalRunOptions o = Options();
    o.model_dir = Path(name);
    o.requests = 4;
    o.prefill_tokens = 8;
    o.decode_passes = 16;
    o.l2_bytes = 2u << 20;
    return o;
  }

  static LocalRunResult Run(const LocalRunOptions& o) {
    Result<LocalRunResult> r = RunLocal(o);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? std::move(r).value() : LocalRunResult{};
  }
};

TEST_F(LocalRunTest, RequestTimesFollowTheirPasses) {
  const LocalRunResult r = Run(Options());
  ASSERT_EQ(r.request_times.size(), 3u);
  EXPECT_EQ(r.requests, 3u);
  EXPECT_EQ(r.forward_passes, 3u + 6);
  EXPECT_EQ(r.passes, 3u * 7);  // each request: its prefill pass and 6 decode passes
  EXPECT_EQ(r.prefill_tokens, 3u * 5);
  EXPECT_EQ(r.decode_tokens, 3u * 6);
  EXPECT_EQ(r.steps, (3u * 5 + 3u * 6) * 3);
  EXPECT_EQ(r.layer_batches, 9u * 3);
  const int64_t last_end_ns = r.request_times.back().last_end_ns;
  for (size_t i = 0; i < r.request_times.size(); ++i) {
    const reports::RequestTimes& t = r.request_times[i];
    EXPECT_EQ(t.passes, 7u);
    EXPECT_GE(t.start_ns, 0);
    EXPECT_LT(t.start_ns, t.first_pass_end_ns);
    EXPECT_LT(t.first_pass_end_ns, t.last_end_ns);
    EXPECT_EQ(t.last_end_ns, last_end_ns) << "every request ends with the last decode pass";
    if (i > 0) {
      EXPECT_GE(t.start_ns, r.request_times[i - 1].first_pass_end_ns) << "prefills run one after another";
    }
    EXPECT_EQ(r.ttft_ns.raw()[i], t.first_pass_end_ns - t.start_ns);
    EXPECT_EQ(r.request_latency_ns.raw()[i], t.last_end_ns - t.start_ns);
    EXPECT_LT(r.ttft_ns.raw()[i], r.request_latency_ns.raw()[i]);
    EXPECT_EQ(r.tpot_ns.raw()[i], (t.last_end_ns - t.first_pass_end_ns) / 6);
  }
  EXPECT_GE(r.elapsed_ns, last_end_ns);
  const double seconds = static_cast<double>(r.elapsed_ns) / 1e9;
  EXPECT_DOUBLE_EQ(r.throughput.tokens_per_s, 21 / seconds);
  EXPECT_DOUBLE_EQ(r.throughput.processed_tokens_per_s, 33 / seconds);
  EXPECT_DOUBLE_EQ(r.throughput.steps_per_s, 99 / seconds);
  EXPECT_EQ(r.step_ns[0].count(), r.layer_batches);
  EXPECT_EQ(r.output_digest.size(), 16u);
  EXPECT_EQ(r.storage_backend, "pread");
  EXPECT_EQ(r.compute_backend.rfind("cpu", 0), 0u) << r.compute_backend;  // cpu, cpu-avx2, ...
  EXPECT_EQ(r.transfer_backend, "cpu");
  EXPECT_FALSE(r.recording.has_value());
}

TEST_F(LocalRunTest, WithoutDecodePassesTtftIsTheLatencyAndTpotIsEmpty) {
  LocalRunOptions o = Options();
  o.decode_passes = 0;
  const LocalRunResult r = Run(o);
  EXPECT_EQ(r.passes, 3u);
  EXPECT_EQ(r.ttft_ns.raw(), r.request_latency_ns.raw());
  EXPECT_EQ(r.tpot_ns.count(), 0u);
}

TEST_F(LocalRunTest, OutputDigestDoesNotDependOnPlacement) {
  const LocalRunResult base = Run(Options());
  EXPECT_EQ(Run(Options()).output_digest, base.output_digest) << "repeatable";
  auto with = [this](auto change) {
    LocalRunOptions o = Options();
    change(o);
    return o;
  };
  for (const LocalRunOptions& o : {with([](LocalRunOptions& o) { o.l2_bytes = 0; }),
                                   with([](LocalRunOptions& o) { o.l1_bytes = 2 * 12288; o.l2_bytes = 8 * 12288; }),
                                   with([](LocalRunOptions& o) { o.queue_depth = 1; o.threads = 2; }),
                                   with([](LocalRunOptions& o) { o.l2_bytes = 4 * 12288; o.prefetch.predictor = "coact"; }),
                                   with([](LocalRunOptions& o) { o.l2_policy = "lfu"; o.staging_slots = 1; })}) {
    const LocalRunResult other = Run(o);
    EXPECT_EQ(other.output_digest, base.output_digest);
    EXPECT_EQ(other.expert_load_counts, base.expert_load_counts);
  }
  EXPECT_NE(Run(with([](LocalRunOptions& o) { o.seed = 2; })).output_digest, base.output_digest);
  EXPECT_NE(Run(with([](LocalRunOptions& o) { o.correlation = 0.5; })).output_digest, base.output_digest);
}

// Faults over the real backends (pread and, where the kernel allows, io_uring,
// on the real event loop): every transient read fault -- errors, short and
// stuck reads, corrupted bytes caught by the block digests, alone and with
// delayed completions (which make the storage chain's Poll re-entrant) -- is
// read again, and the output is the fault-free one, bit for bit.
TEST_F(LocalRunTest, TransientReadFaultsLeaveTheOutputBitIdentical) {
  LocalRunOptions plain = FaultsWorkload("faults-model");
  plain.read_retries = 8;  // at these rates no read fails nine times in a row (io_uring's order varies the draws)
  const LocalRunResult base = Run(plain);
  int runs = 0;
  for (const char* storage : {"pread", "uring"}) {
    for (const char* spec : {"storage.corrupt=1/10,storage.spike=1/5:1ms",
                             "storage.eio=1/20,storage.short=1/20,storage.stuck=1/30:1ms,storage.corrupt=1/20,"
                             "storage.spike=1/10:1ms"}) {
      LocalRunOptions o = plain;
      o.storage = storage;
      auto faults = sim::ParseFaultSpec(spec);
      ASSERT_TRUE(faults.ok());
      o.faults = faults.value();
      Result<LocalRunResult> r = RunLocal(o);
      if (!r.ok() && std::string(storage) == "uring" && r.status().code() == StatusCode::kUnsupported) continue;
      ASSERT_TRUE(r.ok()) << storage << " " << spec << ": " << r.status().message();
      LocalRunOptions clean = o;
      clean.faults = sim::FaultSpec{};
      EXPECT_EQ(r.value().output_digest, Run(clean).output_digest) << storage << " " << spec;
      EXPECT_EQ(r.value().output_digest, base.output_digest);
      uint64_t errors = 0, corrupt = 0;
      for (const sim::InjectedFault& f : r.value().faults) {
        errors += f.kind != "storage.spike";
        corrupt += f.kind == "storage.corrupt";
      }
      EXPECT_GT(corrupt, 0u) << spec;
      EXPECT_EQ(r.value().read_retries, errors) << storage << " " << spec;  // each failed attempt read again
      ++runs;
    }
  }
  EXPECT_GE(runs, 2);
}

// isolate_failures with reads that are never retried: a failed read fails
// only the requests routed to that expert (named with the pass, layer and
// expert); they leave the later passes, and every request that completes has
// the output digest it has in the fault-free run, bit for bit.
TEST_F(LocalRunTest, AFailedExpertFailsOnlyTheRequestsThatNeedIt) {
  const LocalRunOptions o = FaultsWorkload("isolate-model");
  const LocalRunResult clean = Run(o);
  ASSERT_EQ(clean.request_output_digests.size(), 4u);
  int mixed = 0;
  for (const char* spec : {"storage.eio=1/60", "storage.eio=1/150", "storage.eio=1/300", "storage.eio=1/150,storage.spike=1/10:1ms"}) {
    LocalRunOptions faulty = o;
    faulty.faults = sim::ParseFaultSpec(spec).value();
    faulty.read_retries = 0;
    faulty.isolate_failures = true;
    const LocalRunResult r = Run(faulty);
    ASSERT_EQ(r.request_output_digests.size(), 4u);
    size_t failed = 0;
    for (uint32_t q = 0; q < 4; ++q) {
      if (r.request_output_digests[q].empty()) {
        ++failed;
      } else {
        EXPECT_EQ(r.request_output_digests[q], clean.request_output_digests[q]) << spec << " request " << q;
      }
    }
    EXPECT_EQ(r.failed_requests.size(), failed) << spec;
    for (const FailedRequest& f : r.failed_requests) {
      EXPECT_TRUE(r.request_output_digests[f.request].empty());
      EXPECT_NE(f.error.find("reading expert " + std::to_string(f.expert) + " of MoE layer " +
                             std::to_string(f.layer_index)), std::string::npos)
          << f.error;
    }
    EXPECT_GT(r.faults.size(), 0u) << spec;
    mixed += failed > 0 && failed < 4;
  }
  EXPECT_GT(mixed, 0) << "no spec failed some requests and not all";
  LocalRunOptions whole = o;  // without isolation the same fault fails the run
  whole.faults = sim::ParseFaultSpec("storage.eio=1/60").value();
  whole.read_retries = 0;
  EXPECT_FALSE(RunLocal(whole).ok());
}

// modelled_storage: the model's real bytes read by the modelled drive on a
// simulated clock. Two runs with every storage fault kind (delays and
// timeouts included) give the same faults, times and per-request outputs, and
// the outputs are those of the real drive without faults.
TEST_F(LocalRunTest, ModelledStorageRunsAreDeterministicFaultsIncluded) {
  const LocalRunOptions o = FaultsWorkload("modelled-model");
  const LocalRunResult real = Run(o);
  auto catalog = sim::HardwareCatalog::BuiltIn();
  ASSERT_TRUE(catalog.ok());
  auto drive = catalog.value().Nvme("samsung-pm9a3");  // with latency jitter: a seeded stream
  ASSERT_TRUE(drive.ok());
  LocalRunOptions m = o;
  m.modelled_storage = *drive.value();
  m.read_retries = 8;
  m.faults = sim::ParseFaultSpec("storage.eio=1/20,storage.short=1/30,storage.spike=1/10:200us,"
                                 "storage.stuck=1/40:2ms,storage.corrupt=1/20").value();
  const LocalRunResult a = Run(m), b = Run(m);
  EXPECT_EQ(a.storage_backend, "sim");
  EXPECT_EQ(a.output_digest, real.output_digest);
  EXPECT_EQ(a.request_output_digests, real.request_output_digests);
  EXPECT_GT(a.faults.size(), 0u);
  EXPECT_EQ(a.faults, b.faults);
  EXPECT_EQ(a.elapsed_ns, b.elapsed_ns);
  EXPECT_EQ(a.read_retries, b.read_retries);
  EXPECT_EQ(a.output_digest, b.output_digest);
  LocalRunOptions other = m;
  other.seed = 2;  // another seed: other hidden states and other faults
  const LocalRunResult c = Run(other);
  EXPECT_NE(c.faults, a.faults);
}

TEST_F(LocalRunTest, RecordingIsTheStoredRouting) {
  LocalRunOptions o = Options();
  o.record_path = Path("run.ctrace");
  o.record_tokens = true;
  uint64_t progress_calls = 0, last_done = 0;
  o.on_pass = [&](uint64_t done, uint64_t total) {
    ++progress_calls;
    last_done = done;
    EXPECT_EQ(total, 9u);
  };
  const LocalRunResult r = Run(o);
  EXPECT_EQ(progress_calls, 9u);
  EXPECT_EQ(last_done, 9u);
  ASSERT_TRUE(r.recording.has_value());
  EXPECT_EQ(r.recording->path, o.record_path);
  EXPECT_EQ(r.recording->records, 3u * 7 * 3);  // (request, pass, layer)
  EXPECT_EQ(Run(Options()).output_digest, r.output_digest) << "recording changes nothing";
  auto reader = traces::TraceReader::Open(o.record_path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();

  const Result<reports::RunResults> stored = LocalRunStoredResults(r, "{}");
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  const reports::RunResults& s = stored.value();
  EXPECT_EQ(s.routing_path, o.record_path);
  EXPECT_EQ(s.routing_digest.size(), 64u);
  EXPECT_EQ(s.distributions.at("ttft_ns").raw(), r.ttft_ns.raw());
  EXPECT_EQ(s.distributions.at("tpot_ns").raw(), r.tpot_ns.raw());
  EXPECT_EQ(s.distributions.at("request_latency_ns").raw(), r.request_latency_ns.raw());
  EXPECT_TRUE(s.distributions.count("step_latency_ns.nvme_read"));
  EXPECT_EQ(s.scalars.at("tokens_per_s"), r.throughput.tokens_per_s);
  EXPECT_EQ(s.scalars.at("processed_tokens_per_s"), r.throughput.processed_tokens_per_s);
  EXPECT_EQ(s.scalars.at("passes"), 21.0);
  EXPECT_EQ(s.texts.at("output_digest"), r.output_digest);
  EXPECT_EQ(s.expert_load, r.expert_load_counts);
}

// The replay of a local run's recording counts what the run counted, by the same definitions.
TEST_F(LocalRunTest, ItsRecordingReplaysAsTheSamePassesTokensAndRequests) {
  LocalRunOptions o = Options();
  o.record_path = Path("run.ctrace");
  const LocalRunResult run = Run(o);
  ReplayConfig c = Config(o.record_path, "h100-p5800x-gen5");
  c.hidden = 64;
  c.l2_bytes = 1ull << 30;
  const Result<ReplayResult> replayed = RunReplay(c);
  ASSERT_TRUE(replayed.ok()) << replayed.status().message();
  const ReplayResult& r = replayed.value();
  EXPECT_EQ(r.requests, run.requests);
  EXPECT_EQ(r.passes, run.passes);
  EXPECT_EQ(r.processed_tokens, run.prefill_tokens + run.decode_tokens);
  EXPECT_EQ(r.steps, run.steps);
  EXPECT_EQ(r.layer_batches, run.layer_batches);
  EXPECT_EQ(r.ttft_ns.count(), run.ttft_ns.count());
  EXPECT_EQ(r.tpot_ns.count(), run.tpot_ns.count());
  EXPECT_EQ(r.request_latency_ns.count(), run.request_latency_ns.count());
  EXPECT_EQ(r.expert_load_counts, run.expert_load_counts);
}

TEST_F(LocalRunTest, BadOptionsAreErrors) {
  LocalRunOptions o = Options();
  o.requests = 0;
  EXPECT_EQ(RunLocal(o).status().code(), StatusCode::kInvalidArgument);
  o = Options();
  o.prefill_tokens = 0;
  EXPECT_EQ(RunLocal(o).status().code(), StatusCode::kInvalidArgument);
  o = Options();
  o.correlation = 1.0;
  EXPECT_EQ(RunLocal(o).status().code(), StatusCode::kInvalidArgument);
  o = Options();
  o.model_dir = Path("no-model");
  const Result<LocalRunResult> missing = RunLocal(o);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no-model"), std::string::npos) << missing.status().message();
  o = Options();
  o.l2_bytes = 100;
  EXPECT_FALSE(RunLocal(o).ok()) << "below one expert";
  o = Options();
  o.l2_policy = "pinned";
  EXPECT_FALSE(RunLocal(o).ok()) << "pinned without a hot set";
}

}  // namespace
}  // namespace colibri::replay
