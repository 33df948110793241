#include "colibri/bench/profile_out.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "colibri/bench/files.h"
#include "colibri/engine/output_claim.h"

namespace colibri::bench {
namespace {

Json Figure(uint64_t value, const char* basis, const std::string& source, const std::string& note) {
  Json figure{{"value", value}, {"basis", basis}, {"source", source}};
  if (!note.empty()) figure["note"] = note;
  return figure;
}

// A built-in figure, copied with its provenance; the note says where it came from.
Json CopiedFigure(const sim::Parameter& p, const std::string& component_id) {
  std::string note = "copied from the built-in profile " + component_id + " (not measured by this bench)";
  if (!p.figure.note.empty()) note += "; its note: " + p.figure.note;
  return Figure(p.value, sim::BasisName(p.figure.basis), p.figure.source, note);
}

Result<sim::Parameter> FindParameter(const std::vector<sim::Parameter>& parameters, const std::string& field,
                                     const std::string& component_id) {
  for (const sim::Parameter& p : parameters) {
    if (p.field == field) return p;
  }
  return Status::NotFound("built-in profile " + component_id + " has no " + field);
}

std::string MeasuredSource(const ProfileRun& run) {
  return "measured: `" + run.command + "` on " + run.device_name + " (CUDA device " + std::to_string(run.device_ordinal) +
         ", PCI " + run.pci_bus_id + "), " + run.date_utc;
}

std::string Rate(uint64_t bytes_per_s) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GB/s", static_cast<double>(bytes_per_s) / 1e9);
  return text;
}

std::string Size(uint64_t bytes) {
  char text[32];
  if (bytes >= (uint64_t{1} << 20)) {
    std::snprintf(text, sizeof(text), "%.4g MiB", static_cast<double>(bytes) / 1048576.0);
  } else {
    std::snprintf(text, sizeof(text), "%.4g KiB", static_cast<double>(bytes) / 1024.0);
  }
  return text;
}

std::string Sizes(const std::vector<uint64_t>& sizes) {
  std::string text;
  for (uint64_t size : sizes) text += (text.empty() ? "" : ", ") + Size(size);
  return text;
}

Status RequirePositive(uint64_t value, const char* what) {
  if (value == 0) return Status::InvalidArgument(std::string("profile: measured ") + what + " is 0");
  return Status::Ok();
}

bool Contains(const std::string& haystack, const char* needle) {
  std::string upper = haystack;
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
  return upper.find(needle) != std::string::npos;
}

// The closest built-in machine's part.
Result<const sim::PcieProfile*> FallbackPcie(const std::string& device_name, const sim::HardwareCatalog& catalog) {
  COLIBRI_ASSIGN_OR_RETURN(const sim::MachineProfile* machine, catalog.Machine(ClosestBuiltInMachine(device_name)));
  return catalog.Pcie(machine->pcie);
}

Result<const sim::ComputeProfile*> FallbackCompute(const std::string& device_name, const sim::HardwareCatalog& catalog) {
  COLIBRI_ASSIGN_OR_RETURN(const sim::MachineProfile* machine, catalog.Machine(ClosestBuiltInMachine(device_name)));
  return catalog.Compute(machine->compute);
}

// A profile file of kind T in `path` whose id is `id`, if there is one.
template <typename Parse>
bool HoldsProfile(const std::string& path, const std::string& id, Parse parse) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto parsed = parse(text, path);
  return parsed.ok() && parsed.value().id == id;
}

std::string PathIn(const std::string& dir, const std::string& stem) {
  return (std::filesystem::path(dir) / (stem + ".json")).string();
}

Status MakeDir(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return Status::IoError(dir + ": cannot create the directory: " + error.message());
  return Status::Ok();
}

