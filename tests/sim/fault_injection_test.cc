// The fault-injecting backends (sim/fault_injection.h) over modelled and
// real targets, all on a SimEventLoop's clock except the PreadStorage case
// (which asserts no times): each storage kind does what the header says to
// the completion, the buffer and the log; rates are deterministic per seed;
// a zero spec is the target itself; held completions are released on the
// loop, also when the loop polls the wrapper as an event source; transfer
// fail / oom and compute fail likewise.
#include "colibri/sim/fault_injection.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../engine/reference_ffn.h"
#include "colibri/engine/cpu_compute.h"
#include "colibri/engine/event_loop.h"
#include "colibri/engine/slab_pool.h"
#include "colibri/engine/storage.h"
#include "colibri/engine/transfer.h"
#include "colibri/sim/profiles.h"
#include "colibri/sim/sim_compute.h"
#include "colibri/sim/sim_event_loop.h"
#include "colibri/sim/sim_storage.h"
#include "colibri/sim/sim_transfer.h"

namespace colibri::sim {
namespace {

using engine::ReadCompletion;
using engine::StorageBackend;
using engine::TimeNs;
using engine::TransferCompletion;

constexpr uint64_t kBlock = 16 << 10;
constexpr uint64_t kBlocks = 64;
constexpr TimeNs kMs = 1'000'000;

FaultSpec Spec(const std::string& text) {
  auto spec = ParseFaultSpec(text);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  return spec.ok() ? spec.value() : FaultSpec{};
}

// kBlocks blocks of bytes that differ from block to block, removed at the end.
struct DataFile {
  DataFile() : path(::testing::TempDir() + "colibri-faults-" + std::to_string(::getpid()) + ".bin") {
    bytes.resize(kBlocks * kBlock);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 2654435761u) >> 11);
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  ~DataFile() { std::filesystem::remove(path); }
  const char* Block(uint64_t i) const { return bytes.data() + i * kBlock; }
  std::string path;
  std::string bytes;
};

// A drive without jitter: times are exact and the model draws nothing.
NvmeProfile SteadyDrive() {
  NvmeProfile p;
  p.id = "test-steady";
  p.channels = 2;
  p.queue_depth = 16;
  p.per_op_ns = 10'000;
  p.channel_read_bytes_per_s = 1'000'000'000;
  p.read_bytes_per_s = 2'000'000'000;
  p.read_latency = {5'000, 5'000};
  return p;
}

std::unique_ptr<StorageBackend> OpenSim(SimEventLoop* loop, const std::string& data_path, uint32_t queue_depth = 8) {
  SimStorageOptions options;
  options.loop = loop;
  options.queue_depth = queue_depth;
  options.seed = 1;
  options.data_path = data_path;
  if (data_path.empty()) options.file_bytes = kBlocks * kBlock;
  auto made = MakeSimStorage(SteadyDrive(), options);
  EXPECT_TRUE(made.ok()) << made.status().message();
  return made.ok() ? std::move(made).value() : nullptr;
}

std::unique_ptr<engine::SlabPool> Buffers(uint64_t count, bool reserved = false) {
  auto pool = reserved ? engine::SlabPool::CreateReserved(count * kBlock, kBlock)
                       : engine::SlabPool::Create(count * kBlock, kBlock);
  EXPECT_TRUE(pool.ok()) << pool.status().message();
  return std::move(pool).value();
}

// Reads block (i % kBlocks) into slot i with tag 100 + i, for i < count.
void SubmitReads(StorageBackend* storage, const engine::SlabPool& buffers, uint64_t count) {
  for (uint64_t i = 0; i < count; ++i) {
    const Status status = storage->Submit({i % kBlocks * kBlock, kBlock, buffers.SlotData(i), 100 + i});
    ASSERT_TRUE(status.ok()) << status.message();
  }
}

// Waiting polls until nothing is outstanding; by tag.
std::map<uint64_t, ReadCompletion> PollAll(StorageBackend* storage) {
  std::map<uint64_t, ReadCompletion> by_tag;
  std::vector<ReadCompletion> done;
  while (storage->outstanding() > 0) {
    done.clear();
    const Status status = storage->Poll(true, &done);
    EXPECT_TRUE(status.ok()) << status.message();
    if (!status.ok() || done.empty()) break;
    for (ReadCompletion& c : done) {
      EXPECT_EQ(by_tag.count(c.tag), 0u) << "tag " << c.tag << " completed twice";
      by_tag[c.tag] = std::move(c);
    }
  }
  return by_tag;
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class FaultStorageTest : public ::testing::Test {
 protected:
  // The reads of `count` blocks through a fault wrapper with `spec` over a fresh SimStorage.
  std::map<uint64_t, ReadCompletion> Run(const std::string& spec, uint64_t seed, uint64_t count, FaultLog* log,
                                         std::unique_ptr<engine::SlabPool>* buffers_out = nullptr) {
    SimEventLoop loop;
    auto target = OpenSim(&loop, file_.path);
    FaultInjectionStorage storage(target.get(), Spec(spec), seed, &loop, log);
    auto buffers = Buffers(count);
    SubmitReads(&storage, *buffers, count);
    auto done = PollAll(&storage);
    EXPECT_EQ(storage.outstanding(), 0u);
    EXPECT_EQ(target->outstanding(), 0u);
    if (buffers_out != nullptr) *buffers_out = std::move(buffers);
    return done;
  }

  // The same reads on the bare target: the reference times.
  std::map<uint64_t, ReadCompletion> Plain(uint64_t count) {
    SimEventLoop loop;
    auto target = OpenSim(&loop, file_.path);
    auto buffers = Buffers(count);
    SubmitReads(target.get(), *buffers, count);
    return PollAll(target.get());
  }

  DataFile file_;
};

TEST_F(FaultStorageTest, AZeroSpecIsTheTargetItself) {
  for (const char* text : {"", "none", "transfer.fail=1/1,compute.fail=1/1"}) {
    SCOPED_TRACE(text);
    FaultLog log;
    const auto plain = Plain(40);
    const auto wrapped = Run(text, 5, 40, &log);
    ASSERT_EQ(wrapped.size(), plain.size());
    for (const auto& [tag, c] : plain) {
      const ReadCompletion& w = wrapped.at(tag);
      EXPECT_TRUE(w.status.ok()) << w.status.message();
      EXPECT_EQ(w.bytes, c.bytes);
      EXPECT_EQ(w.submit_ns, c.submit_ns);
      EXPECT_EQ(w.complete_ns, c.complete_ns);
    }
    EXPECT_EQ(log.size(), 0u);
  }
  // The wrapper forwards caps, counters and warning as they are.
  SimEventLoop loop;
  auto target = OpenSim(&loop, file_.path);
  FaultInjectionStorage storage(target.get(), FaultSpec{}, 5, &loop, nullptr);
  EXPECT_EQ(&storage.caps(), &target->caps());
  EXPECT_EQ(&storage.counters(), &target->counters());
  EXPECT_EQ(storage.target(), target.get());
}

TEST_F(FaultStorageTest, EioOnEveryReadIsAnErrorAndLogged) {
  SimEventLoop loop;
  auto target = OpenSim(&loop, file_.path);
  FaultLog log;
  FaultInjectionStorage storage(target.get(), Spec("storage.eio=1/1"), 3, &loop, &log);
  auto buffers = Buffers(20);
  SubmitReads(&storage, *buffers, 20);
  const auto done = PollAll(&storage);
  ASSERT_EQ(done.size(), 20u);
  for (const auto& [tag, c] : done) {
    EXPECT_EQ(c.status.code(), StatusCode::kIoError);
    EXPECT_TRUE(Contains(c.status.message(), "input/output error (injected storage.eio)")) << c.status.message();
    EXPECT_TRUE(Contains(c.status.message(), "at offset " + std::to_string((tag - 100) % kBlocks * kBlock)))
        << c.status.message();
    EXPECT_EQ(c.bytes, 0u);
  }
  ASSERT_EQ(log.size(), 20u);
  EXPECT_EQ(log.count(FaultKind::kStorageEio), 20u);
  for (const InjectedFault& f : log.records()) {
    EXPECT_EQ(f.kind, "storage.eio");
    EXPECT_TRUE(Contains(f.detail, "read of 16384 bytes at offset")) << f.detail;
    const uint64_t tag = std::stoull(f.detail.substr(4));  // "tag N: ..."
    EXPECT_EQ(f.at_ns, done.at(tag).complete_ns) << f.detail;
  }
  EXPECT_EQ(storage.counters().reads, 0u);
  EXPECT_EQ(storage.counters().read_errors, 20u);
  EXPECT_EQ(target->counters().reads, 20u);  // the target read them all
}

// 1/4 over 400 reads: about 100 fire, exactly the same ones again for the same seed.
TEST_F(FaultStorageTest, RatesAreDeterministicPerSeed) {
  auto faulted = [&](uint64_t seed, FaultLog* log) {
    std::vector<uint64_t> tags;
    for (const auto& [tag, c] : Run("storage.eio=1/4", seed, 400, log)) {
      if (!c.status.ok()) tags.push_back(tag);
    }
    return tags;
  };
  FaultLog first_log, again_log, other_log;
  const std::vector<uint64_t> first = faulted(7, &first_log);
  const std::vector<uint64_t> again = faulted(7, &again_log);
  const std::vector<uint64_t> other = faulted(8, &other_log);
  EXPECT_GT(first.size(), 60u);
  EXPECT_LT(first.size(), 140u);
  EXPECT_EQ(first_log.size(), first.size());
  EXPECT_EQ(first, again);
  EXPECT_EQ(first_log.records(), again_log.records());
  EXPECT_NE(first, other);
  EXPECT_NE(first_log.records(), other_log.records());
}

TEST_F(FaultStorageTest, SpikeDelaysTheCompletionByExactlyItsDuration) {
  const auto plain = Plain(12);
  FaultLog log;
  const auto spiked = Run("storage.spike=1/1:5ms", 1, 12, &log);
  ASSERT_EQ(spiked.size(), plain.size());
  for (const auto& [tag, c] : plain) {
    const ReadCompletion& s = spiked.at(tag);
    EXPECT_TRUE(s.status.ok()) << s.status.message();
    EXPECT_EQ(s.bytes, kBlock);
    EXPECT_EQ(s.submit_ns, c.submit_ns);
    EXPECT_EQ(s.complete_ns, c.complete_ns + 5 * kMs) << "tag " << tag;
  }
  EXPECT_EQ(log.count(FaultKind::kStorageSpike), 12u);
  EXPECT_TRUE(Contains(log.records()[0].detail, "delayed by 5ms")) << log.records()[0].detail;

  // One read: the waiting poll runs the loop to the release, and not before.
  SimEventLoop loop;
  auto target = OpenSim(&loop, file_.path);
  FaultInjectionStorage storage(target.get(), Spec("storage.spike=1/1:5ms"), 1, &loop, nullptr);
  auto buffers = Buffers(1);
  SubmitReads(&storage, *buffers, 1);
  std::vector<ReadCompletion> done;
  ASSERT_TRUE(loop.RunUntil([&] { return loop.Now() >= plain.at(100).complete_ns + kMs; }).ok());
  ASSERT_TRUE(storage.Poll(false, &done).ok());
  EXPECT_TRUE(done.empty()) << "handed over before its delayed completion";
  EXPECT_EQ(storage.outstanding(), 1u);
  EXPECT_EQ(target->outstanding(), 0u);
  ASSERT_TRUE(storage.Poll(true, &done).ok());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].complete_ns, plain.at(100).complete_ns + 5 * kMs);
  EXPECT_EQ(loop.Now(), done[0].complete_ns);
  EXPECT_EQ(std::memcmp(buffers->SlotData(0), file_.Block(0), kBlock), 0);
}

