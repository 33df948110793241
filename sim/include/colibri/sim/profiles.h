// Hardware profile files (docs/HARDWARE_PROFILES.md): parsing and the
// catalog of components and machines.
//
// A profile file is one JSON object with a "kind" (nvme, pcie, compute or
// machine). Every numeric parameter of a component is an object
// {"value": <integer>, "basis": "spec|measured|derived|assumed", "source":
// "...", "note": "..."}, named exactly as the field of hardware.h's struct
// (peak FLOP/s as peak_flops_per_s.<dtype>). Unknown fields are errors.
// The files in sim/profiles/ are built into the binary (BuiltIn); user files
// are added with AddFile / AddFiles.
//
// Errors: InvalidArgument for a malformed file, with a message that names the
// file (origin), the field and what was expected, e.g.
// "sim/profiles/nvme/x.json: field read_bytes_per_s.value: expected a positive
// integer, got -5"; NotFound for an unknown id or name (the message lists the
// known ones) or a missing user file; IoError for an unreadable one.
// Nothing throws.
//
// Ownership: the catalog owns copies of every profile; pointers it returns
// stay valid until the catalog is modified or destroyed. Thread-safety: const
// methods may be called concurrently; adding files needs exclusive access.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "colibri/sim/hardware.h"
#include "colibri/status.h"

namespace colibri::sim {

// "spec", "measured", "derived", "assumed".
const char* BasisName(Basis basis);

// Parse one profile file's text; `origin` names it in messages. The file's
// "kind" must match the function.
Result<NvmeProfile> ParseNvmeProfile(std::string_view json_text, const std::string& origin);
Result<PcieProfile> ParsePcieProfile(std::string_view json_text, const std::string& origin);
Result<ComputeProfile> ParseComputeProfile(std::string_view json_text, const std::string& origin);
Result<MachineProfile> ParseMachineProfile(std::string_view json_text, const std::string& origin);

enum class ComponentKind { kNvme, kPcie, kCompute };
const char* ComponentKindName(ComponentKind kind);  // "nvme", "pcie", "compute"

// One numeric parameter of a component with its provenance.
struct Parameter {
  std::string field;  // as in the file, e.g. "read_bytes_per_s", "peak_flops_per_s.bf16"
  uint64_t value = 0;
  Figure figure;
};

// Parameters in file order (the order of the struct's fields; FLOP/s by dtype name).
std::vector<Parameter> ParametersOf(const NvmeProfile& profile);
std::vector<Parameter> ParametersOf(const PcieProfile& profile);
std::vector<Parameter> ParametersOf(const ComputeProfile& profile);
// A machine's host memory ("host_memory.ram_bytes", ...); empty when absent.
std::vector<Parameter> ParametersOf(const HostMemoryProfile& profile);

// A component of any kind, for listing and printing.
struct ComponentInfo {
  ComponentKind kind = ComponentKind::kNvme;
  std::string id;
  std::string name;
  std::string origin;        // the file it came from, e.g. "sim/profiles/nvme/optane-p5800x.json"
  std::string compute_kind;  // "gpu" or "cpu" for compute components, else empty
  std::vector<Parameter> parameters;
};

// Replacements for one part of a machine; an empty id keeps the machine's own.
struct MachineOverrides {
  std::string nvme;
  std::string pcie;
  std::string compute;
};

// A machine with its three components, copied out of the catalog.
struct ResolvedMachine {
  MachineProfile machine;  // component ids are the ones used (after overrides)
  std::string label;       // the name, plus " (nvme=x, ...)" for each override
  NvmeProfile nvme;
  PcieProfile pcie;
  ComputeProfile compute;
};

class HardwareCatalog {
 public:
  // The catalog of the profile files built into the binary (sim/profiles/).
  static Result<HardwareCatalog> BuiltIn();

  // Adds one profile file's text. A component id must be new among all
  // components (any kind), a machine name new among machines, and a
  // machine's component ids must already be in the catalog.
  Status AddText(std::string_view json_text, const std::string& origin);
  // Reads and adds user profile files: every component file before any
  // machine file, so their order does not matter. Stops at the first error
  // (files added before it stay added).
  Status AddFiles(const std::vector<std::string>& paths);
  Status AddFile(const std::string& path) { return AddFiles({path}); }

  Result<const NvmeProfile*> Nvme(const std::string& id) const;
  Result<const PcieProfile*> Pcie(const std::string& id) const;
  Result<const ComputeProfile*> Compute(const std::string& id) const;
  Result<const MachineProfile*> Machine(const std::string& name) const;
  // Any component by id; "nvme/ID", "pcie/ID" or "compute/ID" names the kind.
  Result<ComponentInfo> Component(const std::string& id) const;
  // The file a machine came from.
  Result<std::string> MachineOrigin(const std::string& name) const;

  // Sorted.
  std::vector<std::string> NvmeIds() const;
  std::vector<std::string> PcieIds() const;
  std::vector<std::string> ComputeIds() const;
  std::vector<std::string> MachineNames() const;
  // Every component, by kind (nvme, pcie, compute) then id.
  std::vector<ComponentInfo> Components() const;

  // The machine `name` with the parts named in `overrides` replaced; every
  // id must exist (NotFound otherwise, listing the known ids of that kind).
  Result<ResolvedMachine> Resolve(const std::string& name, const MachineOverrides& overrides = {}) const;

 private:
  template <typename T>
  struct Entry {
    T profile;
    std::string origin;
  };

  // (origin, text) pairs: components first, then machines.
  Status AddAll(const std::vector<std::pair<std::string, std::string>>& files);
  Status AddMachine(MachineProfile machine, const std::string& origin);
  Status CheckNewComponentId(const std::string& id, const std::string& origin) const;

  std::map<std::string, Entry<NvmeProfile>> nvme_;
  std::map<std::string, Entry<PcieProfile>> pcie_;
  std::map<std::string, Entry<ComputeProfile>> compute_;
  std::map<std::string, Entry<MachineProfile>> machines_;
};

}  // namespace colibri::sim
