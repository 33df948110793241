// RunReplay on modelled hardware: deterministic (same inputs, same digest and
// metrics; another seed changes the digest when latency jitters), the
// all-miss configuration's time per token equals the hand-computed sum of
// reads and kernels to the nanosecond, and the replay of a run recorded from
// the real engine makes the same cache decisions as the engine did.
#include "colibri/replay/replay_run.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "colibri/engine/local_engine.h"
#include "colibri/replay/cache_lab.h"
#include "colibri/sim/read_grid.h"
#include "colibri/sim/sim_compute.h"
#include "colibri/sim/sim_transfer.h"
#include "colibri/sim/sim_event_loop.h"
#include "replay_test_util.h"

namespace colibri::replay {
namespace {

namespace fs = std::filesystem;

class ReplayRunTest : public testing::ReplayTest {
 protected:
  ReplayRunTest() : ReplayTest("replay-run") {}

  // One request: `passes` passes of one token over 2 MoE layers, 16 experts, top-2, bf16 H=256 I=128.
  std::string WriteTrace(int passes, uint64_t seed) const {
    return Write("t" + std::to_string(seed) + ".ctrace", testing::TestTrace{1, passes, 0, seed, std::nullopt, false});
  }
};

TEST_F(ReplayRunTest, SameInputsSameDigestAndMetrics) {
  const std::string trace = WriteTrace(40, 1);
  ReplayConfig c = Config(trace, "a100-pm9a3-gen4");  // PM9A3 latency jitters
  c.l2_bytes = 6u * 196608;
  c.l1_bytes = 3u * 196608;
  auto a = RunReplay(c), b = RunReplay(c);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a.value().event_digest, b.value().event_digest);
  EXPECT_EQ(a.value().elapsed_ns, b.value().elapsed_ns);
  EXPECT_EQ(a.value().step("layer_batch").Summarize().p99, b.value().step("layer_batch").Summarize().p99);
  EXPECT_EQ(a.value().served, b.value().served);
  EXPECT_TRUE(a.value().simulated);
  EXPECT_EQ(a.value().steps, 80u);
  c.seed = 2;
  auto other = RunReplay(c);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other.value().event_digest, a.value().event_digest);
  EXPECT_EQ(other.value().served, a.value().served);  // timing changes, cache decisions do not
}

TEST_F(ReplayRunTest, AllMissTimePerTokenIsTheHandComputedSum) {
  const int passes = 5;
  const std::string trace = WriteTrace(passes, 3);
  ReplayConfig c = Config(trace, "serial-h100");
  c.queue_depth = 1;
  c.staging_slots = 1;  // read, compute, read, compute: nothing overlaps
  auto r = RunReplay(c);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // By hand: a 196,608-byte read = per_op 5,000 + 196,608 ns at 1 GB/s + latency 20,000.
  const int64_t read_ns = 5000 + 196608 + 20000;
  sim::SimEventLoop loop;
  auto compute = sim::MakeSimCompute(c.machine.compute, sim::SimComputeOptions{&loop, nullptr});
  ASSERT_TRUE(compute.ok());
  const auto ffn_ns = compute.value()->ExpertFfnNs(engine::ExpertLayout::Make(engine::DType::kBf16, 256, 128), 1);
  ASSERT_TRUE(ffn_ns.ok());
  const int64_t token_ns = 2 /*layers*/ * 2 /*experts*/ * (read_ns + ffn_ns.value());
  EXPECT_EQ(r.value().elapsed_ns, passes * token_ns);
  EXPECT_EQ(r.value().tpot_ns.max(), token_ns);
  EXPECT_EQ(r.value().read_bytes, static_cast<uint64_t>(passes) * 4 * 196608);
  EXPECT_EQ(r.value().decode.passes, static_cast<uint64_t>(passes));
  EXPECT_EQ(r.value().decode.read_latency_ns, passes * 4 * read_ns);  // one read at a time: no queueing
  EXPECT_EQ(r.value().decode.nvme_read_ns, passes * 2 * (2 * read_ns + ffn_ns.value()));  // read, compute, read per layer
  EXPECT_EQ(r.value().served, 0u);
}

