#include "cuda_device.h"

#if COLIBRI_HAVE_CUDA

#include <optional>
#include <string>

#include "colibri/bench/provenance.h"

namespace colibri::bench {

Json CudaDeviceJson(const cuda::BenchDeviceInfo& info, bool with_link) {
  Json device{{"ordinal", info.device.ordinal},
              {"name", info.device.name},
              {"pci_bus_id", info.device.pci_bus_id},
              {"compute_capability",
               std::to_string(info.device.compute_major) + "." + std::to_string(info.device.compute_minor)},
              {"memory_bytes", info.device.total_memory_bytes},
              {"multiprocessors", info.device.multiprocessors},
              {"l2_cache_bytes", info.l2_cache_bytes}};
  if (with_link) device["async_engine_count"] = info.async_engine_count;
  device["runtime_version"] = info.runtime_version;
  device["driver_version"] = info.driver_version;
  if (with_link) {
    auto optional = [](const std::optional<uint32_t>& v) { return v ? Json(*v) : Json(nullptr); };
    device["pcie_nvml"] = Json{{"max_generation", optional(info.pcie_max_generation)},
                               {"max_lanes", optional(info.pcie_max_lanes)},
                               {"current_generation", optional(info.pcie_current_generation)},
                               {"current_lanes", optional(info.pcie_current_lanes)}};
  }
  return device;
}

ProfileRun ProfileRunOn(const cuda::BenchDeviceInfo& info) {
  return ProfileRun{CommandLine(), UtcNow(), info.device.name, info.device.ordinal, info.device.pci_bus_id};
}

}  // namespace colibri::bench

#endif  // COLIBRI_HAVE_CUDA
