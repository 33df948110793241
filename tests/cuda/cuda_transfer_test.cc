// Tests of CudaTransfer: the TransferBackend contract
// (tests/engine/transfer_conformance.h, included by path) over one and four
// copy streams, and what CudaTransfer adds: argument and device checks, the L1
// pool as one device allocation carved into slots, destinations checked to be
// device memory, pinned host buffers. Without a GPU or driver every test that
// needs one skips (with ProbeCudaDevice's reason); the checks of Create()
// that need no device run everywhere.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "../engine/transfer_conformance.h"
#include "colibri/cuda/cuda_transfer.h"
#include "colibri/cuda/device.h"
#include "cuda_test_util.h"
#include "colibri/engine/clock.h"

namespace colibri::cuda {
namespace {

using engine::conformance::TransferConformanceTest;
using engine::conformance::TransferHarness;
using engine::conformance::TransferHarnessFactory;

// CudaTransfer on device 0 over kStreams copy streams, on the monotonic
// clock; no device is Unsupported, which skips the suite.
template <uint32_t kStreams>
class CudaHarness final : public TransferHarness {
 public:
  Result<std::unique_ptr<engine::TransferBackend>> Make() override {
    auto made = CudaTransfer::Create(0, &clock_, kStreams);
    if (!made.ok()) {
      return testing::NoDeviceStatus(made.status());
    }
    last_ = made.value().get();
    return std::unique_ptr<engine::TransferBackend>(std::move(made).value());
  }
  const engine::Clock& clock() const override { return clock_; }
  bool ReadBack(const std::byte* device, uint64_t bytes, std::byte* host) override {
    if (last_ == nullptr) return false;
    const Status status = last_->ReadBack(device, bytes, host);
    EXPECT_TRUE(status.ok()) << status.message();
    return status.ok();
  }

 private:
  engine::MonotonicClock clock_;
  CudaTransfer* last_ = nullptr;  // the backend the suite holds (made once per test)
};

template <uint32_t kStreams>
std::unique_ptr<TransferHarness> MakeCudaHarness() {
  return std::make_unique<CudaHarness<kStreams>>();
}

const TransferHarnessFactory kHarnesses[] = {
    {"cuda_1_stream", &MakeCudaHarness<1>},
    {"cuda_4_streams", &MakeCudaHarness<4>},
};

INSTANTIATE_TEST_SUITE_P(Cuda, TransferConformanceTest, ::testing::ValuesIn(kHarnesses),
                         engine::conformance::TransferHarnessName);

constexpr uint64_t kSlotBytes = 64 << 10;

std::vector<std::byte> Pattern(uint64_t bytes, uint32_t seed) {
  std::vector<std::byte> out(bytes);
  uint32_t state = seed * 2654435761u + 1;
  for (std::byte& b : out) {
    state = state * 1664525u + 1013904223u;
    b = static_cast<std::byte>(state >> 24);
  }
  return out;
}

// A transfer on device 0 (the test skips without a device).
class CudaTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_CUDA_DEVICE();
    auto made = CudaTransfer::Create(0, &clock_);
    ASSERT_TRUE(made.ok()) << made.status().message();
    transfer_ = std::move(made).value();
  }

  // Waits until every copy is handed over; returns the completions.
  std::vector<engine::TransferCompletion> Drain() {
    std::vector<engine::TransferCompletion> done;
    for (int polls = 0; transfer_->outstanding() > 0 && polls < 100000; ++polls) {
      EXPECT_TRUE(transfer_->Poll(true, &done).ok());
    }
    EXPECT_EQ(transfer_->outstanding(), 0u);
    return done;
  }

  engine::MonotonicClock clock_;
  std::unique_ptr<CudaTransfer> transfer_;
};

using testing::ExpectNoDevice;

