// storage_reads.h: random whole-block reads through both backends, stopped
// by a read count or a duration, over every aligned block or given offsets.
#include "colibri/bench/storage_reads.h"

#include <gtest/gtest.h>

#include "../traces/test_util.h"
#include "colibri/bench/files.h"

namespace colibri::bench {
namespace {

using traces::testing::TempDir;

constexpr uint64_t kBlock = 64 * 1024;

class StorageReadsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { ASSERT_TRUE(CreateRandomFile(path_, 16 * kBlock + 100, 1).ok()); }

  Result<StorageReadRun> Measure(const StorageReadOptions& o) { return MeasureStorageReads(path_, o); }

  StorageReadOptions Options() const {
    StorageReadOptions o;
    o.backend = GetParam();
    o.block_bytes = kBlock;
    o.queue_depth = 4;
    return o;
  }

  TempDir dir_;
  std::string path_ = dir_.File("data.bin");
};

// Where the kernel refuses io_uring (containers, old kernels).
bool Refused(const Result<StorageReadRun>& run) { return !run.ok() && run.status().code() == StatusCode::kUnsupported; }

TEST_P(StorageReadsTest, ACountOfReadsEachTimed) {
  StorageReadOptions o = Options();
  o.read_count = 25;
  auto run = Measure(o);
  if (Refused(run)) GTEST_SKIP() << run.status().message();
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run.value().reads, 25u);
  EXPECT_EQ(run.value().read_bytes, 25 * kBlock);
  ASSERT_EQ(run.value().latencies_ns.size(), 25u);
  for (int64_t ns : run.value().latencies_ns) EXPECT_GE(ns, 0);
  EXPECT_EQ(run.value().backend, GetParam());
  EXPECT_GT(run.value().elapsed_s, 0);
  EXPECT_GT(run.value().read_bytes_per_s(), 0);
  // Fewer reads than the queue depth: only those are submitted.
  o.read_count = 2;
  auto few = Measure(o);
  ASSERT_TRUE(few.ok()) << few.status().message();
  EXPECT_EQ(few.value().reads, 2u);
}

TEST_P(StorageReadsTest, ADurationAndGivenOffsets) {
  StorageReadOptions o = Options();
  o.duration_ns = 20'000'000;  // 20 ms
  o.offsets = {0, 3 * kBlock, 7 * kBlock};
  auto run = Measure(o);
  if (Refused(run)) GTEST_SKIP() << run.status().message();
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_GE(run.value().reads, 4u);  // at least the first queue depth
  EXPECT_EQ(run.value().read_bytes, run.value().reads * kBlock);
  EXPECT_EQ(run.value().latencies_ns.size(), run.value().reads);
  EXPECT_GE(run.value().elapsed_s, 0.02);
}

INSTANTIATE_TEST_SUITE_P(Backends, StorageReadsTest, ::testing::Values("pread", "uring"));

TEST(StorageReadsErrorsTest, BadOptionsAreInvalidArguments) {
  TempDir dir;
  const std::string path = dir.File("small.bin");
  ASSERT_TRUE(CreateRandomFile(path, 1000, 1).ok());
  StorageReadOptions o;
  o.backend = "pread";
  o.block_bytes = kBlock;
  o.read_count = 1;
  EXPECT_EQ(MeasureStorageReads(path, o).status().code(), StatusCode::kInvalidArgument);  // no whole block
  o.block_bytes = 0;
  EXPECT_EQ(MeasureStorageReads(path, o).status().code(), StatusCode::kInvalidArgument);
  o.block_bytes = 4096;
  o.read_count = 0;
  EXPECT_EQ(MeasureStorageReads(path, o).status().code(), StatusCode::kInvalidArgument);  // no stop condition
  o.read_count = 1;
  o.backend = "tape";
  EXPECT_EQ(MeasureStorageReads(path, o).status().code(), StatusCode::kInvalidArgument);
  o.backend = "pread";
  o.offsets = {0};
  EXPECT_FALSE(MeasureStorageReads(dir.File("missing.bin"), o).ok());
}

}  // namespace
}  // namespace colibri::bench
