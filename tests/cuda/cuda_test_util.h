// Shared by the CUDA tests: the status every backend's Create returns without a usable device.
#pragma once

#include <gtest/gtest.h>

#include "colibri/status.h"

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