TEST_F(FaultStorageTest, StuckReadsTimeOutAtSubmitPlusTheDuration) {
  SimEventLoop loop;
  auto target = OpenSim(&loop, file_.path);
  FaultLog log;
  {
    FaultInjectionStorage storage(target.get(), Spec("storage.stuck=1/1:100ms"), 1, &loop, &log);
    auto buffers = Buffers(3);
    loop.WaitUntil(7 * kMs);  // submissions at a time other than 0
    SubmitReads(&storage, *buffers, 3);
    const auto done = PollAll(&storage);
    ASSERT_EQ(done.size(), 3u);
    for (const auto& [tag, c] : done) {
      EXPECT_EQ(c.status.code(), StatusCode::kIoError);
      EXPECT_TRUE(Contains(c.status.message(), "read timed out after 100ms")) << c.status.message();
      EXPECT_EQ(c.bytes, 0u);
      EXPECT_EQ(c.submit_ns, 7 * kMs);
      EXPECT_EQ(c.complete_ns, 107 * kMs);
    }
    // The target's own reads completed (into the buffers) before the wrapper goes.
    EXPECT_EQ(target->outstanding(), 0u);
    EXPECT_EQ(target->counters().reads, 3u);
    for (uint64_t i = 0; i < 3; ++i) EXPECT_EQ(std::memcmp(buffers->SlotData(i), file_.Block(i), kBlock), 0);
    EXPECT_EQ(storage.counters().read_errors, 3u);
  }
  ASSERT_EQ(log.size(), 3u);
  for (const InjectedFault& f : log.records()) {
    EXPECT_EQ(f.kind, "storage.stuck");
    EXPECT_EQ(f.at_ns, 107 * kMs);
  }
}

