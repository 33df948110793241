// `colibri fidelity [--profile DIR] [--hw MACHINE] [--grid quick|full]`: how
// well a machine profile predicts this machine's real engine
// (replay/fidelity.h, docs/FIDELITY.md). This file parses flags and prints.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli_common.h"
#include "version.h"
#include "colibri/replay/fidelity.h"
#include "colibri/sim/profiles.h"
#include "commands.h"
#include "run_storage.h"

namespace colibri::cli {
namespace {

struct FidelityFlags {
  std::vector<std::string> profile_dirs;
  std::vector<std::string> hw_files;
  std::string machine;
  std::string grid = "quick";
  uint32_t repeats = 2;
  std::string work_dir;
  uint64_t seed = 1;
  std::string format = "table";
  std::string output;
  StoreFlags store;
  bool json = false;
  bool no_disk_probe = false;
};

// The profile files of the directories (every *.json, sorted) and the machines they define.
Result<std::vector<std::string>> ProfileFiles(const std::vector<std::string>& dirs, std::vector<std::string>* machines) {
  std::vector<std::string> files;
  for (const std::string& dir : dirs) {
    std::error_code error;
    if (!std::filesystem::is_directory(dir, error)) return Status::NotFound("--profile " + dir + ": not a directory");
    std::vector<std::string> here;
    for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
      if (entry.path().extension() == ".json") here.push_back(entry.path().string());
    }
    if (here.empty()) return Status::NotFound("--profile " + dir + ": no *.json profile files");
    std::sort(here.begin(), here.end());
    for (const std::string& file : here) {
      std::ifstream in(file);
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (!doc.is_object() || !doc.contains("kind") || doc["kind"] != "machine") continue;  // AddFiles checks the rest
      auto parsed = sim::ParseMachineProfile(text, file);
      if (!parsed.ok()) return parsed.status();
      machines->push_back(parsed.value().name);
    }
    files.insert(files.end(), here.begin(), here.end());
  }
  return files;
}

Result<replay::FidelityReport> RunFidelityCommand(const FidelityFlags& f) {
  COLIBRI_ASSIGN_OR_RETURN(sim::HardwareCatalog catalog, sim::HardwareCatalog::BuiltIn());
  std::vector<std::string> machines;
  COLIBRI_ASSIGN_OR_RETURN(std::vector<std::string> files, ProfileFiles(f.profile_dirs, &machines));
  files.insert(files.end(), f.hw_files.begin(), f.hw_files.end());
  COLIBRI_RETURN_IF_ERROR(catalog.AddFiles(files));
  std::string machine = f.machine;
  if (machine.empty()) {
    if (machines.size() > 1) {
      return Status::InvalidArgument("--profile holds " + std::to_string(machines.size()) +
                                     " machines: name one with --hw");
    }
    machine = machines.empty() ? "cpu-local" : machines.front();
  }
  replay::FidelityOptions options;
  COLIBRI_ASSIGN_OR_RETURN(options.machine, catalog.Resolve(machine));
  options.grid = f.grid;
  options.repeats = f.repeats;
  options.seed = f.seed;
  options.probe_storage = !f.no_disk_probe;
  options.work_dir = f.work_dir.empty() ? (std::filesystem::temp_directory_path() / "colibri-fidelity").string() : f.work_dir;
  std::unique_ptr<reports::RunStore> store;
  if (!f.store.no_store) {
    COLIBRI_ASSIGN_OR_RETURN(store, OpenStore(f.store));
    options.store = store.get();
  }
  options.tool_version = ColibriVersion();
  options.git_commit = ColibriGitCommit();
  Progress progress("fidelity");
  options.progress = [&](size_t done, size_t total, const std::string&) { progress.Update(done, total); };
  Result<replay::FidelityReport> report = replay::RunFidelity(options);
  progress.Done();
  return report;
}

int Run(const FidelityFlags& f) {
  if (f.repeats < 1) return Fail(Status::InvalidArgument("--repeats: expected at least 1"));
  Result<replay::FidelityReport> report = RunFidelityCommand(f);
  if (!report.ok()) return Fail(report.status());
  for (const std::string& w : report.value().warnings) std::cerr << "colibri: warning: " << w << "\n";
  std::string text;
  if (f.json) {
    text = replay::FidelityJson(report.value()) + "\n";
  } else if (f.format == "html") {
    text = replay::FidelityHtml(report.value());
  } else {
    text = replay::FidelityMarkdown(report.value());
  }
  const Status written = WriteOutput(f.output, text);
  return written.ok() ? kExitOk : Fail(written);
}

}  // namespace

void AddFidelityCommand(CLI::App* app, int* exit_code) {
  auto f = std::make_shared<FidelityFlags>();
  CLI::App* cmd = app->add_subcommand(
      "fidelity", "Run the real engine and replay its recordings on a profile: measured vs predicted per step");
  cmd->add_option("--profile", f->profile_dirs, "A directory of profile files (colibri calibrate -o DIR); repeatable");
  cmd->add_option("--hw-file", f->hw_files, "Extra profile files");
  cmd->add_option("--hw", f->machine, "The machine to predict with (default: the one in --profile, else cpu-local)");
  cmd->add_option("--grid", f->grid, "quick (small model, short runs) or full")->check(CLI::IsMember({"quick", "full"}));
  cmd->add_option("--repeats", f->repeats, "Real runs per configuration (the noise floor needs 2)")->capture_default_str();
  cmd->add_option("--work-dir", f->work_dir, "Models and recordings (default: <tmp>/colibri-fidelity; models are reused)");
  cmd->add_option("--seed", f->seed, "The workload's seed")->capture_default_str();
  cmd->add_option("--format", f->format, "table (markdown), md or html")->check(CLI::IsMember({"table", "md", "html"}));
  cmd->add_option("-o,--output", f->output, "Write the report here instead of stdout");
  cmd->add_flag("--json", f->json, "Print the report as JSON");
  cmd->add_flag("--no-disk-probe", f->no_disk_probe,
                "Skip the storage probes around each configuration's real runs (the disk drift column)");
  AddStoreFlags(cmd, &f->store);
  cmd->callback([f, exit_code] { *exit_code = Run(*f); });
}

}  // namespace colibri::cli
