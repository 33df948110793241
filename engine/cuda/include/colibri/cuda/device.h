// CUDA device access for Colibri, behind a C++ API that exposes no CUDA types.
//
// Built only when nvcc is found (COLIBRI_HAVE_CUDA). The CUDA runtime is
// linked statically, so a binary using this library needs neither
// libcudart.so nor a GPU to start: without a driver or device, every call
// returns a Status saying so. Thread-safety: the functions share no state of
// their own; they use the calling thread's current CUDA device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "colibri/status.h"

namespace colibri::cuda {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int compute_major = 0;  // compute capability, e.g. 9.0 for H100/H200
  int compute_minor = 0;
  uint64_t total_memory_bytes = 0;  // as CUDA reports it (a MIG slice's memory under MIG)
  int multiprocessors = 0;
  std::string pci_bus_id;  // "0000:00:00.0"
  // MIG mode of the physical GPU, from NVML (loaded at run time when present);
  // nullopt when NVML is unavailable or does not say.
  std::optional<bool> mig_enabled;
};

// Number of CUDA devices visible to this process, or "no CUDA device: <why>"
// (kNotFound) when there is none or no usable driver.
Result<int> CudaDeviceCount();

// Describes device `ordinal`. kNotFound "no CUDA device: <why>" without a
// device or driver; kInvalidArgument when `ordinal` is out of range.
Result<DeviceInfo> ProbeCudaDevice(int ordinal);

// y[i] += a * x[i] for i < n, computed on the current device. `x` and `y` are
// host pointers; the data is copied through device memory and back.
Status ScaleAddOnDevice(const float* x, float a, float* y, size_t n);

}  // namespace colibri::cuda
