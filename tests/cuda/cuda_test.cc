// Tests of colibri_cuda. Without a GPU or driver every test skips with the
// reason ProbeCudaDevice gives.
#include <gtest/gtest.h>

#include <iostream>
#include <vector>

#include "colibri/cuda/device.h"

namespace colibri::cuda {
namespace {

#define SKIP_WITHOUT_CUDA_DEVICE()                       \
  do {                                                   \
    auto probe = ProbeCudaDevice(0);                     \
    if (!probe.ok()) GTEST_SKIP() << probe.status().message(); \
  } while (0)

TEST(CudaDeviceTest, ProbeDescribesDeviceZero) {
  auto probe = ProbeCudaDevice(0);
  if (!probe.ok()) {
    EXPECT_NE(probe.status().message().find("no CUDA device: "), std::string::npos) << probe.status().message();
    GTEST_SKIP() << probe.status().message();
  }
  const DeviceInfo& info = probe.value();
  EXPECT_EQ(info.ordinal, 0);
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.compute_major, 5);
  EXPECT_GT(info.total_memory_bytes, 0u);
  EXPECT_GT(info.multiprocessors, 0);
  EXPECT_FALSE(info.pci_bus_id.empty());
  std::cout << "device 0: " << info.name << ", sm_" << info.compute_major << info.compute_minor << ", "
            << info.total_memory_bytes / (1 << 20) << " MiB, " << info.multiprocessors << " SMs, PCI "
            << info.pci_bus_id << ", MIG "
            << (info.mig_enabled ? (*info.mig_enabled ? "on" : "off") : "unknown") << "\n";
}

TEST(CudaDeviceTest, ProbeRejectsOrdinalOutOfRange) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto probe = ProbeCudaDevice(1 << 20);
  ASSERT_FALSE(probe.ok());
  EXPECT_EQ(probe.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(ProbeCudaDevice(-1).ok());
}

TEST(CudaDeviceTest, ScaleAddMatchesCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  // Not a multiple of the block size, and more than one block.
  for (size_t n : {size_t{1}, size_t{1000}, size_t{(1 << 20) + 3}}) {
    std::vector<float> x(n);
    std::vector<float> y(n);
    for (size_t i = 0; i < n; ++i) {
      x[i] = static_cast<float>(i % 97) * 0.25f - 3.0f;
      y[i] = static_cast<float>(i % 13) - 6.5f;
    }
    std::vector<float> expected = y;
    const float a = 1.5f;
    for (size_t i = 0; i < n; ++i) expected[i] += a * x[i];
    const Status status = ScaleAddOnDevice(x.data(), a, y.data(), n);
    ASSERT_TRUE(status.ok()) << status.message();
    for (size_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(y[i], expected[i]) << "n=" << n << " i=" << i;
  }
}

TEST(CudaDeviceTest, ScaleAddArgumentChecks) {
  // Needs no device: these are rejected (or done) before touching CUDA.
  EXPECT_TRUE(ScaleAddOnDevice(nullptr, 2.0f, nullptr, 0).ok());
  float y = 1.0f;
  Status status = ScaleAddOnDevice(nullptr, 2.0f, &y, 1);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.message();
  EXPECT_EQ(y, 1.0f);
}

}  // namespace
}  // namespace colibri::cuda
