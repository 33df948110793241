// files.h and process_memory.h: scratch files, random data files, file
// sizes and this process's memory figures.
#include "colibri/bench/files.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "../traces/test_util.h"
#include "colibri/bench/process_memory.h"
#include "colibri/engine/output_claim.h"

namespace colibri::bench {
namespace {

using traces::testing::ReadFileBytes;
using traces::testing::TempDir;

TEST(FilesTest, ScratchFileRemovesItsFileAndMovesOwnership) {
  TempDir dir;
  const std::string path = dir.File("scratch.bin");
  {
    ScratchFile outer;
    {
      ScratchFile inner(path);
      ASSERT_TRUE(engine::WriteFileWhole(path, "x").ok());
      outer = std::move(inner);
      EXPECT_TRUE(inner.path().empty());
    }
    EXPECT_TRUE(std::filesystem::exists(path));  // the moved-from owner removed nothing
    EXPECT_EQ(outer.path(), path);
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  ScratchFile missing(dir.File("never-made"));  // removing what is not there is no error
}

TEST(FilesTest, RandomFileHasTheSizeSeededNonZeroBytesAndReportsProgress) {
  TempDir dir;
  const uint64_t size = (8u << 20) + 12345;  // one whole chunk and a part
  uint64_t last_done = 0, calls = 0;
  Observer observer;
  observer.progress = [&](uint64_t done, uint64_t total) {
    EXPECT_EQ(total, size);
    EXPECT_GT(done, last_done);
    last_done = done;
    ++calls;
  };
  ASSERT_TRUE(CreateRandomFile(dir.File("a"), size, 7, observer).ok());
  ASSERT_TRUE(CreateRandomFile(dir.File("b"), size, 7).ok());
  ASSERT_TRUE(CreateRandomFile(dir.File("c"), size, 8).ok());
  EXPECT_EQ(calls, 2u);
  EXPECT_EQ(last_done, size);
  EXPECT_EQ(FileBytes(dir.File("a")), size);
  const std::string a = ReadFileBytes(dir.File("a"));
  EXPECT_EQ(a, ReadFileBytes(dir.File("b")));
  EXPECT_NE(a, ReadFileBytes(dir.File("c")));
  EXPECT_NE(a.find_first_not_of('\0'), std::string::npos);
  EXPECT_FALSE(CreateRandomFile(dir.File("no/such/dir/f"), 10, 1).ok());
}

TEST(FilesTest, FileBytesIsZeroForAMissingFile) { EXPECT_EQ(FileBytes("/nonexistent/colibri"), 0u); }

TEST(ProcessMemoryTest, ReportsThisProcess) {
  EXPECT_GT(PeakRssBytes(), 0u);
  EXPECT_GT(ProcStatusBytes("VmRSS"), 0u);
  EXPECT_GE(ProcStatusBytes("VmHWM"), ProcStatusBytes("VmRSS") / 2);
  EXPECT_EQ(ProcStatusBytes("NoSuchField"), 0u);
}

}  // namespace
}  // namespace colibri::bench
