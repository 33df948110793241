// The run store's defences (run_store_integrity.h): a changed value in a
// finished run is refused by its checksum; random byte flips never return
// altered figures; a damaged file is refused before anything is written;
// reading opens read-only; paths that are not run stores are named; a store
// on a read-only file system or in a directory the user cannot write is read
// (immutable) and refused for writing with the cause.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <fstream>
#include <random>

#include "run_store_test_util.h"

namespace colibri::reports {
namespace {

using namespace store_testing;  // NOLINT: the suite's helpers

class RunStoreIntegrityTest : public StoreDirTest {
 protected:
  // A store with one finished run (FullResults), closed; its run id.
  int64_t OneRun(const std::string& path) {
    auto store = MustOpen(path);
    auto id = store->BeginRun(FullInfo());
    EXPECT_TRUE(id.ok());
    EXPECT_TRUE(store->FinishRun(*id, FullResults(), 5).ok());
    return *id;
  }
};

TEST_F(RunStoreIntegrityTest, AChangedValueIsRefusedByTheChecksum) {
  const int64_t id = OneRun(Path());
  const char* edits[] = {
      "UPDATE run_scalars SET value = 0",
      "UPDATE run_texts SET value = 'other' WHERE name = (SELECT MIN(name) FROM run_texts)",
      "UPDATE run_distributions SET count = count + 1",
      "UPDATE run_tiers SET hits = hits + 1",
      "UPDATE runs SET label = 'another machine'",
      "DELETE FROM run_hit_rate WHERE position = 0",
  };
  for (const char* edit : edits) {
    const std::string path = Path(std::string("edit-") + std::to_string(std::hash<std::string>{}(edit)) + ".db");
    std::filesystem::copy_file(Path(), path);
    { RawDb(path).Exec(edit); }
    auto store = MustOpen(path);
    auto results = store->Results(id);
    ASSERT_FALSE(results.ok()) << edit;
    EXPECT_EQ(results.status().code(), StatusCode::kCorruption) << edit;
    EXPECT_TRUE(Contains(results.status().message(), "do not match the checksum")) << results.status().message();
    EXPECT_TRUE(Contains(results.status().message(), path)) << results.status().message();
  }
  auto intact = MustOpen(Path());
  auto results = intact->Results(id);
  ASSERT_TRUE(results.ok()) << results.status().message();
  ExpectSameResults(*results, FullResults(), true);
}

TEST_F(RunStoreIntegrityTest, RandomByteFlipsNeverReturnAlteredFigures) {
  const int64_t id = OneRun(Path());
  std::ifstream in(Path(), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  ASSERT_GT(bytes.size(), 4096u);
  std::mt19937_64 rng(17);
  int refused = 0;
  for (int trial = 0; trial < 60; ++trial) {
    std::string damaged = bytes;
    for (int flip = 0; flip < 8; ++flip) damaged[100 + rng() % (damaged.size() - 100)] ^= static_cast<char>(1 + rng() % 255);
    const std::string path = Path("flip-" + std::to_string(trial) + ".db");
    std::ofstream(path, std::ios::binary) << damaged;
    RunStore::Options options;
    options.read_only = true;
    auto store = RunStore::Open(path, options);
    if (!store.ok()) {
      ++refused;
      continue;
    }
    auto results = (*store)->Results(id);
    if (!results.ok()) {
      ++refused;
      continue;
    }
    ExpectSameResults(*results, FullResults(), true);  // unharmed figures, or none at all
  }
  EXPECT_GT(refused, 0);
}

TEST_F(RunStoreIntegrityTest, ADamagedFileIsRefusedBeforeAnythingIsWritten) {
  OneRun(Path());
  // Keep the header (which still declares every page) and cut the file: malformed.
  std::ifstream in(Path(), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  in.close();
  bytes.resize(bytes.size() / 2);
  std::ofstream(Path(), std::ios::binary | std::ios::trunc) << bytes;
  auto store = RunStore::Open(Path());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kCorruption) << store.status().message();
  EXPECT_TRUE(Contains(store.status().message(), "PRAGMA quick_check")) << store.status().message();
  EXPECT_TRUE(Contains(store.status().message(), "nothing was written")) << store.status().message();
  std::ifstream after(Path(), std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(after)), {}), bytes);
}

TEST_F(RunStoreIntegrityTest, ReadingOpensReadOnly) {
  const int64_t id = OneRun(Path());
  RunStore::Options options;
  options.read_only = true;
  auto store = RunStore::Open(Path(), options);
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_TRUE((*store)->Results(id).ok());
  EXPECT_EQ((*store)->List()->size(), 1u);
  auto write = (*store)->BeginRun(FullInfo());
  ASSERT_FALSE(write.ok());
  EXPECT_TRUE(Contains(write.status().message(), "readonly")) << write.status().message();
  auto missing = RunStore::Open(Path("missing.db"), options);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(missing.status().message(), "no such run store")) << missing.status().message();
  EXPECT_FALSE(std::filesystem::exists(Path("missing.db")));
}

