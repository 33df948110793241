// The StorageBackend contract (tests/engine/storage_conformance.h) over
// SimStorage with a data file, driven by a SimEventLoop: the model keeps time,
// the data file supplies the bytes. Two drives: one whose latency jitter
// completes reads out of order, one with a single channel and no jitter.
#include <memory>
#include <string>
#include <utility>

#include "../engine/storage_conformance.h"
#include "colibri/sim/sim_event_loop.h"
#include "colibri/sim/sim_storage.h"

namespace colibri::sim {
namespace {

using engine::StorageBackend;
using engine::conformance::StorageConformanceTest;
using engine::conformance::StorageHarness;
using engine::conformance::StorageHarnessFactory;

NvmeProfile JitteryDrive() {
  NvmeProfile p;
  p.id = "test-jittery";
  p.channels = 4;
  p.queue_depth = 64;
  p.per_op_ns = 3'000;
  p.channel_read_bytes_per_s = 1'000'000'000;
  p.read_bytes_per_s = 3'000'000'000;
  p.read_latency = {20'000, 200'000};
  return p;
}

NvmeProfile SerialDrive() {
  NvmeProfile p;
  p.id = "test-serial";
  p.channels = 1;
  p.queue_depth = 32;
  p.per_op_ns = 10'000;
  p.channel_read_bytes_per_s = 2'000'000'000;
  p.read_bytes_per_s = 2'000'000'000;
  p.read_latency = {5'000, 5'000};
  return p;
}

// SimStorage over the file on its own simulated loop; time passes one event at a time.
class SimHarness final : public StorageHarness {
 public:
  explicit SimHarness(NvmeProfile profile) : profile_(std::move(profile)) {}

  Result<std::unique_ptr<StorageBackend>> Open(const std::string& path, uint32_t queue_depth) override {
    SimStorageOptions options;
    options.loop = &loop_;
    options.queue_depth = queue_depth;
    options.seed = 42;
    options.data_path = path;
    return MakeSimStorage(profile_, options);
  }

  void LetTimePass() override {
    bool ran = false;
    ASSERT_TRUE(loop_.RunUntil([&] { return std::exchange(ran, true); }).ok());
  }

 private:
  NvmeProfile profile_;
  SimEventLoop loop_;
};

const StorageHarnessFactory kHarnesses[] = {
    {"sim_jittery", [] { return std::unique_ptr<StorageHarness>(new SimHarness(JitteryDrive())); }},
    {"sim_serial", [] { return std::unique_ptr<StorageHarness>(new SimHarness(SerialDrive())); }},
};

INSTANTIATE_TEST_SUITE_P(Sim, StorageConformanceTest, ::testing::ValuesIn(kHarnesses),
                         engine::conformance::HarnessName);

}  // namespace
}  // namespace colibri::sim
