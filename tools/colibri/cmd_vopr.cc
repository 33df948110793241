// `colibri vopr --seed S [--runs N] [--minutes M] [--run I] [--db PATH]`:
// seeded simulation testing under faults (vopr/vopr.h). Prints the seed
// first, each run's configuration as it starts (so a run that crashes the
// process is named), then each run's outcome and a summary; on a broken
// invariant the command that reproduces the run, and exit 1.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <unistd.h>

#include "cli_common.h"
#include "colibri/sim/fault_spec.h"
#include "colibri/vopr/vopr.h"
#include "commands.h"
#include "run_storage.h"

namespace colibri::cli {
namespace {

struct VoprFlags {
  uint64_t seed = 0;
  uint32_t runs = 20;
  double minutes = 0;
  int64_t run = -1;
  std::string work_dir;
  StoreFlags store;
  bool json = false;
};

int Run(const VoprFlags& f) {
  // First, before anything can go wrong (on stderr with --json, whose stdout is the document alone).
  std::fprintf(f.json ? stderr : stdout, "vopr seed %llu\n", static_cast<unsigned long long>(f.seed));
  std::fflush(f.json ? stderr : stdout);
  vopr::VoprOptions o;
  o.seed = f.seed;
  o.runs = f.runs;
  o.minutes = f.minutes;
  o.only_run = f.run;
  o.db_path = f.store.no_store ? std::string() : DbPath(f.store);
  const std::string dir = !f.work_dir.empty() ? f.work_dir
                                              : (std::filesystem::temp_directory_path() /
                                                 ("colibri-vopr-" + std::to_string(::getpid()))).string();
  std::error_code made;
  std::filesystem::create_directories(dir, made);
  if (made) return Fail(Status::IoError(dir + ": cannot create the work directory: " + made.message()));
  o.work_dir = dir;
  Progress progress("vopr");
  o.on_run_start = [&](uint32_t i) {
    // Before the run, flushed: a run that crashes the process is still named, with its repro.
    if (!f.json) {
      std::printf("run %u: %s\n", i, vopr::DeriveRunConfig(f.seed, i).Describe().c_str());
      std::fflush(stdout);
    }
    progress.Update(i, f.minutes > 0 || f.run >= 0 ? 0 : f.runs);
  };
  Result<vopr::VoprResult> result = vopr::RunVopr(o);
  progress.Done();
  if (f.work_dir.empty()) std::filesystem::remove_all(dir, made);
  if (!result.ok()) return Fail(result.status());
  const vopr::VoprResult& r = result.value();
  Json runs = Json::array();
  for (const vopr::VoprRunReport& run : r.runs) {
    if (!f.json) {
      std::printf("run %u %s: %llu faults, %llu reads retried, %u requests failed\n", run.config.index,
                  run.violations.empty() ? "ok" : "FAILED", static_cast<unsigned long long>(run.faults_injected),
                  static_cast<unsigned long long>(run.read_retries), run.failed_requests);
      for (const std::string& v : run.violations) std::printf("  violated: %s\n  reproduce: %s\n", v.c_str(), run.repro.c_str());
    }
    runs.push_back(Json{{"run", run.config.index}, {"run_seed", run.config.run_seed},
                        {"config", run.config.Describe()}, {"faults_injected", run.faults_injected},
                        {"read_retries", run.read_retries}, {"failed_requests", run.failed_requests},
                        {"oracle_run_id", run.oracle_run_id}, {"faulty_run_id", run.faulty_run_id},
                        {"violations", run.violations}, {"repro", run.repro}});
  }
  Json by_kind = Json::object();
  std::string kinds;
  for (size_t k = 0; k < r.faults_by_kind.size(); ++k) {
    const char* name = sim::FaultKindName(static_cast<sim::FaultKind>(k));
    by_kind[name] = r.faults_by_kind[k];
    kinds += std::string(kinds.empty() ? "" : ", ") + name + " " + std::to_string(r.faults_by_kind[k]);
  }
  const uint32_t failed = r.failed_runs();
  if (f.json) {
    std::printf("%s\n", Json{{"seed", f.seed}, {"runs", runs}, {"faults_by_kind", by_kind},
                             {"runs_failed", failed}, {"db", o.db_path}}.dump(2).c_str());
  } else {
    std::printf("%zu runs, %u failed; faults: %s%s\n", r.runs.size(), failed, kinds.c_str(),
                o.db_path.empty() ? "" : ("; stored in " + o.db_path).c_str());
  }
  return failed == 0 ? kExitOk : kExitCheckFailed;
}

}  // namespace

void AddVoprCommand(CLI::App* app, int* exit_code) {
  auto f = std::make_shared<VoprFlags>();
  CLI::App* cmd = app->add_subcommand("vopr", "Seeded simulation testing: random configurations under faults, checked");
  cmd->add_option("--seed", f->seed, "Root seed: every run's configuration and faults derive from it")->required();
  cmd->add_option("--runs", f->runs, "Runs")->check(CLI::Range(1u, 1000000u))->capture_default_str();
  cmd->add_option("--minutes", f->minutes, "Soak: start runs until this many minutes have passed")
      ->check(PositiveNumber());
  cmd->add_option("--run", f->run, "Run only this index (what a repro command does)")->check(CLI::Range(int64_t{0}, int64_t{1000000}));
  cmd->add_option("--work-dir", f->work_dir, "Where the runs' models are written (default: a temporary directory)");
  AddStoreFlags(cmd, &f->store);
  cmd->add_flag("--json", f->json, "Print the result as JSON");
  cmd->callback([f, exit_code] { *exit_code = Run(*f); });
}

}  // namespace colibri::cli
