// The model directory format: synth -> open -> verify, determinism, and the
// checks that refuse corrupted, truncated or badly configured models.
#include "colibri/engine/model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "model_codec.h"
#include "model_test_util.h"

namespace colibri::engine {
namespace {

using ::testing::HasSubstr;
using testing_util::kAllDTypes;
using testing_util::FindCheck;
using testing_util::ReadBytes;
using testing_util::ScratchDir;
using testing_util::SmallShape;
using testing_util::WriteBytes;
using testing_util::WriteText;

std::vector<std::string> CheckNames(const VerifyReport& report) {
  std::vector<std::string> names;
  for (const ModelCheck& check : report.checks) names.push_back(check.name);
  return names;
}

TEST(ModelTest, SynthOpenVerifyEveryDtype) {
  ScratchDir scratch;
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(DTypeName(dtype));
    const std::string dir = scratch.Path(DTypeName(dtype));
    auto written = SynthModel(SmallShape(dtype), 7, dir);
    ASSERT_TRUE(written.ok()) << written.status().message();

    auto model = OpenModel(dir, /*verify_checksums=*/true);
    ASSERT_TRUE(model.ok()) << model.status().message();
    const ModelConfig& c = model->config();
    EXPECT_EQ(c.dtype, dtype);
    EXPECT_EQ(c.layer_ids, (std::vector<uint32_t>{0, 1}));
    EXPECT_EQ(c.experts, 4u);
    EXPECT_EQ(c.top_k, 2u);
    EXPECT_EQ(c.hidden, 64u);
    EXPECT_EQ(c.intermediate, 32u);
    EXPECT_EQ(c.source_intermediate, 32u);
    EXPECT_EQ(c.model_name, "synthetic");
    EXPECT_EQ(c.source.at("seed"), "7");
    EXPECT_EQ(c.layout.block_bytes, ExpertLayout::Make(dtype, 64, 32).block_bytes);
    EXPECT_EQ(c.experts_file.sha256, written->experts_file.sha256);
    EXPECT_EQ(model->experts_path(), dir + "/experts.bin");
    for (uint32_t layer = 0; layer < 2; ++layer) {
      for (uint32_t expert = 0; expert < 4; ++expert) {
        const uint64_t offset = model->ExpertOffset(layer, expert);
        EXPECT_EQ(offset % 4096, 0u);
        EXPECT_LE(offset + c.layout.block_bytes, c.experts_file.bytes);
        if (expert > 0) {
          EXPECT_EQ(offset, model->ExpertOffset(layer, expert - 1) + c.layout.block_bytes);
        }
      }
    }
    EXPECT_EQ(model->GateBias(0), model->GateWeight(0) + 4 * 64);
    EXPECT_EQ(model->GateWeight(1), model->GateBias(0) + 4);

    auto report = VerifyModel(dir, /*verify_checksums=*/true);
    ASSERT_TRUE(report.ok()) << report.status().message();
    EXPECT_TRUE(report->ok());
    EXPECT_EQ(CheckNames(report.value()),
              (std::vector<std::string>{"config", "intermediate_alignment", "experts_size", "gating_size",
                                        "block_alignment", "index", "block_digests", "block_digests_sha256",
                                        "experts_sha256", "blocks", "gating_sha256"}));
  }
}

TEST(ModelTest, SynthIsDeterministic) {
  ScratchDir scratch;
  for (const char* name : {"a", "b"}) ASSERT_TRUE(SynthModel(SmallShape(DType::kBf16), 42, scratch.Path(name)).ok());
  ASSERT_TRUE(SynthModel(SmallShape(DType::kBf16), 43, scratch.Path("c")).ok());
  for (const char* file : {"experts.bin", "gating.bin", "config.json"}) {
    EXPECT_EQ(ReadBytes(scratch.Path(std::string("a/") + file)), ReadBytes(scratch.Path(std::string("b/") + file)))
        << file;
  }
  EXPECT_NE(ReadBytes(scratch.Path("a/experts.bin")), ReadBytes(scratch.Path("c/experts.bin")));
  EXPECT_NE(ReadBytes(scratch.Path("a/gating.bin")), ReadBytes(scratch.Path("c/gating.bin")));
}

// Every dtype rounds the same fp32 draws; weights have std ~ 1/sqrt(fan_in).
TEST(ModelTest, SynthDtypesRoundTheSameValues) {
  ScratchDir scratch;
  ASSERT_TRUE(SynthModel(SmallShape(DType::kFp32), 5, scratch.Path("fp32")).ok());
  ASSERT_TRUE(SynthModel(SmallShape(DType::kFp16), 5, scratch.Path("fp16")).ok());
  auto fp32 = OpenModel(scratch.Path("fp32"), false);
  auto fp16 = OpenModel(scratch.Path("fp16"), false);
  ASSERT_TRUE(fp32.ok() && fp16.ok());
  const std::vector<char> a = ReadBytes(fp32->experts_path());
  const std::vector<char> b = ReadBytes(fp16->experts_path());
  const auto* block_a = reinterpret_cast<const std::byte*>(a.data() + fp32->ExpertOffset(1, 3));
  const auto* block_b = reinterpret_cast<const std::byte*>(b.data() + fp16->ExpertOffset(1, 3));
  std::vector<float> row_a(32), row_b(32);
  double squares = 0;
  for (uint32_t r = 0; r < 64; ++r) {
    model_detail::DecodeRow(fp32->config().layout, model_detail::MatrixKind::kDown, r, block_a, row_a.data());
    model_detail::DecodeRow(fp16->config().layout, model_detail::MatrixKind::kDown, r, block_b, row_b.data());
    for (uint32_t c = 0; c < 32; ++c) {
      EXPECT_EQ(row_b[c], Fp16ToFloat(FloatToFp16(row_a[c])));
      squares += double{row_a[c]} * row_a[c];
    }
  }
  const double std_dev = std::sqrt(squares / (64 * 32));
  EXPECT_NEAR(std_dev, 1 / std::sqrt(32.0), 0.1 / std::sqrt(32.0));  // down: fan_in = I
}

TEST(ModelTest, CorruptedByteFailsVerifyNamingExpertsBin) {
  ScratchDir scratch;
  const std::string dir = scratch.Path("m");
  ASSERT_TRUE(SynthModel(SmallShape(DType::kBf16), 1, dir).ok());
  std::vector<char> bytes = ReadBytes(dir + "/experts.bin");
  bytes[bytes.size() - 5000] ^= 0x01;
  WriteBytes(dir + "/experts.bin", bytes);

  auto report = VerifyModel(dir, true);
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->ok());
  const ModelCheck* check = FindCheck(report.value(), "experts_sha256");
  ASSERT_NE(check, nullptr);
  EXPECT_EQ(check->status.code(), StatusCode::kCorruption);
  EXPECT_THAT(check->status.message(), HasSubstr("experts.bin: sha256"));
  EXPECT_TRUE(FindCheck(report.value(), "gating_sha256")->status.ok());

