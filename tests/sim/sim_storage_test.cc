// SimStorage's model, by hand-computed figures (see sim_storage.h for the
// recipe). The StorageBackend contract itself is checked by
// sim_storage_conformance_test.cc.
#include "colibri/sim/sim_storage.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "colibri/sim/event_log.h"
#include "colibri/sim/sim_event_loop.h"

namespace colibri::sim {
namespace {

using engine::ReadCompletion;
using engine::StorageBackend;
using engine::TimeNs;

constexpr uint64_t kPage = 4096;
constexpr uint64_t kFileBytes = 1ull << 40;  // a modelled 1 TiB experts file

NvmeProfile Drive(uint32_t channels, uint32_t queue_depth, TimeNs per_op_ns, uint64_t channel_bytes_per_s,
                  uint64_t device_bytes_per_s, LatencyDistribution latency) {
  NvmeProfile p;
  p.id = "test-drive";
  p.channels = channels;
  p.queue_depth = queue_depth;
  p.per_op_ns = per_op_ns;
  p.channel_read_bytes_per_s = channel_bytes_per_s;
  p.read_bytes_per_s = device_bytes_per_s;
  p.read_latency = latency;
  return p;
}

// A page-aligned buffer the model never touches (it keeps time only).
struct PageBuffer {
  PageBuffer() : data(static_cast<char*>(std::aligned_alloc(kPage, kPage))) { std::memset(data, 0xAB, kPage); }
  ~PageBuffer() { std::free(data); }
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;
  char* data;
};

class SimStorageTest : public ::testing::Test {
 protected:
  std::unique_ptr<StorageBackend> Make(const NvmeProfile& profile, uint32_t queue_depth = 0, uint64_t seed = 1) {
    SimStorageOptions options;
    options.loop = &loop_;
    options.queue_depth = queue_depth;
    options.seed = seed;
    options.file_bytes = kFileBytes;
    options.event_log = &log_;
    auto storage = MakeSimStorage(profile, options);
    EXPECT_TRUE(storage.ok()) << storage.status().message();
    return storage.ok() ? std::move(storage).value() : nullptr;
  }

  // Submits reads of `bytes` each (tags 0..), at the loop's current time.
  void Submit(StorageBackend* storage, const std::vector<uint64_t>& bytes) {
    for (uint64_t i = 0; i < bytes.size(); ++i) {
      const uint64_t offset = next_tag_ % 1000 * (1 << 20);
      const Status s = storage->Submit({offset, bytes[i], buffer_.data, next_tag_++});
      ASSERT_TRUE(s.ok()) << s.message();
    }
  }

  // Waits for everything; returns completion instants indexed by tag.
  std::vector<TimeNs> DrainTimes(StorageBackend* storage) {
    std::vector<ReadCompletion> done;
    while (storage->outstanding() > 0) {
      const Status s = storage->Poll(true, &done);
      EXPECT_TRUE(s.ok()) << s.message();
      if (!s.ok()) break;
    }
    std::vector<TimeNs> at(done.size(), -1);
    for (const ReadCompletion& c : done) {
      EXPECT_TRUE(c.status.ok()) << c.status.message();
      if (c.tag < at.size()) at[c.tag] = c.complete_ns;
    }
    return at;
  }