// Writes the machine file of `run`'s device into `dir`, its parts measured
// when their files are there; returns its path.
Result<std::string> WriteMachine(const std::string& dir, const ProfileRun& run, const sim::HardwareCatalog& catalog) {
  const std::string pcie_id = MeasuredPcieId(run.device_name);
  const std::string compute_id = MeasuredComputeId(run.device_name);
  const bool pcie_measured = HoldsProfile(PathIn(dir, pcie_id), pcie_id, sim::ParsePcieProfile);
  const bool compute_measured = HoldsProfile(PathIn(dir, compute_id), compute_id, sim::ParseComputeProfile);
  std::string pcie = pcie_id;
  std::string compute = compute_id;
  if (!pcie_measured) {
    COLIBRI_ASSIGN_OR_RETURN(const sim::PcieProfile* fallback, FallbackPcie(run.device_name, catalog));
    pcie = fallback->id;
  }
  if (!compute_measured) {
    COLIBRI_ASSIGN_OR_RETURN(const sim::ComputeProfile* fallback, FallbackCompute(run.device_name, catalog));
    compute = fallback->id;
  }
  COLIBRI_ASSIGN_OR_RETURN(Json machine,
                           MachineProfileJson(run, pcie, pcie_measured, compute, compute_measured, catalog));
  const std::string path = PathIn(dir, MeasuredMachineName(run.device_name));
  COLIBRI_RETURN_IF_ERROR(engine::WriteFileWhole(path, machine.dump(2) + "\n"));
  return path;
}

}  // namespace

std::string DeviceSlug(const std::string& device_name) {
  std::string slug;
  for (unsigned char c : device_name) {
    if (std::isalnum(c)) {
      slug += static_cast<char>(std::tolower(c));
    } else if (!slug.empty() && slug.back() != '-') {
      slug += '-';
    }
  }
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  if (slug.rfind("nvidia-", 0) == 0) slug.erase(0, 7);
  return slug.empty() ? "gpu" : slug;
}

std::string MeasuredPcieId(const std::string& device_name) { return "measured-" + DeviceSlug(device_name) + "-pcie"; }

std::string MeasuredComputeId(const std::string& device_name) {
  return "measured-" + DeviceSlug(device_name) + "-compute";
}

std::string MeasuredMachineName(const std::string& device_name) {
  return Contains(device_name, "H200") ? "measured-h200" : "measured-" + DeviceSlug(device_name);
}

std::string ClosestBuiltInMachine(const std::string& device_name) {
  if (Contains(device_name, "H100")) return "h100-p5800x-gen5";
  if (Contains(device_name, "A100")) return "a100-pm9a3-gen4";
  if (Contains(device_name, "4090")) return "rtx4090-990pro-gen4";
  return "h200-p5800x-gen5";
}

