// The GPU harnesses where they cannot run: without a CUDA device (or in a
// build without CUDA) creating them and the suites fail cleanly with the
// reason, before touching anything. On a machine with a usable device these
// tests skip (the GPU check runs the benches there).
#include <gtest/gtest.h>

#include "colibri/bench/cuda_compute_bench.h"
#include "colibri/bench/cuda_ffn.h"
#include "colibri/bench/host_to_device.h"
#include "colibri/bench/pcie_bench.h"
#include "colibri/replay/hw_backends.h"

namespace colibri::bench {
namespace {

void ExpectCannotRun(const Status& status) {
  ASSERT_FALSE(status.ok());
#if COLIBRI_HAVE_CUDA
  EXPECT_NE(status.message().find("no CUDA device"), std::string::npos) << status.message();
#else
  EXPECT_NE(status.message().find("built without CUDA"), std::string::npos) << status.message();
#endif
}

class GpuHarnessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (replay::CudaUsable(0).ok()) GTEST_SKIP() << "a usable CUDA device is present";
  }
};

TEST_F(GpuHarnessTest, HarnessesSayWhyTheyCannotRun) {
  ExpectCannotRun(HostToDeviceBench::Create(0, 2).status());
  ExpectCannotRun(CudaFfnBench::Create(0).status());
}

TEST_F(GpuHarnessTest, SuitesSayWhyTheyCannotRun) {
  PcieBenchOptions pcie;
  pcie.sizes_bytes = {4096};
  ExpectCannotRun(RunPcieBench(pcie).status());
  CudaComputeBenchOptions compute;
  compute.dtypes = {engine::DType::kBf16};
  compute.batches = {1};
  ExpectCannotRun(RunCudaComputeBench(compute).status());
}

TEST(GpuSuiteOptionsTest, EmptyListsAreRefusedFirst) {
  EXPECT_EQ(RunPcieBench(PcieBenchOptions{}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RunCudaComputeBench(CudaComputeBenchOptions{}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace colibri::bench
