// Shared by the CUDA tests: skipping without a device, and the status every
// backend's Create returns without a usable device.
//
// The skip rule: without a usable CUDA device the tests that need one skip,
// with ProbeCudaDevice's reason, unless COLIBRI_REQUIRE_CUDA_DEVICE is set
// (to anything but "" or "0"): then they FAIL. tools/gpu-check.sh sets it
// when nvidia-smi lists a GPU, so a broken driver or runtime cannot pass as
// "no GPU here". Tests that do not apply (e.g. a no-device test on a machine
// with a device) skip with a message starting "not applicable: ", the one
// kind of skip gpu-check.sh accepts there.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "colibri/cuda/device.h"
#include "colibri/status.h"

namespace colibri::cuda::testing {

// Whether COLIBRI_REQUIRE_CUDA_DEVICE asks a missing device to fail tests.
inline bool CudaDeviceRequired() {
  const char* value = std::getenv("COLIBRI_REQUIRE_CUDA_DEVICE");
  return value != nullptr && *value != '\0' && std::strcmp(value, "0") != 0;
}

// For a harness's Make(): a backend that cannot be made for want of a
// device (kNotFound, kUnsupported) becomes kUnsupported, which skips the
// conformance suite, or, when CudaDeviceRequired(), kInternal, which fails it.
inline Status NoDeviceStatus(const Status& status) {
  if (status.code() != StatusCode::kNotFound && status.code() != StatusCode::kUnsupported) return status;
  if (CudaDeviceRequired()) {
    return Status::Internal("COLIBRI_REQUIRE_CUDA_DEVICE is set but: " + status.message());
  }
  return Status::Unsupported(status.message());
}

// Without a device: kNotFound "no CUDA device: <why>", or kUnsupported with
// the same start when NVML sees a GPU in MIG mode that CUDA cannot use.
inline void ExpectNoDevice(const Status& status) {
  EXPECT_NE(status.message().find("no CUDA device"), std::string::npos) << status.message();
  if (status.code() == StatusCode::kUnsupported) {
    EXPECT_NE(status.message().find("MIG"), std::string::npos) << status.message();
  } else {
    EXPECT_EQ(status.code(), StatusCode::kNotFound) << status.message();
  }
}

}  // namespace colibri::cuda::testing

// Skips the running test, with ProbeCudaDevice's reason, unless CUDA device 0
// is usable; fails it instead when CudaDeviceRequired().
#define SKIP_WITHOUT_CUDA_DEVICE()                                                                      \
  do {                                                                                                  \
    auto probe = ::colibri::cuda::ProbeCudaDevice(0);                                                   \
    if (!probe.ok()) {                                                                                  \
      if (::colibri::cuda::testing::CudaDeviceRequired()) {                                             \
        FAIL() << "COLIBRI_REQUIRE_CUDA_DEVICE is set but: " << probe.status().message();               \
      }                                                                                                 \
      GTEST_SKIP() << probe.status().message();                                                         \
    }                                                                                                   \
  } while (0)
