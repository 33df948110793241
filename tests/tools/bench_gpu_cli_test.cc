// `colibri bench pcie` and `colibri bench compute --compute cuda` where they
// cannot run: on a machine without a CUDA device they fail cleanly (exit 2,
// one line "no CUDA device: ..." on stderr, nothing on stdout, no crash),
// and in a colibri built without CUDA they say so. On a machine with a usable
// device these tests skip (the GPU check runs the benches there). Bad flags
// are refused before any device is touched.
#include <gtest/gtest.h>

#include <algorithm>

#include "cli_test_util.h"

namespace colibri::cli {
namespace {

using cli_testing::CliTest;
using cli_testing::Outcome;

class BenchGpuCliTest : public CliTest {
 protected:
  // Skips the test when `probe` (a cheap run of the bench) succeeded: a device is present.
  void ExpectCannotRun(const Outcome& run, const std::string& command) {
    if (run.exit_code == 0) GTEST_SKIP() << "a usable CUDA device is present: " << command << " ran";
    EXPECT_EQ(run.exit_code, 2) << command << "\n" << run.err;
    EXPECT_TRUE(run.out.empty()) << run.out;
#if COLIBRI_HAVE_CUDA
    EXPECT_NE(run.err.find("no CUDA device"), std::string::npos) << run.err;
#else
    EXPECT_NE(run.err.find("built without CUDA"), std::string::npos) << run.err;
#endif
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;  // one line
  }
};

TEST_F(BenchGpuCliTest, PcieWithoutDeviceFailsCleanly) {
  const std::string args = "bench pcie --sizes 4KiB --iterations 1 --repeats 1 --small-copies 1";
  ExpectCannotRun(Colibri(args), args);
  const std::string json = args + " --json --profile-out " + dir_.File("profiles");
  ExpectCannotRun(Colibri(json), json);
}

TEST_F(BenchGpuCliTest, ComputeCudaWithoutDeviceFailsCleanly) {
  const std::string args = "bench compute --compute cuda --dtype bf16 --batch 1 --seconds 0.01 --repeats 1";
  ExpectCannotRun(Colibri(args), args);
  ExpectCannotRun(Colibri(args + " --json"), args + " --json");
}

TEST_F(BenchGpuCliTest, BadFlagsAreRefusedFirst) {
  for (const std::string& args :
       {std::string("bench pcie --sizes 4KiB,abc"), std::string("bench pcie --sizes 2.5B"),
        std::string("bench pcie --sizes 0"), std::string("bench pcie --copy-streams 17"),
        std::string("bench compute --compute cuda --dtype fp64"), std::string("bench compute --compute tpu"),
        std::string("bench compute --compute cuda --threads 2"),
        std::string("bench compute --profile-out x"),  // --compute cpu
        std::string("bench compute --cuda-device 1")}) {
    const Outcome run = Colibri(args);
    EXPECT_EQ(run.exit_code, 2) << args << "\n" << run.err;
    EXPECT_EQ(run.err.find("no CUDA device"), std::string::npos) << args << "\n" << run.err;
  }
}

}  // namespace
}  // namespace colibri::cli
