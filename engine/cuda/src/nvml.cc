// NVML loaded once per process (nvml.h). The entry points are declared here
// by their C signatures (NVML's header is not needed to build): every one
// returns an nvmlReturn_t, 0 on success.
#include "nvml.h"

#include <dlfcn.h>

#include <mutex>

namespace colibri::cuda::detail {
namespace {

using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr int kNvmlSuccess = 0;

class Nvml {
 public:
  // The process's one instance, initialised on first use.
  static Nvml& Get() {
    static Nvml* const nvml = new Nvml();  // never destroyed: NVML may be queried until exit
    return *nvml;
  }

  std::mutex& mutex() { return mutex_; }
  bool available() const { return available_; }

  // The device at `pci_bus_id`, or null.
  NvmlDevice ByPciBusId(const std::string& pci_bus_id) const {
    NvmlDevice device = nullptr;
    if (!available_ || by_pci_ == nullptr || by_pci_(pci_bus_id.c_str(), &device) != kNvmlSuccess) return nullptr;
    return device;
  }
  std::optional<bool> MigMode(NvmlDevice device) const {
    unsigned current = 0;
    unsigned pending = 0;
    if (device == nullptr || mig_mode_ == nullptr || mig_mode_(device, &current, &pending) != kNvmlSuccess) {
      return std::nullopt;  // e.g. NVML_ERROR_NOT_SUPPORTED on GPUs without MIG
    }
    return current != 0;
  }
  std::optional<uint32_t> Uint(NvmlDevice device, const char* name) const {
    using UintFn = int (*)(NvmlDevice, unsigned*);
    if (device == nullptr) return std::nullopt;
    auto fn = reinterpret_cast<UintFn>(dlsym(lib_, name));
    unsigned value = 0;
    if (fn == nullptr || fn(device, &value) != kNvmlSuccess || value == 0) return std::nullopt;
    return value;
  }
  std::vector<unsigned> MigEnabledGpus() const {
    std::vector<unsigned> gpus;
    unsigned count = 0;
    if (!available_ || count_ == nullptr || by_index_ == nullptr || count_(&count) != kNvmlSuccess) return gpus;
    for (unsigned i = 0; i < count; ++i) {
      NvmlDevice gpu = nullptr;
      if (by_index_(i, &gpu) == kNvmlSuccess && MigMode(gpu).value_or(false)) gpus.push_back(i);
    }
    return gpus;
  }
  std::optional<std::string> DriverVersion() const {
    using VersionFn = int (*)(char*, unsigned);
    if (!available_) return std::nullopt;
    auto fn = reinterpret_cast<VersionFn>(dlsym(lib_, "nvmlSystemGetDriverVersion"));
    char version[96] = {};
    if (fn == nullptr || fn(version, sizeof(version)) != kNvmlSuccess) return std::nullopt;
    return std::string(version);
  }

 private:
  Nvml() {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib_ == nullptr) return;
    using InitFn = int (*)();
    auto init = reinterpret_cast<InitFn>(dlsym(lib_, "nvmlInit_v2"));
    by_pci_ = reinterpret_cast<HandleByPciFn>(dlsym(lib_, "nvmlDeviceGetHandleByPciBusId_v2"));
    by_index_ = reinterpret_cast<HandleByIndexFn>(dlsym(lib_, "nvmlDeviceGetHandleByIndex_v2"));
    count_ = reinterpret_cast<CountFn>(dlsym(lib_, "nvmlDeviceGetCount_v2"));
    mig_mode_ = reinterpret_cast<MigModeFn>(dlsym(lib_, "nvmlDeviceGetMigMode"));
    available_ = init != nullptr && init() == kNvmlSuccess;
  }

  using HandleByPciFn = int (*)(const char*, NvmlDevice*);
  using HandleByIndexFn = int (*)(unsigned, NvmlDevice*);
  using CountFn = int (*)(unsigned*);
  using MigModeFn = int (*)(NvmlDevice, unsigned*, unsigned*);
  std::mutex mutex_;
  void* lib_ = nullptr;
  bool available_ = false;
  HandleByPciFn by_pci_ = nullptr;
  HandleByIndexFn by_index_ = nullptr;
  CountFn count_ = nullptr;
  MigModeFn mig_mode_ = nullptr;
};

}  // namespace

bool NvmlAvailable() {
  Nvml& nvml = Nvml::Get();
  std::lock_guard lock(nvml.mutex());
  return nvml.available();
}

std::optional<bool> NvmlMigMode(const std::string& pci_bus_id) {
  Nvml& nvml = Nvml::Get();
  std::lock_guard lock(nvml.mutex());
  return nvml.MigMode(nvml.ByPciBusId(pci_bus_id));
}

std::vector<unsigned> NvmlMigEnabledGpus() {
  Nvml& nvml = Nvml::Get();
  std::lock_guard lock(nvml.mutex());
  return nvml.MigEnabledGpus();
}

NvmlPcieLink NvmlPcieLinkOf(const std::string& pci_bus_id) {
  Nvml& nvml = Nvml::Get();
  std::lock_guard lock(nvml.mutex());
  const NvmlDevice device = nvml.ByPciBusId(pci_bus_id);
  NvmlPcieLink link;
  link.max_generation = nvml.Uint(device, "nvmlDeviceGetMaxPcieLinkGeneration");
  link.max_lanes = nvml.Uint(device, "nvmlDeviceGetMaxPcieLinkWidth");
  link.current_generation = nvml.Uint(device, "nvmlDeviceGetCurrPcieLinkGeneration");
  link.current_lanes = nvml.Uint(device, "nvmlDeviceGetCurrPcieLinkWidth");
  return link;
}

std::optional<std::string> NvmlDriverVersion() {
  Nvml& nvml = Nvml::Get();
  std::lock_guard lock(nvml.mutex());
  return nvml.DriverVersion();
}

}  // namespace colibri::cuda::detail