// A machine with measured host work (calibrate's): each layer batch also
// pays routing (the recorded routing's gate GEMV plus scoring), scheduling,
// one gather per expert and the aggregation, each in its own step.
// (routing: the recorded routing's whole step, gate GEMV included)
TEST_F(ReplayRunTest, MeasuredHostWorkAddsEachStepsCost) {
  const int passes = 5;
  ReplayConfig c = Config(WriteTrace(passes, 3), "serial-h100");
  c.queue_depth = 1;
  c.staging_slots = 1;
  c.hidden = 256;
  sim::HostWorkProfile h;
  h.present = true;
  h.routing_fixed_ns = 1'000;
  h.routing_ps_per_logit = 2'000;        // 16 experts x 1 token: 32 ns
  h.scheduling_fixed_ns = 3'000;
  h.scheduling_ps_per_expert = 100'000;  // 2 experts: 200 ns
  h.scheduling_ps_per_assignment = 0;
  h.scheduling_ps_per_read = 1'000'000;  // 2 reads: 2,000 ns
  h.gather_fixed_ns = 400;
  h.gather_ps_per_element = 1'000;       // 1 row x 256: 256 ns
  h.aggregation_fixed_ns = 500;
  h.aggregation_ps_per_element = 1'000;  // 1 x 2 x 256: 512 ns
  c.machine.machine.host_work = {h};     // threads 0: any count
  auto r = RunReplay(c);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const int64_t read_ns = 5000 + 196608 + 20000;  // as in the all-miss sum
  sim::SimEventLoop loop;
  auto compute = sim::MakeSimCompute(c.machine.compute, sim::SimComputeOptions{&loop, nullptr});
  ASSERT_TRUE(compute.ok());
  const int64_t ffn_ns = compute.value()->ExpertFfnNs(engine::ExpertLayout::Make(engine::DType::kBf16, 256, 128), 1).value();
  const int64_t routing_ns = 1'000 + 32;  // the whole step, as calibrate measures it
  const int64_t scheduling_ns = 3'000 + 200 + 2'000;
  const int64_t gather_ns = 400 + 256;
  const int64_t aggregation_ns = 500 + 512;
  const int64_t batch_ns = routing_ns + scheduling_ns + 2 * (read_ns + gather_ns + ffn_ns) + aggregation_ns;
  EXPECT_EQ(r.value().elapsed_ns, passes * 2 /*layers*/ * batch_ns);
  EXPECT_EQ(r.value().step("routing").Summarize().max, routing_ns);
  EXPECT_EQ(r.value().step("scheduling").Summarize().max, scheduling_ns);
  EXPECT_EQ(r.value().step("aggregation").Summarize().max, aggregation_ns);
  EXPECT_EQ(r.value().step("layer_batch").Summarize().max, batch_ns);
}

// Host work measured at several thread counts: the run's count picks its
// entry; a count not measured is refused, naming those measured.
TEST_F(ReplayRunTest, HostWorkOfTheRunsThreadCount) {
  ReplayConfig c = Config(WriteTrace(2, 3), "serial-h100");
  c.hidden = 256;
  sim::HostWorkProfile one;
  one.present = true;
  one.threads = 1;
  one.routing_fixed_ns = 1'000;
  sim::HostWorkProfile two = one;
  two.threads = 2;
  two.routing_fixed_ns = 70'000;
  c.machine.machine.host_work = {one, two};
  c.threads = 1;
  auto r = RunReplay(c);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value().step("routing").Summarize().max, 1'000);
  c.threads = 2;
  r = RunReplay(c);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value().step("routing").Summarize().max, 70'000);
  c.threads = 4;
  r = RunReplay(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("measured at 1, 2 compute thread(s), not at the 4"), std::string::npos)
      << r.status().message();
}

