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
#include "colibri/sim/sim_compute.h"
#include "colibri/sim/sim_event_loop.h"
#include "colibri/traces/writer.h"

namespace colibri::replay {
namespace {

namespace fs = std::filesystem;

// A one-channel, queue-depth-1 drive without jitter, no PCIe, and a compute device, as profile files.
constexpr const char* kSerialDrive = R"({"kind": "nvme", "id": "serial", "name": "serial test drive",
  "read_bytes_per_s": {"value": 1000000000, "basis": "assumed", "source": "test", "note": "a test drive"},
  "channel_read_bytes_per_s": {"value": 1000000000, "basis": "assumed", "source": "test", "note": "a test drive"},
  "channels": {"value": 1, "basis": "assumed", "source": "test", "note": "a test drive"},
  "per_op_ns": {"value": 5000, "basis": "assumed", "source": "test", "note": "a test drive"},
  "queue_depth": {"value": 1, "basis": "assumed", "source": "test", "note": "a test drive"},
  "read_latency_p50_ns": {"value": 20000, "basis": "assumed", "source": "test", "note": "a test drive"},
  "read_latency_p99_ns": {"value": 20000, "basis": "assumed", "source": "test", "note": "a test drive"}})";
constexpr const char* kSerialMachine = R"({"kind": "machine", "name": "serial-h100", "description": "test",
  "nvme": "serial", "pcie": "none", "compute": "h100-sxm"})";

class ReplayRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("colibri-replay-run-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto catalog = sim::HardwareCatalog::BuiltIn();
    ASSERT_TRUE(catalog.ok()) << catalog.status().message();
    catalog_ = std::move(catalog).value();
    const Status drive = catalog_.AddText(kSerialDrive, "serial.json");
    ASSERT_TRUE(drive.ok()) << drive.message();
    ASSERT_TRUE(catalog_.AddText(kSerialMachine, "serial-h100.json").ok());
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // One request: `passes` passes of one token over 2 MoE layers, 16 experts, top-2, bf16 H=256 I=128.
  std::string WriteTrace(int passes, uint64_t seed) const {
    traces::TraceHeader header;
    header.shape.moe_layer_ids = {0, 1};
    header.shape.experts_per_layer = 16;
    header.shape.top_k = 2;
    header.shape.dtype = "bf16";
    header.shape.hidden_size = 256;
    header.shape.expert_bytes = {3u * 256 * 128 * 2, 3u * 256 * 128 * 2};
    const std::string path = Path("t" + std::to_string(seed) + ".ctrace");
    auto writer = traces::TraceWriter::Create(path, header, {});
    EXPECT_TRUE(writer.ok());
    std::mt19937_64 rng(seed);
    for (int p = 0; p < passes; ++p) {
      for (uint32_t layer = 0; layer < 2; ++layer) {
        traces::TraceRecord r;
        r.request_id = 0;
        r.pass_id = static_cast<uint64_t>(p);
        r.layer = layer;
        r.prefill = false;
        r.positions = {static_cast<uint64_t>(p)};
        const auto a = static_cast<uint32_t>(rng() % 16);
        r.expert_ids = {a, (a + 1 + static_cast<uint32_t>(rng() % 15)) % 16};
        EXPECT_TRUE(writer.value()->Append(r).ok());
      }
    }
    EXPECT_TRUE(writer.value()->Close().ok());
    return path;
  }

  ReplayConfig Config(const std::string& trace, const std::string& machine) const {
    ReplayConfig c;
    c.trace_path = trace;
    auto resolved = catalog_.Resolve(machine);
    EXPECT_TRUE(resolved.ok()) << resolved.status().message();
    c.machine = resolved.value();
    return c;
  }

  fs::path dir_;
  sim::HardwareCatalog catalog_;
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
  EXPECT_EQ(a.value().step_ns.at("layer_batch").Percentile(99), b.value().step_ns.at("layer_batch").Percentile(99));
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

TEST_F(ReplayRunTest, RealBackendsNeedAModel) {
  ReplayConfig c = Config(WriteTrace(2, 4), "cpu-local");
  c.storage = "uring";
  auto r = RunReplay(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--model"), std::string::npos);
}

}  // namespace
}  // namespace colibri::replay
