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

// A test suite sharing one scratch directory (dir_, made per suite) that holds
// a synthesized model (Model()): 3 layers x 8 experts, top-2, H=64 I=32 bf16,
// seed 5 (12 KiB blocks). A derived SetUpTestSuite that adds files calls this
// one first.
class SynthModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new traces::testing::TempDir();
    const Outcome synth = RunColibri("model synth --layers 3 --experts 8 --top-k 2 --hidden 64 --intermediate 32 "
                                     "--dtype bf16 --seed 5 -o " + Model(), dir_->path());
    ASSERT_EQ(synth.exit_code, 0) << synth.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string Model() { return dir_->File("model"); }

  static inline traces::testing::TempDir* dir_ = nullptr;
};

}  // namespace colibri::cli_testing
