// CUDA device access for Colibri, behind a C++ API that exposes no CUDA types.
//
// Built only when nvcc is found (COLIBRI_HAVE_CUDA). The CUDA runtime is
// linked statically, so a binary using this library needs neither
// libcudart.so nor a GPU to start: without a driver or device, every call
// returns a Status saying so. Thread-safety: the functions share no state of
// their own but NVML's (loaded once per process, behind a mutex); they use
// the calling thread's current CUDA device.
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

// Number of CUDA devices visible to this process. Errors: kNotFound "no CUDA
// device: <why>" when the driver reports none or no NVIDIA driver is loaded
// (a machine without a GPU); kUnsupported "CUDA driver too old: ..." (or
// "CUDA driver mismatch: ...") naming the driver's and this runtime's CUDA
// versions when a driver is there but cannot serve this binary (the static
// CUDA 13 runtime needs a recent driver); kInternal for any other failure.
Result<int> CudaDeviceCount();

// The Status CudaDeviceCount returns when cudaGetDeviceCount failed with
// `cuda_error` (a cudaError_t), given cudaDriverGetVersion's and
// cudaRuntimeGetVersion's answers (e.g. 12080, 13000; 0 when unknown) and
// NVML's driver version: exposed so the classification is tested without a
// driver.
Status DeviceCountFailure(int cuda_error, int driver_version, int runtime_version,
                          const std::optional<std::string>& kernel_driver);

// Describes device `ordinal`. Errors: CudaDeviceCount's; kInvalidArgument
// when `ordinal` is out of range.
Result<DeviceInfo> ProbeCudaDevice(int ordinal);

// y[i] += a * x[i] for i < n, computed on the current device. `x` and `y` are
// host pointers; the data is copied through device memory and back.
Status ScaleAddOnDevice(const float* x, float a, float* y, size_t n);

}  // namespace colibri::cuda
