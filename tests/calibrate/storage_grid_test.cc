// Measuring storage for a measured nvme profile (calibrate/storage_grid.h),
// on a small file in the build tree: structure and refusals, never timings
// (these shared machines are noisy).
#include "colibri/calibrate/storage_grid.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace colibri::calibrate {
namespace {

// A directory of the running test's own (ctest runs the tests of this file in parallel, and the
// first checks that no measurement file is left in its directory).
std::string OwnDir() {
  const std::filesystem::path dir = std::filesystem::current_path() / "storage_grid_test" /
                                    ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::filesystem::create_directories(dir);
  return dir.string();
}

StorageGridOptions Small() {
  StorageGridOptions o;
  o.dir = OwnDir();
  o.file_bytes = 32ull << 20;
  o.read_bytes = {4096, 1 << 20};
  o.queue_depths = {1, 4};
  o.reads_per_point = 64;
  o.min_reads_per_point = 8;
  o.seconds_per_point_ns = 50'000'000;
  o.bursts_per_point = 5;
  return o;
}

TEST(StorageGridTest, MeasuresEveryPointAndFitsBothModels) {
  size_t progress_calls = 0;
  StorageGridOptions o = Small();
  o.progress = [&](size_t done, size_t all) {
    ++progress_calls;
    EXPECT_LE(done, all);
  };
  auto measured = MeasureStorageGrid(o);
  ASSERT_TRUE(measured.ok()) << measured.status().message();
  const StorageGrid& g = measured.value();
  ASSERT_EQ(g.grid.points.size(), 4u);
  EXPECT_EQ(progress_calls, 4u * o.passes) << "every point of every pass";
  EXPECT_EQ(g.file_bytes, o.file_bytes);
  for (const sim::ReadGridPoint& p : g.grid.points) {
    EXPECT_GE(p.reads, 8u);
    EXPECT_GT(p.bytes_per_s, 0u);
    EXPECT_TRUE(std::is_sorted(p.latency_ns.begin(), p.latency_ns.end()));
  }
  ASSERT_EQ(g.fits.size(), 4u);
  for (const PointFit& f : g.fits) {
    EXPECT_GT(f.measured_p50_ns, 0);
    EXPECT_GT(f.grid_throughput_error, -1.0);  // computed (a ratio), not asserted
    EXPECT_GE(f.pass_p99_spread, 0.0);
  }
  ASSERT_EQ(g.bursts.size(), 4u) << "each read size x each burst size";
  for (const BurstFit& b : g.bursts) {
    EXPECT_EQ(b.bursts, 5u);
    EXPECT_GT(b.measured_p50_ns, 0);
    EXPECT_GE(b.measured_p99_ns, b.measured_p50_ns);
    EXPECT_GT(b.independent_p50_error, -1.0);  // computed, not asserted
    EXPECT_GT(b.shared_p50_error, -1.0);
  }
  EXPECT_GE(g.channel.channels, 1u);
  EXPECT_FALSE(g.backend.empty());
  for (const auto& entry : std::filesystem::directory_iterator(o.dir)) {
    EXPECT_EQ(entry.path().filename().string().rfind("colibri-calibrate-", 0), std::string::npos)
        << "the measurement file is removed";
  }
}

TEST(StorageGridTest, StudiedSizesAreGridPointsAndBursts) {
  StorageGridOptions o = Small();
  o.max_burst_read_bytes = 4096;                  // the 1 MiB grid size gets no bursts ...
  o.studied_read_bytes = {3ull << 20, 1 << 20};   // ... unless it is studied; 3 MiB joins the grid
  auto measured = MeasureStorageGrid(o);
  ASSERT_TRUE(measured.ok()) << measured.status().message();
  const StorageGrid& g = measured.value();
  std::vector<std::pair<uint64_t, uint32_t>> points;
  for (const sim::ReadGridPoint& p : g.grid.points) points.emplace_back(p.read_bytes, p.queue_depth);
  const std::vector<std::pair<uint64_t, uint32_t>> expected = {
      {4096, 1}, {4096, 4}, {1 << 20, 1}, {1 << 20, 4}, {3ull << 20, 1}, {3ull << 20, 4}};
  EXPECT_EQ(points, expected) << "sizes ascending, each once";
  std::vector<uint64_t> burst_sizes;
  for (const BurstFit& b : g.bursts) burst_sizes.push_back(b.read_bytes);
  const std::vector<uint64_t> expected_bursts = {4096, 4096, 1 << 20, 1 << 20, 3ull << 20, 3ull << 20};
  EXPECT_EQ(burst_sizes, expected_bursts);
  o = Small();
  o.studied_read_bytes = {5000};
  EXPECT_EQ(MeasureStorageGrid(o).status().code(), StatusCode::kInvalidArgument) << "studied sizes are checked too";
}

TEST(StorageGridTest, RefusesBeforeWriting) {
  StorageGridOptions o = Small();
  o.file_bytes = uint64_t{1} << 60;  // more than any disk here
  o.read_bytes = {4096};
  auto refused = MeasureStorageGrid(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("bytes free"), std::string::npos) << refused.status().message();
  o = Small();
  o.dir = "/nonexistent/dir";
  EXPECT_EQ(MeasureStorageGrid(o).status().code(), StatusCode::kNotFound);
  o = Small();
  o.queue_depths = {2, 4};
  EXPECT_EQ(MeasureStorageGrid(o).status().code(), StatusCode::kInvalidArgument);
  o = Small();
  o.read_bytes = {5000};
  EXPECT_EQ(MeasureStorageGrid(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(StorageGridTest, TmpfsIsMeasuredWithAWarning) {
  if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm here";
  StorageGridOptions o = Small();
  o.dir = "/dev/shm";
  o.file_bytes = 8ull << 20;
  o.read_bytes = {4096};
  o.queue_depths = {1};
  auto measured = MeasureStorageGrid(o);
  ASSERT_TRUE(measured.ok()) << measured.status().message();
  bool warned = false;
  for (const std::string& w : measured.value().warnings) warned |= w.find("tmpfs") != std::string::npos;
  EXPECT_TRUE(warned);
}

}  // namespace
}  // namespace colibri::calibrate
