#include "colibri/calibrate/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "calibrate_report.h"
#include "colibri/bench/files.h"
#include "colibri/engine/expert_layout.h"
#include "colibri/engine/output_claim.h"
#include "colibri/engine/model.h"
#include "colibri/sim/machine_identity.h"
#include "colibri/sim/profile_json.h"
#include "colibri/sim/profiles.h"
#include "colibri/sim/read_grid.h"
#include "colibri/traces/model_config.h"

namespace colibri::calibrate {
namespace {

// What is being studied: the router for the host-work runs and the FFN shapes.
struct StudiedShape {
  uint32_t experts = 64, top_k = 4, hidden = 2048;
  std::vector<ExpertShape> shapes;
  std::vector<uint64_t> read_bytes;  // the engine's read per expert (its block), when a model is studied
};

Result<StudiedShape> Studied(const CalibrateOptions& o) {
  StudiedShape s;
  if (!o.model_dir.empty() && !o.like_config.empty()) return Status::InvalidArgument("--model and --like are exclusive");
  if (!o.model_dir.empty()) {
    COLIBRI_ASSIGN_OR_RETURN(const engine::ModelConfig c, engine::ReadModelConfig(o.model_dir));
    s.experts = c.experts;
    s.top_k = c.top_k;
    s.hidden = c.hidden;
    s.shapes = {{c.hidden, c.intermediate, "--model " + o.model_dir}};
    s.read_bytes = {c.layout.block_bytes};
  } else if (!o.like_config.empty()) {
    COLIBRI_ASSIGN_OR_RETURN(const traces::ModelShape shape, traces::ShapeFromHfConfig(o.like_config, "bf16"));
    if (shape.hidden_size == 0 || shape.expert_bytes.empty()) {
      return Status::InvalidArgument(o.like_config + ": no hidden size or expert size");
    }
    s.experts = shape.experts_per_layer;
    s.top_k = shape.top_k;
    s.hidden = shape.hidden_size;
    // bf16 gated FFN: 3 matrices of hidden x intermediate, 2 bytes each.
    const auto intermediate = static_cast<uint32_t>(shape.expert_bytes.front() / (6ull * shape.hidden_size));
    s.shapes = {{shape.hidden_size, intermediate, "--like " + o.like_config}};
    s.read_bytes = {engine::ExpertLayout::Make(engine::DType::kBf16, shape.hidden_size, intermediate).block_bytes};
  } else {
    s.shapes = DefaultExpertShapes(o.quick);
  }
  return s;
}

std::string Today() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[16];
  std::strftime(text, sizeof(text), "%Y-%m-%d", &utc);
  return text;
}

std::vector<uint32_t> DefaultThreads() {
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  std::vector<uint32_t> threads = {1};
  if (cores > 1) threads.push_back(static_cast<uint32_t>(cores));
  return threads;
}

Status WriteFile(const std::filesystem::path& path, const std::string& text, std::vector<std::string>* files) {
  COLIBRI_RETURN_IF_ERROR(engine::WriteFileWhole(path.string(), text));
  files->push_back(path.string());
  return Status::Ok();
}

}  // namespace

