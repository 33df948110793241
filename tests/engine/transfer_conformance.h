// The TransferBackend contract (transfer.h) as one value-parameterised suite,
// TransferConformanceTest, shared by every implementation: real backends
// (tests/engine/transfer_conformance_test.cc) and modelled ones
// (tests/sim/sim_transfer_conformance_test.cc). A test binary enrolls a
// backend by instantiating the suite over TransferHarnessFactory values; the
// harness makes the backend and supplies the clock it keeps time on. Include
// this header from exactly one source file per test binary (it defines the tests).
//
// The contract checked here:
//  - every accepted Copy() completes exactly once, handed over by Poll() with
//    its tag (any 64-bit value, verbatim), OK status and the requested byte
//    count; outstanding() counts accepted copies not yet handed over;
//  - Poll() appends to `out`; Poll(true) with copies outstanding hands over
//    at least one, and with none returns at once; non-waiting polls alone
//    deliver everything, given time to pass between them;
//  - times are on the backend's clock: submit_ns is the clock during Copy(),
//    submit_ns <= complete_ns <= the clock when Poll() hands the copy over,
//    and complete_ns never decreases from one handed-over copy to the next;
//  - counters: once everything is handed over, copies and copied_bytes count
//    the accepted copies; rejected ones count nothing;
//  - Copy rejects a null source or destination and a copy of 0 bytes with
//    InvalidArgument, queues nothing, and stays usable;
//  - CreateDevicePool carves budget / slot_bytes slots (0 = no tier: no
//    slots), rejects a budget below one slot and a slot size of 0, and
//    copies into its slots are accepted, whatever the caps;
//  - where caps().delivers_data: the destination holds the source's bytes
//    once the copy is handed over, nothing outside [dst, dst + bytes) of the
//    slot changes, and a slot can be copied into again after its copy
//    completed (the engine's reuse); read directly when caps().device_is_host,
//    else through the harness's ReadBack (skipped when it cannot);
//  - the source is never modified;
//  - destroying a backend with copies outstanding neither hangs nor crashes.
// Completion ORDER is not promised (copies on different copy engines finish
// as their sizes allow); backends that promise an order test it in their own
// instantiation file.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "colibri/engine/clock.h"
#include "colibri/engine/slab_pool.h"
#include "colibri/engine/transfer.h"
#include "colibri/status.h"

namespace colibri::engine::conformance {

// A backend under test together with the clock it keeps time on. Owns that
// clock (or event loop), which outlives every backend it makes.
class TransferHarness {
 public:
  virtual ~TransferHarness() = default;
  // A new backend. Unsupported (e.g. no GPU here) skips the suite.
  virtual Result<std::unique_ptr<TransferBackend>> Make() = 0;
  // The clock the backends keep time on.
  virtual const Clock& clock() const = 0;
  // Called between non-waiting polls: lets time pass so copies can finish.
  // Real devices progress by themselves; a modelled link's clock is moved on.
  virtual void LetTimePass() {}
  // For a backend that delivers data to memory the host cannot read
  // (!device_is_host): copies `bytes` of device memory at `device` to `host`.
  // false: this harness cannot, and the data checks are skipped.
  virtual bool ReadBack(const std::byte* device, uint64_t bytes, std::byte* host) {
    (void)device;
    (void)bytes;
    (void)host;
    return false;
  }
};

struct TransferHarnessFactory {
  const char* name;  // the test name suffix
  std::unique_ptr<TransferHarness> (*make)();
};

// Names the harness in gtest's messages (instead of its bytes).
inline void PrintTo(const TransferHarnessFactory& factory, std::ostream* os) { *os << factory.name; }

inline std::string TransferHarnessName(const ::testing::TestParamInfo<TransferHarnessFactory>& info) {
  return info.param.name;
}

namespace transfer_detail {

inline constexpr uint64_t kSlotBytes = 64 << 10;
inline constexpr uint32_t kSlots = 16;
// Waiting polls a drain may take before the suite calls it a hang.
inline constexpr int kMaxPolls = 100'000;

// `bytes` seeded pseudo-random bytes.
inline std::vector<std::byte> PatternBytes(uint64_t bytes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> out(bytes);
  for (uint64_t i = 0; i < bytes; i += 8) {
    const uint64_t word = rng();
    std::memcpy(out.data() + i, &word, std::min<uint64_t>(8, bytes - i));
  }
  return out;
}

}  // namespace transfer_detail

class TransferConformanceTest : public ::testing::TestWithParam<TransferHarnessFactory> {
 protected:
  // What the suite knows of an accepted copy.
  struct Submitted {
    const std::byte* dst = nullptr;
    const std::byte* src = nullptr;
    uint64_t bytes = 0;
    TimeNs before_ns = 0;  // the clock just before and after Copy()
    TimeNs after_ns = 0;
    int completions = 0;
  };

