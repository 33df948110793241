// SimTransfer's model by hand-computed figures (see sim_transfer.h).
#include "colibri/sim/sim_transfer.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "colibri/sim/sim_event_loop.h"

namespace colibri::sim {
namespace {

using engine::TimeNs;
using engine::TransferCompletion;

constexpr uint64_t kMiB = 1 << 20;

// PCIe-ish: 25 GB/s pinned, 10 GB/s pageable, 2 us per copy, two copy engines.
PcieProfile Link() {
  PcieProfile p;
  p.id = "test-link";
  p.generation = 5;
  p.lanes = 16;
  p.pinned_bytes_per_s = 25'000'000'000;
  p.pageable_bytes_per_s = 10'000'000'000;
  p.per_copy_ns = 2'000;
  p.copy_engines = 2;
  return p;
}

class SimTransferTest : public ::testing::Test {
 protected:
  std::unique_ptr<SimTransfer> Make(const PcieProfile& profile, bool pinned = true) {
    SimTransferOptions options;
    options.loop = &loop_;
    options.pinned = pinned;
    options.event_log = &log_;
    auto transfer = MakeSimTransfer(profile, options);
    EXPECT_TRUE(transfer.ok()) << transfer.status().message();
    return transfer.ok() ? std::move(transfer).value() : nullptr;
  }

  Status Copy(SimTransfer* transfer, uint64_t bytes, uint64_t tag) { return transfer->Copy(dst_, src_, bytes, tag); }

