// `colibri trace inspect|validate|stats|slice|merge|synth` run as a process:
// exit codes (0 ok, 1 check failed, 2 bad input), --json documents and keys.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_test_util.h"
#include "colibri/traces/synth.h"

namespace colibri::traces {
namespace {

using Json = nlohmann::json;
using cli_testing::Outcome;
using testing::ReadFileBytes;
using testing::TempDir;
using testing::WriteFileBytes;

class TraceCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SynthOptions options;
    options.shape = testing::SmallShape(16, 2, 3);
    options.requests = 3;
    options.concurrency = 2;
    options.prompt_tokens = 5;
    options.output_tokens = 4;
    ASSERT_TRUE(SynthesizeTrace(options, trace_, WriterOptions{}).ok());
  }

  // Runs `colibri <args>`, capturing stdout and stderr.
  Outcome Colibri(const std::string& args) const { return cli_testing::RunColibri(args, dir_.path()); }

  // A copy of the trace with `edit` applied to its bytes.
  std::string EditedCopy(const std::string& name, void (*edit)(std::string*)) const {
    std::string bytes = ReadFileBytes(trace_);
    edit(&bytes);
    WriteFileBytes(dir_.File(name), bytes);
    return dir_.File(name);
  }
  std::string Corrupt() const {
    return EditedCopy("corrupt.ctrace", [](std::string* b) { (*b)[b->size() / 2] ^= 0x40; });
  }
  std::string Torn() const {
    return EditedCopy("torn.ctrace", [](std::string* b) { b->resize(b->size() - 3); });
  }
  std::string NotATrace() const {
    WriteFileBytes(dir_.File("rows.csv"), "turn,phase\n0,0\n");
    return dir_.File("rows.csv");
  }

  TempDir dir_;
  const std::string trace_ = dir_.File("t.ctrace");
};

void ExpectKeys(const Json& doc, const std::vector<std::string>& keys) {
  for (const std::string& key : keys) EXPECT_TRUE(doc.contains(key)) << "missing key " << key << " in " << doc.dump();
}

TEST_F(TraceCliTest, InspectReportsHeaderCountsAndFields) {
  const Outcome run = Colibri("trace inspect --json " + trace_);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json doc = run.json();
  ExpectKeys(doc, {"config", "compression", "model", "provenance", "requests", "records", "prefill_records",
                   "decode_records", "tokens", "selections", "layers", "top_k", "file_bytes", "bytes_per_selection",
                   "optional_fields", "truncated"});
  ExpectKeys(doc["model"], {"model_name", "moe_layer_ids", "experts_per_layer", "top_k", "expert_bytes", "dtype",
                            "token_cycle_bytes"});
  ExpectKeys(doc["provenance"], {"source_engine", "importer", "sources"});
  ExpectKeys(doc["optional_fields"],
             {"gate_weights", "router_logits", "token_ids", "hidden_states", "timestamps", "cache_outcomes"});
  EXPECT_EQ(doc["config"]["file"], trace_);
  EXPECT_EQ(doc["requests"], 3);
  EXPECT_EQ(doc["tokens"], 27);
  EXPECT_EQ(doc["prefill_records"], 9);
  EXPECT_EQ(doc["decode_records"], 36);
  EXPECT_EQ(doc["optional_fields"]["gate_weights"]["present"], false);
  EXPECT_EQ(doc["truncated"], false);
  EXPECT_EQ(Colibri("trace inspect " + trace_).exit_code, 0);
}