  EXPECT_TRUE(OpenModel(dir, /*verify_checksums=*/false).ok());  // sizes and index still match
  auto opened = OpenModel(dir, /*verify_checksums=*/true);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kCorruption);
  EXPECT_THAT(opened.status().message(), HasSubstr("experts.bin"));
}

TEST(ModelTest, TruncatedFileFailsOpen) {
  ScratchDir scratch;
  for (const char* file : {"experts.bin", "gating.bin"}) {
    SCOPED_TRACE(file);
    const std::string dir = scratch.Path(file + std::string(".model"));
    ASSERT_TRUE(SynthModel(SmallShape(DType::kFp16), 1, dir).ok());
    std::filesystem::resize_file(dir + "/" + file, std::filesystem::file_size(dir + "/" + file) - 100);
    auto opened = OpenModel(dir, false);
    ASSERT_FALSE(opened.ok());
    EXPECT_EQ(opened.status().code(), StatusCode::kTruncated);
    EXPECT_THAT(opened.status().message(), HasSubstr(std::string(file) + ": "));
    EXPECT_THAT(opened.status().message(), HasSubstr("truncated"));
  }
}

TEST(ModelTest, IndexAndBlockAlignmentChecks) {
  ScratchDir scratch;
  const std::string dir = scratch.Path("m");
  ASSERT_TRUE(SynthModel(SmallShape(DType::kFp32), 1, dir).ok());
  std::vector<char> bytes = ReadBytes(dir + "/experts.bin");
  bytes[64 + 8 * 1] += 1;  // index entry of (layer index 0, expert 1): low byte + 1, misaligned
  WriteBytes(dir + "/experts.bin", bytes);
  auto report = VerifyModel(dir, false);
  ASSERT_TRUE(report.ok());
  EXPECT_THAT(FindCheck(report.value(), "index")->status.message(),
              HasSubstr("experts.bin: index entry of (layer index 0, expert 1) is byte"));
  EXPECT_THAT(FindCheck(report.value(), "block_alignment")->status.message(),
              HasSubstr("not a multiple of block_alignment 4096"));
  EXPECT_FALSE(OpenModel(dir, false).ok());
}

