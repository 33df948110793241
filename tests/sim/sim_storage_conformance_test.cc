// The StorageBackend contract (tests/engine/storage_conformance.h) over
// SimStorage with a data file, driven by a SimEventLoop: the model keeps time,
// the data file supplies the bytes. Two drives: one whose latency jitter
// completes reads out of order, one with a single channel and no jitter.
// And FaultInjectionStorage (fault_injection.h) over SimStorage and over
// PreadStorage with specs whose faults keep the contract: none at all; every
// storage rule at 1 in 10^9 (on, so every read takes the wrapper's own path,
// yet with this seed none fires); spikes (completions held and released on
// the loop).
#include <memory>
#include <string>
#include <utility>

#include "../engine/storage_conformance.h"
#include "colibri/engine/event_loop.h"
#include "colibri/sim/fault_injection.h"
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
  engine::EventLoop* loop() { return &loop_; }

 private:
  NvmeProfile profile_;
  SimEventLoop loop_;
};

constexpr const char* kRareFaults =
    "storage.eio=1/1000000000,storage.short=1/1000000000,storage.spike=1/1000000000:1ms,"
    "storage.stuck=1/1000000000:1s,storage.corrupt=1/1000000000";

// Wraps what `Target` opens in a FaultInjectionStorage with `spec` on the same loop.
template <typename Target>
class FaultHarness final : public StorageHarness {
 public:
  template <typename... Args>
  explicit FaultHarness(const char* spec, Args&&... args) : target_(std::forward<Args>(args)...) {
    auto parsed = ParseFaultSpec(spec);
    EXPECT_TRUE(parsed.ok()) << parsed.status().message();
    if (parsed.ok()) spec_ = parsed.value();
  }

  Result<std::unique_ptr<StorageBackend>> Open(const std::string& path, uint32_t queue_depth) override {
    COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<StorageBackend> target, target_.Open(path, queue_depth));
    auto faults = std::make_unique<FaultInjectionStorage>(target.get(), spec_, 42, target_.loop(), &log_);
    return std::unique_ptr<StorageBackend>(
        new engine::OwningStorage(std::move(target), std::move(faults)));
  }
  void LetTimePass() override { target_.LetTimePass(); }

 private:
  Target target_;
  FaultSpec spec_;
  FaultLog log_;
};

// SimStorage as a FaultHarness target.
class SimTarget {
 public:
  explicit SimTarget(NvmeProfile profile) : harness_(std::move(profile)) {}
  Result<std::unique_ptr<StorageBackend>> Open(const std::string& path, uint32_t queue_depth) {
    return harness_.Open(path, queue_depth);
  }
  void LetTimePass() { harness_.LetTimePass(); }
  engine::EventLoop* loop() { return harness_.loop(); }

 private:
  SimHarness harness_;
};

// PreadStorage on a real event loop's clock as a FaultHarness target.
class PreadTarget {
 public:
  Result<std::unique_ptr<StorageBackend>> Open(const std::string& path, uint32_t queue_depth) {
    engine::StorageOptions options;
    options.clock = &loop_;
    options.queue_depth = queue_depth;
    return engine::OpenPreadStorage(path, options);
  }
  void LetTimePass() {}
  engine::EventLoop* loop() { return &loop_; }

 private:
  engine::RealEventLoop loop_;
};

template <typename Target, typename... Args>
std::unique_ptr<StorageHarness> MakeFaultHarness(const char* spec, Args... args) {
  return std::make_unique<FaultHarness<Target>>(spec, args...);
}

const StorageHarnessFactory kHarnesses[] = {
    {"sim_jittery", [] { return std::unique_ptr<StorageHarness>(new SimHarness(JitteryDrive())); }},
    {"sim_serial", [] { return std::unique_ptr<StorageHarness>(new SimHarness(SerialDrive())); }},
    {"fault_none_sim_jittery", [] { return MakeFaultHarness<SimTarget>("none", JitteryDrive()); }},
    {"fault_rare_sim_jittery", [] { return MakeFaultHarness<SimTarget>(kRareFaults, JitteryDrive()); }},
    {"fault_spike_sim_serial", [] { return MakeFaultHarness<SimTarget>("storage.spike=1/2:20us", SerialDrive()); }},
    {"fault_none_pread", [] { return MakeFaultHarness<PreadTarget>("none"); }},
    {"fault_rare_pread", [] { return MakeFaultHarness<PreadTarget>(kRareFaults); }},
    {"fault_spike_pread", [] { return MakeFaultHarness<PreadTarget>("storage.spike=1/3:1us"); }},
};

INSTANTIATE_TEST_SUITE_P(Sim, StorageConformanceTest, ::testing::ValuesIn(kHarnesses),
                         engine::conformance::HarnessName);

}  // namespace
}  // namespace colibri::sim