// Read submission (sim::ReadSubmitNs of the drive's grid) is charged to the
// engine's thread before each read the storage issues at once: at queue
// depth 1 only a batch's first read, at depth 4 both of its two.
TEST_F(ReplayRunTest, ReadSubmissionIsChargedPerReadIssuedAtOnce) {
  ReplayConfig c = Config(WriteTrace(3, 3), "serial-h100");
  c.hidden = 256;
  c.staging_slots = 4;
  c.machine.nvme.queue_depth = 64;  // serial-h100's drive takes one read at a time
  sim::HostWorkProfile host;
  host.present = true;
  c.machine.machine.host_work = {host};
  const uint64_t block_bytes = 196608;  // bf16 H=256 I=128
  auto scheduling_max = [&](engine::TimeNs submit_ns, uint32_t depth) -> engine::TimeNs {
    c.queue_depth = depth;
    // Reads of 1 ms, far longer than the submissions, so none completes while they are charged.
    auto p = sim::MakeReadGridPoint(block_bytes, 1, std::vector<engine::TimeNs>(16, 1'000'000), 16'000'000);
    EXPECT_TRUE(p.ok()) << p.status().message();
    sim::ReadGridPoint point = p.value();
    point.submit_ns = submit_ns;
    c.machine.nvme.read_grid = sim::ReadGrid{};
    c.machine.nvme.read_grid.quantiles.assign(std::begin(sim::kReadGridQuantiles), std::end(sim::kReadGridQuantiles));
    c.machine.nvme.read_grid.points = {point};
    auto r = RunReplay(c);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? r.value().step("scheduling").Summarize().max : -1;
  };
  const engine::TimeNs none = scheduling_max(0, 1);
  EXPECT_EQ(scheduling_max(50'000, 1), none + 50'000);
  EXPECT_EQ(scheduling_max(50'000, 4), scheduling_max(0, 4) + 2 * 50'000);
}

// A modelled GPU computes from device memory: with no L1 each expert is copied
// over the link into the device staging slot before its FFN, so the all-miss
// sum gains one copy per expert (read, copy, compute, one after another here).
TEST_F(ReplayRunTest, AllMissOnAGpuBehindALinkAddsOneCopyPerExpert) {
  const int passes = 5;
  ReplayConfig c = Config(WriteTrace(passes, 3), "serial-h100");
  auto linked = catalog_.Resolve("serial-h100", sim::MachineOverrides{"", "pcie-gen4-x16", ""});
  ASSERT_TRUE(linked.ok()) << linked.status().message();
  c.machine = linked.value();
  c.queue_depth = 1;
  c.staging_slots = 1;
  auto r = RunReplay(c);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const int64_t read_ns = 5000 + 196608 + 20000;  // as above
  sim::SimEventLoop loop;
  auto compute = sim::MakeSimCompute(c.machine.compute, sim::SimComputeOptions{&loop, nullptr});
  auto transfer = sim::MakeSimTransfer(c.machine.pcie, sim::SimTransferOptions{&loop, true, nullptr});
  ASSERT_TRUE(compute.ok());
  ASSERT_TRUE(transfer.ok());
  const auto ffn_ns = compute.value()->ExpertFfnNs(engine::ExpertLayout::Make(engine::DType::kBf16, 256, 128), 1);
  ASSERT_TRUE(ffn_ns.ok());
  const int64_t copy_ns = transfer.value()->CopyNs(196608);
  EXPECT_GT(copy_ns, 10000) << "pcie-gen4-x16: 10 us per copy plus the bytes";
  const int64_t token_ns = 2 /*layers*/ * 2 /*experts*/ * (read_ns + copy_ns + ffn_ns.value());
  EXPECT_EQ(r.value().elapsed_ns, passes * token_ns);
  EXPECT_EQ(r.value().step("host_to_device").Summarize().max, 2 * copy_ns);  // two experts per layer batch
  EXPECT_EQ(r.value().served, 0u);
}

TEST_F(ReplayRunTest, ReplayOfARecordedRunMakesTheEngineSCacheDecisions) {
  engine::ModelConfig shape;
  shape.dtype = engine::DType::kBf16;
  shape.layer_ids = {0, 1, 2};
  shape.experts = 16;
  shape.top_k = 4;
  shape.hidden = 64;
  shape.intermediate = 64;
  ASSERT_TRUE(engine::SynthModel(shape, 5, Path("model")).ok());
  engine::LocalEngineOptions options;
  options.model_dir = Path("model");
  options.storage = "pread";
  auto e = engine::LocalEngine::Open(options);
  ASSERT_TRUE(e.ok());
  const uint64_t block = e.value()->model.config().layout.block_bytes;
  // Budgets where every batch's union (at most 12 experts) fits; L1 smaller than the 48 experts, so it evicts.
  options.engine.l2_bytes = 44 * block;
  options.engine.l1_bytes = 40 * block;
  e = engine::LocalEngine::Open(options);
  ASSERT_TRUE(e.ok());
  auto recorder = TraceRecorder::Create(Path("run.ctrace"), e.value()->model.config(), traces::Provenance{}, {});
  ASSERT_TRUE(recorder.ok());
  e.value()->moe->set_observer(recorder.value().get());
  std::mt19937_64 rng(9);
  for (uint64_t pass = 0; pass < 30; ++pass) {
    recorder.value()->BeginPass(pass, false, {{0, pass, std::nullopt}, {1, pass, std::nullopt}, {2, pass, std::nullopt}});
    for (uint32_t layer = 0; layer < 3; ++layer) {
      std::vector<float> x(3 * 64), y(3 * 64);
      for (float& v : x) v = static_cast<float>(rng() % 2001) / 1000.0f - 1.0f;
      ASSERT_TRUE(e.value()->moe->Forward(layer, x.data(), 3, y.data()).ok());
    }
  }
  ASSERT_TRUE(recorder.value()->Close().ok());
  ReplayConfig c = Config(Path("run.ctrace"), "h100-p5800x-gen5");
  c.l1_bytes = options.engine.l1_bytes;
  c.l2_bytes = options.engine.l2_bytes;
  auto r = RunReplay(c);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const engine::TierCounters l1 = e.value()->moe->l1_counters(), l2 = e.value()->moe->l2_counters();
  EXPECT_EQ(r.value().l1.lookups, l1.lookups);
  EXPECT_EQ(r.value().l1.hits, l1.hits);
  EXPECT_EQ(r.value().l2.lookups, l2.lookups);
  EXPECT_EQ(r.value().l2.hits, l2.hits);
  EXPECT_EQ(r.value().read_bytes, e.value()->storage->counters().read_bytes);
  EXPECT_GT(l1.hits, 0u);
  EXPECT_GT(l1.lookups, l1.hits);
}

TEST_F(ReplayRunTest, LayersWithSmallerExpertsReadAndCacheTheirOwnSize) {
  testing::TestTrace t{1, 6, 0, 8, std::nullopt, false};
  t.layer1_expert_bytes = 98304;  // half the first layer's
  ReplayConfig c = Config(Write("mixed.ctrace", t), "serial-h100");
  auto all_miss = RunReplay(c);
  ASSERT_TRUE(all_miss.ok()) << all_miss.status().message();
  EXPECT_EQ(all_miss.value().read_bytes, 6u * 2 * (196608 + 98304));  // passes x top-k x both layers' sizes
  EXPECT_NE(all_miss.value().modelled_layout.find("per-layer expert sizes"), std::string::npos);
  // An L2 of 2 first-layer + 2 second-layer experts (the union of a batch is 2): with one
  // block size for all, it would hold 2 experts; with each layer's own size, 3 x 98,304 more fit.
  c.l2_bytes = 2 * 196608 + 2 * 98304;
  auto own = RunReplay(c);
  t.layer1_expert_bytes = testing::kTestExpertBytes;
  ReplayConfig uniform = Config(Write("uniform.ctrace", t), "serial-h100");
  uniform.l2_bytes = c.l2_bytes;
  auto same = RunReplay(uniform);
  ASSERT_TRUE(own.ok()) << own.status().message();
  ASSERT_TRUE(same.ok());
  EXPECT_GT(own.value().l2.hits, same.value().l2.hits);
  EXPECT_EQ(own.value().l2.lookups, same.value().l2.lookups);
}

TEST_F(ReplayRunTest, CopyingBytesThatStorageNeverDeliveredIsAnError) {
  ReplayConfig c = Config(WriteTrace(2, 4), "h100-p5800x-gen5");
  c.transfer = "cpu";
  c.l1_bytes = 4 * testing::kTestExpertBytes;
  auto r = RunReplay(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("only models time"), std::string::npos) << r.status().message();
}

TEST_F(ReplayRunTest, RealBackendsNeedAModel) {
  ReplayConfig c = Config(WriteTrace(2, 4), "cpu-local");
  c.storage = "uring";
  auto r = RunReplay(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--model"), std::string::npos);
}

}  // namespace
}  // namespace colibri::replay

namespace colibri::replay {
namespace {

using BeladyReplayTest = ReplayRunTest;

// Belady's optimum in a timed closed-loop replay: the engine's L2 (hard budget)
// makes the lab's decisions exactly when every batch's union fits, never hits
// less than LRU, and is refused where its future is not the tier's.
TEST_F(BeladyReplayTest, ClosedLoopL2MatchesTheLabAndBeatsLru) {
  const std::string trace = WriteTrace(60, 5);
  ReplayConfig c = Config(trace, "a100-pm9a3-gen4");
  c.l2_bytes = 6u * 196608;  // 6 experts of 2 layers x 16, top-2: every batch (2 experts) fits
  auto lru = RunReplay(c);
  c.policy = "belady";
  auto belady = RunReplay(c);
  ASSERT_TRUE(lru.ok()) << lru.status().message();
  ASSERT_TRUE(belady.ok()) << belady.status().message();
  EXPECT_GE(belady.value().served, lru.value().served);

  auto lab_trace = LoadLabTrace(trace);
  ASSERT_TRUE(lab_trace.ok()) << lab_trace.status().message();
  LabRun run;
  run.policy = "belady";
  run.budget_bytes = c.l2_bytes;
  auto lab = SimulateCache(lab_trace.value(), run, BuildNextUse(lab_trace.value()));
  ASSERT_TRUE(lab.ok()) << lab.status().message();
  EXPECT_EQ(belady.value().served, lab.value().hits);
  EXPECT_EQ(belady.value().lookups, lab.value().lookups);
}

TEST_F(BeladyReplayTest, RefusedWhereTheFutureIsNotTheTiers) {
  ReplayConfig c = Config(WriteTrace(4, 6), "a100-pm9a3-gen4");
  c.l2_bytes = 6u * 196608;
  c.policy = "belady";
  c.l1_bytes = 2u * 196608;
  auto with_l1 = RunReplay(c);
  ASSERT_FALSE(with_l1.ok());
  EXPECT_NE(with_l1.status().message().find("--l1-bytes 0"), std::string::npos) << with_l1.status().message();
  c.l1_bytes = 0;
  c.pacing = Pacing::kOpen;
  auto open = RunReplay(c);
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.status().message().find("--pacing closed"), std::string::npos) << open.status().message();
}

using PrefetchReplayTest = ReplayRunTest;

// Prefetch in a timed replay: deterministic, its reads counted with the
// demand reads, an oracle turns every decode lookup into a hit, and a
// predictor that reads too much shows as lost time, not as a hidden cost.
TEST_F(PrefetchReplayTest, DeterministicCountedAndVisibleInTime) {
  const std::string trace = WriteTrace(60, 7);
  constexpr uint64_t kExpertBytes = 196608;
  ReplayConfig c = Config(trace, "a100-pm9a3-gen4");
  c.l2_bytes = 6u * kExpertBytes;
  auto none = RunReplay(c);
  c.prefetch.predictor = "oracle";
  auto oracle = RunReplay(c), again = RunReplay(c);
  c.prefetch.predictor = "coact";
  c.prefetch.width = 16;  // every expert the counts name: most of them wrong
  auto wide = RunReplay(c);
  for (const auto* r : {&none, &oracle, &again, &wide}) ASSERT_TRUE(r->ok()) << r->status().message();
  EXPECT_EQ(oracle.value().event_digest, again.value().event_digest);
  EXPECT_NE(oracle.value().event_digest, none.value().event_digest);
  // Only the first batch (top-2, nothing before it to predict from) misses.
  EXPECT_EQ(oracle.value().served_decode, oracle.value().lookups_decode - 2);
  EXPECT_LT(none.value().served_decode, none.value().lookups_decode);
  for (const auto* r : {&oracle, &wide}) {
    const ReplayResult& v = r->value();
    EXPECT_EQ(v.read_bytes, v.l2.misses * kExpertBytes + v.prefetch.issued_bytes);
    EXPECT_LE(v.prefetch.hits, v.prefetch.issued);
  }
  EXPECT_EQ(oracle.value().prefetch.predicted_used, oracle.value().prefetch.predicted);
  EXPECT_GT(wide.value().read_bytes, none.value().read_bytes);
  EXPECT_GT(wide.value().elapsed_ns, none.value().elapsed_ns);
  EXPECT_GT(wide.value().prefetch.wasted_bytes, 0u);
}

TEST_F(PrefetchReplayTest, RefusedWithoutWhatThePredictorNeeds) {
  ReplayConfig c = Config(WriteTrace(4, 8), "a100-pm9a3-gen4");
  const auto error_of = [&](const ReplayConfig& config) {
    auto r = RunReplay(config);
    return r.ok() ? std::string() : r.status().message();
  };
  c.prefetch.predictor = "coact";
  EXPECT_NE(error_of(c).find("needs an L2 budget"), std::string::npos) << error_of(c);
  c.l2_bytes = 6u * 196608;
  c.prefetch.predictor = "lookahead";
  EXPECT_NE(error_of(c).find("gate weights and a compute backend that reads data"), std::string::npos) << error_of(c);
  c.prefetch.predictor = "oracle";
  c.pacing = Pacing::kOpen;
  EXPECT_NE(error_of(c).find("--pacing closed"), std::string::npos) << error_of(c);
  c.pacing = Pacing::kClosed;
  c.prefetch.predictor = "none";
  c.prefetch_profile = c.trace_path;
  EXPECT_NE(error_of(c).find("--prefetch-profile trains --prefetch coact"), std::string::npos) << error_of(c);
  c.prefetch.predictor = "coact";
  EXPECT_EQ(error_of(c), "");  // trained on itself
}

using PinnedReplayTest = ReplayRunTest;

// A hot set learned from a profiling trace, pinned in the engine's L2: read
// before the first batch, never evicted, the lab's decisions when every batch fits.
TEST_F(PinnedReplayTest, PreloadsTheHotSetAndMatchesTheLab) {
  const std::string trace = WriteTrace(60, 9), profile = WriteTrace(30, 10);
  constexpr uint64_t kExpertBytes = 196608;
  ReplayConfig c = Config(trace, "a100-pm9a3-gen4");
  c.l2_bytes = 6u * kExpertBytes;
  c.policy = "pinned";
  c.pin_from = profile;
  c.pin_bytes = 2u * kExpertBytes;
  auto pinned = RunReplay(c);
  ASSERT_TRUE(pinned.ok()) << pinned.status().message();
  EXPECT_EQ(pinned.value().preload_bytes, 2u * kExpertBytes);
  EXPECT_EQ(pinned.value().read_bytes, pinned.value().preload_bytes + pinned.value().l2.misses * kExpertBytes);

  auto lab_trace = LoadLabTrace(trace), lab_profile = LoadLabTrace(profile);
  ASSERT_TRUE(lab_trace.ok() && lab_profile.ok());
  LabRun run;
  run.policy = "pinned";
  run.budget_bytes = c.l2_bytes;
  run.pinned = PinnedHotSet(lab_profile.value(), c.pin_bytes);
  auto lab = SimulateCache(lab_trace.value(), run, nullptr);
  ASSERT_TRUE(lab.ok()) << lab.status().message();
  EXPECT_EQ(pinned.value().served, lab.value().hits);
  EXPECT_EQ(pinned.value().read_bytes, lab.value().read_bytes);

  c.pin_from.clear();
  auto missing = RunReplay(c);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--pin-from TRACE --pin-bytes B"), std::string::npos);
  c.pin_from = profile;
  c.pin_bytes = 7u * kExpertBytes;  // larger than L2
  auto too_big = RunReplay(c);
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.status().message().find("larger than the L2 budget"), std::string::npos) << too_big.status().message();
}

}  // namespace
}  // namespace colibri::replay