Result<Json> PcieProfileJson(const MeasuredPcie& m, const sim::HardwareCatalog& catalog) {
  COLIBRI_RETURN_IF_ERROR(RequirePositive(m.pinned_bytes_per_s, "pinned_bytes_per_s"));
  COLIBRI_RETURN_IF_ERROR(RequirePositive(m.pageable_bytes_per_s, "pageable_bytes_per_s"));
  const std::string source = MeasuredSource(m.run);
  Json doc{{"kind", "pcie"},
           {"id", MeasuredPcieId(m.run.device_name)},
           {"name", m.run.device_name + " host-to-device link, measured " + m.run.date_utc.substr(0, 10)}};
  // Generation and lanes: NVML's maximum (what the GPU and the system allow), else the closest built-in's.
  std::string current = "not reported";
  if (m.current_generation && m.current_lanes) {
    current = "gen " + std::to_string(*m.current_generation) + " x" + std::to_string(*m.current_lanes);
  }
  const bool nvml = m.generation && m.lanes && *m.generation >= 1 && *m.generation <= 7 && *m.lanes >= 1 &&
                    *m.lanes <= 32;
  if (nvml) {
    const std::string nvml_source = "NVML nvmlDeviceGetMaxPcieLinkGeneration / nvmlDeviceGetMaxPcieLinkWidth, " + source;
    const std::string note = "the link's maximum for this GPU in this system; the current link when probed: " + current +
                             " (a GPU may train its link down while idle)";
    doc["generation"] = Figure(*m.generation, "measured", nvml_source, note);
    doc["lanes"] = Figure(*m.lanes, "measured", nvml_source, note);
  } else {
    COLIBRI_ASSIGN_OR_RETURN(const sim::PcieProfile* fallback, FallbackPcie(m.run.device_name, catalog));
    const std::string note = "NVML did not report the link (not installed, or no answer); assumed as the built-in " +
                             fallback->id + " of " + ClosestBuiltInMachine(m.run.device_name);
    doc["generation"] = Figure(fallback->generation, "assumed", "built-in profile " + fallback->id, note);
    doc["lanes"] = Figure(fallback->lanes, "assumed", "built-in profile " + fallback->id, note);
  }
  const std::string per_size = "sizes measured: " + Sizes(m.sizes_bytes) + "; the rate is taken at the largest, " +
                               Size(m.rate_size_bytes) + ", where a copy's fixed cost is smallest relative to it";
  doc["pinned_bytes_per_s"] = Figure(
      m.pinned_bytes_per_s, "measured", source,
      "CudaTransfer::Copy from a pinned host pool (CreateHostPool) into device pool slots, " +
          std::to_string(m.copy_streams) + " copy stream(s), " + std::to_string(m.in_flight) +
          " copies in flight, timed from the first submit to the last completion; " + per_size +
          "; a synchronous cudaMemcpy from pinned memory reached " + Rate(m.memcpy_pinned_bytes_per_s) +
          " at that size. The rate of all copy streams together (hence copy_engines 1)");
  doc["pageable_bytes_per_s"] = Figure(m.pageable_bytes_per_s, "measured", source,
                                       "synchronous cudaMemcpy from pageable (malloc'd, touched) host memory; " + per_size);
  doc["per_copy_ns"] = Figure(m.per_copy_ns, "measured", source,
                              "median " + Size(m.small_copy_bytes) +
                                  " CudaTransfer copy from pinned memory, Copy() to its hand-over by Poll(wait), one "
                                  "copy at a time (includes moving the bytes and the event poll); a synchronous "
                                  "cudaMemcpy of the same size took " +
                                  std::to_string(m.memcpy_small_copy_ns) + " ns (median)");
  doc["copy_engines"] =
      Figure(1, "derived", source,
             "the device reports asyncEngineCount = " + std::to_string(m.async_engine_count) +
                 " (copy engines for all directions), but host-to-device copies share one direction of the link and "
                 "pinned_bytes_per_s is already the rate of all copy streams together, so one engine at that rate");
  return doc;
}

Result<Json> ComputeProfileJson(const MeasuredCompute& m, const sim::HardwareCatalog& catalog) {
  if (m.peaks.empty()) return Status::InvalidArgument("profile: no measured FFN throughput");
  COLIBRI_ASSIGN_OR_RETURN(const sim::ComputeProfile* fallback, FallbackCompute(m.run.device_name, catalog));
  const std::vector<sim::Parameter> parameters = sim::ParametersOf(*fallback);
  const std::string source = MeasuredSource(m.run);
  Json doc{{"kind", "compute"},
           {"id", MeasuredComputeId(m.run.device_name)},
           {"name", m.run.device_name + ", Colibri's CUDA expert kernels, measured " + m.run.date_utc.substr(0, 10)},
           {"compute_kind", "gpu"}};
  Json peaks = Json::object();
  for (const MeasuredCompute::Peak& peak : m.peaks) {
    COLIBRI_RETURN_IF_ERROR(RequirePositive(peak.flops_per_s, "FFN FLOP/s"));
    std::string spec;
    if (auto p = FindParameter(parameters, "peak_flops_per_s." + peak.dtype, fallback->id); p.ok()) {
      char text[96];
      std::snprintf(text, sizeof(text), " (%s's figure: %.1f TFLOP/s, %s)", fallback->id.c_str(),
                    static_cast<double>(p.value().value) / 1e12, sim::BasisName(p.value().figure.basis));
      spec = text;
    }
    peaks[peak.dtype] = Figure(
        peak.flops_per_s, "measured", source,
        "the best FFN throughput of CudaCompute::ExpertFfn (2 x 3 x H x I x batch FLOP per call; H=" +
            std::to_string(m.hidden) + " I=" + std::to_string(m.intermediate) + ", batches " + m.batches +
            ", best at batch " + std::to_string(peak.batch) +
            ") as the engine calls it, the copies of x and y over PCIe included: what these exact kernels reach, "
            "not the device's peak" +
            spec);
  }
  doc["peak_flops_per_s"] = peaks;
  if (m.memory_bytes_per_s && *m.memory_bytes_per_s > 0) {
    doc["memory_bytes_per_s"] = Figure(*m.memory_bytes_per_s, "measured", source,
                                       "device-to-device cudaMemcpy of " + Size(m.device_copy_bytes) +
                                           ", bytes read plus bytes written per second (best window)");
  } else {
    COLIBRI_ASSIGN_OR_RETURN(sim::Parameter p, FindParameter(parameters, "memory_bytes_per_s", fallback->id));
    doc["memory_bytes_per_s"] = CopiedFigure(p, fallback->id);
  }
  COLIBRI_ASSIGN_OR_RETURN(sim::Parameter launch, FindParameter(parameters, "launch_ns", fallback->id));
  doc["launch_ns"] = CopiedFigure(launch, fallback->id);
  if (m.memory_bytes > 0) {
    doc["memory_bytes"] = Figure(m.memory_bytes, "measured", source, "cudaDeviceProp::totalGlobalMem as the device reports it");
  } else {
    COLIBRI_ASSIGN_OR_RETURN(sim::Parameter p, FindParameter(parameters, "memory_bytes", fallback->id));
    doc["memory_bytes"] = CopiedFigure(p, fallback->id);
  }
  return doc;
}

