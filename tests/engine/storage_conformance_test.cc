// The StorageBackend contract (storage_conformance.h) run against the real
// backends, UringStorage and PreadStorage (add a factory to kBackends to
// enroll another), and PreadStorage inside CheckBlocksOnRead (block_check.h;
// its reads here are not whole model blocks, so they pass through), and what
// only file-backed backends promise:
//  - with direct_io off, reads need no alignment;
//  - opening reports NotFound for a missing file and InvalidArgument for queue
//    depth 0, a missing clock, a path that is not a file, bad registered buffers;
//  - reads into registered buffers (io_uring's READ_FIXED) deliver the file's bytes;
//  - where the file system refuses O_DIRECT the backend reads buffered and says so in warning().
// PreadStorage's submission order is tested separately below.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "colibri/engine/backend_wrappers.h"
#include "colibri/engine/block_check.h"
#include "colibri/engine/storage.h"
#include "model_test_util.h"
#include "storage_conformance.h"

namespace colibri::engine {
namespace {

using conformance::AlignedBuffer;
using conformance::Drain;
using conformance::kAlign;
using conformance::kBlockBytes;
using conformance::PatternFile;
using conformance::ReadWholeFile;
using conformance::RemoveOnExit;
using conformance::StorageConformanceTest;
using conformance::StorageHarness;
using conformance::StorageHarnessFactory;
using conformance::WritePatternFile;

using OpenFn = Result<std::unique_ptr<StorageBackend>> (*)(const std::string& path, const StorageOptions& options);

struct BackendFactory {
  const char* name;
  OpenFn open;
};

const BackendFactory kBackends[] = {{"uring", &OpenUringStorage}, {"pread", &OpenPreadStorage}};

StorageOptions OptionsOn(const Clock* clock, uint32_t queue_depth, bool direct_io = true) {
  StorageOptions options;
  options.clock = clock;
  options.queue_depth = queue_depth;
  options.direct_io = direct_io;
  return options;
}

// A real backend on the monotonic clock, with O_DIRECT.
template <OpenFn kOpen>
class RealHarness final : public StorageHarness {
 public:
  Result<std::unique_ptr<StorageBackend>> Open(const std::string& path, uint32_t queue_depth) override {
    return kOpen(path, OptionsOn(&clock_, queue_depth));
  }

 private:
  MonotonicClock clock_;
};

template <OpenFn kOpen>
std::unique_ptr<StorageHarness> MakeRealHarness() {
  return std::make_unique<RealHarness<kOpen>>();
}

// PreadStorage wrapped by CheckBlocksOnRead for a small format 2 model whose
// blocks (12 KiB) are not the suite's 16 KiB reads.
class BlockCheckHarness final : public StorageHarness {
 public:
  BlockCheckHarness() {
    const std::string dir = scratch_.Path("m");
    const Status written = SynthModel(testing_util::SmallShape(DType::kBf16), 1, dir).status();
    EXPECT_TRUE(written.ok()) << written.message();
    auto model = OpenModel(dir, ModelVerify::kBlocks);
    EXPECT_TRUE(model.ok()) << model.status().message();
    if (model.ok()) model_ = std::move(model).value();
  }
  Result<std::unique_ptr<StorageBackend>> Open(const std::string& path, uint32_t queue_depth) override {
    if (!model_.check_blocks_on_read()) return Status::Internal("the model did not open");
    COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<StorageBackend> storage,
                             OpenPreadStorage(path, OptionsOn(&clock_, queue_depth)));
    StorageBackend* inner = storage.get();
    std::unique_ptr<StorageBackend> wrapped = CheckBlocksOnRead(model_, std::move(storage));
    if (wrapped.get() == inner) return Status::Internal("CheckBlocksOnRead did not wrap");
    return wrapped;
  }

 private:
  testing_util::ScratchDir scratch_;
  Model model_;
  MonotonicClock clock_;
};

std::unique_ptr<StorageHarness> MakeBlockCheckHarness() { return std::make_unique<BlockCheckHarness>(); }

// PreadStorage inside a StorageWrapper that overrides nothing (backend_wrappers.h).
class WrappedHarness final : public StorageHarness {
 public:
  Result<std::unique_ptr<StorageBackend>> Open(const std::string& path, uint32_t queue_depth) override {
    COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<StorageBackend> storage, inner_.Open(path, queue_depth));
    return std::unique_ptr<StorageBackend>(new OwningStorage(std::move(storage)));
  }

 private:
  RealHarness<&OpenPreadStorage> inner_;
};

const StorageHarnessFactory kHarnesses[] = {{"uring", &MakeRealHarness<&OpenUringStorage>},
                                            {"pread", &MakeRealHarness<&OpenPreadStorage>},
                                            {"pread_block_check", &MakeBlockCheckHarness},
                                            {"pread_wrapped", [] {
                                               return std::unique_ptr<StorageHarness>(new WrappedHarness());
                                             }}};

INSTANTIATE_TEST_SUITE_P(Backends, StorageConformanceTest, ::testing::ValuesIn(kHarnesses), conformance::HarnessName);

// What only the file-backed backends promise, over their StorageOptions.
class FileStorageTest : public ::testing::TestWithParam<BackendFactory> {
 protected:
  FileStorageTest() : file_(std::string("file-") + GetParam().name), path_(file_.path()) {}

  void SetUp() override {
    auto probe = GetParam().open(path_, Options(1));
    if (!probe.ok() && probe.status().code() == StatusCode::kUnsupported) GTEST_SKIP() << probe.status().message();
    ASSERT_TRUE(probe.ok()) << probe.status().message();
  }

  StorageOptions Options(uint32_t queue_depth, bool direct_io = true) const {
    return OptionsOn(&clock_, queue_depth, direct_io);
  }

  std::unique_ptr<StorageBackend> Open(const StorageOptions& options) {
    auto storage = GetParam().open(path_, options);
    EXPECT_TRUE(storage.ok()) << storage.status().message();
    return storage.ok() ? std::move(storage).value() : nullptr;
  }

  void ExpectRead(const ReadCompletion& c, uint64_t offset, uint64_t bytes, const char* buffer) const {
    conformance::ExpectRead(file_.content, c, offset, bytes, buffer);
  }

  MonotonicClock clock_;
  PatternFile file_;
  const std::string& path_;
};

TEST_P(FileStorageTest, BufferedReadsNeedNoAlignment) {
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

TEST_P(FileStorageTest, OpenErrorsAreClear) {
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
TEST_P(FileStorageTest, RegisteredBuffers) {
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

TEST_P(FileStorageTest, FallsBackToBufferedReadsWhereODirectIsRefused) {
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

INSTANTIATE_TEST_SUITE_P(Backends, FileStorageTest, ::testing::ValuesIn(kBackends),
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
