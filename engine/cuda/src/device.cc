// Device probing and host-side orchestration of the kernels (compiled by the
// C++ compiler against the CUDA runtime API; the runtime is linked statically).
#include "colibri/cuda/device.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "cuda_status.h"
#include "kernels.h"
#include "nvml.h"

namespace colibri::cuda {
namespace {

using detail::CudaErrorText;
using detail::CudaFailure;

// Device memory freed on scope exit.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  Status Allocate(size_t bytes) {
    const cudaError_t error = cudaMalloc(&ptr_, bytes);
    if (error != cudaSuccess) {
      ptr_ = nullptr;
      return CudaFailure("cudaMalloc", error);
    }
    return Status::Ok();
  }
  float* floats() const { return static_cast<float*>(ptr_); }

 private:
  void* ptr_ = nullptr;
};

// "CUDA 12.8" for a version number such as 12080.
std::string CudaVersionText(int version) {
  return "CUDA " + std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

}  // namespace

Status DeviceCountFailure(int cuda_error, int driver_version, int runtime_version,
                          const std::optional<std::string>& kernel_driver) {
  const auto error = static_cast<cudaError_t>(cuda_error);
  const std::string versions = "the installed NVIDIA driver" + (kernel_driver ? " " + *kernel_driver : std::string()) +
                               " supports up to " + CudaVersionText(driver_version) +
                               ", this binary's CUDA runtime (linked statically) is " +
                               CudaVersionText(runtime_version);
  if (error == cudaErrorInsufficientDriver) {
    // No driver at all reads as version 0: a machine without a GPU.
    if (driver_version == 0) {
      return Status::NotFound("no CUDA device: no NVIDIA driver is loaded (" + CudaErrorText(error) + ")");
    }
    return Status::Unsupported("CUDA driver too old: " + versions + "; install a driver that supports " +
                               CudaVersionText(runtime_version) + " (" + CudaErrorText(error) + ")");
  }
  if (error == cudaErrorSystemDriverMismatch || error == cudaErrorCompatNotSupportedOnDevice) {
    return Status::Unsupported("CUDA driver mismatch: " + versions + " (" + CudaErrorText(error) + ")");
  }
  if (error == cudaErrorNoDevice) return Status::NotFound("no CUDA device: " + CudaErrorText(error));
  return Status::Internal("CUDA cannot count its devices: " + CudaErrorText(error));
}

Result<int> CudaDeviceCount() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();
    int driver = 0;
    int runtime = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
    if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = 0;
    cudaGetLastError();
    // NVML only when a driver is there to ask (it is what a bad driver's message needs).
    const std::optional<std::string> kernel_driver =
        driver != 0 ? detail::NvmlDriverVersion() : std::optional<std::string>();
    return DeviceCountFailure(error, driver, runtime, kernel_driver);
  }
  if (count <= 0) return Status::NotFound("no CUDA device: the driver reports 0 devices");
  return count;
}

Result<DeviceInfo> ProbeCudaDevice(int ordinal) {
  COLIBRI_ASSIGN_OR_RETURN(const int count, CudaDeviceCount());
  if (ordinal < 0 || ordinal >= count) {
    return Status::InvalidArgument("CUDA device " + std::to_string(ordinal) + " does not exist (" +
                                   std::to_string(count) + " device(s): 0.." + std::to_string(count - 1) + ")");
  }
  cudaDeviceProp prop{};
  cudaError_t error = cudaGetDeviceProperties(&prop, ordinal);
  if (error != cudaSuccess) return CudaFailure("cudaGetDeviceProperties", error);
  DeviceInfo info;
  info.ordinal = ordinal;
  info.name = prop.name;
  info.compute_major = prop.major;
  info.compute_minor = prop.minor;
  info.total_memory_bytes = prop.totalGlobalMem;
  info.multiprocessors = prop.multiProcessorCount;
  char bus_id[32] = {};
  error = cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), ordinal);
  if (error != cudaSuccess) return CudaFailure("cudaDeviceGetPCIBusId", error);
  info.pci_bus_id = bus_id;
  info.mig_enabled = detail::NvmlMigMode(info.pci_bus_id);
  return info;
}

Status ScaleAddOnDevice(const float* x, float a, float* y, size_t n) {
  if (n == 0) return Status::Ok();
  if (x == nullptr || y == nullptr) return Status::InvalidArgument("ScaleAddOnDevice: null x or y with n > 0");
  if (n > std::numeric_limits<size_t>::max() / sizeof(float)) {
    return Status::InvalidArgument("ScaleAddOnDevice: n = " + std::to_string(n) + " overflows the byte size");
  }
  COLIBRI_RETURN_IF_ERROR(CudaDeviceCount().status());
  const size_t bytes = n * sizeof(float);
  DeviceBuffer dx;
  DeviceBuffer dy;
  COLIBRI_RETURN_IF_ERROR(dx.Allocate(bytes));
  COLIBRI_RETURN_IF_ERROR(dy.Allocate(bytes));
  cudaError_t error = cudaMemcpy(dx.floats(), x, bytes, cudaMemcpyHostToDevice);
  if (error != cudaSuccess) return CudaFailure("cudaMemcpy (x to device)", error);
  error = cudaMemcpy(dy.floats(), y, bytes, cudaMemcpyHostToDevice);
  if (error != cudaSuccess) return CudaFailure("cudaMemcpy (y to device)", error);
  error = detail::LaunchScaleAdd(dx.floats(), a, dy.floats(), n, /*stream=*/nullptr);
  if (error != cudaSuccess) return CudaFailure("ScaleAdd kernel launch", error);
  // Synchronous on the default stream: waits for the kernel and reports its errors.
  error = cudaMemcpy(y, dy.floats(), bytes, cudaMemcpyDeviceToHost);
  if (error != cudaSuccess) return CudaFailure("cudaMemcpy (y to host)", error);
  return Status::Ok();
}

}  // namespace colibri::cuda