// A store SQLite cannot create its WAL index beside: listed and read
// (immutable), refused for writing naming the cause, never called damaged.
void ExpectReadableNotWritable(const std::string& path, int64_t id, const std::string& cause) {
  RunStore::Options read_only;
  read_only.read_only = true;
  auto reader = RunStore::Open(path, read_only);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  EXPECT_EQ((*reader)->List()->size(), 1u);
  EXPECT_TRUE((*reader)->Results(id).ok());
  auto writer = RunStore::Open(path);
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), StatusCode::kIoError);
  EXPECT_TRUE(Contains(writer.status().message(), path + ": the run store cannot be written: " + cause))
      << writer.status().message();
  EXPECT_FALSE(Contains(writer.status().message(), "damaged")) << writer.status().message();
}

TEST_F(RunStoreIntegrityTest, AReadOnlyFileSystemIsReadAndRefusedForWriting) {
  const std::string mount_point = Path("ro");
  std::filesystem::create_directories(mount_point);
  if (::geteuid() != 0 || ::mount("none", mount_point.c_str(), "tmpfs", 0, "size=16m") != 0) {
    GTEST_SKIP() << "mounting a tmpfs needs root (and a kernel that allows it here)";
  }
  const std::string path = mount_point + "/runs.db";
  const int64_t id = OneRun(path);
  ASSERT_EQ(::mount("none", mount_point.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr), 0) << std::strerror(errno);
  ExpectReadableNotWritable(path, id, "its file system is mounted read-only");
  EXPECT_EQ(::umount(mount_point.c_str()), 0) << std::strerror(errno);
}

TEST_F(RunStoreIntegrityTest, ADirectoryTheUserCannotWriteIsReadAndRefusedForWriting) {
  const std::string dir = Path("locked");
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/runs.db";
  const int64_t id = OneRun(path);
  ASSERT_EQ(::chmod(dir.c_str(), 0555), 0);
  ASSERT_EQ(::chmod(Path("").c_str(), 0755), 0);
  // Root writes anywhere: check as an unprivileged user in a child.
  const int status = RunChild([&] {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) return 3;
    ExpectReadableNotWritable(path, id, "its directory cannot be written (Permission denied)");
    return ::testing::Test::HasFailure() ? 1 : 0;
  });
  EXPECT_TRUE(ExitedZero(status)) << "the child's checks failed (exit " << WEXITSTATUS(status) << ")";
  ::chmod(dir.c_str(), 0755);
}

TEST_F(RunStoreIntegrityTest, PathsThatAreNotRunStoresAreNamed) {
  std::filesystem::create_directories(Path("a-dir"));
  std::ofstream(Path("notes.txt")) << "not a database\n";
  const struct {
    std::string path;
    StatusCode code;
    const char* says;
  } cases[] = {{Path("no-such-dir/runs.db"), StatusCode::kNotFound, "no-such-dir: no such directory"},
               {Path("a-dir"), StatusCode::kInvalidArgument, "is a directory, not a run store"},
               {Path("notes.txt"), StatusCode::kInvalidArgument, "not an SQLite database"},
               {Path("notes.txt/runs.db"), StatusCode::kInvalidArgument, "not a directory"},
               {"", StatusCode::kInvalidArgument, "the run store path is empty"}};
  for (const auto& c : cases) {
    auto store = RunStore::Open(c.path);
    ASSERT_FALSE(store.ok()) << c.path;
    EXPECT_EQ(store.status().code(), c.code) << store.status().message();
    EXPECT_TRUE(Contains(store.status().message(), c.says)) << store.status().message();
  }
}

}  // namespace
}  // namespace colibri::reports