  void SetUp() override {
    harness_ = GetParam().make();
    auto made = harness_->Make();
    if (!made.ok() && made.status().code() == StatusCode::kUnsupported) GTEST_SKIP() << made.status().message();
    ASSERT_TRUE(made.ok()) << made.status().message();
    transfer_ = std::move(made).value();
    ASSERT_NE(transfer_, nullptr);
    auto pool = transfer_->CreateDevicePool(transfer_detail::kSlots * transfer_detail::kSlotBytes,
                                            transfer_detail::kSlotBytes);
    ASSERT_TRUE(pool.ok()) << pool.status().message();
    pool_ = std::move(pool).value();
    ASSERT_EQ(pool_->slot_count(), transfer_detail::kSlots);
    last_ns_ = Now();
  }

  const TransferCaps& caps() const { return transfer_->caps(); }
  std::byte* Slot(uint32_t slot) const { return pool_->SlotData(slot); }

  // The backend's clock, checked never to go back.
  TimeNs Now() {
    const TimeNs now = harness_->clock().Now();
    EXPECT_GE(now, last_ns_) << "the clock went back";
    last_ns_ = now;
    return now;
  }

  // Whether this run can see what lands in device memory.
  bool CanReadDevice() {
    if (!caps().delivers_data) return false;
    if (caps().device_is_host) return true;
    std::byte probe{};
    return harness_->ReadBack(Slot(0), 1, &probe);
  }

  std::vector<std::byte> ReadDevice(const std::byte* device, uint64_t bytes) {
    std::vector<std::byte> host(bytes);
    if (caps().device_is_host) {
      std::memcpy(host.data(), device, bytes);
    } else {
      EXPECT_TRUE(harness_->ReadBack(device, bytes, host.data()));
    }
    return host;
  }

  // Copy() that records the copy when accepted.
  Status Copy(std::byte* dst, const std::byte* src, uint64_t bytes, uint64_t tag) {
    const TimeNs before = Now();
    const Status status = transfer_->Copy(dst, src, bytes, tag);
    const TimeNs after = Now();
    if (status.ok()) {
      EXPECT_EQ(submitted_.count(tag), 0u) << "the suite reuses tag " << tag;
      submitted_[tag] = Submitted{dst, src, bytes, before, after, 0};
      ++accepted_;
      accepted_bytes_ += bytes;
    }
    return status;
  }

  // Poll() that checks what it hands over; returns the completions of this call.
  std::vector<TransferCompletion> Poll(bool wait) {
    const size_t outstanding = transfer_->outstanding();
    std::vector<TransferCompletion> out;
    const Status status = transfer_->Poll(wait, &out);
    EXPECT_TRUE(status.ok()) << status.message();
    const TimeNs now = Now();
    EXPECT_LE(out.size(), outstanding);
    if (wait && outstanding > 0) {
      EXPECT_FALSE(out.empty()) << "a waiting poll with copies outstanding handed none over";
    }
    EXPECT_EQ(transfer_->outstanding(), outstanding - std::min(out.size(), outstanding));
    for (const TransferCompletion& c : out) Check(c, now);
    return out;
  }

  // Polls (waiting) until nothing is outstanding; returns what was handed over.
  std::vector<TransferCompletion> Drain() {
    std::vector<TransferCompletion> all;
    for (int polls = 0; transfer_->outstanding() > 0; ++polls) {
      if (polls == transfer_detail::kMaxPolls) {
        ADD_FAILURE() << "copies still outstanding after " << polls << " waiting polls";
        break;
      }
      const std::vector<TransferCompletion> done = Poll(true);
      if (done.empty()) break;  // reported by Poll
      all.insert(all.end(), done.begin(), done.end());
    }
    return all;
  }