// A timeout shorter than the read: the error waits for the target's own
// completion, so the buffer is never handed back while the target may write it.
TEST_F(FaultStorageTest, AStuckReadKeepsItsBufferUntilTheTargetIsDone) {
  const auto plain = Plain(1);
  const TimeNs target_done_ns = plain.at(100).complete_ns;
  ASSERT_GT(target_done_ns, 2'000);
  SimEventLoop loop;
  auto target = OpenSim(&loop, file_.path);
  FaultInjectionStorage storage(target.get(), Spec("storage.stuck=1/1:1us"), 1, &loop, nullptr);
  auto buffers = Buffers(1);
  SubmitReads(&storage, *buffers, 1);
  ASSERT_TRUE(loop.RunUntil([&] { return loop.Now() >= 1'000; }).ok());  // the timeout has passed
  std::vector<ReadCompletion> done;
  ASSERT_TRUE(storage.Poll(false, &done).ok());
  EXPECT_TRUE(done.empty());
  EXPECT_EQ(storage.outstanding(), 1u);
  ASSERT_TRUE(storage.Poll(true, &done).ok());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(Contains(done[0].status.message(), "read timed out after 1us")) << done[0].status.message();
  EXPECT_EQ(done[0].complete_ns, target_done_ns);
  EXPECT_EQ(target->outstanding(), 0u);
}

TEST_F(FaultStorageTest, CorruptFlipsExactlyOneByte) {
  FaultLog log;
  std::unique_ptr<engine::SlabPool> buffers;
  const auto done = Run("storage.corrupt=1/1", 4, 10, &log, &buffers);
  ASSERT_EQ(done.size(), 10u);
  ASSERT_EQ(log.size(), 10u);
  std::map<uint64_t, std::string> detail_of;  // by tag: each detail starts "tag N: "
  for (const InjectedFault& f : log.records()) detail_of[std::stoull(f.detail.substr(4))] = f.detail;
  for (const auto& [tag, c] : done) {
    EXPECT_TRUE(c.status.ok()) << c.status.message();
    EXPECT_EQ(c.bytes, kBlock);
    const uint64_t i = tag - 100;
    const auto* got = reinterpret_cast<const unsigned char*>(buffers->SlotData(i));
    const auto* want = reinterpret_cast<const unsigned char*>(file_.Block(i));
    std::vector<uint64_t> differ;
    for (uint64_t b = 0; b < kBlock; ++b) {
      if (got[b] != want[b]) differ.push_back(b);
    }
    ASSERT_EQ(differ.size(), 1u) << "tag " << tag;
    EXPECT_EQ(got[differ[0]], static_cast<unsigned char>(want[differ[0]] ^ 0xFF));
    const std::string& detail = detail_of[tag];
    EXPECT_TRUE(Contains(detail, "byte " + std::to_string(differ[0]) + " of the buffer")) << detail;
  }
  EXPECT_EQ(log.count(FaultKind::kStorageCorrupt), 10u);
}

TEST_F(FaultStorageTest, ShortReadsDeliverFewerBytesWithAnError) {
  FaultLog log;
  std::unique_ptr<engine::SlabPool> buffers;
  const auto done = Run("storage.short=1/1", 2, 10, &log, &buffers);
  ASSERT_EQ(done.size(), 10u);
  for (const auto& [tag, c] : done) {
    const uint64_t i = tag - 100;
    EXPECT_EQ(c.status.code(), StatusCode::kIoError);
    EXPECT_LT(c.bytes, kBlock);
    EXPECT_EQ(c.bytes % 4096, 0u);
    EXPECT_TRUE(Contains(c.status.message(), "short read: " + std::to_string(c.bytes) + " of 16384 bytes"))
        << c.status.message();
    EXPECT_EQ(std::memcmp(buffers->SlotData(i), file_.Block(i), c.bytes), 0);
    const std::vector<std::byte> zeros(kBlock - c.bytes);
    EXPECT_EQ(std::memcmp(buffers->SlotData(i) + c.bytes, zeros.data(), zeros.size()), 0);
  }
  EXPECT_EQ(log.count(FaultKind::kStorageShort), 10u);
}

// Over a model that only keeps time, buffers are never touched (here they
// fault when touched): corrupt is not applied, short still shortens.
TEST_F(FaultStorageTest, ATimeOnlyTargetsBuffersAreNeverTouched) {
  for (const char* text : {"storage.corrupt=1/1", "storage.short=1/1"}) {
    SCOPED_TRACE(text);
    SimEventLoop loop;
    auto target = OpenSim(&loop, "");
    ASSERT_FALSE(target->caps().delivers_data);
    FaultLog log;
    FaultInjectionStorage storage(target.get(), Spec(text), 1, &loop, &log);
    auto buffers = Buffers(4, /*reserved=*/true);
    SubmitReads(&storage, *buffers, 4);
    const auto done = PollAll(&storage);
    ASSERT_EQ(done.size(), 4u);
    const bool corrupt = Contains(text, "corrupt");
    for (const auto& [tag, c] : done) EXPECT_EQ(c.status.ok(), corrupt) << c.status.message();
    EXPECT_EQ(log.size(), corrupt ? 0u : 4u);
  }
}

// Faults together: eio and spike both apply (an error, late); stuck alone applies.
TEST_F(FaultStorageTest, KindsCombineAsDocumented) {
  const auto plain = Plain(4);
  FaultLog log;
  const auto done = Run("storage.eio=1/1,storage.spike=1/1:2ms", 1, 4, &log);
  for (const auto& [tag, c] : done) {
    EXPECT_EQ(c.status.code(), StatusCode::kIoError);
    EXPECT_EQ(c.complete_ns, plain.at(tag).complete_ns + 2 * kMs);
  }
  EXPECT_EQ(log.count(FaultKind::kStorageEio), 4u);
  EXPECT_EQ(log.count(FaultKind::kStorageSpike), 4u);

  FaultLog stuck_log;
  const auto stuck = Run("storage.eio=1/1,storage.stuck=1/1:1s,storage.corrupt=1/1", 1, 4, &stuck_log);
  for (const auto& [tag, c] : stuck) EXPECT_EQ(c.complete_ns, c.submit_ns + 1'000'000'000);
  EXPECT_EQ(stuck_log.size(), 4u);
  EXPECT_EQ(stuck_log.count(FaultKind::kStorageStuck), 4u);
}

// The engine's arrangement: the loop polls the wrapper as an event source,
// and a waiting Poll of the wrapper runs the loop (nested polls).
class StorageSource final : public engine::EventSource {
 public:
  explicit StorageSource(StorageBackend* storage) : storage_(storage) {}
  size_t pending() const override { return storage_->outstanding(); }
  Status Poll(bool wait) override { return storage_->Poll(wait, &done); }
  std::vector<ReadCompletion> done;

 private:
  StorageBackend* storage_;
};

TEST_F(FaultStorageTest, HeldCompletionsAreReleasedWhenTheLoopPollsTheWrapper) {
  constexpr uint64_t kReads = 40;
  SimEventLoop loop;
  auto target = OpenSim(&loop, file_.path, 4);
  FaultLog log;
  FaultInjectionStorage storage(target.get(), Spec("storage.spike=1/2:50us,storage.stuck=1/5:300us"), 9, &loop, &log);
  StorageSource source(&storage);
  loop.AddSource(&source);
  auto buffers = Buffers(kReads);
  SubmitReads(&storage, *buffers, kReads);
  // Half through the loop alone, the rest through waiting polls that nest.
  ASSERT_TRUE(loop.RunUntil([&] { return source.done.size() >= kReads / 2; }).ok());
  std::vector<ReadCompletion> direct;
  while (storage.outstanding() > 0) ASSERT_TRUE(storage.Poll(true, &direct).ok());
  std::map<uint64_t, int> seen;
  for (const auto* list : {&source.done, &direct}) {
    for (const ReadCompletion& c : *list) {
      ++seen[c.tag];
      EXPECT_LE(c.submit_ns, c.complete_ns);
    }
  }
  EXPECT_EQ(seen.size(), kReads);
  for (const auto& [tag, times] : seen) EXPECT_EQ(times, 1) << "tag " << tag;
  EXPECT_GT(log.count(FaultKind::kStorageSpike), 0u);
  EXPECT_GT(log.count(FaultKind::kStorageStuck), 0u);
  EXPECT_EQ(storage.counters().read_errors, log.count(FaultKind::kStorageStuck));
  EXPECT_EQ(storage.counters().reads, kReads - log.count(FaultKind::kStorageStuck));
}

// Destroying the wrapper with completions held and timers scheduled: the
// tasks do nothing afterwards, and the target is left to its own destructor.
TEST_F(FaultStorageTest, DestroyWithCompletionsHeld) {
  SimEventLoop loop;
  auto target = OpenSim(&loop, file_.path);
  auto buffers = Buffers(8);
  {
    FaultInjectionStorage storage(target.get(), Spec("storage.spike=1/2:1ms,storage.stuck=1/2:1s"), 2, &loop, nullptr);
    SubmitReads(&storage, *buffers, 8);
    ASSERT_TRUE(loop.RunUntil([&] { return loop.Now() >= 500'000; }).ok());
  }
  ASSERT_TRUE(loop.RunUntil([] { return false; }).ok());  // runs the orphaned tasks
  target.reset();
  SUCCEED();
}

TEST_F(FaultStorageTest, SubmitWithoutALoopIsRefusedWhenFaultsAreOn) {
  SimEventLoop loop;
  auto target = OpenSim(&loop, file_.path);
  FaultInjectionStorage storage(target.get(), Spec("storage.eio=1/2"), 2, nullptr, nullptr);
  auto buffers = Buffers(1);
  const Status status = storage.Submit({0, kBlock, buffers->SlotData(0), 1});
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(target->outstanding(), 0u);
  // A read the target rejects is rejected as it is, and draws nothing.
  FaultInjectionStorage with_loop(target.get(), Spec("storage.eio=1/2"), 2, &loop, nullptr);
  EXPECT_EQ(with_loop.Submit({1, kBlock, buffers->SlotData(0), 1}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(with_loop.outstanding(), 0u);
}

// Over the real PreadStorage (real clock; no time is asserted).
TEST_F(FaultStorageTest, EioOverPreadStorage) {
  auto run = [&](std::vector<uint64_t>* faulted) {
    engine::RealEventLoop loop;
    engine::StorageOptions options;
    options.clock = &loop;
    options.queue_depth = 4;
    auto target = engine::OpenPreadStorage(file_.path, options);
    ASSERT_TRUE(target.ok()) << target.status().message();
    FaultLog log;
    FaultInjectionStorage storage(target.value().get(), Spec("storage.eio=1/3"), 11, &loop, &log);
    auto buffers = Buffers(50);
    SubmitReads(&storage, *buffers, 50);
    const auto done = PollAll(&storage);
    ASSERT_EQ(done.size(), 50u);
    for (const auto& [tag, c] : done) {
      if (!c.status.ok()) {
        EXPECT_TRUE(Contains(c.status.message(), "injected storage.eio")) << c.status.message();
        faulted->push_back(tag);
        continue;
      }
      EXPECT_EQ(std::memcmp(buffers->SlotData(tag - 100), file_.Block((tag - 100) % kBlocks), kBlock), 0);
    }
    EXPECT_EQ(log.size(), faulted->size());
    EXPECT_EQ(storage.counters().read_errors, faulted->size());
    EXPECT_EQ(storage.counters().reads, 50 - faulted->size());
  };
  std::vector<uint64_t> first, again;
  run(&first);
  run(&again);
  EXPECT_GT(first.size(), 0u);
  EXPECT_LT(first.size(), 50u);
  EXPECT_EQ(first, again);
}

// ---------------------------------------------------------------------------
// Transfer

Result<std::unique_ptr<SimTransfer>> Gen5(SimEventLoop* loop) {
  COLIBRI_ASSIGN_OR_RETURN(const HardwareCatalog catalog, HardwareCatalog::BuiltIn());
  COLIBRI_ASSIGN_OR_RETURN(const PcieProfile* link, catalog.Pcie("pcie-gen5-x16"));
  SimTransferOptions options;
  options.loop = loop;
  return MakeSimTransfer(*link, options);
}

std::vector<TransferCompletion> DrainCopies(engine::TransferBackend* transfer) {
  std::vector<TransferCompletion> done;
  while (transfer->outstanding() > 0) {
    const size_t before = done.size();
    EXPECT_TRUE(transfer->Poll(true, &done).ok());
    if (done.size() == before) break;
  }
  return done;
}

TEST(FaultTransferTest, FailCarriesAnErrorAndOnlyTheChosenCopiesFail) {
  auto run = [](const char* spec, uint64_t seed, FaultLog* log) {
    SimEventLoop loop;
    auto target = Gen5(&loop);
    EXPECT_TRUE(target.ok()) << target.status().message();
    FaultInjectionTransfer transfer(target.value().get(), Spec(spec), seed, &loop, log);
    std::byte memory[2] = {};
    for (uint64_t i = 0; i < 300; ++i) EXPECT_TRUE(transfer.Copy(&memory[0], &memory[1], 4096 + i, 7).ok());
    std::vector<uint64_t> failed;
    const std::vector<TransferCompletion> done = DrainCopies(&transfer);
    EXPECT_EQ(done.size(), 300u);
    for (size_t i = 0; i < done.size(); ++i) {
      EXPECT_EQ(done[i].tag, 7u);  // the caller's tags, repeated ones included
      if (done[i].status.ok()) continue;
      EXPECT_EQ(done[i].status.code(), StatusCode::kIoError);
      EXPECT_TRUE(Contains(done[i].status.message(), "transfer failed (injected transfer.fail)"));
      failed.push_back(done[i].bytes);
    }
    EXPECT_EQ(transfer.counters().copies, 300 - failed.size());
    return failed;
  };
  FaultLog all_log;
  EXPECT_EQ(run("transfer.fail=1/1", 1, &all_log).size(), 300u);
  EXPECT_EQ(all_log.count(FaultKind::kTransferFail), 300u);
  FaultLog first_log, again_log, other_log;
  const std::vector<uint64_t> first = run("transfer.fail=1/3", 5, &first_log);
  EXPECT_GT(first.size(), 50u);
  EXPECT_LT(first.size(), 150u);
  EXPECT_EQ(first, run("transfer.fail=1/3", 5, &again_log));
  EXPECT_EQ(first_log.records(), again_log.records());
  EXPECT_NE(first, run("transfer.fail=1/3", 6, &other_log));
}

// The copy is still performed (CpuTransfer moves the bytes); its completion carries the error.
TEST(FaultTransferTest, AFailedCopyIsStillPerformed) {
  SimEventLoop loop;
  auto target = engine::MakeCpuTransfer(&loop);
  FaultLog log;
  FaultInjectionTransfer transfer(target.get(), Spec("transfer.fail=1/1"), 1, &loop, &log);
  std::vector<std::byte> src(64, std::byte{0x5A}), dst(64);
  ASSERT_TRUE(transfer.Copy(dst.data(), src.data(), 64, 3).ok());
  const std::vector<TransferCompletion> done = DrainCopies(&transfer);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_FALSE(done[0].status.ok());
  EXPECT_EQ(done[0].tag, 3u);
  EXPECT_EQ(dst, src);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log.records()[0].at_ns, done[0].complete_ns);
  EXPECT_EQ(log.records()[0].detail, "copy of 64 bytes (tag 3)");
  // Rejected copies are the target's errors and draw nothing.
  EXPECT_EQ(transfer.Copy(nullptr, src.data(), 64, 4).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(transfer.outstanding(), 0u);
}

TEST(FaultTransferTest, OomFailsPoolCreation) {
  SimEventLoop loop;
  auto target = Gen5(&loop);
  ASSERT_TRUE(target.ok()) << target.status().message();
  FaultLog log;
  FaultInjectionTransfer transfer(target.value().get(), Spec("transfer.oom=1/1"), 1, &loop, &log);
  loop.WaitUntil(42);
  auto device = transfer.CreateDevicePool(1 << 20, 1 << 16);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(device.status().message(), "device out of memory (injected")) << device.status().message();
  auto host = transfer.CreateHostPool(1 << 20, 1 << 16);
  ASSERT_FALSE(host.ok());
  EXPECT_TRUE(Contains(host.status().message(), "host pool of 1048576 bytes")) << host.status().message();
  auto none = transfer.CreateDevicePool(0, 1 << 16);  // no tier: allocates nothing, never fails
  ASSERT_TRUE(none.ok()) << none.status().message();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log.records()[0].at_ns, 42);
  EXPECT_EQ(log.records()[0].kind, "transfer.oom");
  // Copies are untouched by an oom-only spec.
  std::byte memory[2] = {};
  ASSERT_TRUE(transfer.Copy(&memory[0], &memory[1], 100, 9).ok());
  EXPECT_EQ(DrainCopies(&transfer).at(0).tag, 9u);
  EXPECT_EQ(&transfer.counters(), &target.value()->counters());
}

// ---------------------------------------------------------------------------
// Compute

TEST(FaultComputeTest, FailReturnsTheErrorWithoutRunningTheKernel) {
  SimEventLoop loop;
  auto catalog = HardwareCatalog::BuiltIn();
  ASSERT_TRUE(catalog.ok()) << catalog.status().message();
  auto profile = catalog.value().Compute("h200-sxm");
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  auto target = MakeSimCompute(*profile.value(), SimComputeOptions{&loop});
  ASSERT_TRUE(target.ok()) << target.status().message();
  FaultLog log;
  FaultInjectionCompute compute(target.value().get(), Spec("compute.fail=1/1"), 1, &loop, &log);
  const engine::ExpertLayout layout = engine::ExpertLayout::Make(engine::DType::kBf16, 256, 512);
  loop.WaitUntil(1'000);
  const Status failed = compute.ExpertFfn(engine::ExpertView{&layout, nullptr}, nullptr, 4, nullptr);
  EXPECT_EQ(failed.code(), StatusCode::kInternal);
  EXPECT_TRUE(Contains(failed.message(), "kernel failed (injected")) << failed.message();
  EXPECT_EQ(loop.Now(), 1'000) << "a failed kernel kept time";
  EXPECT_EQ(target.value()->counters().kernels, 0u);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log.records()[0].at_ns, 1'000);
  EXPECT_EQ(log.records()[0].detail, "expert FFN of 4 tokens (hidden 256, intermediate 512)");
  // No draw, no fault: 0 tokens, a bad view, the gate.
  EXPECT_TRUE(compute.ExpertFfn(engine::ExpertView{&layout, nullptr}, nullptr, 0, nullptr).ok());
  EXPECT_EQ(compute.ExpertFfn(engine::ExpertView{nullptr, nullptr}, nullptr, 4, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(compute.GateGemv(nullptr, nullptr, 64, 256, nullptr, 4, nullptr).ok());
  EXPECT_EQ(log.size(), 1u);
}

// Over CpuCompute: failed calls write nothing; the others are the target's.
TEST(FaultComputeTest, OnlyTheChosenCallsFailAndTheRestAreTheTargets) {
  auto cpu = engine::CpuCompute::Create(engine::CpuComputeOptions{1, engine::CpuIsa::kScalar});
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  const engine::reference::RandomExpert expert(engine::DType::kFp32, 32, 48, 3);
  const std::vector<float> x = engine::reference::RandomActivations(2 * 32, 4);
  std::vector<float> want(2 * 32);
  ASSERT_TRUE(cpu.value()->ExpertFfn(expert.view(), x.data(), 2, want.data()).ok());
  auto failures = [&](uint64_t seed) {
    SimEventLoop clock;
    FaultInjectionCompute compute(cpu.value().get(), Spec("compute.fail=1/2"), seed, &clock, nullptr);
    std::vector<int> failed;
    for (int call = 0; call < 40; ++call) {
      std::vector<float> y(2 * 32, -1.0f);
      const Status status = compute.ExpertFfn(expert.view(), x.data(), 2, y.data());
      if (status.ok()) {
        EXPECT_EQ(std::memcmp(y.data(), want.data(), 4 * y.size()), 0);
      } else {
        EXPECT_EQ(y, std::vector<float>(2 * 32, -1.0f)) << "a failed call wrote its output";
        failed.push_back(call);
      }
    }
    return failed;
  };
  const std::vector<int> first = failures(3);
  EXPECT_GT(first.size(), 5u);
  EXPECT_LT(first.size(), 35u);
  EXPECT_EQ(first, failures(3));
  EXPECT_NE(first, failures(4));
}

// The streams are the documented ones: DeriveSeed(seed, "fault_storage") etc.
TEST(FaultDrawTest, DecisionsFollowTheDocumentedRule) {
  const FaultRate rate{3, 10, 0};
  Rng mine(DeriveSeed(77, "fault_compute"));
  Rng reference(DeriveSeed(77, "fault_compute"));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(DrawFault(rate, &mine), reference.NextU64() % 10 < 3);
  Rng untouched(5);
  Rng copy(5);
  EXPECT_FALSE(DrawFault(FaultRate{}, &untouched));
  EXPECT_EQ(untouched.NextU64(), copy.NextU64()) << "an off rule drew from the stream";

  SimEventLoop loop;
  auto cpu = engine::CpuCompute::Create(engine::CpuComputeOptions{1, engine::CpuIsa::kScalar});
  ASSERT_TRUE(cpu.ok());
  FaultInjectionCompute compute(cpu.value().get(), Spec("compute.fail=1/2"), 77, &loop, nullptr);
  const engine::reference::RandomExpert expert(engine::DType::kFp32, 16, 16, 1);
  const std::vector<float> x = engine::reference::RandomActivations(16, 2);
  std::vector<float> y(16);
  Rng expected(DeriveSeed(77, "fault_compute"));
  for (int i = 0; i < 50; ++i) {
    const bool fails = expected.NextU64() % 2 < 1;
    EXPECT_EQ(!compute.ExpertFfn(expert.view(), x.data(), 1, y.data()).ok(), fails) << "call " << i;
  }
}

}  // namespace
}  // namespace colibri::sim
