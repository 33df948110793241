// The dense part of a layer batch (dense_cost.h) by hand-computed figures:
// the memory-bound pass, attention by context length (and the warning when
// the trace has no attention shape), page faults when the machine's memory is
// short; and a replay that charges them and reports them per decode pass.
#include "colibri/replay/dense_cost.h"

#include <gtest/gtest.h>

#include <numeric>

#include "colibri/sim/sim_event_loop.h"
#include "replay_test_util.h"

namespace colibri::replay {
namespace {

using engine::TimeNs;

// 1 TFLOP/s fp32, 10 GB/s, 1 us per call.
sim::ComputeProfile Cpu() {
  sim::ComputeProfile p;
  p.id = "test-cpu";
  p.kind = sim::ComputeKind::kCpu;
  p.peak_flops_per_s = {{"fp32", 1'000'000'000'000}, {"int8", 1'000'000'000'000}};
  p.memory_bytes_per_s = 10'000'000'000;
  p.launch_ns = 1'000;
  return p;
}

// Two MoE layers of 1 and 3 MB dense weights; attention 4 query heads, 2 KV
// heads of 64 + 64 dims in f16 (512 bytes per cached position), the second
// layer sliding over 8 positions.
traces::ModelShape Shape(bool attention) {
  traces::ModelShape s;
  s.moe_layer_ids = {0, 1};
  s.experts_per_layer = 16;
  s.top_k = 2;
  s.expert_bytes = {65536, 65536};
  s.dense_bytes = {1'000'000, 3'000'000};
  if (attention) {
    s.attention = {{4, 2, 64, 64, 0}, {4, 2, 64, 64, 8}};
    s.kv_element_bytes = 2;
  }
  return s;
}

LayerBatch Batch(uint32_t layer, std::vector<std::pair<uint64_t, uint64_t>> request_positions) {
  LayerBatch b;
  b.layer_index = layer;
  for (const auto& [request, position] : request_positions) b.rows.push_back(BatchRow{request, position, std::nullopt});
  return b;
}

class DenseCostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto compute = sim::MakeSimCompute(Cpu(), sim::SimComputeOptions{&loop_, nullptr});
    ASSERT_TRUE(compute.ok()) << compute.status().message();
    compute_ = std::move(compute).value();
    auto catalog = testing::TestCatalog();
    auto serial = catalog.Resolve("serial-h100");
    ASSERT_TRUE(serial.ok());
    machine_ = serial.value();
  }

  DenseCost Make(const traces::ModelShape& shape, uint64_t l2_bytes = 0) {
    auto cost = DenseCost::Make(shape, compute_.get(), machine_, l2_bytes, 1);
    EXPECT_TRUE(cost.ok()) << cost.status().message();
    return std::move(cost).value();
  }

  DenseCostParts Parts(const DenseCost& cost, const LayerBatch& batch) {
    auto parts = cost.ForBatch(batch);
    EXPECT_TRUE(parts.ok()) << parts.status().message();
    return parts.ok() ? parts.value() : DenseCostParts{};
  }

  sim::SimEventLoop loop_;
  std::unique_ptr<sim::SimCompute> compute_;
  sim::ResolvedMachine machine_;
};

