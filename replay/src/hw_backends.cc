#include "colibri/replay/hw_backends.h"

#include <optional>

#include "colibri/engine/cpu_compute.h"
#if COLIBRI_HAVE_CUDA
#include "colibri/cuda/cuda_compute.h"
#include "colibri/cuda/cuda_transfer.h"
#endif

namespace colibri::replay {
namespace {

Status NotBuilt() {
  return Status::Unsupported("this colibri was built without CUDA (nvcc was not found when it was configured)");
}

Status UnknownBackend(const char* kind, const std::string& name) {
  return Status::InvalidArgument(std::string("--") + kind + " " + name + ": expected cpu or cuda");
}

}  // namespace

bool CudaBuilt() { return COLIBRI_HAVE_CUDA != 0; }

Status CudaUsable(int device) {
#if COLIBRI_HAVE_CUDA
  return cuda::OpenCudaDevice(device);
#else
  (void)device;
  return NotBuilt();
#endif
}

HwBackendNames ResolveHwBackends(const std::string& transfer, const std::string& compute, int device) {
  HwBackendNames names{transfer, compute};
  if (names.compute == "auto") names.compute = CudaUsable(device).ok() ? "cuda" : "cpu";
  if (names.transfer == "auto") names.transfer = names.compute == "cuda" ? "cuda" : "cpu";
  return names;
}

Result<std::unique_ptr<engine::TransferBackend>> MakeHwTransfer(const std::string& name, const engine::Clock* clock,
                                                                const HwBackendOptions& options) {
  if (name == "cpu") return engine::MakeCpuTransfer(clock);
  if (name != "cuda") return UnknownBackend("transfer", name);
#if COLIBRI_HAVE_CUDA
  auto made = cuda::CudaTransfer::Create(options.cuda_device, clock, options.copy_streams);
  if (!made.ok()) return made.status().WithPrefix("--transfer cuda");
  return std::unique_ptr<engine::TransferBackend>(std::move(made).value());
#else
  (void)options;
  return NotBuilt().WithPrefix("--transfer cuda");
#endif
}

Result<std::unique_ptr<engine::ComputeBackend>> MakeHwCompute(const std::string& name,
                                                              const HwBackendOptions& options) {
  if (name == "cpu") {
    COLIBRI_ASSIGN_OR_RETURN(auto compute, engine::CpuCompute::Create(engine::CpuComputeOptions{options.threads, std::nullopt}));
    return std::unique_ptr<engine::ComputeBackend>(std::move(compute));
  }
  if (name != "cuda") return UnknownBackend("compute", name);
#if COLIBRI_HAVE_CUDA
  // The engine's router weights never change while it runs: keep them on the device.
  auto made = cuda::CudaCompute::Create(options.cuda_device, cuda::CudaComputeOptions{/*keep_gate_weights=*/true});
  if (!made.ok()) return made.status().WithPrefix("--compute cuda");
  return std::unique_ptr<engine::ComputeBackend>(std::move(made).value());
#else
  return NotBuilt().WithPrefix("--compute cuda");
#endif
}

}  // namespace colibri::replay
