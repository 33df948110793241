// NVML (the NVIDIA management library), loaded with dlopen once per process
// so that neither building nor running needs it: the MIG mode and PCIe link
// of a GPU and the driver's version, for messages and benchmark reports.
// Private to colibri_cuda.
//
// The library is opened and nvmlInit_v2 called on the first query (that is
// the slow part: it is never repeated, whether it succeeded or not) and it
// stays loaded for the life of the process. Thread-safety: every query takes
// one mutex. Errors: none are reported; an answer NVML does not give is
// nullopt (NVML missing, a GPU without MIG, a query this driver lacks).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace colibri::cuda::detail {

struct NvmlPcieLink {
  std::optional<uint32_t> max_generation;
  std::optional<uint32_t> max_lanes;
  std::optional<uint32_t> current_generation;  // as of this query (links slow down when idle)
  std::optional<uint32_t> current_lanes;
};

// Whether NVML loaded and initialised.
bool NvmlAvailable();
// The current MIG mode of the GPU at `pci_bus_id` (CUDA's "0000:00:00.0" form).
std::optional<bool> NvmlMigMode(const std::string& pci_bus_id);
// NVML indices of the GPUs with MIG mode enabled; empty when none or no NVML.
std::vector<unsigned> NvmlMigEnabledGpus();
// The PCIe link of the GPU at `pci_bus_id`.
NvmlPcieLink NvmlPcieLinkOf(const std::string& pci_bus_id);
// The kernel driver's version, e.g. "580.159.04".
std::optional<std::string> NvmlDriverVersion();

}  // namespace colibri::cuda::detail
