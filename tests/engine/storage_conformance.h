// The StorageBackend contract (storage.h) as one value-parameterised suite,
// StorageConformanceTest, shared by every implementation: real backends
// (tests/engine/storage_conformance_test.cc) and modelled ones
// (tests/sim/sim_storage_conformance_test.cc). A test binary enrolls a backend
// by instantiating the suite over StorageHarnessFactory values; the harness
// opens the backend over a file and supplies the clock or event loop it runs
// on. Include this header from exactly one source file per test binary (it
// defines the tests).
//
// The contract checked here:
//  - every accepted read completes exactly once, through Poll(), with its
//    tag, OK status, the requested byte count and the file's bytes;
//  - submissions beyond the queue depth wait inside the backend: each counts
//    one queue_full_event, and all still complete;
//  - counters: reads and read_bytes count successful reads, read_errors failed ones;
//  - Submit rejects, with InvalidArgument naming the path and rule, requests
//    that break the caps (alignment with O_DIRECT, range, null, empty);
//  - a file cut short after opening gives an error completion;
//  - destroying a backend with reads outstanding neither hangs nor crashes.
// Completion ORDER is not promised (io_uring completes as the device does).
#pragma once

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "colibri/engine/mix.h"
#include "colibri/engine/storage.h"

namespace colibri::engine::conformance {

inline constexpr uint64_t kAlign = 4096;
inline constexpr uint64_t kFileBytes = 8 << 20;
inline constexpr uint64_t kBlockBytes = 16 << 10;

// A page-aligned heap buffer.
struct AlignedBuffer {
  explicit AlignedBuffer(uint64_t bytes) : data(static_cast<char*>(std::aligned_alloc(kAlign, bytes))), size(bytes) {}
  ~AlignedBuffer() { std::free(data); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  char* data;
  uint64_t size;
};

// Writes `bytes` of a known pattern (word i = SplitMix64(i)) to `path`; returns the content.
inline std::string WritePatternFile(const std::string& path, uint64_t bytes) {
  std::string content(bytes, '\0');
  for (uint64_t i = 0; i < bytes / 8; ++i) {
    const uint64_t word = SplitMix64(i);
    std::memcpy(content.data() + 8 * i, &word, 8);
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(content.data(), static_cast<std::streamsize>(bytes));
  return content;
}

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Removes a file when the test ends, however it ends.
struct RemoveOnExit {
  ~RemoveOnExit() { std::filesystem::remove(path); }
  std::string path;
};

// A kFileBytes pattern file in the test temp dir, removed on destruction.
struct PatternFile {
  explicit PatternFile(const std::string& tag)
      : file{::testing::TempDir() + "colibri-storage-" + tag + "-" + std::to_string(::getpid()) + ".bin"},
        content(WritePatternFile(file.path, kFileBytes)) {}
  const std::string& path() const { return file.path; }
  RemoveOnExit file;
  std::string content;
};

// Submits reads of blocks 0..count-1, block i into buffer slot i with tag i.
inline void SubmitBlocks(StorageBackend* storage, const AlignedBuffer& buffers, uint64_t count) {
  for (uint64_t i = 0; i < count; ++i) {
    const Status status = storage->Submit({i * kBlockBytes, kBlockBytes, buffers.data + i * kBlockBytes, i});
    ASSERT_TRUE(status.ok()) << status.message();
  }
}

// Polls (waiting) until nothing is outstanding.
inline std::vector<ReadCompletion> Drain(StorageBackend* storage) {
  std::vector<ReadCompletion> done;
  while (storage->outstanding() > 0) {
    const Status status = storage->Poll(true, &done);
    EXPECT_TRUE(status.ok()) << status.message();
    if (!status.ok()) break;
  }
  return done;
}

// Checks one completion of a read of `bytes` at `offset` of a file holding
// `content` into `buffer`.
inline void ExpectRead(const std::string& content, const ReadCompletion& c, uint64_t offset, uint64_t bytes,
                       const char* buffer) {
  EXPECT_TRUE(c.status.ok()) << c.status.message();
  EXPECT_EQ(c.bytes, bytes);
  EXPECT_LE(c.submit_ns, c.complete_ns);
  EXPECT_EQ(std::memcmp(buffer, content.data() + offset, bytes), 0) << "tag " << c.tag << " offset " << offset;
}

// A backend under test together with the clock or event loop it runs on.
// Owns that clock/loop, which outlives every backend it opens.
class StorageHarness {
 public:
  virtual ~StorageHarness() = default;
  // Opens the backend over `path` with `queue_depth` reads in flight at most
  // (reading with O_DIRECT, or modelling it). Unsupported skips the suite.
  virtual Result<std::unique_ptr<StorageBackend>> Open(const std::string& path, uint32_t queue_depth) = 0;
  // Called between non-waiting polls: lets time pass so reads can finish.
  // Real devices progress by themselves; a simulated loop runs its next event.
  virtual void LetTimePass() {}
};

struct StorageHarnessFactory {
  const char* name;  // the test name suffix
  std::unique_ptr<StorageHarness> (*make)();
};

inline std::string HarnessName(const ::testing::TestParamInfo<StorageHarnessFactory>& info) {
  return info.param.name;
}

class StorageConformanceTest : public ::testing::TestWithParam<StorageHarnessFactory> {
 protected:
  StorageConformanceTest() : file_(GetParam().name), path_(file_.path()), content_(file_.content) {}

  void SetUp() override {
    harness_ = GetParam().make();
    auto probe = harness_->Open(path_, 1);
    if (!probe.ok() && probe.status().code() == StatusCode::kUnsupported) GTEST_SKIP() << probe.status().message();
    ASSERT_TRUE(probe.ok()) << probe.status().message();
  }

  std::unique_ptr<StorageBackend> Open(uint32_t queue_depth) {
    auto storage = harness_->Open(path_, queue_depth);
    EXPECT_TRUE(storage.ok()) << storage.status().message();
    return storage.ok() ? std::move(storage).value() : nullptr;
  }

  void ExpectRead(const ReadCompletion& c, uint64_t offset, uint64_t bytes, const char* buffer) const {
    conformance::ExpectRead(content_, c, offset, bytes, buffer);
  }

  PatternFile file_;
  const std::string& path_;
  const std::string& content_;
  std::unique_ptr<StorageHarness> harness_;
};

// Submits more reads than the queue depth at once, then drains: same data,
// every tag once, one queue_full_event per read beyond the depth.
TEST_P(StorageConformanceTest, RandomBlocksBeyondQueueDepthCompleteExactlyOnce) {
  std::mt19937_64 rng(7);
  for (uint32_t depth : {1u, 4u, 32u}) {
    SCOPED_TRACE("queue depth " + std::to_string(depth));
    auto storage = Open(depth);
    ASSERT_NE(storage, nullptr);
    EXPECT_TRUE(storage->caps().direct_io);
    EXPECT_EQ(storage->caps().alignment_bytes, kAlign);
    EXPECT_EQ(storage->caps().queue_depth, depth);
    const uint32_t reads = 3 * depth + 5;
    AlignedBuffer buffers(reads * kBlockBytes);
    std::vector<uint64_t> offsets;
    for (uint32_t i = 0; i < reads; ++i) {
      offsets.push_back(rng() % (kFileBytes / kBlockBytes) * kBlockBytes);
      ASSERT_TRUE(storage->Submit({offsets[i], kBlockBytes, buffers.data + i * kBlockBytes, 1000 + i}).ok());
    }
    EXPECT_EQ(storage->outstanding(), reads);
    EXPECT_EQ(storage->counters().queue_full_events, reads - depth);
    std::map<uint64_t, int> seen;
    for (const ReadCompletion& c : Drain(storage.get())) {
      ASSERT_GE(c.tag, 1000u);
      ASSERT_LT(c.tag, 1000u + reads);
      ++seen[c.tag];
      const uint64_t i = c.tag - 1000;
      ExpectRead(c, offsets[i], kBlockBytes, buffers.data + i * kBlockBytes);
    }
    EXPECT_EQ(seen.size(), reads);
    for (const auto& [tag, times] : seen) EXPECT_EQ(times, 1) << "tag " << tag;
    EXPECT_EQ(storage->counters().reads, reads);
    EXPECT_EQ(storage->counters().read_bytes, reads * kBlockBytes);
    EXPECT_EQ(storage->counters().read_errors, 0u);
    EXPECT_EQ(storage->outstanding(), 0u);
  }
}

// Keeps exactly queue_depth reads outstanding, reusing each buffer as its read
// completes (the engine's streaming pattern): no queue_full_events.
TEST_P(StorageConformanceTest, SteadyStateAtQueueDepthNeverWaits) {
  constexpr uint32_t kDepth = 8;
  constexpr uint32_t kTotal = 200;
  auto storage = Open(kDepth);
  ASSERT_NE(storage, nullptr);
  AlignedBuffer buffers(kDepth * kBlockBytes);
  std::vector<uint64_t> offset_of_slot(kDepth);
  std::mt19937_64 rng(11);
  uint32_t submitted = 0;
  auto submit = [&](uint32_t slot) {
    offset_of_slot[slot] = rng() % (kFileBytes / kBlockBytes) * kBlockBytes;
    ++submitted;
    return storage->Submit({offset_of_slot[slot], kBlockBytes, buffers.data + slot * kBlockBytes, slot});
  };
  for (uint32_t slot = 0; slot < kDepth; ++slot) ASSERT_TRUE(submit(slot).ok());
  uint32_t completed = 0;
  while (storage->outstanding() > 0) {
    std::vector<ReadCompletion> done;
    ASSERT_TRUE(storage->Poll(true, &done).ok());
    ASSERT_FALSE(done.empty());
    for (const ReadCompletion& c : done) {
      ++completed;
      ExpectRead(c, offset_of_slot[c.tag], kBlockBytes, buffers.data + c.tag * kBlockBytes);
      if (submitted < kTotal) {
        ASSERT_TRUE(submit(static_cast<uint32_t>(c.tag)).ok());
      }
    }
  }
  EXPECT_EQ(completed, kTotal);
  EXPECT_EQ(storage->counters().reads, kTotal);
  EXPECT_EQ(storage->counters().queue_full_events, 0u);
}

// Non-waiting polls alone deliver everything (no read needs a waiting Poll to
// make progress), given time to pass between them.
TEST_P(StorageConformanceTest, NonWaitingPollsDeliverEverything) {
  auto storage = Open(4);
  ASSERT_NE(storage, nullptr);
  std::vector<ReadCompletion> done;
  ASSERT_TRUE(storage->Poll(true, &done).ok());  // nothing outstanding: returns at once
  EXPECT_TRUE(done.empty());
  AlignedBuffer buffers(10 * kBlockBytes);
  SubmitBlocks(storage.get(), buffers, 10);
  while (storage->outstanding() > 0) {
    ASSERT_TRUE(storage->Poll(false, &done).ok());
    harness_->LetTimePass();
  }
  ASSERT_EQ(done.size(), 10u);
  for (const ReadCompletion& c : done) {
    ExpectRead(c, c.tag * kBlockBytes, kBlockBytes, buffers.data + c.tag * kBlockBytes);
  }
}

TEST_P(StorageConformanceTest, ReadsTheWholeFileInOneRequest) {
  auto storage = Open(2);
  ASSERT_NE(storage, nullptr);
  AlignedBuffer buffer(kFileBytes);
  ASSERT_TRUE(storage->Submit({0, kFileBytes, buffer.data, 5}).ok());
  const std::vector<ReadCompletion> done = Drain(storage.get());
  ASSERT_EQ(done.size(), 1u);
  ExpectRead(done[0], 0, kFileBytes, buffer.data);
}

TEST_P(StorageConformanceTest, RejectsRequestsThatBreakTheCaps) {
  auto storage = Open(4);
  ASSERT_NE(storage, nullptr);
  AlignedBuffer buffer(4 * kAlign);
  const struct {
    ReadRequest request;
    const char* message;
  } cases[] = {
      {{512, kAlign, buffer.data, 1}, "offset is not aligned (alignment 4096 bytes with O_DIRECT)"},
      {{0, kAlign + 512, buffer.data, 2}, "length is not aligned"},
      {{0, kAlign, buffer.data + 512, 3}, "buffer address is not aligned"},
      {{kFileBytes - kAlign, 2 * kAlign, buffer.data, 4}, "ends past the end of the file (8388608 bytes)"},
      {{kFileBytes + kAlign, kAlign, buffer.data, 5}, "ends past the end of the file"},
      {{0, kAlign, nullptr, 6}, "buffer is null"},
      {{0, 0, buffer.data, 7}, "length must be > 0"},
  };
  for (const auto& c : cases) {
    const Status status = storage->Submit(c.request);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_NE(status.message().find(path_), std::string::npos) << status.message();
    EXPECT_NE(status.message().find(c.message), std::string::npos) << status.message();
  }
  EXPECT_EQ(storage->outstanding(), 0u);
  EXPECT_EQ(storage->counters().reads, 0u);
  EXPECT_EQ(storage->counters().queue_full_events, 0u);
}

// A file cut short after opening: the read gets the bytes up to the new end
// (a short read, continued), then an end of file, reported as an error completion.
TEST_P(StorageConformanceTest, FileShrunkAfterOpenGivesAnErrorCompletion) {
  auto storage = Open(4);
  ASSERT_NE(storage, nullptr);
  const uint64_t new_size = kFileBytes / 2;
  std::filesystem::resize_file(path_, new_size);
  AlignedBuffer buffer(2 * kBlockBytes);
  const uint64_t offset = new_size - kBlockBytes;
  ASSERT_TRUE(storage->Submit({offset, 2 * kBlockBytes, buffer.data, 3}).ok());
  const std::vector<ReadCompletion> done = Drain(storage.get());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status.code(), StatusCode::kIoError);
  EXPECT_NE(done[0].status.message().find(path_ + ": read at offset " + std::to_string(new_size) +
                                          ": unexpected end of file"),
            std::string::npos)
      << done[0].status.message();
  EXPECT_EQ(done[0].bytes, kBlockBytes);
  EXPECT_EQ(std::memcmp(buffer.data, content_.data() + offset, kBlockBytes), 0);
  EXPECT_EQ(storage->counters().reads, 0u);
  EXPECT_EQ(storage->counters().read_errors, 1u);
}

// Destroying a backend with reads waiting and in flight neither hangs nor crashes.
TEST_P(StorageConformanceTest, DestroyWithReadsOutstanding) {
  AlignedBuffer buffers(16 * kBlockBytes);
  {
    auto storage = Open(4);
    ASSERT_NE(storage, nullptr);
    SubmitBlocks(storage.get(), buffers, 16);
  }
  SUCCEED();
}

}  // namespace colibri::engine::conformance
