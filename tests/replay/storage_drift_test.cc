// The storage probe of `colibri fidelity` (replay/storage_drift.h), on a
// small file in the build tree: structure, determinism of the modelled side
// and refusals, never timings (these shared machines are noisy).
#include "colibri/replay/storage_drift.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "colibri/sim/profiles.h"

namespace colibri::replay {
namespace {

class StorageDriftTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One file per test: ctest runs the tests of this file in parallel.
    path_ = (std::filesystem::current_path() /
             (std::string("storage_drift_test-") + ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".bin"))
                .string();
    std::ofstream out(path_, std::ios::binary);
    std::vector<char> bytes(4 << 20);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 2654435761u) >> 13);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    auto catalog = sim::HardwareCatalog::BuiltIn();
    ASSERT_TRUE(catalog.ok()) << catalog.status().message();
    auto machine = catalog.value().Resolve("cpu-local");
    ASSERT_TRUE(machine.ok()) << machine.status().message();
    nvme_ = machine.value().nvme;
  }
  void TearDown() override { std::filesystem::remove(path_); }

  StorageDriftOptions Options() const {
    StorageDriftOptions o;
    o.file = path_;
    o.read_bytes = 64 << 10;
    o.queue_depth = 2;
    o.duration_ns = 20'000'000;
    o.min_reads = 8;
    o.max_reads = 64;
    return o;
  }

  std::string path_;
  sim::NvmeProfile nvme_;
};

TEST_F(StorageDriftTest, MeasuresBothSidesOfOnePoint) {
  auto first = ProbeStorageDrift(Options(), nvme_);
  ASSERT_TRUE(first.ok()) << first.status().message();
  const StorageDrift& d = first.value();
  EXPECT_EQ(d.read_bytes, 64u << 10);
  EXPECT_EQ(d.queue_depth, 2u);
  EXPECT_GE(d.reads, 8u);
  EXPECT_LE(d.reads, 64u);
  EXPECT_GT(d.measured_p50_ns, 0);
  EXPECT_GT(d.profile_p50_ns, 0);
  EXPECT_GT(d.measured_bytes_per_s, 0u);
  EXPECT_GT(d.profile_bytes_per_s, 0u);
  EXPECT_DOUBLE_EQ(d.drift, static_cast<double>(d.profile_p50_ns - d.measured_p50_ns) /
                                static_cast<double>(d.measured_p50_ns));
  auto second = ProbeStorageDrift(Options(), nvme_);
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(second.value().profile_p50_ns, d.profile_p50_ns) << "the modelled side is seeded, not timed";
  EXPECT_EQ(second.value().profile_bytes_per_s, d.profile_bytes_per_s);
}

TEST_F(StorageDriftTest, RefusesWhatItCannotMeasure) {
  StorageDriftOptions o = Options();
  o.file = path_ + ".missing";
  auto missing = ProbeStorageDrift(o, nvme_);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(".missing"), std::string::npos) << missing.status().message();
  for (uint64_t bad : {uint64_t{0}, uint64_t{5000}, uint64_t{8} << 20}) {
    o = Options();
    o.read_bytes = bad;
    auto refused = ProbeStorageDrift(o, nvme_);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(refused.status().message().find(path_), std::string::npos) << refused.status().message();
  }
  o = Options();
  o.queue_depth = 0;
  EXPECT_EQ(ProbeStorageDrift(o, nvme_).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace colibri::replay
