// The bad inputs of issue 17 that the CLI must refuse clearly (exit 2, a
// message naming the flag or file) instead of accepting silently, clamping,
// hanging or crashing. docs/RELIABILITY.md lists each case and its test.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace colibri::cli {
namespace {

using cli_testing::kSampleTrace;
using cli_testing::Outcome;

using BadInputCliTest = cli_testing::CliTest;

const std::string kQwenConfig = std::string(COLIBRI_SHARED_DATA) + "/model-configs/qwen/config.json";

void ExpectRefused(const Outcome& run, const std::string& says) {
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find(says), std::string::npos) << run.err;
}

TEST_F(BadInputCliTest, IntegersAreNeverClampedOrWrapped) {
  const std::string synth = "trace synth --model-config " + kQwenConfig + " --requests 1 -o " + dir_.File("s.ctrace");
  ExpectRefused(Colibri(synth + " --seed 18446744073709551616"), "--seed: '18446744073709551616' is out of range");
  ExpectRefused(Colibri(synth + " --seed -1"), "--seed: '-1' is not a non-negative integer");
  ExpectRefused(Colibri(synth + " --seed 0x10"), "is not a non-negative integer");
  EXPECT_FALSE(std::filesystem::exists(dir_.File("s.ctrace")));
  EXPECT_EQ(Colibri(synth + " --seed 18446744073709551615").exit_code, 0);  // the largest seed is a seed
  ExpectRefused(Colibri("replay " + kSampleTrace + " --hidden 2048 --hw h100-p5800x-gen5 --max-arrivals -1"),
                "--max-arrivals: '-1' is not a non-negative integer");
  ExpectRefused(Colibri("replay " + kSampleTrace + " --hidden 4294967295 --hw h100-p5800x-gen5"),
                "--hidden: Value 4294967295 not in range 1 to 1048576");
}

// Range errors name the rule, not a bound of 309 digits (CLI11's own
// PositiveNumber printed DBL_MAX in full).
TEST_F(BadInputCliTest, RangeMessagesAreHumanSized) {
  const std::string synth = "trace synth --model-config " + kQwenConfig + " -o " + dir_.File("s.ctrace");
  for (const auto& [flags, says] : {std::pair{" --requests 0", "--requests: '0' is not a positive number"},
                                    std::pair{" --time-scale -2", "--time-scale: '-2' is not a positive number"},
                                    std::pair{" --zipf -0.5", "--zipf: '-0.5' is not a number >= 0"}}) {
    const std::string command = std::string(flags).find("time-scale") != std::string::npos
                                    ? "replay " + kSampleTrace + " --hidden 2048 --hw h100-p5800x-gen5 --pacing open" + flags
                                    : synth + flags;
    const Outcome refused = Colibri(command);
    ExpectRefused(refused, says);
    EXPECT_LT(refused.err.size(), 400u) << refused.err;
    EXPECT_EQ(refused.err.find("179769"), std::string::npos) << refused.err;
  }
}

TEST_F(BadInputCliTest, FloatsMustBeFinite) {
  for (const char* value : {"nan", "inf", "-inf", "1e999", "5%"}) {
    const Outcome run = Colibri(std::string("report gate --baseline 1 --candidate 2 --max-p99-regression ") + value);
    EXPECT_EQ(run.exit_code, 2) << value << ": " << run.err;
    EXPECT_NE(run.err.find("--max-p99-regression"), std::string::npos) << run.err;
  }
}

TEST_F(BadInputCliTest, AnEmptyDbPathIsAnErrorNotTheDefault) {
  ExpectRefused(Colibri("runs list --db ''"), "--db: an empty path");
  EXPECT_FALSE(std::filesystem::exists(dir_.File("colibri-runs.db")));
}

TEST_F(BadInputCliTest, SpecialFilesAreRefusedByTypeWithoutHanging) {
  const std::string fifo = dir_.File("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ExpectRefused(Colibri("trace validate " + fifo), "is a FIFO");
  ExpectRefused(Colibri("trace stats /dev/zero"), "is a character device");
  ExpectRefused(Colibri("trace inspect /proc/self/status"), "kernel pseudo-file");
  ExpectRefused(Colibri("replay " + fifo + " --hw h100-p5800x-gen5 --hidden 2048"), "is a FIFO");
}

TEST_F(BadInputCliTest, AModelLargerThanTheDiskIsRefusedBeforeWriting) {
  const std::string out = dir_.File("huge");
  const Outcome run = Colibri("model synth --layers 1 --experts 8 --top-k 2 --hidden 1048576 --intermediate 1048576 -o " +
                              out);
  ExpectRefused(run, "bytes free; nothing was written");
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    EXPECT_EQ(entry.path().filename().string().find("huge"), std::string::npos) << entry.path();
  }
}

