// Shared by the replay tests: a test drive without jitter (one channel, queue
// depth 1) and its machine, and a writer of small routing traces.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <random>
#include <string>

#include "colibri/replay/replay_run.h"
#include "colibri/sim/profiles.h"
#include "colibri/traces/writer.h"

namespace colibri::replay::testing {

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

// The built-in catalog plus "serial-h100".
inline sim::HardwareCatalog TestCatalog() {
  auto catalog = sim::HardwareCatalog::BuiltIn();
  EXPECT_TRUE(catalog.ok()) << catalog.status().message();
  EXPECT_TRUE(catalog.value().AddText(kSerialDrive, "serial.json").ok());
  EXPECT_TRUE(catalog.value().AddText(kSerialMachine, "serial-h100.json").ok());
  return std::move(catalog).value();
}

// Bytes of one expert of the test traces: bf16, H = 256, I = 128.
constexpr uint64_t kTestExpertBytes = 3u * 256 * 128 * 2;

struct TestTrace {
  int requests = 1;
  int passes = 1;             // per request, including the prefill pass when prompt_tokens > 0
  uint32_t prompt_tokens = 0; // > 0: each request's first pass is a prefill of that many tokens
  uint64_t seed = 1;
  std::optional<uint64_t> arrival_gap_ns;  // request r arrives at r x gap (recorded arrival_ns)
  bool pass_major = false;    // records ordered pass, layer, request (as the engine records) instead of request-major
  uint32_t top_k = 2;
  uint64_t layer1_expert_bytes = kTestExpertBytes;  // the second layer's experts (mixed quantisation when smaller)
  std::vector<uint64_t> dense_bytes = {};  // per MoE layer (2), or none
};

// Writes a trace of 2 MoE layers x 16 experts, top-k, bf16 H = 256 I = 128;
// request r's pass p has pass_id p and seeded distinct expert ids.
inline void WriteTestTrace(const std::string& path, const TestTrace& t) {
  traces::TraceHeader header;
  header.shape.moe_layer_ids = {0, 1};
  header.shape.experts_per_layer = 16;
  header.shape.top_k = t.top_k;
  header.shape.dtype = "bf16";
  header.shape.hidden_size = 256;
  header.shape.expert_bytes = {kTestExpertBytes, t.layer1_expert_bytes};
  header.shape.dense_bytes = t.dense_bytes;
  auto writer = traces::TraceWriter::Create(path, header, {});
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  auto record = [&](int request, int pass, uint32_t layer) {
    std::mt19937_64 rng(t.seed * 1000003 + static_cast<uint64_t>(request * 7919 + pass * 2 + static_cast<int>(layer)));
    traces::TraceRecord r;
    r.request_id = static_cast<uint64_t>(request);
    r.pass_id = static_cast<uint64_t>(pass);
    r.layer = layer;
    r.prefill = pass == 0 && t.prompt_tokens > 0;
    const uint32_t tokens = r.prefill ? t.prompt_tokens : 1;
    const uint64_t first = pass == 0 ? 0 : t.prompt_tokens + static_cast<uint64_t>(pass) - 1;
    for (uint32_t k = 0; k < tokens; ++k) {
      r.positions.push_back(first + k);
      const auto a = static_cast<uint32_t>(rng() % 16);
      const auto step = static_cast<uint32_t>(1 + 2 * (rng() % 8));  // odd: k x step mod 16 are distinct
      for (uint32_t slot = 0; slot < t.top_k; ++slot) r.expert_ids.push_back((a + slot * step) % 16);
    }
    if (t.arrival_gap_ns) r.arrival_ns = static_cast<uint64_t>(request) * *t.arrival_gap_ns;
    ASSERT_TRUE(writer.value()->Append(r).ok());
  };
  if (t.pass_major) {
    for (int p = 0; p < t.passes; ++p)
      for (uint32_t layer = 0; layer < 2; ++layer)
        for (int request = 0; request < t.requests; ++request) record(request, p, layer);
  } else {
    for (int request = 0; request < t.requests; ++request)
      for (int p = 0; p < t.passes; ++p)
        for (uint32_t layer = 0; layer < 2; ++layer) record(request, p, layer);
  }
  ASSERT_TRUE(writer.value()->Close().ok());
}

// A scratch directory and the test catalog, for replay tests.
class ReplayTest : public ::testing::Test {
 protected:
  explicit ReplayTest(const std::string& name)
      : dir_(std::filesystem::temp_directory_path() / ("colibri-" + name + "-" + std::to_string(::getpid()))) {}
  void SetUp() override {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::string Write(const std::string& name, const TestTrace& t) const {
    const std::string path = Path(name);
    WriteTestTrace(path, t);
    return path;
  }

  // A closed-loop replay of `trace` on the catalog's `machine`, other options at their defaults.
  ReplayConfig Config(const std::string& trace, const std::string& machine) const {
    ReplayConfig c;
    c.trace_path = trace;
    auto resolved = catalog_.Resolve(machine);
    EXPECT_TRUE(resolved.ok()) << resolved.status().message();
    if (resolved.ok()) c.machine = resolved.value();
    return c;
  }

  std::filesystem::path dir_;
  sim::HardwareCatalog catalog_ = TestCatalog();
};

}  // namespace colibri::replay::testing