TEST_F(TraceCliTest, ValidateExitCodes) {
  Outcome clean = Colibri("trace validate --json " + trace_);
  EXPECT_EQ(clean.exit_code, 0) << clean.err;
  EXPECT_EQ(clean.json()["status"], "complete");
  EXPECT_EQ(clean.json()["records"], 45);

  Outcome corrupt = Colibri("trace validate --json " + Corrupt());
  EXPECT_EQ(corrupt.exit_code, 1);
  EXPECT_EQ(corrupt.json()["status"], "corrupt");
  EXPECT_NE(corrupt.json()["error"].get<std::string>().find("byte offset"), std::string::npos);
  EXPECT_NE(corrupt.err.find("record index"), std::string::npos) << corrupt.err;

  // Cut inside the trailer: every record is there, but the file is not whole.
  Outcome torn = Colibri("trace validate --json " + Torn());
  EXPECT_EQ(torn.exit_code, 1);
  EXPECT_EQ(torn.json()["status"], "torn");
  EXPECT_EQ(torn.json()["records"], 45);
  EXPECT_EQ(torn.json()["torn_at_byte"], std::filesystem::file_size(trace_) - 41);
  // Cut at a frame boundary (the header alone): torn, never "complete".
  const std::string header_only = EditedCopy("header.ctrace", [](std::string* b) {
    const uint32_t header_bytes = static_cast<uint8_t>((*b)[12]) | (static_cast<uint8_t>((*b)[13]) << 8);
    b->resize(20 + header_bytes);
  });
  Outcome cut = Colibri("trace validate " + header_only);
  EXPECT_EQ(cut.exit_code, 1);
  EXPECT_NE(cut.out.find("torn at byte offset"), std::string::npos) << cut.out;

  EXPECT_EQ(Colibri("trace validate " + dir_.File("missing.ctrace")).exit_code, 2);
  EXPECT_EQ(Colibri("trace validate " + NotATrace()).exit_code, 2);
  EXPECT_EQ(Colibri("trace validate --no-such-flag " + trace_).exit_code, 2);
  EXPECT_EQ(Colibri("trace validate " + Corrupt()).exit_code, 1);
}

TEST_F(TraceCliTest, StatsJsonKeysAndTornTailWarning) {
  const Outcome run = Colibri("trace stats --json " + trace_);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json doc = run.json();
  ExpectKeys(doc, {"config", "layers", "load_cv_mean", "load_cv_max", "decode_reuse_mean", "token_cycle_bytes",
                   "tokens", "requests", "truncated"});
  ASSERT_EQ(doc["layers"].size(), 3u);
  ExpectKeys(doc["layers"][0], {"layer", "load_cv", "load_max_over_mean", "gini", "unused_experts"});
  EXPECT_EQ(doc["layers"][1]["layer"], 3);
  EXPECT_EQ(doc["tokens"], 27);
  EXPECT_EQ(doc["token_cycle_bytes"], 2 * (1000 + 1001 + 1002));
  EXPECT_EQ(Colibri("trace stats --json " + trace_).out, run.out);  // deterministic

  const Outcome refused = Colibri("trace stats --json " + Torn());
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("--allow-torn"), std::string::npos) << refused.err;
  const Outcome torn = Colibri("trace stats --json --allow-torn " + Torn());
  EXPECT_EQ(torn.exit_code, 0) << torn.err;
  EXPECT_EQ(torn.json()["truncated"], true);
  EXPECT_NE(torn.err.find("torn at byte offset"), std::string::npos) << torn.err;

  EXPECT_EQ(Colibri("trace stats " + Corrupt()).exit_code, 1);
  EXPECT_EQ(Colibri("trace stats " + dir_.File("missing.ctrace")).exit_code, 2);
  const Outcome table = Colibri("trace stats " + trace_);
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_NE(table.out.find("load_cv"), std::string::npos);
}

TEST_F(TraceCliTest, UpgradeRewritesVersionOneAndSalvagesTornFiles) {
  // A version-1 file: the v2 bytes without the end, version 1.
  const std::string v1 = EditedCopy("v1.ctrace", [](std::string* b) {
    b->resize(b->size() - 41);
    (*b)[8] = 1;
  });
  const Outcome refused = Colibri("trace validate " + v1);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("colibri trace upgrade"), std::string::npos) << refused.err;
  const std::string up = dir_.File("up.ctrace");
  const Outcome upgrade = Colibri("trace upgrade --json " + v1 + " -o " + up);
  ASSERT_EQ(upgrade.exit_code, 0) << upgrade.err;
  EXPECT_EQ(upgrade.json()["input_version"], 1);
  EXPECT_EQ(upgrade.json()["records"], 45);
  EXPECT_EQ(upgrade.json()["torn"], false);
  EXPECT_EQ(ReadFileBytes(up), ReadFileBytes(trace_));
  EXPECT_EQ(Colibri("trace validate " + up).exit_code, 0);
  // A torn v2 file: refused, salvaged with --allow-torn into a complete file.
  const Outcome torn = Colibri("trace upgrade " + Torn() + " -o " + dir_.File("s.ctrace"));
  EXPECT_EQ(torn.exit_code, 1);
  EXPECT_FALSE(std::filesystem::exists(dir_.File("s.ctrace")));
  const Outcome salvage = Colibri("trace upgrade --json --allow-torn " + Torn() + " -o " + dir_.File("s.ctrace"));
  ASSERT_EQ(salvage.exit_code, 0) << salvage.err;
  EXPECT_EQ(salvage.json()["torn"], true);
  EXPECT_EQ(Colibri("trace validate " + dir_.File("s.ctrace")).exit_code, 0);
  EXPECT_EQ(Colibri("trace upgrade " + Corrupt() + " -o " + dir_.File("c.ctrace")).exit_code, 1);
  EXPECT_FALSE(std::filesystem::exists(dir_.File("c.ctrace")));
}