  SimEventLoop loop_;
  EventLog log_;
  // Never touched by the model; any non-null addresses do.
  std::byte memory_[2] = {};
  std::byte* dst_ = &memory_[0];
  const std::byte* src_ = &memory_[1];
};

// 1 MiB pinned: 2'000 + ceil(1'048'576 / 25 GB/s = 41'943.04 ns) = 43'944 ns.
// Three copies at t=0 on two engines: two end at 43'944, the third at 87'888.
TEST_F(SimTransferTest, CopiesByHandOnTwoEngines) {
  auto transfer = Make(Link());
  ASSERT_NE(transfer, nullptr);
  EXPECT_EQ(transfer->CopyNs(kMiB), 43'944);
  for (uint64_t tag = 0; tag < 3; ++tag) ASSERT_TRUE(Copy(transfer.get(), kMiB, tag).ok());
  EXPECT_EQ(transfer->outstanding(), 3u);
  std::vector<TransferCompletion> done;
  ASSERT_TRUE(transfer->Poll(false, &done).ok());  // nothing due at t=0
  EXPECT_TRUE(done.empty());
  ASSERT_TRUE(transfer->Poll(true, &done).ok());
  EXPECT_EQ(loop_.Now(), 43'944);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].tag, 0u);
  EXPECT_EQ(done[1].tag, 1u);
  for (const TransferCompletion& c : done) {
    EXPECT_TRUE(c.status.ok());
    EXPECT_EQ(c.bytes, kMiB);
    EXPECT_EQ(c.submit_ns, 0);
    EXPECT_EQ(c.complete_ns, 43'944);
  }
  ASSERT_TRUE(transfer->Poll(true, &done).ok());
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[2].tag, 2u);
  EXPECT_EQ(done[2].complete_ns, 87'888);
  EXPECT_EQ(loop_.Now(), 87'888);
  EXPECT_EQ(transfer->outstanding(), 0u);
  EXPECT_EQ(transfer->counters().copies, 3u);
  EXPECT_EQ(transfer->counters().copied_bytes, 3 * kMiB);
  EXPECT_EQ(log_.events(), 3u);
  ASSERT_TRUE(transfer->Poll(true, &done).ok());  // nothing outstanding: returns at once
  EXPECT_EQ(done.size(), 3u);
  EXPECT_EQ(loop_.Now(), 87'888);
}

// Pageable: 2'000 + ceil(1'048'576 / 10 GB/s = 104'857.6 ns) = 106'858 ns.
TEST_F(SimTransferTest, PageableMemoryIsSlower) {
  auto transfer = Make(Link(), /*pinned=*/false);
  ASSERT_NE(transfer, nullptr);
  EXPECT_EQ(transfer->CopyNs(kMiB), 106'858);
}

// A copy issued after its engine went idle starts when issued.
TEST_F(SimTransferTest, IdleEngineStartsAtNow) {
  auto transfer = Make(Link());
  ASSERT_NE(transfer, nullptr);
  loop_.WaitUntil(1'000'000);
  ASSERT_TRUE(Copy(transfer.get(), kMiB, 7).ok());
  std::vector<TransferCompletion> done;
  ASSERT_TRUE(transfer->Poll(true, &done).ok());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].submit_ns, 1'000'000);
  EXPECT_EQ(done[0].complete_ns, 1'043'944);
}

// Generation 0 is "no link" (CPU compute): copies cost nothing.
TEST_F(SimTransferTest, NoLinkCopiesAreFree) {
  PcieProfile none;
  none.id = "none";
  auto transfer = Make(none);
  ASSERT_NE(transfer, nullptr);
  EXPECT_TRUE(transfer->caps().device_is_host);
  ASSERT_TRUE(Copy(transfer.get(), kMiB, 1).ok());
  std::vector<TransferCompletion> done;
  ASSERT_TRUE(transfer->Poll(false, &done).ok());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].complete_ns, 0);
  EXPECT_EQ(loop_.Now(), 0);
}

// A measured host memcpy (calibrate's): no link, but copies into the L1 host
// pool cost per_copy_ns + bytes at the one rate, pinned or not.
TEST_F(SimTransferTest, NoLinkWithAMeasuredHostCopyRate) {
  PcieProfile host;
  host.id = "host-copy";
  host.pinned_bytes_per_s = 10'000'000'000;
  host.pageable_bytes_per_s = 10'000'000'000;
  host.per_copy_ns = 1'000;
  for (bool pinned : {true, false}) {
    auto transfer = Make(host, pinned);
    ASSERT_NE(transfer, nullptr);
    EXPECT_TRUE(transfer->caps().device_is_host);
    EXPECT_EQ(transfer->CopyNs(kMiB), 1'000 + 104'858);  // ceil(1,048,576 / 10 GB/s)
  }
}

TEST_F(SimTransferTest, CapsAndReservedDevicePool) {
  auto transfer = Make(Link());
  ASSERT_NE(transfer, nullptr);
  EXPECT_STREQ(transfer->caps().name, "sim");
  EXPECT_FALSE(transfer->caps().delivers_data);
  EXPECT_FALSE(transfer->caps().device_is_host);
  auto pool = transfer->CreateDevicePool(64ull << 30, kMiB);  // 64 GiB of address space, no memory
  ASSERT_TRUE(pool.ok()) << pool.status().message();
  EXPECT_EQ(pool.value()->slot_count(), 65'536u);
  auto empty = transfer->CreateDevicePool(0, kMiB);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty.value()->slot_count(), 0u);
}

TEST_F(SimTransferTest, RejectsBadCopies) {
  auto transfer = Make(Link());
  ASSERT_NE(transfer, nullptr);
  EXPECT_EQ(transfer->Copy(nullptr, src_, kMiB, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(transfer->Copy(dst_, nullptr, kMiB, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(transfer->Copy(dst_, src_, 0, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(transfer->outstanding(), 0u);
}

TEST(SimTransferFactoryTest, RejectsWhatItCannotModel) {
  SimEventLoop loop;
  SimTransferOptions options;
  options.loop = &loop;
  auto expect_error = [](const PcieProfile& profile, const SimTransferOptions& o, const char* text) {
    auto result = MakeSimTransfer(profile, o);
    ASSERT_FALSE(result.ok()) << text;
    EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(result.status().message().find(text), std::string::npos) << result.status().message();
  };
  SimTransferOptions no_loop;
  expect_error(Link(), no_loop, "loop is required");
  PcieProfile bad = Link();
  bad.pinned_bytes_per_s = 0;
  expect_error(bad, options, "pcie profile 'test-link': pinned_bytes_per_s must be > 0");
  bad = Link();
  bad.copy_engines = 0;
  expect_error(bad, options, "copy_engines must be >= 1");
  bad = Link();
  bad.pageable_bytes_per_s = 0;
  SimTransferOptions pageable = options;
  pageable.pinned = false;
  expect_error(bad, pageable, "pageable_bytes_per_s must be > 0");
  EXPECT_TRUE(MakeSimTransfer(bad, options).ok());  // pinned copies never use the pageable rate
}

}  // namespace
}  // namespace colibri::sim