TEST(CudaTransferCreateTest, ChecksArgumentsBeforeTouchingCuda) {
  engine::MonotonicClock clock;
  EXPECT_EQ(CudaTransfer::Create(0, nullptr).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaTransfer::Create(0, &clock, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaTransfer::Create(0, &clock, CudaTransfer::kMaxCopyStreams + 1).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(CudaTransferCreateTest, WithoutADeviceIsNotFound) {
  if (ProbeCudaDevice(0).ok()) GTEST_SKIP() << "not applicable: a CUDA device is present";
  engine::MonotonicClock clock;
  auto made = CudaTransfer::Create(0, &clock);
  ASSERT_FALSE(made.ok());
  ExpectNoDevice(made.status());
  ExpectNoDevice(OpenCudaDevice(0));
}

TEST(CudaTransferCreateTest, RejectsADeviceThatDoesNotExist) {
  SKIP_WITHOUT_CUDA_DEVICE();
  engine::MonotonicClock clock;
  EXPECT_EQ(CudaTransfer::Create(1 << 20, &clock).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaTransfer::Create(-1, &clock).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(CudaTransferTest, Caps) {
  EXPECT_STREQ(transfer_->caps().name, "cuda");
  EXPECT_FALSE(transfer_->caps().device_is_host);
  EXPECT_TRUE(transfer_->caps().delivers_data);
  EXPECT_EQ(transfer_->device(), 0);
  EXPECT_EQ(transfer_->copy_streams(), 2u);
}

// The pool is one device allocation: slot i's device address is the first
// slot's + i x slot_bytes, and every slot is memory of device 0.
TEST_F(CudaTransferTest, PoolIsOneDeviceAllocationCarvedIntoSlots) {
  constexpr uint32_t kSlots = 8;
  auto made = transfer_->CreateDevicePool(kSlots * kSlotBytes + kSlotBytes / 2, kSlotBytes);
  ASSERT_TRUE(made.ok()) << made.status().message();
  const std::unique_ptr<engine::SlabPool> pool = std::move(made).value();
  ASSERT_EQ(pool->slot_count(), kSlots);
  auto first = transfer_->DeviceAddress(pool->SlotData(0), kSlotBytes);
  ASSERT_TRUE(first.ok()) << first.status().message();
  for (uint32_t slot = 0; slot < kSlots; ++slot) {
    SCOPED_TRACE("slot " + std::to_string(slot));
    auto device = transfer_->DeviceAddress(pool->SlotData(slot), kSlotBytes);
    ASSERT_TRUE(device.ok()) << device.status().message();
    EXPECT_EQ(device.value(), first.value() + uint64_t{slot} * kSlotBytes);
    for (const std::byte* p : {device.value(), device.value() + kSlotBytes - 1}) {
      cudaPointerAttributes attributes{};
      ASSERT_EQ(cudaPointerGetAttributes(&attributes, p), cudaSuccess);
      EXPECT_EQ(attributes.type, cudaMemoryTypeDevice);
      EXPECT_EQ(attributes.device, 0);
    }
  }
  const std::byte* last = pool->SlotData(kSlots - 1);
  EXPECT_EQ(transfer_->DeviceAddress(last + kSlotBytes - 1, 2).status().code(), StatusCode::kInvalidArgument)
      << "a range past the pool's end";
  EXPECT_EQ(transfer_->DeviceAddress(nullptr, 1).status().code(), StatusCode::kInvalidArgument);
  std::vector<std::byte> host(64);
  EXPECT_EQ(transfer_->DeviceAddress(host.data(), host.size()).status().code(), StatusCode::kInvalidArgument);
  // Budget checks are SlabPool's.
  EXPECT_EQ(transfer_->CreateDevicePool(kSlotBytes / 2, kSlotBytes).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(transfer_->CreateDevicePool(kSlotBytes, 1000).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(CudaTransferTest, PoolBeyondDeviceMemoryIsAnError) {
  auto info = ProbeCudaDevice(0);
  ASSERT_TRUE(info.ok());
  constexpr uint64_t kSlot = 1ull << 30;
  const uint64_t budget = (info.value().total_memory_bytes / kSlot + 2) * kSlot;
  auto made = transfer_->CreateDevicePool(budget, kSlot);
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), StatusCode::kInvalidArgument) << made.status().message();
  // Still usable.
  auto pool = transfer_->CreateDevicePool(kSlotBytes, kSlotBytes);
  ASSERT_TRUE(pool.ok()) << pool.status().message();
}

TEST_F(CudaTransferTest, CopiesOnlyIntoDeviceMemory) {
  auto pool = transfer_->CreateDevicePool(2 * kSlotBytes, kSlotBytes);
  ASSERT_TRUE(pool.ok()) << pool.status().message();
  const std::vector<std::byte> source = Pattern(4096, 1);
  std::vector<std::byte> host(4096);
  EXPECT_EQ(transfer_->Copy(host.data(), source.data(), 4096, 1).code(), StatusCode::kInvalidArgument);
  std::byte* end_of_pool = pool.value()->SlotData(1) + kSlotBytes;
  EXPECT_EQ(transfer_->Copy(end_of_pool - 100, source.data(), 4096, 2).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(transfer_->outstanding(), 0u);
  EXPECT_EQ(transfer_->counters().copies, 0u);
  // The last bytes of the pool are fine.
  ASSERT_TRUE(transfer_->Copy(end_of_pool - 4096, source.data(), 4096, 3).ok());
  const std::vector<engine::TransferCompletion> done = Drain();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].tag, 3u);
  std::vector<std::byte> back(4096);
  ASSERT_TRUE(transfer_->ReadBack(end_of_pool - 4096, 4096, back.data()).ok());
  EXPECT_TRUE(back == source);
}

// Device memory that is not a pool slot (e.g. another allocator's) is a valid destination.
TEST_F(CudaTransferTest, CopiesIntoOtherDeviceMemory) {
  void* raw = nullptr;
  ASSERT_EQ(cudaMalloc(&raw, 8192), cudaSuccess);
  std::unique_ptr<void, cudaError_t (*)(void*)> memory(raw, &cudaFree);
  auto* device = static_cast<std::byte*>(raw);
  auto resolved = transfer_->DeviceAddress(device, 8192);
  ASSERT_TRUE(resolved.ok()) << resolved.status().message();
  EXPECT_EQ(resolved.value(), device);
  const std::vector<std::byte> source = Pattern(8192, 2);
  ASSERT_TRUE(transfer_->Copy(device, source.data(), 8192, 42).ok());
  ASSERT_EQ(Drain().size(), 1u);
  std::vector<std::byte> back(8192);
  ASSERT_TRUE(transfer_->ReadBack(device, 8192, back.data()).ok());
  EXPECT_TRUE(back == source);
}

TEST_F(CudaTransferTest, PinnedHostBuffers) {
  EXPECT_EQ(transfer_->AllocatePinnedHost(0).status().code(), StatusCode::kInvalidArgument);
  constexpr uint64_t kBytes = 1 << 20;
  auto made = transfer_->AllocatePinnedHost(kBytes);
  ASSERT_TRUE(made.ok()) << made.status().message();
  PinnedBuffer buffer = std::move(made).value();
  ASSERT_NE(buffer.data(), nullptr);
  EXPECT_EQ(buffer.bytes(), kBytes);
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, buffer.data()), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost);
  const std::vector<std::byte> pattern = Pattern(kBytes, 3);
  std::memcpy(buffer.data(), pattern.data(), kBytes);

  auto pool = transfer_->CreateDevicePool(kBytes, kBytes);
  ASSERT_TRUE(pool.ok()) << pool.status().message();
  std::byte* slot = pool.value()->SlotData(0);
  // Two halves on the two copy streams, from pinned memory (truly asynchronous).
  ASSERT_TRUE(transfer_->Copy(slot, buffer.data(), kBytes / 2, 1).ok());
  ASSERT_TRUE(transfer_->Copy(slot + kBytes / 2, buffer.data() + kBytes / 2, kBytes / 2, 2).ok());
  EXPECT_EQ(Drain().size(), 2u);
  std::vector<std::byte> back(kBytes);
  ASSERT_TRUE(transfer_->ReadBack(slot, kBytes, back.data()).ok());
  EXPECT_TRUE(back == pattern);

  PinnedBuffer moved = std::move(buffer);
  EXPECT_EQ(buffer.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from state is specified
  EXPECT_EQ(buffer.bytes(), 0u);
  EXPECT_NE(moved.data(), nullptr);
}

// The host pools (the engine's L2 and staging slots) are pinned, page-aligned
// memory; copies from them land in device pools, which free their memory
// themselves, even after the transfer is gone.
TEST_F(CudaTransferTest, HostPoolsArePinnedAndPoolsOutliveTheTransfer) {
  constexpr uint32_t kSlots = 3;
  auto host = transfer_->CreateHostPool(kSlots * kSlotBytes, kSlotBytes);
  ASSERT_TRUE(host.ok()) << host.status().message();
  ASSERT_EQ(host.value()->slot_count(), kSlots);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(host.value()->base()) % 4096, 0u);
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, host.value()->SlotData(kSlots - 1)), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost);
  EXPECT_EQ(transfer_->CreateHostPool(0, kSlotBytes).value()->slot_count(), 0u);
  EXPECT_EQ(transfer_->CreateHostPool(kSlotBytes / 2, kSlotBytes).status().code(), StatusCode::kInvalidArgument);

  auto device = transfer_->CreateDevicePool(kSlots * kSlotBytes, kSlotBytes);
  ASSERT_TRUE(device.ok()) << device.status().message();
  const std::vector<std::byte> pattern = Pattern(kSlotBytes, 9);
  std::memcpy(host.value()->SlotData(1), pattern.data(), kSlotBytes);
  ASSERT_TRUE(transfer_->Copy(device.value()->SlotData(2), host.value()->SlotData(1), kSlotBytes, 7).ok());
  EXPECT_EQ(Drain().size(), 1u);
  std::vector<std::byte> back(kSlotBytes);
  ASSERT_TRUE(transfer_->ReadBack(device.value()->SlotData(2), kSlotBytes, back.data()).ok());
  EXPECT_TRUE(back == pattern);

  transfer_.reset();
  device.value().reset();  // frees its device memory without the transfer
  host.value().reset();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// Completion times lie between the clock at Copy() and at the Poll() that hands the copy over.
TEST_F(CudaTransferTest, CompletionTimesAreOnTheClock) {
  auto pool = transfer_->CreateDevicePool(4 * kSlotBytes, kSlotBytes);
  ASSERT_TRUE(pool.ok()) << pool.status().message();
  const std::vector<std::byte> source = Pattern(kSlotBytes, 4);
  const engine::TimeNs before = clock_.Now();
  for (uint32_t slot = 0; slot < 4; ++slot) {
    ASSERT_TRUE(transfer_->Copy(pool.value()->SlotData(slot), source.data(), kSlotBytes, slot).ok());
  }
  const engine::TimeNs after_copies = clock_.Now();
  const std::vector<engine::TransferCompletion> done = Drain();
  const engine::TimeNs after = clock_.Now();
  ASSERT_EQ(done.size(), 4u);
  for (const engine::TransferCompletion& c : done) {
    EXPECT_TRUE(c.status.ok()) << c.status.message();
    EXPECT_GE(c.submit_ns, before);
    EXPECT_LE(c.submit_ns, after_copies);
    EXPECT_GE(c.complete_ns, c.submit_ns);
    EXPECT_LE(c.complete_ns, after);
  }
}

}  // namespace
}  // namespace colibri::cuda
