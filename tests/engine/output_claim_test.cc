// OutputClaim and CheckInputFile: one writer per output, unique temporary
// names swept after a crash, whole-file writes, special files refused by type.
#include "colibri/engine/output_claim.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "colibri/engine/input_file.h"
#include "model_test_util.h"

namespace colibri::engine {
namespace {

namespace fs = std::filesystem;
using testing_util::ScratchDir;

std::vector<std::string> Names(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(OutputClaimTest, WriteFileWholeReplacesAndLeavesNothingElse) {
  ScratchDir dir;
  const std::string path = dir.Path("out.json");
  ASSERT_TRUE(WriteFileWhole(path, "first").ok());
  ASSERT_TRUE(WriteFileWhole(path, "second").ok());
  EXPECT_EQ(Slurp(path), "second");
  EXPECT_EQ(Names(dir.root()), std::vector<std::string>{"out.json"});
  const Status missing = WriteFileWhole(dir.Path("missing/out.json"), "x");
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("missing: no such directory"), std::string::npos) << missing.message();
  std::ofstream(dir.Path("file")) << "x";
  const Status not_dir = WriteFileWhole(dir.Path("file/out.json"), "x");
  EXPECT_FALSE(not_dir.ok());
  EXPECT_NE(not_dir.message().find("not a directory"), std::string::npos) << not_dir.message();
  EXPECT_EQ(WriteFileWhole("", "x").code(), StatusCode::kInvalidArgument);
}

TEST(OutputClaimTest, SecondWriterFailsUntilTheFirstIsDone) {
  ScratchDir dir;
  const std::string path = dir.Path("out.bin");
  auto first = OutputClaim::Acquire(path);
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto second = OutputClaim::Acquire(path);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("another writer"), std::string::npos) << second.status().message();
  EXPECT_NE(second.status().message().find(path), std::string::npos);
  std::ofstream(first->temp_path()) << "whole";
  ASSERT_TRUE(first->Commit().ok());
  EXPECT_EQ(Slurp(path), "whole");
  EXPECT_EQ(Names(dir.root()), std::vector<std::string>{"out.bin"});  // the lock file went with the claim
  auto third = OutputClaim::Acquire(path);
  EXPECT_TRUE(third.ok()) << third.status().message();
}

TEST(OutputClaimTest, TemporaryNamesAreUniqueAndAbandonRemovesThem) {
  ScratchDir dir;
  const std::string path = dir.Path("out.bin");
  std::string first_temp;
  {
    auto claim = OutputClaim::Acquire(path);
    ASSERT_TRUE(claim.ok());
    first_temp = claim->temp_path();
    EXPECT_EQ(first_temp.rfind(path + ".partial-" + std::to_string(::getpid()) + "-", 0), 0u) << first_temp;
    fs::create_directories(first_temp);  // a directory output (a model) is removed too
    std::ofstream(first_temp + "/experts.bin") << "partial";
  }
  EXPECT_TRUE(Names(dir.root()).empty());
  auto again = OutputClaim::Acquire(path);
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->temp_path(), first_temp);
}

TEST(OutputClaimTest, LeftoversOfKilledWritersAreSwept) {
  ScratchDir dir;
  const std::string path = dir.Path("out.ctrace");
  std::ofstream(path + ".partial-12345-0") << "torn";
  fs::create_directories(path + ".partial-777-3");
  std::ofstream(path + ".partial") << "older fixed name";
  std::ofstream(path + ".lock") << "";  // nobody holds it
  std::ofstream(dir.Path("other.ctrace.partial-1-0")) << "another output's";
  auto claim = OutputClaim::Acquire(path);
  ASSERT_TRUE(claim.ok()) << claim.status().message();
  EXPECT_EQ(Names(dir.root()), (std::vector<std::string>{"other.ctrace.partial-1-0", "out.ctrace.lock"}));
}

TEST(OutputClaimTest, CommitOntoANonEmptyDirectoryFails) {
  ScratchDir dir;
  const std::string path = dir.Path("model");
  fs::create_directories(path);
  std::ofstream(path + "/config.json") << "{}";
  auto claim = OutputClaim::Acquire(path);
  ASSERT_TRUE(claim.ok());
  fs::create_directories(claim->temp_path());
  const Status status = claim->Commit();
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("exists and is not empty"), std::string::npos) << status.message();
  EXPECT_EQ(Names(path), std::vector<std::string>{"config.json"});
  EXPECT_EQ(Names(dir.root()), std::vector<std::string>{"model"});
}

TEST(InputFileTest, RefusesWhatIsNotARegularFileByType) {
  ScratchDir dir;
  const std::string fifo = dir.Path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::ofstream(dir.Path("plain")) << "x";
  EXPECT_TRUE(CheckInputFile(dir.Path("plain"), "CSV file").ok());
  const struct {
    std::string path;
    StatusCode code;
    const char* says;
  } cases[] = {{fifo, StatusCode::kInvalidArgument, "is a FIFO (named pipe), not a CSV file"},
               {"/dev/zero", StatusCode::kInvalidArgument, "is a character device"},
               {"/proc/self/status", StatusCode::kInvalidArgument, "kernel pseudo-file"},
               {dir.root().string(), StatusCode::kInvalidArgument, "is a directory"},
               {dir.Path("missing"), StatusCode::kNotFound, "no such file"},
               {"", StatusCode::kInvalidArgument, "name is empty"}};
  for (const auto& c : cases) {
    const Status status = CheckInputFile(c.path, "CSV file");
    EXPECT_EQ(status.code(), c.code) << c.path << ": " << status.message();
    EXPECT_NE(status.message().find(c.says), std::string::npos) << status.message();
  }
}

}  // namespace
}  // namespace colibri::engine
