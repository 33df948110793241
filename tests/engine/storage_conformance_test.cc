// The StorageBackend contract (storage.h), one suite run against every
// implementation (add a factory to kBackends to enroll a new one):
//  - every accepted read completes exactly once, through Poll(), with its
//    tag, OK status, the requested byte count and the file's bytes;
//  - submissions beyond the queue depth wait inside the backend: each counts
//    one queue_full_event, and all still complete;
//  - counters: reads and read_bytes count successful reads, read_errors failed ones;
//  - Submit rejects, with InvalidArgument naming the path and rule, requests
//    that break the caps (alignment with O_DIRECT, range, null, empty);
//  - opening reports NotFound for a missing file and InvalidArgument for queue
//    depth 0 or a missing clock;
//  - where the file system refuses O_DIRECT the backend reads buffered and says so in warning().
// Completion ORDER is not promised (io_uring completes as the device does);
// PreadStorage's submission order is tested separately below.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "colibri/engine/storage.h"

namespace colibri::engine {
namespace {

constexpr uint64_t kAlign = 4096;
constexpr uint64_t kFileBytes = 8 << 20;
constexpr uint64_t kBlockBytes = 16 << 10;

struct BackendFactory {
  const char* name;
  Result<std::unique_ptr<StorageBackend>> (*open)(const std::string& path, const StorageOptions& options);
};

const BackendFactory kBackends[] = {{"uring", &OpenUringStorage}, {"pread", &OpenPreadStorage}};

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

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
std::string WritePatternFile(const std::string& path, uint64_t bytes) {
  std::string content(bytes, '\0');
  for (uint64_t i = 0; i < bytes / 8; ++i) {
    const uint64_t word = SplitMix64(i);
    std::memcpy(content.data() + 8 * i, &word, 8);
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(content.data(), static_cast<std::streamsize>(bytes));
  return content;
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Removes a file when the test ends, however it ends.
struct RemoveOnExit {
  ~RemoveOnExit() { std::filesystem::remove(path); }
  std::string path;
};

// Submits reads of blocks 0..count-1, block i into buffer slot i with tag i.
void SubmitBlocks(StorageBackend* storage, const AlignedBuffer& buffers, uint64_t count) {
  for (uint64_t i = 0; i < count; ++i) {
    const Status status = storage->Submit({i * kBlockBytes, kBlockBytes, buffers.data + i * kBlockBytes, i});
    ASSERT_TRUE(status.ok()) << status.message();
  }
}

// Polls (waiting) until nothing is outstanding.
std::vector<ReadCompletion> Drain(StorageBackend* storage) {
  std::vector<ReadCompletion> done;
  while (storage->outstanding() > 0) {
    const Status status = storage->Poll(true, &done);
    EXPECT_TRUE(status.ok()) << status.message();
    if (!status.ok()) break;
  }
  return done;
}

class StorageConformanceTest : public ::testing::TestWithParam<BackendFactory> {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "colibri-storage-" + GetParam().name + "-" + std::to_string(::getpid()) + ".bin";
    content_ = WritePatternFile(path_, kFileBytes);
    auto probe = GetParam().open(path_, Options(1));
    if (!probe.ok() && probe.status().code() == StatusCode::kUnsupported) GTEST_SKIP() << probe.status().message();
    ASSERT_TRUE(probe.ok()) << probe.status().message();
  }
  void TearDown() override { std::filesystem::remove(path_); }

  StorageOptions Options(uint32_t queue_depth, bool direct_io = true) const {
    StorageOptions options;
    options.clock = &clock_;
    options.queue_depth = queue_depth;
    options.direct_io = direct_io;
    return options;
  }

  std::unique_ptr<StorageBackend> Open(const StorageOptions& options) {
    auto storage = GetParam().open(path_, options);
    EXPECT_TRUE(storage.ok()) << storage.status().message();
    return storage.ok() ? std::move(storage).value() : nullptr;
  }

  // Checks one completion of a read of `bytes` at `offset` into `buffer`.
  void ExpectRead(const ReadCompletion& c, uint64_t offset, uint64_t bytes, const char* buffer) const {
    EXPECT_TRUE(c.status.ok()) << c.status.message();
    EXPECT_EQ(c.bytes, bytes);
    EXPECT_LE(c.submit_ns, c.complete_ns);
    EXPECT_EQ(std::memcmp(buffer, content_.data() + offset, bytes), 0) << "tag " << c.tag << " offset " << offset;
  }

  MonotonicClock clock_;
  std::string path_;
  std::string content_;
};

// Submits more reads than the queue depth at once, then drains: same data,
// every tag once, one queue_full_event per read beyond the depth.
TEST_P(StorageConformanceTest, RandomBlocksBeyondQueueDepthCompleteExactlyOnce) {
  std::mt19937_64 rng(7);
  for (uint32_t depth : {1u, 4u, 32u}) {
    SCOPED_TRACE("queue depth " + std::to_string(depth));
    auto storage = Open(Options(depth));
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
  auto storage = Open(Options(kDepth));
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

// Non-waiting polls alone deliver everything (no read needs a waiting Poll to make progress).
TEST_P(StorageConformanceTest, NonWaitingPollsDeliverEverything) {
  auto storage = Open(Options(4));
  ASSERT_NE(storage, nullptr);
  std::vector<ReadCompletion> done;
  ASSERT_TRUE(storage->Poll(true, &done).ok());  // nothing outstanding: returns at once
  EXPECT_TRUE(done.empty());
  AlignedBuffer buffers(10 * kBlockBytes);
  SubmitBlocks(storage.get(), buffers, 10);
  while (storage->outstanding() > 0) ASSERT_TRUE(storage->Poll(false, &done).ok());
  ASSERT_EQ(done.size(), 10u);
  for (const ReadCompletion& c : done) {
    ExpectRead(c, c.tag * kBlockBytes, kBlockBytes, buffers.data + c.tag * kBlockBytes);
  }
}

TEST_P(StorageConformanceTest, ReadsTheWholeFileInOneRequest) {
  auto storage = Open(Options(2));
  ASSERT_NE(storage, nullptr);
  AlignedBuffer buffer(kFileBytes);
  ASSERT_TRUE(storage->Submit({0, kFileBytes, buffer.data, 5}).ok());
  const std::vector<ReadCompletion> done = Drain(storage.get());
  ASSERT_EQ(done.size(), 1u);
  ExpectRead(done[0], 0, kFileBytes, buffer.data);
}

TEST_P(StorageConformanceTest, RejectsRequestsThatBreakTheCaps) {
  auto storage = Open(Options(4));
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

TEST_P(StorageConformanceTest, BufferedReadsNeedNoAlignment) {
  auto storage = Open(Options(4, /*direct_io=*/false));
  ASSERT_NE(storage, nullptr);
  EXPECT_FALSE(storage->caps().direct_io);
  EXPECT_EQ(storage->caps().alignment_bytes, 1u);
  EXPECT_TRUE(storage->warning().empty());
  std::vector<char> buffer(1000);
  ASSERT_TRUE(storage->Submit({12345, 999, buffer.data() + 1, 9}).ok());
  const std::vector<ReadCompletion> done = Drain(storage.get());
  ASSERT_EQ(done.size(), 1u);
  ExpectRead(done[0], 12345, 999, buffer.data() + 1);
}

TEST_P(StorageConformanceTest, OpenErrorsAreClear) {
  const std::string missing = ::testing::TempDir() + "colibri-no-such-file.bin";
  auto result = GetParam().open(missing, Options(4));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kNotFound);
  EXPECT_NE(result.status().message().find(missing), std::string::npos) << result.status().message();

  result = GetParam().open(path_, Options(0));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("queue depth must be >= 1"), std::string::npos)
      << result.status().message();

  StorageOptions no_clock = Options(4);
  no_clock.clock = nullptr;
  result = GetParam().open(path_, no_clock);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("clock is required"), std::string::npos) << result.status().message();

  result = GetParam().open(::testing::TempDir(), Options(4));
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("not a regular file or block device"), std::string::npos)
      << result.status().message();
}

// Reads into registered buffers (io_uring's READ_FIXED), into a buffer that
// straddles two registered ones, and into an unregistered buffer (plain READ).
TEST_P(StorageConformanceTest, RegisteredBuffers) {
  constexpr uint32_t kBuffers = 4;
  AlignedBuffer arena(kBuffers * kBlockBytes);
  AlignedBuffer unregistered(kBlockBytes);
  StorageOptions options = Options(8);
  for (uint32_t i = 0; i < kBuffers; ++i) options.registered_buffers.push_back(arena.data + i * kBlockBytes);
  options.registered_buffer_bytes = kBlockBytes;
  auto storage = Open(options);
  ASSERT_NE(storage, nullptr);
  struct Read {
    uint64_t offset;
    uint64_t bytes;
    char* buffer;
  };
  const std::vector<Read> reads = {
      {0, kBlockBytes, arena.data},
      {5 * kBlockBytes, kBlockBytes, arena.data + 3 * kBlockBytes},
      {7 * kAlign, kAlign, arena.data + kBlockBytes + kAlign},           // inside buffer 1
      {9 * kBlockBytes, kBlockBytes, arena.data + 2 * kBlockBytes - kAlign},  // straddles buffers 1 and 2
      {11 * kBlockBytes, kBlockBytes, unregistered.data},
  };
  for (size_t i = 0; i < reads.size(); ++i) {
    ASSERT_TRUE(storage->Submit({reads[i].offset, reads[i].bytes, reads[i].buffer, i}).ok());
    const std::vector<ReadCompletion> done = Drain(storage.get());  // one at a time: some buffers overlap
    ASSERT_EQ(done.size(), 1u);
    ExpectRead(done[0], reads[i].offset, reads[i].bytes, reads[i].buffer);
  }

  StorageOptions bad = Options(8);
  bad.registered_buffers = {arena.data};
  EXPECT_EQ(GetParam().open(path_, bad).status().code(), StatusCode::kInvalidArgument);  // no length
  bad.registered_buffers = {nullptr};
  bad.registered_buffer_bytes = kBlockBytes;
  EXPECT_EQ(GetParam().open(path_, bad).status().code(), StatusCode::kInvalidArgument);
}

// A file cut short after opening: the read gets the bytes up to the new end
// (a short read, continued), then an end of file, reported as an error completion.
TEST_P(StorageConformanceTest, FileShrunkAfterOpenGivesAnErrorCompletion) {
  auto storage = Open(Options(4));
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
    auto storage = Open(Options(4));
    ASSERT_NE(storage, nullptr);
    SubmitBlocks(storage.get(), buffers, 16);
  }
  SUCCEED();
}

// Returns a file whose file system refuses O_DIRECT, or "" when this machine has none.
// Candidates: /dev/shm (tmpfs refused O_DIRECT before Linux 6.6) and sysfs's
// /sys/kernel/btf/vmlinux (sysfs never takes O_DIRECT; it also returns at most a
// page per read, so reading it exercises short-read continuation).
std::string FindFileWithoutDirectIo(const std::string& shm_candidate) {
  WritePatternFile(shm_candidate, 64 << 10);
  for (const std::string& path : {shm_candidate, std::string("/sys/kernel/btf/vmlinux")}) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
    if (fd >= 0) ::close(fd);
    if (fd < 0 && errno == EINVAL) return path;
  }
  return "";
}