TEST_F(BadInputCliTest, AHugeRunIsRefusedWithItsEstimateUnlessForced) {
  const std::string model = dir_.File("m");
  ASSERT_EQ(Colibri("model synth --layers 2 --experts 8 --top-k 2 --hidden 256 --intermediate 128 -o " + model).exit_code,
            0);
  const Outcome run = Colibri("run --model " + model + " --requests 4096 --prefill 1048576 --no-store");
  ExpectRefused(run, "4295098368 tokens (4096 requests x (1048576 prompt + 32 decode)) through 2 MoE layers at top-2");
  EXPECT_NE(run.err.find("--force"), std::string::npos) << run.err;
}

// One changed byte in experts.bin or gating.bin, or a wrong digest in
// config.json: `run` and `replay --model` refuse the model at open.
TEST_F(BadInputCliTest, AChangedModelIsRefusedAtOpen) {
  const std::string model = dir_.File("m");
  ASSERT_EQ(Colibri("model synth --layers 2 --experts 8 --top-k 2 --hidden 256 --intermediate 128 -o " + model).exit_code,
            0);
  const std::string recording = dir_.File("r.ctrace");
  const std::string run = "run --requests 2 --prefill 4 --tokens 4 --no-store --model ";
  ASSERT_EQ(Colibri(run + model + " --record " + recording).exit_code, 0);
  const std::string replay = "replay " + recording + " --hw cpu-local --storage pread --transfer cpu --compute cpu " +
                             "--no-store --model ";
  ASSERT_EQ(Colibri(replay + model).exit_code, 0) << Colibri(replay + model).err;

  const auto damaged = [&](const std::string& name, const std::function<void(const std::string&)>& edit) {
    const std::string copy = dir_.File(name);
    std::filesystem::copy(model, copy, std::filesystem::copy_options::recursive);
    edit(copy);
    return copy;
  };
  const auto flip = [](const std::string& file) {
    std::string bytes = traces::testing::ReadFileBytes(file);
    bytes[bytes.size() - 100] = static_cast<char>(bytes[bytes.size() - 100] ^ 0x01);
    traces::testing::WriteFileBytes(file, bytes);
  };
  const std::string experts = damaged("experts-flip", [&](const std::string& d) { flip(d + "/experts.bin"); });
  const std::string gating = damaged("gating-flip", [&](const std::string& d) { flip(d + "/gating.bin"); });
  const std::string config = damaged("config-digest", [&](const std::string& d) {
    std::string text = traces::testing::ReadFileBytes(d + "/config.json");
    const size_t at = text.find("\"sha256\": \"") + 11;
    text[at] = text[at] == '0' ? '1' : '0';
    traces::testing::WriteFileBytes(d + "/config.json", text);
  });
  for (const auto& [dir, file] : {std::pair{experts, "experts.bin"}, std::pair{gating, "gating.bin"},
                                  std::pair{config, "experts.bin"}}) {
    for (const std::string& command : {run + dir, replay + dir}) {
      const Outcome refused = Colibri(command);
      EXPECT_EQ(refused.exit_code, 1) << command << ": " << refused.err;
      EXPECT_NE(refused.err.find(std::string(file) + ": sha256"), std::string::npos) << refused.err;
      EXPECT_NE(refused.err.find("config.json records"), std::string::npos) << refused.err;
    }
  }
  // --verify none is the user's explicit choice.
  EXPECT_EQ(Colibri(run + experts + " --verify none").exit_code, 0);

  // Checked block by block as blocks are read (what a model above 1 GiB gets
  // under auto): one changed byte in every block, so whichever block a run
  // reads first is refused, named by layer and expert.
  const std::string every_block = damaged("every-block", [&](const std::string& d) {
    const auto config = nlohmann::json::parse(traces::testing::ReadFileBytes(d + "/config.json"));
    const uint64_t block_bytes = config["expert_block_bytes"], blocks = 2 * 8, first = 4096;
    std::string bytes = traces::testing::ReadFileBytes(d + "/experts.bin");
    ASSERT_EQ(bytes.size(), first + blocks * block_bytes);
    for (uint64_t block = 0; block < blocks; ++block) bytes[first + block * block_bytes + 17] ^= 0x04;
    traces::testing::WriteFileBytes(d + "/experts.bin", bytes);
  });
  for (const std::string& command : {run + every_block, replay + every_block}) {
    const Outcome refused = Colibri(command + " --verify blocks");
    EXPECT_EQ(refused.exit_code, 1) << command << ": " << refused.err;
    EXPECT_NE(refused.err.find("experts.bin: layer index "), std::string::npos) << refused.err;
    EXPECT_NE(refused.err.find("reads as xxh3 0x"), std::string::npos) << refused.err;
    EXPECT_NE(refused.err.find("experts.xxh3 records 0x"), std::string::npos) << refused.err;
  }
  EXPECT_EQ(Colibri(run + model + " --verify blocks").exit_code, 0);
  EXPECT_EQ(Colibri(replay + model + " --verify blocks").exit_code, 0);
}

}  // namespace
}  // namespace colibri::cli