TEST_F(DenseCostTest, AttentionReadsTheKvCacheUpToTheContext) {
  const DenseCost cost = Make(Shape(true));
  EXPECT_TRUE(cost.warnings().empty());
  // Decode at position 99, full attention: 100 positions x 512 bytes = 51,200 bytes at 10 GB/s = 5,120 ns
  // (the 2 x 4 x 128 x 100 = 102,400 FLOPs take 103 ns); the pass: 1 us + 1 MB at 10 GB/s.
  DenseCostParts p = Parts(cost, Batch(0, {{0, 99}}));
  EXPECT_TRUE(p.charged);
  EXPECT_EQ(p.pass_ns, 101'000);
  EXPECT_EQ(p.kv_read_bytes, 51'200u);
  EXPECT_EQ(p.attention_ns, 5'120);
  EXPECT_EQ(p.total_ns(), 106'120);
  EXPECT_EQ(p.fault_ns, 0);
  // The sliding layer reads its 8-position window only: 4,096 bytes, 410 ns (409.6 rounded up).
  p = Parts(cost, Batch(1, {{0, 99}}));
  EXPECT_EQ(p.kv_read_bytes, 4'096u);
  EXPECT_EQ(p.attention_ns, 410);
  // A prefill of positions 0..3 reads the cache once for its last token (4 x 512 bytes): 205 ns.
  p = Parts(cost, Batch(0, {{0, 0}, {0, 1}, {0, 2}, {0, 3}}));
  EXPECT_EQ(p.kv_read_bytes, 2'048u);
  EXPECT_EQ(p.attention_ns, 205);
  // Two requests read their own caches: (10 + 20) x 512 bytes = 1,536 ns.
  p = Parts(cost, Batch(0, {{0, 9}, {1, 19}}));
  EXPECT_EQ(p.kv_read_bytes, 15'360u);
  EXPECT_EQ(p.attention_ns, 1'536);
}

TEST_F(DenseCostTest, WithoutTheAttentionShapeTheTermIsZeroWithAWarning) {
  const DenseCost cost = Make(Shape(false));
  ASSERT_EQ(cost.warnings().size(), 1u);
  EXPECT_NE(cost.warnings()[0].find("no attention shape"), std::string::npos) << cost.warnings()[0];
  const DenseCostParts p = Parts(cost, Batch(0, {{0, 99}}));
  EXPECT_EQ(p.attention_ns, 0);
  EXPECT_EQ(p.total_ns(), 101'000);  // the pass alone, as before attention was modelled

  // Nothing recorded: nothing charged, nothing to warn about.
  traces::ModelShape bare = Shape(false);
  bare.dense_bytes.clear();
  const DenseCost none = Make(bare);
  EXPECT_TRUE(none.warnings().empty());
  EXPECT_FALSE(Parts(none, Batch(0, {{0, 99}})).charged);
}

TEST_F(DenseCostTest, AMachineShortOfMemoryFaultsItsDenseShareBack) {
  // The serial test drive: a lone 8 KiB read holds the channel 5 us + 8,192 ns, then 20 us of latency.
  const TimeNs fault_ns = 5'000 + 8'192 + 20'000;
  // Demand at position 99: 10 MB of L2 + 4 MB dense + KV 100 x 512 + 8 x 512 = 14,055,296 bytes.
  machine_.machine.host_memory.present = true;
  machine_.machine.host_memory.ram_bytes = uint64_t{1} << 30;
  machine_.machine.host_memory.available_bytes = 12'055'296;  // 2,000,000 bytes short
  machine_.machine.host_memory.fault_read_bytes = 8192;
  const DenseCost cost = Make(Shape(true), 10'000'000);
  const DenseCostParts p = Parts(cost, Batch(0, {{0, 99}}));
  EXPECT_EQ(p.shortfall_bytes, 2'000'000u);
  EXPECT_EQ(p.faults, 62u);  // the 1 MB layer's quarter: 500,000 bytes in 8 KiB faults, rounded up
  EXPECT_EQ(p.faulted_bytes, 62u * 8192);
  EXPECT_EQ(p.fault_ns, 62 * fault_ns);
  EXPECT_EQ(p.total_ns(), 101'000 + 5'120 + 62 * fault_ns);
  // Earlier in the decode the KV cache is smaller and so is the shortfall.
  EXPECT_EQ(Parts(cost, Batch(0, {{0, 49}})).shortfall_bytes, 2'000'000u - 50 * 512);
  // Enough memory: no faults.
  machine_.machine.host_memory.available_bytes = 15'000'000;
  EXPECT_EQ(Parts(Make(Shape(true), 10'000'000), Batch(0, {{0, 99}})).faults, 0u);
}

class DenseCostReplayTest : public testing::ReplayTest {
 protected:
  DenseCostReplayTest() : ReplayTest("dense-cost") {}
};

TEST_F(DenseCostReplayTest, AReplayChargesTheTermsAndReportsEveryDecodePass) {
  testing::TestTrace t;
  t.passes = 6;
  t.prompt_tokens = 4;
  t.dense_bytes = {1'000'000, 3'000'000};
  const std::string trace = Write("t.ctrace", t);
  // A CPU machine on the serial drive whose RAM is 1 MB short of the L2 budget plus the dense weights.
  ASSERT_TRUE(catalog_.AddText(R"({"kind": "machine", "name": "serial-cpu", "description": "test",
    "nvme": "serial", "pcie": "none", "compute": "cpu-local",
    "host_memory": {
      "ram_bytes": {"value": 1000000000, "basis": "assumed", "source": "test", "note": "a test"},
      "available_bytes": {"value": 4200000, "basis": "assumed", "source": "test", "note": "a test"},
      "fault_read_bytes": {"value": 8192, "basis": "assumed", "source": "test", "note": "a test"}}})",
                               "serial-cpu.json")
                  .ok());
  ReplayConfig c = Config(trace, "serial-cpu");
  c.l2_bytes = 1'200'000;
  c.decode_series = true;
  auto r = RunReplay(c);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("no attention shape"), std::string::npos);
  // 1,000,000 bytes short every pass: 31 + 92 faults of 8 KiB (the layers' quarter and three quarters).
  EXPECT_EQ(r->dense_cost.shortfall_bytes_max, 1'000'000u);
  EXPECT_EQ(r->dense_cost.faults, 6u * (31 + 92));
  EXPECT_EQ(r->dense_cost.attention_ns, 0);
  EXPECT_EQ(r->dense_cost.fault_ns + r->dense_cost.pass_ns,
            std::accumulate(r->step_ns[6].raw().begin(), r->step_ns[6].raw().end(), int64_t{0}));
  ASSERT_EQ(r->decode.series.size(), r->decode.passes);
  ASSERT_EQ(r->decode.passes, 5u);
  int64_t elapsed = 0, dense = 0;
  uint64_t read_bytes = 0;
  for (const DecodePasses::Pass& p : r->decode.series) {
    elapsed += p.elapsed_ns;
    dense += p.dense_ns;
    read_bytes += p.read_bytes;
    EXPECT_GT(p.dense_ns, 0);
    EXPECT_LE(p.dense_ns, p.elapsed_ns);
  }
  EXPECT_EQ(elapsed, r->decode.elapsed_ns);
  EXPECT_EQ(read_bytes, r->decode.read_bytes);
  // The decode passes' dense parts: 5 of the 6 passes' share of the run's.
  EXPECT_EQ(dense * 6, (r->dense_cost.fault_ns + r->dense_cost.pass_ns) * 5);

  // Without --decode-series the series stays empty; the figures are the same.
  c.decode_series = false;
  auto plain = RunReplay(c);
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->decode.series.empty());
  EXPECT_EQ(plain->decode.elapsed_ns, r->decode.elapsed_ns);
  EXPECT_EQ(plain->event_digest, r->event_digest);
}

}  // namespace
}  // namespace colibri::replay
