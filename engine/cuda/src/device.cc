// Device probing and host-side orchestration of the kernels (compiled by the
// C++ compiler against the CUDA runtime API; the runtime is linked statically).
#include "colibri/cuda/device.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdint>
#include <limits>

#include "cuda_status.h"
#include "kernels.h"

namespace colibri::cuda {
namespace {

using detail::CudaErrorText;
using detail::CudaFailure;

// Reads the MIG mode of the physical GPU at `pci_bus_id` through NVML, which
// is loaded at run time so that neither building nor running needs it.
std::optional<bool> QueryMigMode(const std::string& pci_bus_id) {
  using NvmlDevice = struct NvmlDeviceOpaque*;
  using InitFn = int (*)();
  using ShutdownFn = int (*)();
  using HandleByPciFn = int (*)(const char*, NvmlDevice*);
  using MigModeFn = int (*)(NvmlDevice, unsigned int*, unsigned int*);
  constexpr int kNvmlSuccess = 0;

  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return std::nullopt;
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
  auto shutdown = reinterpret_cast<ShutdownFn>(dlsym(lib, "nvmlShutdown"));
  auto by_pci = reinterpret_cast<HandleByPciFn>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
  auto mig_mode = reinterpret_cast<MigModeFn>(dlsym(lib, "nvmlDeviceGetMigMode"));
  std::optional<bool> result;
  if (init != nullptr && shutdown != nullptr && by_pci != nullptr && mig_mode != nullptr &&
      init() == kNvmlSuccess) {
    NvmlDevice device = nullptr;
    unsigned int current = 0;
    unsigned int pending = 0;
    if (by_pci(pci_bus_id.c_str(), &device) == kNvmlSuccess &&
        mig_mode(device, &current, &pending) == kNvmlSuccess) {
      result = current != 0;
    }
    // Any other answer (e.g. NVML_ERROR_NOT_SUPPORTED on GPUs without MIG) leaves it unknown.
    shutdown();
  }
  dlclose(lib);
  return result;
}

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

}  // namespace

Result<int> CudaDeviceCount() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();
    return Status::NotFound("no CUDA device: " + CudaErrorText(error));
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
  info.mig_enabled = QueryMigMode(info.pci_bus_id);
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
