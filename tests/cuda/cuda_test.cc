// Tests of colibri_cuda. Without a GPU or driver every test skips with the
// reason ProbeCudaDevice gives.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "colibri/cuda/bench_reference.h"
#include "colibri/cuda/device.h"
#include "cuda_test_util.h"

namespace colibri::cuda {
namespace {

TEST(CudaDeviceTest, ProbeDescribesDeviceZero) {
  auto probe = ProbeCudaDevice(0);
  if (!probe.ok()) {
    EXPECT_NE(probe.status().message().find("no CUDA device: "), std::string::npos) << probe.status().message();
    SKIP_WITHOUT_CUDA_DEVICE();
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

// Needs no device: what each cudaGetDeviceCount failure becomes.
TEST(CudaDeviceTest, DeviceCountFailuresAreTold) {
  constexpr int kNoDevice = 100;             // cudaErrorNoDevice
  constexpr int kInsufficientDriver = 35;    // cudaErrorInsufficientDriver
  constexpr int kSystemDriverMismatch = 803;  // cudaErrorSystemDriverMismatch
  constexpr int kInitializationError = 3;    // cudaErrorInitializationError
  Status none = DeviceCountFailure(kNoDevice, 13000, 13000, std::nullopt);
  EXPECT_EQ(none.code(), StatusCode::kNotFound);
  EXPECT_EQ(none.message().rfind("no CUDA device: ", 0), 0u) << none.message();
  Status no_driver = DeviceCountFailure(kInsufficientDriver, 0, 13000, std::nullopt);
  EXPECT_EQ(no_driver.code(), StatusCode::kNotFound) << "no driver at all: a machine without a GPU";
  EXPECT_NE(no_driver.message().find("no NVIDIA driver is loaded"), std::string::npos) << no_driver.message();
  Status old = DeviceCountFailure(kInsufficientDriver, 12080, 13000, std::string("570.86.15"));
  EXPECT_EQ(old.code(), StatusCode::kUnsupported);
  EXPECT_EQ(old.message().find("no CUDA device"), std::string::npos) << "not to be read as no GPU: " << old.message();
  EXPECT_NE(old.message().find("CUDA driver too old"), std::string::npos) << old.message();
  EXPECT_NE(old.message().find("570.86.15 supports up to CUDA 12.8"), std::string::npos) << old.message();
  EXPECT_NE(old.message().find("runtime (linked statically) is CUDA 13.0"), std::string::npos) << old.message();
  Status mismatch = DeviceCountFailure(kSystemDriverMismatch, 13000, 13000, std::nullopt);
  EXPECT_EQ(mismatch.code(), StatusCode::kUnsupported);
  EXPECT_NE(mismatch.message().find("CUDA driver mismatch"), std::string::npos) << mismatch.message();
  Status other = DeviceCountFailure(kInitializationError, 13000, 13000, std::nullopt);
  EXPECT_EQ(other.code(), StatusCode::kInternal);
  EXPECT_EQ(other.message().find("no CUDA device"), std::string::npos) << other.message();
}

// Needs no device: where cuBLAS is looked for, and that every miss is said.
TEST(CublasSearchTest, ExplicitPathFirstThenTheUsualPlaces) {
  ASSERT_EQ(setenv("COLIBRI_CUBLAS", "/nonexistent/libcublas.so.13", 1), 0);
  CublasLibrary cublas = LoadCublas();
  unsetenv("COLIBRI_CUBLAS");
  ASSERT_FALSE(cublas.tried.empty());
  EXPECT_NE(cublas.tried[0].find("/nonexistent/libcublas.so.13"), std::string::npos) << cublas.tried[0];
  if (cublas.handle == nullptr) {
    EXPECT_TRUE(cublas.path.empty());
    std::string tried;
    for (const std::string& t : cublas.tried) tried += t + "\n";
    EXPECT_NE(tried.find("/usr/local/cuda*/lib64/libcublas.so.13"), std::string::npos) << tried;
    EXPECT_NE(tried.find("/nvidia/*/lib/libcublas.so.13"), std::string::npos) << tried;
    // The toolkit's copy, where there is one, must have been found.
    EXPECT_NE(access("/usr/local/cuda/lib64/libcublas.so.13", R_OK), 0) << tried;
  } else {
    EXPECT_FALSE(cublas.path.empty());
    std::cout << "cuBLAS: " << cublas.path << "\n";
  }
}

}  // namespace
}  // namespace colibri::cuda