  SimEventLoop loop_;
  EventLog log_;
  PageBuffer buffer_;
  uint64_t next_tag_ = 0;
};

// One channel, queue depth 1, no jitter: every figure by hand.
//  read 0 (4096 B at t=0): channel 0..10'000+4'096 = 14'096; link 0..2'048;
//    done 14'096 + latency 5'000 = 19'096.
//  read 1 (8192 B, waits): issued at 19'096; channel 19'096..19'096+10'000+8'192
//    = 37'288; link 19'096..23'192; done 37'288 + 5'000 = 42'288.
TEST_F(SimStorageTest, OneChannelQueueDepthOneByHand) {
  auto storage = Make(Drive(1, 1, 10'000, 1'000'000'000, 2'000'000'000, {5'000, 5'000}));
  ASSERT_NE(storage, nullptr);
  Submit(storage.get(), {4096, 8192});
  EXPECT_EQ(storage->counters().queue_full_events, 1u);
  std::vector<ReadCompletion> done;
  ASSERT_TRUE(storage->Poll(false, &done).ok());  // time has not moved: nothing yet
  EXPECT_TRUE(done.empty());
  ASSERT_TRUE(storage->Poll(true, &done).ok());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].tag, 0u);
  EXPECT_EQ(done[0].submit_ns, 0);
  EXPECT_EQ(done[0].complete_ns, 19'096);
  EXPECT_EQ(loop_.Now(), 19'096);
  ASSERT_TRUE(storage->Poll(true, &done).ok());
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[1].tag, 1u);
  EXPECT_EQ(done[1].submit_ns, 0);
  EXPECT_EQ(done[1].complete_ns, 42'288);
  EXPECT_EQ(storage->counters().reads, 2u);
  EXPECT_EQ(storage->counters().read_bytes, 4096u + 8192u);
  EXPECT_EQ(log_.events(), 2u);
}

// The loop's clock moved on (a modelled kernel) past the first completion: the
// waiting read is still issued at that completion's modelled time.
TEST_F(SimStorageTest, WaitingReadsIssueAtTheCompletionsModelledTime) {
  auto storage = Make(Drive(1, 1, 10'000, 1'000'000'000, 2'000'000'000, {5'000, 5'000}));
  ASSERT_NE(storage, nullptr);
  Submit(storage.get(), {4096, 8192});
  loop_.WaitUntil(1'000'000);
  EXPECT_EQ(DrainTimes(storage.get()), (std::vector<TimeNs>{19'096, 42'288}));
}

// A read submitted later than the device became free starts at its submission.
TEST_F(SimStorageTest, ReadsStartNoEarlierThanSubmitted) {
  auto storage = Make(Drive(1, 1, 10'000, 1'000'000'000, 2'000'000'000, {5'000, 5'000}));
  ASSERT_NE(storage, nullptr);
  loop_.WaitUntil(100'000);
  Submit(storage.get(), {4096});
  EXPECT_EQ(DrainTimes(storage.get()), (std::vector<TimeNs>{100'000 + 19'096}));
}

// Four channels, a link twice as fast as one channel: the link serialises the
// transfers. 409'600 B: channel 409'600 ns, link 204'800 ns each.
//  links: 0..204'800, ..409'600, ..614'400, ..819'200; done = max(channel, link).
TEST_F(SimStorageTest, SharedLinkSerialisesTransfers) {
  auto storage = Make(Drive(4, 4, 0, 1'000'000'000, 2'000'000'000, {0, 0}));
  ASSERT_NE(storage, nullptr);
  Submit(storage.get(), {409'600, 409'600, 409'600, 409'600});
  EXPECT_EQ(DrainTimes(storage.get()), (std::vector<TimeNs>{409'600, 409'600, 614'400, 819'200}));
}

// Durations round up to whole ns: 4096 B at 3 GB/s is 1365.33 ns -> 1366.
TEST_F(SimStorageTest, DurationsRoundUp) {
  auto storage = Make(Drive(1, 1, 0, 3'000'000'000, 3'000'000'000, {0, 0}));
  ASSERT_NE(storage, nullptr);
  Submit(storage.get(), {4096});
  EXPECT_EQ(DrainTimes(storage.get()), (std::vector<TimeNs>{1'366}));
}

// Queue depth 2 on four channels: reads 2 and 3 wait for the first two
// completions (5'096 = 1'000 + 4'096; the link, 5 ns per read, never binds).
TEST_F(SimStorageTest, QueueDepthBoundsReadsInFlight) {
  auto storage = Make(Drive(4, 8, 1'000, 1'000'000'000, 1'000'000'000'000, {0, 0}), /*queue_depth=*/2);
  ASSERT_NE(storage, nullptr);
  EXPECT_EQ(storage->caps().queue_depth, 2u);
  Submit(storage.get(), {4096, 4096, 4096, 4096, 4096});
  EXPECT_EQ(storage->counters().queue_full_events, 3u);
  EXPECT_EQ(storage->outstanding(), 5u);
  EXPECT_EQ(DrainTimes(storage.get()), (std::vector<TimeNs>{5'096, 5'096, 10'192, 10'192, 15'288}));
  EXPECT_EQ(storage->counters().reads, 5u);
  EXPECT_EQ(storage->outstanding(), 0u);
}

TEST_F(SimStorageTest, QueueDepthDefaultsToAndIsCappedAtTheProfiles) {
  const NvmeProfile drive = Drive(4, 8, 1'000, 1'000'000'000, 2'000'000'000, {0, 0});
  EXPECT_EQ(Make(drive, 0)->caps().queue_depth, 8u);
  EXPECT_EQ(Make(drive, 100)->caps().queue_depth, 8u);
  EXPECT_EQ(Make(drive, 3)->caps().queue_depth, 3u);
}

// Under a saturating load on many channels the link bounds the throughput:
// by every completion the bytes delivered fit in the link's time, and the
// whole run gets close to the device's rate.
TEST_F(SimStorageTest, ThroughputNeverExceedsTheDeviceBandwidth) {
  constexpr uint64_t kRate = 3'200'000'000;
  constexpr uint64_t kBytes = 128 << 10;
  auto storage = Make(Drive(16, 64, 20'000, 800'000'000, kRate, {30'000, 90'000}));
  ASSERT_NE(storage, nullptr);
  Submit(storage.get(), std::vector<uint64_t>(2000, kBytes));
  std::vector<TimeNs> times = DrainTimes(storage.get());
  ASSERT_EQ(times.size(), 2000u);
  std::sort(times.begin(), times.end());
  for (size_t k = 0; k < times.size(); ++k) {
    const unsigned __int128 delivered = static_cast<unsigned __int128>((k + 1) * kBytes) * 1'000'000'000u;
    ASSERT_LE(delivered, static_cast<unsigned __int128>(kRate) * static_cast<uint64_t>(times[k])) << "completion " << k;
  }
  const double achieved = 2000.0 * kBytes * 1e9 / static_cast<double>(times.back());
  EXPECT_GT(achieved, 0.95 * kRate);
}

// With a fast link, the channels bound the throughput: two channels of 1 GB/s.
TEST_F(SimStorageTest, ThroughputNeverExceedsTheChannels) {
  auto storage = Make(Drive(2, 32, 0, 1'000'000'000, 100'000'000'000, {0, 0}));
  ASSERT_NE(storage, nullptr);
  Submit(storage.get(), std::vector<uint64_t>(100, 1 << 20));
  std::vector<TimeNs> times = DrainTimes(storage.get());
  const TimeNs last = *std::max_element(times.begin(), times.end());
  EXPECT_GE(last, 50 * 1'048'576);  // 100 MiB over 2 x 1 GB/s
}

// Completion instants of 300 reads of a jittery drive seeded with `seed`, and the log's digest.
std::pair<std::vector<TimeNs>, std::string> JitteryRun(uint64_t seed) {
  SimEventLoop loop;
  EventLog log;
  SimStorageOptions options;
  options.loop = &loop;
  options.seed = seed;
  options.file_bytes = kFileBytes;
  options.event_log = &log;
  auto storage = MakeSimStorage(Drive(8, 32, 5'000, 1'000'000'000, 4'000'000'000, {40'000, 400'000}), options);
  EXPECT_TRUE(storage.ok());
  if (!storage.ok()) return {};
  PageBuffer buffer;
  std::vector<ReadCompletion> done;
  for (uint64_t i = 0; i < 300; ++i) {
    EXPECT_TRUE(storage.value()->Submit({i * kPage, 64 * kPage, buffer.data, i}).ok());
    if (i % 7 == 6) {
      EXPECT_TRUE(storage.value()->Poll(true, &done).ok());  // interleave, as the engine does
    }
  }
  while (storage.value()->outstanding() > 0) EXPECT_TRUE(storage.value()->Poll(true, &done).ok());
  std::vector<TimeNs> at(300, -1);
  for (const ReadCompletion& c : done) at[c.tag] = c.complete_ns;
  EXPECT_EQ(log.events(), 300u);
  return {at, log.digest_hex()};
}

TEST(SimStorageDeterminismTest, SameSeedSameTimesDifferentSeedDifferentTimes) {
  const auto a = JitteryRun(1);
  const auto b = JitteryRun(1);
  const auto c = JitteryRun(2);
  EXPECT_EQ(a.first, b.first);
  EXPECT_EQ(a.second, b.second);
  EXPECT_NE(a.first, c.first);
  EXPECT_NE(a.second, c.second);
  EXPECT_EQ(std::count(a.first.begin(), a.first.end(), -1), 0);
  EXPECT_FALSE(std::is_sorted(a.first.begin(), a.first.end()));  // jitter reorders completions
}

TEST_F(SimStorageTest, KeepsTimeWithoutTouchingBuffers) {
  auto storage = Make(Drive(1, 1, 0, 1'000'000'000, 1'000'000'000, {0, 0}));
  ASSERT_NE(storage, nullptr);
  EXPECT_STREQ(storage->caps().name, "sim");
  EXPECT_FALSE(storage->caps().delivers_data);
  EXPECT_TRUE(storage->caps().direct_io);
  EXPECT_EQ(storage->caps().alignment_bytes, kPage);
  EXPECT_TRUE(storage->warning().empty());
  Submit(storage.get(), {kPage});
  DrainTimes(storage.get());
  for (uint64_t i = 0; i < kPage; ++i) ASSERT_EQ(static_cast<unsigned char>(buffer_.data[i]), 0xAB) << i;
}

TEST_F(SimStorageTest, RejectsReadsPastTheModelledFile) {
  auto storage = Make(Drive(1, 1, 0, 1'000'000'000, 1'000'000'000, {0, 0}));
  ASSERT_NE(storage, nullptr);
  const Status status = storage->Submit({kFileBytes, kPage, buffer_.data, 1});
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("sim-nvme:test-drive: read of 4096 bytes at offset 1099511627776: ends past the end "
                                  "of the file (1099511627776 bytes)"),
            std::string::npos)
      << status.message();
  EXPECT_EQ(storage->outstanding(), 0u);
}

// The engine registers the backend as a loop source; a waiting Poll that runs
// the loop may see its completions handed to that source instead. It returns
// (with nothing) rather than waiting forever, and the reads are all accounted.
class BackendSource : public engine::EventSource {
 public:
  explicit BackendSource(StorageBackend* storage) : storage_(storage) {}
  size_t pending() const override { return storage_->outstanding(); }
  Status Poll(bool wait) override { return storage_->Poll(wait, &taken_); }
  StorageBackend* storage_;
  std::vector<ReadCompletion> taken_;
};

TEST_F(SimStorageTest, WaitingPollWhileTheLoopPollsTheBackendToo) {
  auto storage = Make(Drive(2, 2, 1'000, 1'000'000'000, 1'000'000'000, {0, 0}));
  ASSERT_NE(storage, nullptr);
  BackendSource source(storage.get());
  loop_.AddSource(&source);
  Submit(storage.get(), {kPage, kPage, kPage});
  std::vector<ReadCompletion> direct;
  while (storage->outstanding() > 0) ASSERT_TRUE(storage->Poll(true, &direct).ok());
  EXPECT_EQ(direct.size() + source.taken_.size(), 3u);
  EXPECT_EQ(storage->counters().reads, 3u);
}

// Destroying the backend with reads in flight leaves no-op tasks on the loop.
TEST_F(SimStorageTest, DestroyWithReadsInFlightThenRunTheLoop) {
  {
    auto storage = Make(Drive(1, 1, 1'000, 1'000'000'000, 1'000'000'000, {0, 0}));
    ASSERT_NE(storage, nullptr);
    Submit(storage.get(), {kPage, kPage, kPage});
  }
  ASSERT_TRUE(loop_.RunUntil([] { return false; }).ok());
  EXPECT_EQ(log_.events(), 0u);
}

TEST(SimStorageFactoryTest, RejectsWhatItCannotModel) {
  SimEventLoop loop;
  const NvmeProfile good = Drive(1, 1, 0, 1'000'000'000, 1'000'000'000, {0, 0});
  SimStorageOptions options;
  options.loop = &loop;
  options.file_bytes = kFileBytes;
  auto expect_error = [](const NvmeProfile& profile, const SimStorageOptions& o, StatusCode code, const char* text) {
    auto result = MakeSimStorage(profile, o);
    ASSERT_FALSE(result.ok()) << text;
    EXPECT_EQ(result.status().code(), code) << result.status().message();
    EXPECT_NE(result.status().message().find(text), std::string::npos) << result.status().message();
  };
  SimStorageOptions no_loop = options;
  no_loop.loop = nullptr;
  expect_error(good, no_loop, StatusCode::kInvalidArgument, "loop is required");
  SimStorageOptions no_size = options;
  no_size.file_bytes = 0;
  expect_error(good, no_size, StatusCode::kInvalidArgument, "file_bytes must be > 0");
  SimStorageOptions deep = options;
  deep.queue_depth = 40'000;
  expect_error(good, deep, StatusCode::kInvalidArgument, "queue depth must be <= 32768");
  SimStorageOptions missing = options;
  missing.data_path = ::testing::TempDir() + "colibri-sim-no-such-file.bin";
  expect_error(good, missing, StatusCode::kNotFound, missing.data_path.c_str());
  NvmeProfile bad = good;
  bad.channels = 0;
  expect_error(bad, options, StatusCode::kInvalidArgument, "nvme profile 'test-drive': channels must be >= 1");
  bad = good;
  bad.read_bytes_per_s = 0;
  expect_error(bad, options, StatusCode::kInvalidArgument, "read_bytes_per_s must be > 0");
  bad = good;
  bad.read_latency = {0, 1'000};
  expect_error(bad, options, StatusCode::kInvalidArgument, "read_latency");
}

}  // namespace
}  // namespace colibri::sim
