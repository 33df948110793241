// `colibri calibrate -o DIR [--dir PATH] [--model DIR | --like CONFIG.json]
// [--quick] [--threads LIST] [--json]`: measures this machine and writes a
// measured machine profile (calibrate/calibrate.h, docs/FIDELITY.md). This
// file parses flags and prints.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <iostream>

#include "cli_common.h"
#include "version.h"
#include "colibri/calibrate/calibrate.h"
#include "commands.h"

namespace colibri::cli {
namespace {

struct CalibrateFlags {
  std::string out_dir;
  std::string dir = ".";
  std::string model;
  std::string like;
  bool quick = false;
  std::string threads;
  uint64_t seed = 1;
  bool json = false;
};

Result<std::vector<uint32_t>> Threads(const std::string& text) {
  std::vector<uint32_t> threads;
  if (text.empty()) return threads;
  COLIBRI_ASSIGN_OR_RETURN(const std::vector<std::string> parts, SplitList(text, "--threads"));
  for (const std::string& part : parts) {
    char* end = nullptr;
    const unsigned long n = std::strtoul(part.c_str(), &end, 10);
    if (end == part.c_str() || *end != '\0' || part[0] == '-' || n == 0 || n > 256) {
      return Status::InvalidArgument("--threads: '" + part + "' is not a thread count in [1, 256]");
    }
    threads.push_back(static_cast<uint32_t>(n));
  }
  std::sort(threads.begin(), threads.end());
  threads.erase(std::unique(threads.begin(), threads.end()), threads.end());
  return threads;
}

int Run(const CalibrateFlags& f) {
  calibrate::CalibrateOptions options;
  options.out_dir = f.out_dir;
  options.dir = f.dir;
  options.model_dir = f.model;
  options.like_config = f.like;
  options.quick = f.quick;
  options.seed = f.seed;
  options.tool_version = ColibriVersion();
  options.git_commit = ColibriGitCommit();
  Result<std::vector<uint32_t>> threads = Threads(f.threads);
  if (!threads.ok()) return Fail(threads.status());
  options.threads = threads.value();
  std::unique_ptr<Progress> progress;  // one line per stage (storage, compute, engine)
  std::string last_stage;
  options.progress = [&](const std::string& stage, size_t done, size_t total) {
    if (stage != last_stage) {
      if (progress) progress->Done();
      progress = std::make_unique<Progress>("calibrate: " + stage);
      last_stage = stage;
    }
    progress->Update(done, total);
  };
  Result<calibrate::CalibrateReport> report = calibrate::Calibrate(options);
  if (progress) progress->Done();
  if (!report.ok()) return Fail(report.status());
  for (const std::string& w : report.value().warnings) std::cerr << "colibri: warning: " << w << "\n";
  if (f.json) {
    std::printf("%s\n", calibrate::CalibrateReportJson(report.value()).c_str());
    return kExitOk;
  }
  for (const std::string& file : report.value().files) std::printf("wrote %s\n", file.c_str());
  std::printf("machine %s: replay on it with --hw-file %s/*.json --hw %s (or colibri fidelity --profile %s)\n",
              report.value().machine_name.c_str(), f.out_dir.c_str(), report.value().machine_name.c_str(),
              f.out_dir.c_str());
  return kExitOk;
}

}  // namespace

void AddCalibrateCommand(CLI::App* app, int* exit_code) {
  auto f = std::make_shared<CalibrateFlags>();
  CLI::App* cmd = app->add_subcommand("calibrate", "Measure this machine and write a measured hardware profile");
  cmd->add_option("-o,--output-dir", f->out_dir, "Where the profile files go (created)")->required();
  cmd->add_option("--dir", f->dir, "A directory on the file system whose storage is measured")->capture_default_str();
  cmd->add_option("--model", f->model, "Measure this model's expert shape and router");
  cmd->add_option("--like", f->like, "Measure the shape of this Hugging Face config.json");
  cmd->add_flag("--quick", f->quick, "A smaller grid (under 2 minutes)");
  cmd->add_option("--threads", f->threads, "CPU thread counts to measure, e.g. 1,2 (default: 1 and every core)");
  cmd->add_option("--seed", f->seed, "Seed of the measured files and inputs")->capture_default_str();
  cmd->add_flag("--json", f->json, "Print the report as JSON");
  cmd->callback([f, exit_code] { *exit_code = Run(*f); });
}

}  // namespace colibri::cli