// Edits one field of config.json and expects OpenModel to name it.
struct ConfigCase {
  std::string name;
  std::function<void(nlohmann::json&)> edit;
  std::string expected;
};

TEST(ModelTest, BadConfigFieldsGiveClearErrors) {
  const std::vector<ConfigCase> cases = {
      {"top_k", [](auto& j) { j["top_k"] = 9; }, "field 'top_k': 9 not in 1..4"},
      {"negative", [](auto& j) { j["num_experts"] = -1; }, "field 'num_experts': expected a non-negative integer"},
      {"float", [](auto& j) { j["hidden_size"] = 64.5; }, "field 'hidden_size': expected a non-negative integer"},
      {"string", [](auto& j) { j["hidden_size"] = "64"; }, "field 'hidden_size': expected a non-negative integer"},
      {"huge", [](auto& j) { j["intermediate_size"] = 1ull << 40; }, "field 'intermediate_size'"},
      {"dtype", [](auto& j) { j["dtype"] = "fp8"; }, "field 'dtype': unknown dtype 'fp8'"},
      {"missing", [](auto& j) { j.erase("norm_topk_prob"); }, "field 'norm_topk_prob': missing"},
      {"bool", [](auto& j) { j["norm_topk_prob"] = 1; }, "field 'norm_topk_prob': expected true or false"},
      {"unknown", [](auto& j) { j["hiden_size"] = 64; }, "field 'hiden_size': unknown field"},
      {"layers", [](auto& j) { j["num_layers"] = 3; }, "field 'num_layers': 3 but layer_ids lists 2"},
      {"ascending",
       [](auto& j) {
         j["layer_ids"] = {1, 1};
       },
       "field 'layer_ids': not strictly ascending"},
      {"alignment", [](auto& j) { j["block_alignment"] = 6144; }, "field 'block_alignment': 6144 is not a power"},
      {"small_alignment", [](auto& j) { j["block_alignment"] = 512; }, "field 'block_alignment': 512 not in"},
      {"block_bytes", [](auto& j) { j["expert_block_bytes"] = 4096; }, "field 'expert_block_bytes': 4096 but"},
      {"file_bytes", [](auto& j) { j["files"]["experts"]["bytes"] = 1; }, "field 'files.experts.bytes': 1 but"},
      {"sha256", [](auto& j) { j["files"]["gating"]["sha256"] = "ABC"; }, "field 'files.gating.sha256'"},
      {"file_name", [](auto& j) { j["files"]["experts"]["name"] = "../x"; }, "field 'files.experts.name'"},
      {"version", [](auto& j) { j["format_version"] = 3; }, "field 'format_version': 3, this build reads 1..2"},
      {"source", [](auto& j) { j["source"]["seed"] = 1; }, "field 'source.seed': expected a string"},
      {"overflow",
       [](auto& j) {
         j["num_experts"] = 65536;
         j["hidden_size"] = 1 << 20;
         j["intermediate_size"] = 1 << 20;
         j["source_intermediate_size"] = 1 << 20;
       },
       "exceed the 1125899906842624-byte limit of experts.bin"},
      {"blocks",
       [](auto& j) {
         j["num_layers"] = 300;
         j["layer_ids"] = nlohmann::json::array();
         for (int i = 0; i < 300; ++i) j["layer_ids"].push_back(i);
         j["num_experts"] = 65536;
       },
       "300 layers x 65536 experts exceed the 16777216 expert blocks"},
  };
  ScratchDir scratch;
  const std::string dir = scratch.Path("m");
  ASSERT_TRUE(SynthModel(SmallShape(DType::kBf16), 1, dir).ok());
  const std::vector<char> original = ReadBytes(dir + "/config.json");
  for (const ConfigCase& c : cases) {
    SCOPED_TRACE(c.name);
    nlohmann::json json = nlohmann::json::parse(original.begin(), original.end());
    c.edit(json);
    WriteText(dir + "/config.json", json.dump(2));
    auto opened = OpenModel(dir, false);
    ASSERT_FALSE(opened.ok());
    EXPECT_THAT(opened.status().message(), HasSubstr(dir + "/config.json: "));
    EXPECT_THAT(opened.status().message(), HasSubstr(c.expected));
    auto report = VerifyModel(dir, false);
    ASSERT_TRUE(report.ok()) << report.status().message();
    ASSERT_EQ(report->checks.size(), 1u);
    EXPECT_EQ(report->checks[0].name, "config");
    EXPECT_THAT(report->checks[0].status.message(), HasSubstr(c.expected));
  }
  WriteText(dir + "/config.json", "{\"format\": \"colibri-model\",");
  auto report = VerifyModel(dir, false);
  ASSERT_TRUE(report.ok());
  EXPECT_THAT(report->checks[0].status.message(), HasSubstr("invalid JSON"));
}