  // One handed-over completion, against what was submitted.
  void Check(const TransferCompletion& c, TimeNs polled_ns) {
    const auto it = submitted_.find(c.tag);
    ASSERT_NE(it, submitted_.end()) << "completion of unknown tag " << c.tag;
    Submitted& s = it->second;
    EXPECT_EQ(++s.completions, 1) << "tag " << c.tag << " completed more than once";
    EXPECT_TRUE(c.status.ok()) << "tag " << c.tag << ": " << c.status.message();
    EXPECT_EQ(c.bytes, s.bytes) << "tag " << c.tag;
    EXPECT_GE(c.submit_ns, s.before_ns) << "tag " << c.tag << ": submitted before Copy() was called";
    EXPECT_LE(c.submit_ns, s.after_ns) << "tag " << c.tag << ": submitted after Copy() returned";
    EXPECT_LE(c.submit_ns, c.complete_ns) << "tag " << c.tag;
    EXPECT_LE(c.complete_ns, polled_ns) << "tag " << c.tag << ": handed over before it completed";
    EXPECT_GE(c.complete_ns, last_complete_ns_) << "tag " << c.tag << ": completion time went back";
    last_complete_ns_ = std::max(last_complete_ns_, c.complete_ns);
  }

  // Every accepted copy was handed over exactly once, and the counters say so.
  void ExpectAllCompleted() {
    EXPECT_EQ(transfer_->outstanding(), 0u);
    for (const auto& entry : submitted_) EXPECT_EQ(entry.second.completions, 1) << "tag " << entry.first;
    EXPECT_EQ(transfer_->counters().copies, accepted_);
    EXPECT_EQ(transfer_->counters().copied_bytes, accepted_bytes_);
  }