Result<CalibrateReport> Calibrate(const CalibrateOptions& o) {
  if (o.out_dir.empty()) return Status::InvalidArgument("calibrate: an output directory (-o) is required");
  COLIBRI_ASSIGN_OR_RETURN(const StudiedShape studied, Studied(o));
  const std::vector<uint32_t> threads = o.threads.empty() ? DefaultThreads() : o.threads;
  CalibrateReport report;
  report.identity = sim::ThisMachineIdentity(o.dir);
  report.identity.measured_on = o.measured_on.empty() ? Today() : o.measured_on;
  report.identity.commit = o.git_commit;
  std::string date = report.identity.measured_on;
  date.erase(std::remove(date.begin(), date.end(), '-'), date.end());
  report.machine_name = "measured-" + sim::CpuSlug(report.identity.cpu_model) + "-" + date;
  auto stage = [&](const char* name) {
    return [&o, name](size_t done, size_t total) {
      if (o.progress) o.progress(name, done, total);
    };
  };

  StorageGridOptions storage = DefaultStorageGrid(o.quick);
  storage.dir = o.dir;
  storage.studied_read_bytes = studied.read_bytes;
  storage.seed = o.seed;
  storage.progress = stage("storage");
  COLIBRI_ASSIGN_OR_RETURN(report.storage, MeasureStorageGrid(storage));
  report.warnings.insert(report.warnings.end(), report.storage.warnings.begin(), report.storage.warnings.end());

  ComputeTableOptions compute;
  compute.shapes = studied.shapes;
  compute.threads = threads;
  if (o.quick) {
    compute.tokens = {1, 4, 16, 64, 256};
    compute.seconds_per_point = 0.04;
    compute.windows_per_point = 2;
  }
  compute.progress = stage("compute");
  COLIBRI_ASSIGN_OR_RETURN(report.compute, MeasureComputeTables(compute));

  HostWorkRunsOptions host;
  host.work_dir = o.dir;
  host.experts = studied.experts;
  host.top_k = studied.top_k;
  host.hidden = studied.hidden;
  host.threads = threads;
  host.seed = o.seed;
  if (o.quick) host.repeats = 3;
  host.progress = stage("engine");
  const sim::ReadGrid& grid = report.storage.grid;
  host.read_submit_ns = [&grid](uint64_t read_bytes, uint32_t depth) { return sim::ReadSubmitNs(grid, read_bytes, depth); };
  COLIBRI_ASSIGN_OR_RETURN(report.host_work, MeasureHostWork(host));

  COLIBRI_ASSIGN_OR_RETURN(report.host_copies,
                           MeasureHostCopies({64 << 10, 1 << 20, 4 << 20, 16 << 20}, o.quick ? 20 : 100));

  COLIBRI_ASSIGN_OR_RETURN(const MeasuredProfiles profiles, BuildProfiles(report, o));
  std::error_code error;
  std::filesystem::create_directories(o.out_dir, error);
  if (error) return Status::IoError(o.out_dir + ": cannot create: " + error.message());
  const std::filesystem::path out(o.out_dir);
  COLIBRI_ASSIGN_OR_RETURN(const std::string machine, sim::MachineProfileJson(profiles.machine));
  COLIBRI_ASSIGN_OR_RETURN(const std::string nvme, sim::NvmeProfileJson(profiles.nvme));
  COLIBRI_ASSIGN_OR_RETURN(const std::string pcie, sim::PcieProfileJson(profiles.pcie));
  COLIBRI_ASSIGN_OR_RETURN(const std::string cpu, sim::ComputeProfileJson(profiles.compute));
  COLIBRI_RETURN_IF_ERROR(WriteFile(out / (report.machine_name + ".json"), machine, &report.files));
  COLIBRI_RETURN_IF_ERROR(WriteFile(out / (profiles.nvme.id + ".json"), nvme, &report.files));
  COLIBRI_RETURN_IF_ERROR(WriteFile(out / (profiles.pcie.id + ".json"), pcie, &report.files));
  COLIBRI_RETURN_IF_ERROR(WriteFile(out / (profiles.compute.id + ".json"), cpu, &report.files));
  // What was written must load as --hw-file would load it.
  COLIBRI_ASSIGN_OR_RETURN(sim::HardwareCatalog catalog, sim::HardwareCatalog::BuiltIn());
  COLIBRI_RETURN_IF_ERROR(catalog.AddFiles(report.files));
  COLIBRI_RETURN_IF_ERROR(catalog.Resolve(report.machine_name).status());
  COLIBRI_RETURN_IF_ERROR(WriteFile(out / (report.machine_name + ".report.md"), CalibrateMarkdown(report), &report.files));
  COLIBRI_RETURN_IF_ERROR(WriteFile(out / (report.machine_name + ".raw.ndjson"), CalibrateRaw(report), &report.files));
  return report;
}

}  // namespace colibri::calibrate