TEST_P(StorageConformanceTest, FallsBackToBufferedReadsWhereODirectIsRefused) {
  const RemoveOnExit shm{"/dev/shm/colibri-storage-" + std::to_string(::getpid()) + ".bin"};
  const std::string path = FindFileWithoutDirectIo(shm.path);
  if (path.empty()) {
    GTEST_SKIP() << "no file system here refuses O_DIRECT (tmpfs accepts it since Linux 6.6; no sysfs BTF)";
  }
  const std::string expected = ReadWholeFile(path);
  ASSERT_GE(expected.size(), 64u << 10);
  auto result = GetParam().open(path, Options(4));
  ASSERT_TRUE(result.ok()) << result.status().message();
  StorageBackend& storage = *result.value();
  EXPECT_EQ(storage.warning(), "O_DIRECT unsupported on " + path + "'s file system; reading through the page cache");
  EXPECT_FALSE(storage.caps().direct_io);
  EXPECT_EQ(storage.caps().alignment_bytes, 1u);
  const uint64_t offsets[] = {0, 4096, 100, 20000, 40000};
  std::vector<std::string> buffers(std::size(offsets), std::string(24 << 10, '\0'));
  for (size_t i = 0; i < std::size(offsets); ++i) {
    ASSERT_TRUE(storage.Submit({offsets[i], buffers[i].size(), buffers[i].data(), i}).ok());
  }
  const std::vector<ReadCompletion> done = Drain(&storage);
  ASSERT_EQ(done.size(), std::size(offsets));
  for (const ReadCompletion& c : done) {
    EXPECT_TRUE(c.status.ok()) << c.status.message();
    EXPECT_EQ(c.bytes, buffers[c.tag].size());
    EXPECT_EQ(buffers[c.tag], expected.substr(offsets[c.tag], buffers[c.tag].size())) << "offset " << offsets[c.tag];
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, StorageConformanceTest, ::testing::ValuesIn(kBackends),
                         [](const ::testing::TestParamInfo<BackendFactory>& info) {
                           return std::string(info.param.name);
                         });

// PreadStorage's own promise beyond the contract: completions in submission order.
TEST(PreadStorageTest, CompletesInSubmissionOrder) {
  const RemoveOnExit file{::testing::TempDir() + "colibri-pread-order-" + std::to_string(::getpid()) + ".bin"};
  WritePatternFile(file.path, 1 << 20);
  MonotonicClock clock;
  StorageOptions options;
  options.clock = &clock;
  options.queue_depth = 4;
  auto storage = OpenPreadStorage(file.path, options);
  ASSERT_TRUE(storage.ok()) << storage.status().message();
  AlignedBuffer buffers(20 * kAlign);
  for (uint64_t i = 0; i < 20; ++i) {
    ASSERT_TRUE(storage.value()->Submit({(19 - i) * kAlign, kAlign, buffers.data + i * kAlign, i}).ok());
  }
  const std::vector<ReadCompletion> done = Drain(storage.value().get());
  ASSERT_EQ(done.size(), 20u);
  for (uint64_t i = 0; i < 20; ++i) EXPECT_EQ(done[i].tag, i);
}

}  // namespace
}  // namespace colibri::engine