TEST(ModelTest, AlignmentRuleMessage) {
  ScratchDir scratch;
  ModelConfig shape = SmallShape(DType::kBf16);
  shape.intermediate = 254;
  shape.intermediate_multiple = 256;
  auto refused = SynthModel(shape, 1, scratch.Path("refused"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "up_proj columns (254) not aligned to 256, pad to 256");
  EXPECT_FALSE(std::filesystem::exists(scratch.Path("refused")));

  // A model written without the rule, then given it: verify names the rule.
  shape.intermediate_multiple = 1;
  const std::string dir = scratch.Path("m");
  ASSERT_TRUE(SynthModel(shape, 1, dir).ok());
  const std::vector<char> bytes = ReadBytes(dir + "/config.json");
  nlohmann::json json = nlohmann::json::parse(bytes.begin(), bytes.end());
  json["intermediate_multiple"] = 256;
  WriteText(dir + "/config.json", json.dump(2));
  auto report = VerifyModel(dir, true);
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->ok());
  EXPECT_EQ(FindCheck(report.value(), "intermediate_alignment")->status.message(),
            "up_proj columns (254) not aligned to 256, pad to 256");
  EXPECT_TRUE(FindCheck(report.value(), "experts_sha256")->status.ok());
  auto opened = OpenModel(dir, false);
  ASSERT_FALSE(opened.ok());
  EXPECT_THAT(opened.status().message(), HasSubstr("up_proj columns (254) not aligned to 256, pad to 256"));
}

TEST(ModelTest, NotAModelDirectory) {
  ScratchDir scratch;
  auto missing = VerifyModel(scratch.Path("absent"), true);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto empty = VerifyModel(scratch.root().string(), true);
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("no config.json"));
  WriteText(scratch.Path("config.json"), R"({"model_type": "mixtral"})");
  auto foreign = OpenModel(scratch.root().string(), true);
  ASSERT_FALSE(foreign.ok());
  EXPECT_THAT(foreign.status().message(), HasSubstr("not a Colibri model config"));
}

