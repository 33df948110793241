// Runs the built `colibri` binary as a process for CLI tests.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "../traces/test_util.h"

namespace colibri::cli_testing {

struct Outcome {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
  nlohmann::json json() const { return nlohmann::json::parse(out); }
};

// Runs `colibri <args>` (a shell word list), capturing stdout and stderr;
// stderr goes through a file in `scratch_dir`. Runs are stored in
// `scratch_dir`/colibri-runs.db (COLIBRI_DB) unless `args` name a --db.
inline Outcome RunColibri(const std::string& args, const std::string& scratch_dir) {
  const std::string err_path = scratch_dir + "/stderr.txt";
  const std::string command = "COLIBRI_DB='" + scratch_dir + "/colibri-runs.db' " + std::string(COLIBRI_BINARY) +
                              " " + args + " 2>" + err_path;
  Outcome run;
  FILE* pipe = ::popen(command.c_str(), "r");
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) run.out.append(buffer, n);
  const int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.err = traces::testing::ReadFileBytes(err_path);
  return run;
}

// The bundled sample trace (a real Qwen3-30B-A3B routing trace) and a replay of it with 8 GiB of L2.
inline const std::string kSampleTrace = std::string(COLIBRI_SOURCE_DIR) + "/traces/samples/qwen3-bigmoe.ctrace";
inline const std::string kReplaySample = "replay " + kSampleTrace + " --hidden 2048 --l2-bytes 8G ";

// A test with its own scratch directory (and run store) for the commands it runs.
class CliTest : public ::testing::Test {
 protected:
  Outcome Colibri(const std::string& args) const { return RunColibri(args, dir_.path()); }
  traces::testing::TempDir dir_;
};

}  // namespace colibri::cli_testing
