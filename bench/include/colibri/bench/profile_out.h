// Measured GPU figures as hardware profile files (`--profile-out DIR` of
// `colibri bench pcie` and `bench compute --compute cuda`; a calibration
// writes them the same way)
// (docs/HARDWARE_PROFILES.md), loadable with `--hw-file`:
//   DIR/measured-<device>-pcie.json     kind pcie (bench pcie)
//   DIR/measured-<device>-compute.json  kind compute (bench compute --compute cuda)
//   DIR/<machine>.json                  kind machine: measured-h200 when the device name says H200,
//                                       else measured-<device>
// <device> is DeviceSlug(the CUDA device name), e.g. "h200" for "NVIDIA H200".
// The machine combines the measured components found in DIR (each bench
// rewrites it, so running both benches gives a fully measured link and
// compute) with, for a part not measured yet, the closest built-in machine's
// (ClosestBuiltInMachine), and always the NVMe drive of h200-p5800x-gen5
// (nothing here measures a drive).
//
// The *ProfileJson functions are pure: they turn measured numbers into a
// profile document, taking the figures they do not measure from the
// built-in catalog with their basis, source and note kept. Every document
// they return parses with sim::Parse*Profile (tests/bench/profile_out_test.cc).
// Errors: kInvalidArgument for a measured figure the format rejects (a zero
// rate), kNotFound for a built-in profile missing from the catalog; the
// Write* functions add kIoError for files that cannot be written.
// Ownership: plain values in and out. Thread-safety: plain functions; the
// Write* functions write files (atomically, each through a rename) and print
// nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "colibri/bench/harness.h"
#include "colibri/sim/profiles.h"
#include "colibri/status.h"

namespace colibri::bench {

// Where the figures of one run came from.
struct ProfileRun {
  std::string command;      // the exact command line (provenance.h's CommandLine())
  std::string date_utc;     // "2026-12-01T10:00:00Z" (provenance.h's UtcNow())
  std::string device_name;  // as CUDA reports it, e.g. "NVIDIA H200"
  int device_ordinal = 0;
  std::string pci_bus_id;
};

// `colibri bench pcie`'s figures.
struct MeasuredPcie {
  ProfileRun run;
  uint64_t rate_size_bytes = 0;            // the copy size the rates below are taken at (the largest)
  uint64_t pinned_bytes_per_s = 0;         // CudaTransfer from a pinned host pool, at rate_size_bytes
  uint64_t pageable_bytes_per_s = 0;       // synchronous cudaMemcpy from pageable memory, at rate_size_bytes
  uint64_t memcpy_pinned_bytes_per_s = 0;  // synchronous cudaMemcpy from pinned memory (the ceiling), for the note
  std::vector<uint64_t> sizes_bytes;       // every size measured
  uint64_t small_copy_bytes = 4096;
  uint64_t per_copy_ns = 0;                // median CudaTransfer copy of small_copy_bytes, submit to hand-over
  uint64_t memcpy_small_copy_ns = 0;       // median synchronous cudaMemcpy (pinned) of the same size
  uint32_t copy_streams = 0;
  uint32_t in_flight = 0;
  int async_engine_count = 0;              // cudaDeviceProp::asyncEngineCount
  std::optional<uint32_t> generation;      // NVML's maximum link generation and width
  std::optional<uint32_t> lanes;
  std::optional<uint32_t> current_generation;  // NVML's current ones, for the note
  std::optional<uint32_t> current_lanes;
};

// `colibri bench compute --compute cuda`'s figures.
struct MeasuredCompute {
  struct Peak {
    std::string dtype;  // "fp32", "bf16", "fp16", "int8"
    uint64_t flops_per_s = 0;
    uint32_t batch = 0;  // the batch it was reached at
  };
  ProfileRun run;
  uint32_t hidden = 0;
  uint32_t intermediate = 0;
  std::string batches;     // the batches measured, "1,8,64,256"
  std::vector<Peak> peaks; // the best ExpertFfn FLOP/s of each dtype measured
  std::optional<uint64_t> memory_bytes_per_s;  // device-to-device cudaMemcpy, read + written bytes
  uint64_t device_copy_bytes = 0;              // its copy size
  uint64_t memory_bytes = 0;                   // cudaDeviceProp::totalGlobalMem; 0 = unknown
};

// Lowercase letters and digits of `device_name`, other runs as '-', without
// a leading "nvidia-"; "gpu" when nothing is left. "NVIDIA H200" -> "h200".
std::string DeviceSlug(const std::string& device_name);
std::string MeasuredPcieId(const std::string& device_name);     // measured-<slug>-pcie
std::string MeasuredComputeId(const std::string& device_name);  // measured-<slug>-compute
std::string MeasuredMachineName(const std::string& device_name);  // measured-h200 or measured-<slug>
// The built-in machine whose GPU is closest to `device_name`: H100, A100 and
// RTX 4090 have their own; everything else (H200 included) h200-p5800x-gen5.
std::string ClosestBuiltInMachine(const std::string& device_name);
// The built-in machine whose NVMe drive measured machines use.
inline constexpr const char* kNvmeSourceMachine = "h200-p5800x-gen5";

Result<Json> PcieProfileJson(const MeasuredPcie& m, const sim::HardwareCatalog& catalog);
Result<Json> ComputeProfileJson(const MeasuredCompute& m, const sim::HardwareCatalog& catalog);
// The machine for `run`'s device with the given pcie and compute ids (each
// measured or built-in, as `*_measured` says) and kNvmeSourceMachine's drive.
Result<Json> MachineProfileJson(const ProfileRun& run, const std::string& pcie_id, bool pcie_measured,
                                const std::string& compute_id, bool compute_measured,
                                const sim::HardwareCatalog& catalog);

// Write the component file and the machine file into `dir` (created when
// missing); return the paths written (the component's, then the machine's).
Result<std::vector<std::string>> WritePcieProfiles(const std::string& dir, const MeasuredPcie& m);
Result<std::vector<std::string>> WriteComputeProfiles(const std::string& dir, const MeasuredCompute& m);

}  // namespace colibri::bench