  // Destroyed in reverse: the backend (with any copies still in flight) before its pool.
  std::unique_ptr<TransferHarness> harness_;
  std::unique_ptr<SlabPool> pool_;
  std::unique_ptr<TransferBackend> transfer_;
  std::map<uint64_t, Submitted> submitted_;
  uint64_t accepted_ = 0;
  uint64_t accepted_bytes_ = 0;
  TimeNs last_ns_ = 0;
  TimeNs last_complete_ns_ = 0;
};

TEST_P(TransferConformanceTest, CapsAndDevicePools) {
  EXPECT_NE(caps().name, nullptr);
  EXPECT_GT(std::strlen(caps().name), 0u);
  constexpr uint64_t kSlot = transfer_detail::kSlotBytes;
  auto pool = transfer_->CreateDevicePool(5 * kSlot + kSlot / 2, kSlot);  // the rest of a slot is unused
  ASSERT_TRUE(pool.ok()) << pool.status().message();
  EXPECT_EQ(pool.value()->slot_count(), 5u);
  EXPECT_EQ(pool.value()->slot_bytes(), kSlot);
  for (uint32_t slot = 1; slot < 5; ++slot) {
    EXPECT_EQ(pool.value()->SlotData(slot) - pool.value()->SlotData(slot - 1), static_cast<ptrdiff_t>(kSlot));
  }
  auto none = transfer_->CreateDevicePool(0, kSlot);
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(none.value()->slot_count(), 0u);
  EXPECT_EQ(transfer_->CreateDevicePool(kSlot - 4096, kSlot).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(transfer_->CreateDevicePool(kSlot, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(transfer_->outstanding(), 0u);
  EXPECT_EQ(transfer_->counters().copies, 0u);
  EXPECT_EQ(transfer_->counters().copied_bytes, 0u);
}

// Copies of many sizes into every slot, with tags spread over 64 bits: each
// completes exactly once, with its bytes where the backend delivers data;
// the rest of each slot and every source stay as they were.
TEST_P(TransferConformanceTest, EveryCopyCompletesOnceWithItsTagAndBytes) {
  constexpr uint64_t kSlot = transfer_detail::kSlotBytes;
  const bool readable = CanReadDevice();
  // First fill every slot, so the suite knows what a partial copy must leave alone.
  std::vector<std::vector<std::byte>> background;
  for (uint32_t slot = 0; slot < transfer_detail::kSlots; ++slot) {
    background.push_back(transfer_detail::PatternBytes(kSlot, 1000 + slot));
    ASSERT_TRUE(Copy(Slot(slot), background[slot].data(), kSlot, slot).ok());
  }
  Drain();
  if (readable) {
    for (uint32_t slot = 0; slot < transfer_detail::kSlots; ++slot) {
      EXPECT_TRUE(ReadDevice(Slot(slot), kSlot) == background[slot]) << "slot " << slot;
    }
  }
  const uint64_t sizes[] = {1, 7, 4095, 4096, 4097, 12345, kSlot - 1, kSlot, 3, 65, 1000, 8192, 2, 511, 40000, 16};
  static_assert(std::size(sizes) == transfer_detail::kSlots);
  std::vector<std::vector<std::byte>> sources;
  std::vector<uint64_t> tags;
  for (uint32_t slot = 0; slot < transfer_detail::kSlots; ++slot) {
    sources.push_back(transfer_detail::PatternBytes(sizes[slot], 2000 + slot));
    tags.push_back(slot % 2 == 0 ? ~uint64_t{0} - slot : (uint64_t{slot} << 40) + 17);
    ASSERT_TRUE(Copy(Slot(slot), sources[slot].data(), sizes[slot], tags[slot]).ok());
  }
  EXPECT_EQ(transfer_->outstanding(), transfer_detail::kSlots);
  const std::vector<TransferCompletion> done = Drain();
  EXPECT_EQ(done.size(), transfer_detail::kSlots);
  ExpectAllCompleted();
  for (uint32_t slot = 0; slot < transfer_detail::kSlots; ++slot) {
    SCOPED_TRACE("slot " + std::to_string(slot) + ", " + std::to_string(sizes[slot]) + " bytes");
    EXPECT_TRUE(sources[slot] == transfer_detail::PatternBytes(sizes[slot], 2000 + slot)) << "source modified";
    if (!readable) continue;
    const std::vector<std::byte> device = ReadDevice(Slot(slot), kSlot);
    EXPECT_EQ(std::memcmp(device.data(), sources[slot].data(), sizes[slot]), 0) << "wrong bytes delivered";
    EXPECT_EQ(std::memcmp(device.data() + sizes[slot], background[slot].data() + sizes[slot], kSlot - sizes[slot]), 0)
        << "bytes past the copy changed";
  }
  if (!readable) {
    RecordProperty("data_checked", caps().delivers_data ? "no (harness cannot read device memory)"
                                                        : "no (caps: delivers_data = false)");
  }
}

// Copies and polls interleaved, waiting and not: times stay on one monotone
// clock and every copy still completes once.
TEST_P(TransferConformanceTest, InterleavedCopiesAndPollsKeepTimeMonotone) {
  std::mt19937_64 rng(5);
  const std::vector<std::byte> source = transfer_detail::PatternBytes(transfer_detail::kSlotBytes, 3);
  uint64_t tag = 0;
  size_t handed_over = 0;
  for (int round = 0; round < 20; ++round) {
    const uint64_t copies = 1 + rng() % 4;
    for (uint64_t i = 0; i < copies; ++i) {
      const uint64_t bytes = 1 + rng() % transfer_detail::kSlotBytes;
      // Different tags, any slots: the destination is not read in this test.
      ASSERT_TRUE(Copy(Slot(static_cast<uint32_t>(tag % transfer_detail::kSlots)), source.data(), bytes, tag).ok());
      ++tag;
    }
    handed_over += Poll(round % 3 == 0).size();
    if (round % 2 == 0) harness_->LetTimePass();
  }
  handed_over += Drain().size();
  EXPECT_EQ(handed_over, tag);
  ExpectAllCompleted();
}

TEST_P(TransferConformanceTest, PollsAppendAndReturnAtOnceWhenIdle) {
  std::vector<TransferCompletion> out(1);
  out[0].tag = 12345;
  ASSERT_TRUE(transfer_->Poll(true, &out).ok());  // nothing outstanding: returns at once
  ASSERT_TRUE(transfer_->Poll(false, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  const std::vector<std::byte> source = transfer_detail::PatternBytes(4096, 9);
  ASSERT_TRUE(Copy(Slot(0), source.data(), 4096, 7).ok());
  for (int polls = 0; transfer_->outstanding() > 0 && polls < transfer_detail::kMaxPolls; ++polls) {
    ASSERT_TRUE(transfer_->Poll(true, &out).ok());
  }
  ASSERT_EQ(out.size(), 2u) << "Poll must append to its output";
  EXPECT_EQ(out[0].tag, 12345u);
  EXPECT_EQ(out[1].tag, 7u);
  Check(out[1], Now());
  ExpectAllCompleted();
}

// No copy needs a waiting poll to make progress.
TEST_P(TransferConformanceTest, NonWaitingPollsDeliverEverything) {
  const std::vector<std::byte> source = transfer_detail::PatternBytes(transfer_detail::kSlotBytes, 4);
  for (uint32_t slot = 0; slot < 10; ++slot) {
    ASSERT_TRUE(Copy(Slot(slot), source.data(), transfer_detail::kSlotBytes - slot, slot).ok());
  }
  size_t handed_over = 0;
  for (int polls = 0; transfer_->outstanding() > 0; ++polls) {
    ASSERT_LT(polls, transfer_detail::kMaxPolls) << "non-waiting polls never delivered everything";
    handed_over += Poll(false).size();
    harness_->LetTimePass();
  }
  EXPECT_EQ(handed_over, 10u);
  ExpectAllCompleted();
}

// The engine's streaming pattern: a few copies in flight, each slot copied
// into again as soon as its copy is handed over (in whatever order); each
// time the slot holds the latest copy's bytes.
TEST_P(TransferConformanceTest, SlotsAreReusedAfterTheirCopyCompletes) {
  constexpr uint32_t kInFlight = 4;
  constexpr uint64_t kTotal = 40;
  constexpr uint64_t kBytes = transfer_detail::kSlotBytes;
  const bool readable = CanReadDevice();
  std::vector<std::vector<std::byte>> sources;
  for (uint64_t i = 0; i < kTotal; ++i) sources.push_back(transfer_detail::PatternBytes(kBytes, 500 + i));
  std::map<uint64_t, uint32_t> slot_of;  // by tag
  uint64_t next = 0;
  for (; next < kInFlight; ++next) {
    slot_of[next] = static_cast<uint32_t>(next);
    ASSERT_TRUE(Copy(Slot(slot_of[next]), sources[next].data(), kBytes, next).ok());
  }
  uint64_t completed = 0;
  for (int polls = 0; transfer_->outstanding() > 0; ++polls) {
    ASSERT_LT(polls, transfer_detail::kMaxPolls);
    for (const TransferCompletion& c : Poll(true)) {
      ++completed;
      ASSERT_LT(c.tag, kTotal);
      const uint32_t slot = slot_of[c.tag];
      if (readable) {
        EXPECT_TRUE(ReadDevice(Slot(slot), kBytes) == sources[c.tag]) << "copy " << c.tag << " in slot " << slot;
      }
      if (next < kTotal) {
        slot_of[next] = slot;
        ASSERT_TRUE(Copy(Slot(slot), sources[next].data(), kBytes, next).ok());
        ++next;
      }
    }
  }
  EXPECT_EQ(completed, kTotal);
  ExpectAllCompleted();
}

TEST_P(TransferConformanceTest, RejectsBadCopiesAndStaysUsable) {
  const std::vector<std::byte> source = transfer_detail::PatternBytes(4096, 6);
  const struct {
    std::byte* dst;
    const std::byte* src;
    uint64_t bytes;
    const char* what;
  } cases[] = {
      {nullptr, source.data(), 4096, "null destination"},
      {Slot(0), nullptr, 4096, "null source"},
      {Slot(0), source.data(), 0, "0 bytes"},
      {nullptr, nullptr, 0, "nothing at all"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(transfer_->Copy(c.dst, c.src, c.bytes, 99).code(), StatusCode::kInvalidArgument) << c.what;
  }
  EXPECT_EQ(transfer_->outstanding(), 0u);
  EXPECT_EQ(transfer_->counters().copies, 0u);
  EXPECT_EQ(transfer_->counters().copied_bytes, 0u);
  std::vector<TransferCompletion> out;
  ASSERT_TRUE(transfer_->Poll(true, &out).ok());
  EXPECT_TRUE(out.empty()) << "a rejected copy completed";
  ASSERT_TRUE(Copy(Slot(0), source.data(), 4096, 1).ok());
  EXPECT_EQ(Drain().size(), 1u);
  ExpectAllCompleted();
  if (CanReadDevice()) {
    EXPECT_TRUE(ReadDevice(Slot(0), 4096) == source);
  }
}

// Destroying a backend with copies outstanding neither hangs nor crashes.
TEST_P(TransferConformanceTest, DestroyWithCopiesOutstanding) {
  const std::vector<std::byte> source = transfer_detail::PatternBytes(transfer_detail::kSlotBytes, 8);
  for (uint32_t slot = 0; slot < transfer_detail::kSlots; ++slot) {
    ASSERT_TRUE(Copy(Slot(slot), source.data(), transfer_detail::kSlotBytes, slot).ok());
  }
  transfer_.reset();
  SUCCEED();
}

}  // namespace colibri::engine::conformance