TEST(ModelTest, WritersRefuseNonEmptyOutputAndLeaveNothingOnError) {
  ScratchDir scratch;
  const std::string dir = scratch.Path("m");
  std::filesystem::create_directories(dir);
  WriteText(dir + "/keep.txt", "mine");
  auto refused = SynthModel(SmallShape(DType::kFp32), 1, dir);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("not empty"));
  EXPECT_EQ(ReadBytes(dir + "/keep.txt").size(), 4u);

  ModelConfig bad = SmallShape(DType::kFp32);
  bad.top_k = 5;
  EXPECT_FALSE(SynthModel(bad, 1, scratch.Path("bad")).ok());
  for (const auto& entry : std::filesystem::directory_iterator(scratch.root())) {
    EXPECT_EQ(entry.path().filename().string().find(".partial"), std::string::npos) << entry.path();
  }
  ASSERT_TRUE(SynthModel(SmallShape(DType::kFp32), 1, scratch.Path("empty/")).ok());  // trailing slash
  EXPECT_TRUE(OpenModel(scratch.Path("empty"), true).ok());
}

std::string SharedConfig(const std::string& name) {
  return std::string(COLIBRI_SHARED_DATA) + "/model-configs/" + name + "/config.json";
}

TEST(ModelTest, ShapesFromHuggingFaceConfigs) {
  if (!std::filesystem::exists(SharedConfig("olmoe"))) GTEST_SKIP() << "no shared model configs";
  struct Expected {
    const char* name;
    uint32_t layers, first_layer, experts, top_k, hidden, intermediate;
    bool norm;
  };
  for (const Expected& e :
       {Expected{"olmoe", 16, 0, 64, 8, 2048, 1024, false}, Expected{"mixtral", 32, 0, 8, 2, 4096, 14336, true},
        Expected{"qwen2", 28, 0, 64, 8, 3584, 2560, false}, Expected{"qwen3", 48, 0, 128, 8, 2048, 768, true},
        Expected{"deepseek2", 26, 1, 64, 6, 2048, 1408, false}}) {
    SCOPED_TRACE(e.name);
    auto shape = ModelShapeFromHf(SharedConfig(e.name), DType::kBf16, 0);
    ASSERT_TRUE(shape.ok()) << shape.status().message();
    EXPECT_EQ(shape->layers(), e.layers);
    EXPECT_EQ(shape->layer_ids.front(), e.first_layer);
    EXPECT_EQ(shape->experts, e.experts);
    EXPECT_EQ(shape->top_k, e.top_k);
    EXPECT_EQ(shape->hidden, e.hidden);
    EXPECT_EQ(shape->intermediate, e.intermediate);
    EXPECT_EQ(shape->norm_topk_prob, e.norm);
    EXPECT_EQ(shape->dtype, DType::kBf16);
  }
  auto cut = ModelShapeFromHf(SharedConfig("deepseek2"), DType::kInt8, 2);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->layer_ids, (std::vector<uint32_t>{1, 2}));
  auto too_many = ModelShapeFromHf(SharedConfig("olmoe"), DType::kInt8, 17);
  ASSERT_FALSE(too_many.ok());
  EXPECT_THAT(too_many.status().message(), HasSubstr("has 16 MoE layers"));
  auto refused = ModelShapeFromHf(SharedConfig("xverse"), DType::kBf16, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnsupported);
  EXPECT_THAT(refused.status().message(), HasSubstr("model_type 'xverse' is not supported"));
}

TEST(ModelTest, SynthLikeARealModelCutToOneLayer) {
  if (!std::filesystem::exists(SharedConfig("qwen3"))) GTEST_SKIP() << "no shared model configs";
  auto shape = ModelShapeFromHf(SharedConfig("qwen3"), DType::kInt8, 1);
  ASSERT_TRUE(shape.ok());
  shape->experts = 2;  // keep the test small: 2 experts of the real 2048 x 768
  shape->top_k = 2;
  ScratchDir scratch;
  auto written = SynthModel(shape.value(), 3, scratch.Path("m"));
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_EQ(written->source.at("model_type"), "qwen3_moe");
  EXPECT_TRUE(VerifyModel(scratch.Path("m"), true)->ok());
}

}  // namespace
}  // namespace colibri::engine