Result<Json> MachineProfileJson(const ProfileRun& run, const std::string& pcie_id, bool pcie_measured,
                                const std::string& compute_id, bool compute_measured,
                                const sim::HardwareCatalog& catalog) {
  COLIBRI_ASSIGN_OR_RETURN(const sim::MachineProfile* nvme_source, catalog.Machine(kNvmeSourceMachine));
  auto part = [&](const std::string& id, bool measured) {
    return id + (measured ? " (measured)" : " (built-in, of " + ClosestBuiltInMachine(run.device_name) + ")");
  };
  return Json{{"kind", "machine"},
              {"name", MeasuredMachineName(run.device_name)},
              {"description", run.device_name + " as measured by colibri bench pcie / bench compute --compute cuda (" +
                                  run.date_utc + "): link " + part(pcie_id, pcie_measured) + ", compute " +
                                  part(compute_id, compute_measured) + "; NVMe drive " + nvme_source->nvme +
                                  " of " + kNvmeSourceMachine + " (not measured)"},
              {"nvme", nvme_source->nvme},
              {"pcie", pcie_id},
              {"compute", compute_id}};
}

Result<std::vector<std::string>> WritePcieProfiles(const std::string& dir, const MeasuredPcie& m) {
  COLIBRI_ASSIGN_OR_RETURN(const sim::HardwareCatalog catalog, sim::HardwareCatalog::BuiltIn());
  COLIBRI_ASSIGN_OR_RETURN(Json pcie, PcieProfileJson(m, catalog));
  COLIBRI_RETURN_IF_ERROR(MakeDir(dir));
  const std::string path = PathIn(dir, MeasuredPcieId(m.run.device_name));
  COLIBRI_RETURN_IF_ERROR(engine::WriteFileWhole(path, pcie.dump(2) + "\n"));
  COLIBRI_ASSIGN_OR_RETURN(std::string machine, WriteMachine(dir, m.run, catalog));
  return std::vector<std::string>{path, machine};
}

Result<std::vector<std::string>> WriteComputeProfiles(const std::string& dir, const MeasuredCompute& m) {
  COLIBRI_ASSIGN_OR_RETURN(const sim::HardwareCatalog catalog, sim::HardwareCatalog::BuiltIn());
  COLIBRI_ASSIGN_OR_RETURN(Json compute, ComputeProfileJson(m, catalog));
  COLIBRI_RETURN_IF_ERROR(MakeDir(dir));
  const std::string path = PathIn(dir, MeasuredComputeId(m.run.device_name));
  COLIBRI_RETURN_IF_ERROR(engine::WriteFileWhole(path, compute.dump(2) + "\n"));
  COLIBRI_ASSIGN_OR_RETURN(std::string machine, WriteMachine(dir, m.run, catalog));
  return std::vector<std::string>{path, machine};
}

}  // namespace colibri::bench
