// This machine's identity (sim/machine_identity.h): what it reads, the slug
// of a CPU model, and when two identities differ.
#include "colibri/sim/machine_identity.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace colibri::sim {
namespace {

TEST(MachineIdentityTest, ReadsThisMachine) {
  const MachineIdentity here = ThisMachineIdentity(std::filesystem::current_path().string());
  EXPECT_FALSE(here.cpu_model.empty());
  EXPECT_GE(here.cores, 1u);
  EXPECT_GT(here.ram_bytes, 0u);
  EXPECT_FALSE(here.kernel.empty());
  EXPECT_FALSE(here.block_device.empty()) << "a file system, with or without a block device, is named";
  EXPECT_TRUE(IdentityMismatch(here, here).empty());
  EXPECT_TRUE(IdentityMismatch(MachineIdentity{}, here).empty()) << "published profiles describe no machine";
}

TEST(MachineIdentityTest, MismatchSaysWhatDiffers) {
  MachineIdentity a{"AMD EPYC 9R14", "avx2 avx512f", 2, 24ull << 30, "6.1", "vda", "2026-12-01", "abc"};
  MachineIdentity b = a;
  b.ram_bytes = (24ull << 30) + (512ull << 20);  // within 5%
  EXPECT_TRUE(IdentityMismatch(a, b).empty());
  b.cpu_model = "Intel(R) Xeon(R) Platinum 8488C";
  const std::string why = IdentityMismatch(a, b);
  EXPECT_NE(why.find("measured on AMD EPYC 9R14 (2 cores"), std::string::npos) << why;
  EXPECT_NE(why.find("this machine is Intel(R) Xeon(R) Platinum 8488C"), std::string::npos) << why;
  b = a;
  b.cores = 16;
  EXPECT_FALSE(IdentityMismatch(a, b).empty());
}

TEST(MachineIdentityTest, CpuSlugs) {
  EXPECT_EQ(CpuSlug("AMD EPYC 9R14 96-Core Processor"), "amd-epyc-9r14");
  EXPECT_EQ(CpuSlug("Intel(R) Xeon(R) Platinum 8488C"), "intel-xeon-platinum-8488c");
  EXPECT_EQ(CpuSlug("Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz"), "intel-core-i78700");
  EXPECT_EQ(CpuSlug("AMD EPYC"), "amd-epyc");
  EXPECT_EQ(CpuSlug(""), "cpu");
}

}  // namespace
}  // namespace colibri::sim
