// Shared by the CUDA tests: skipping without a device, and the status every
// backend's Create returns without a usable device.
#pragma once

#include <gtest/gtest.h>

#include "colibri/cuda/device.h"
#include "colibri/status.h"

// Skips the running test, with ProbeCudaDevice's reason, unless CUDA device 0 is usable.
#define SKIP_WITHOUT_CUDA_DEVICE()                                               \
  do {                                                                           \
    auto probe = ::colibri::cuda::ProbeCudaDevice(0);                            \
    if (!probe.ok()) GTEST_SKIP() << probe.status().message();                   \
  } while (0)

namespace colibri::cuda::testing {

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
