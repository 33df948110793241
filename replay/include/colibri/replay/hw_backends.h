// The real transfer and compute backends, chosen by name: "cpu" (CpuTransfer,
// CpuCompute), "cuda" (CudaTransfer, CudaCompute: engine/cuda, when this
// binary was built with CUDA) and "auto" (cuda when a usable CUDA device is
// present, else cpu). Used by `colibri run`, `colibri replay` and the
// benchmarks; the modelled "sim" backends are replay's own.
//
// A binary built with CUDA runs unchanged without a GPU: "auto" then picks
// cpu, and "cuda" is a clear error (kNotFound "no CUDA device: ..."; in a
// binary built without CUDA, kUnsupported saying so).
// Thread-safety: the functions share no state. Ownership: the caller owns
// what they make; a transfer borrows the clock, which must outlive it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "colibri/engine/clock.h"
#include "colibri/engine/compute.h"
#include "colibri/engine/transfer.h"
#include "colibri/status.h"

namespace colibri::replay {

struct HwBackendOptions {
  uint32_t threads = 1;       // CpuCompute worker threads
  int cuda_device = 0;        // the CUDA device ordinal
  uint32_t copy_streams = 2;  // CudaTransfer copy streams
};

// Whether this binary contains the CUDA backends.
bool CudaBuilt();
// Ok when CUDA device `device` can be used; else why not (as OpenCudaDevice,
// or kUnsupported in a binary built without CUDA).
Status CudaUsable(int device);

// The transfer and compute names after "auto": compute "auto" is cuda when
// CudaUsable(device), else cpu; transfer "auto" is cuda when the compute
// (after resolving) is cuda, else cpu. Other names ("cpu", "cuda", "sim")
// are returned as they are.
struct HwBackendNames {
  std::string transfer;
  std::string compute;
};
HwBackendNames ResolveHwBackends(const std::string& transfer, const std::string& compute, int device);

// Makes a backend by resolved name, "cpu" or "cuda". Errors: another name
// (kInvalidArgument), "cuda" without a usable device or in a binary built
// without CUDA (see above), and the backend's own.
Result<std::unique_ptr<engine::TransferBackend>> MakeHwTransfer(const std::string& name, const engine::Clock* clock,
                                                                const HwBackendOptions& options);
Result<std::unique_ptr<engine::ComputeBackend>> MakeHwCompute(const std::string& name,
                                                              const HwBackendOptions& options);

}  // namespace colibri::replay