TEST_F(TraceCliTest, SliceAndMerge) {
  const std::string sliced = dir_.File("s.ctrace");
  const Outcome slice =
      Colibri("trace slice " + trace_ + " -o " + sliced + " --requests 0,2 --tokens 5: --layers 1 --json");
  ASSERT_EQ(slice.exit_code, 0) << slice.err;
  const Json doc = slice.json();
  EXPECT_EQ(doc["records_in"], 45);
  EXPECT_EQ(doc["records_out"], 8);              // 2 requests x 4 decode steps at layer 1
  EXPECT_EQ(doc["config"]["compress"], "none");  // the input's
  EXPECT_EQ(doc["config"]["tokens"], "5:");

  const std::string merged = dir_.File("m.ctrace");
  const Outcome merge = Colibri("trace merge " + trace_ + " " + sliced + " -o " + merged + " --compress zstd --json");
  ASSERT_EQ(merge.exit_code, 0) << merge.err;
  EXPECT_EQ(merge.json()["records_out"], 53);
  EXPECT_EQ(Colibri("trace inspect --json " + merged).json()["compression"], "zstd");
  EXPECT_EQ(Colibri("trace validate " + merged).exit_code, 0);

  EXPECT_EQ(Colibri("trace slice " + trace_ + " -o " + sliced + " --tokens 9").exit_code, 2);
  EXPECT_EQ(Colibri("trace slice " + trace_ + " -o " + sliced + " --layers 2").exit_code, 2);
  EXPECT_EQ(Colibri("trace slice " + trace_ + " -o " + sliced + " --compress lz4").exit_code, 2);
  EXPECT_EQ(Colibri("trace merge " + trace_ + " " + NotATrace() + " -o " + merged).exit_code, 2);
}

TEST_F(TraceCliTest, MergeRefusesDifferentShapes) {
  SynthOptions options;
  options.shape = testing::SmallShape(8, 2, 3);
  const std::string other = dir_.File("other.ctrace");
  ASSERT_TRUE(SynthesizeTrace(options, other, WriterOptions{}).ok());
  const Outcome run = Colibri("trace merge " + trace_ + " " + other + " -o " + dir_.File("m.ctrace"));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("experts_per_layer"), std::string::npos) << run.err;
}

TEST_F(TraceCliTest, SynthFromModelConfig) {
  const std::string config = std::string(COLIBRI_SHARED_DATA) + "/model-configs/mixtral/config.json";
  if (!std::filesystem::exists(config)) GTEST_SKIP() << "no " << config;
  const std::string args = "trace synth --model-config " + config +
                           " --layers 2 --requests 3 --prompt-tokens 6 --output-tokens 5 --zipf 1.2 --json -o ";
  const Outcome run = Colibri(args + dir_.File("a.ctrace"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json doc = run.json();
  ExpectKeys(doc, {"config", "records", "selections", "tokens", "file_bytes", "bytes_per_selection"});
  ExpectKeys(doc["config"], {"model_config", "dtype", "layers", "zipf", "decode_reuse", "requests", "concurrency",
                             "prompt_tokens", "output_tokens", "seed", "gate_weights", "compress", "output"});
  EXPECT_EQ(doc["config"]["dtype"], "bf16");
  EXPECT_EQ(doc["config"]["zipf"], 1.2);
  EXPECT_EQ(doc["tokens"], 33);
  EXPECT_EQ(doc["selections"], 33 * 2 * 2);  // Mixtral: top-2, 2 layers kept
  ASSERT_EQ(Colibri(args + dir_.File("b.ctrace")).exit_code, 0);
  EXPECT_EQ(ReadFileBytes(dir_.File("a.ctrace")), ReadFileBytes(dir_.File("b.ctrace")));

  EXPECT_EQ(Colibri("trace synth --model-config " + config + " --layers 99 -o " + dir_.File("c.ctrace")).exit_code, 2);
  EXPECT_EQ(Colibri("trace synth -o " + dir_.File("c.ctrace")).exit_code, 2);
  const Outcome help = Colibri("trace synth --help");
  EXPECT_NE(help.out.find("=bf16"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("=0.5"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace colibri::traces
