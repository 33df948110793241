// Runs the built `colibri` binary as a process for CLI tests.
#pragma once

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
// stderr goes through a file in `scratch_dir`.
inline Outcome RunColibri(const std::string& args, const std::string& scratch_dir) {
  const std::string err_path = scratch_dir + "/stderr.txt";
  const std::string command = std::string(COLIBRI_BINARY) + " " + args + " 2>" + err_path;
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

}  // namespace colibri::cli_testing
