// ShapeFromHfConfig on the real config.json files in tests/data/real/model-configs:
// layer patterns, experts, top-k and expert bytes checked by hand against the
// files, a cross-check with the folder's config.jsonl summary, refusals of
// unsupported families, and errors naming the file and the field.
#include "colibri/traces/model_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace colibri::traces {
namespace {

using testing::TempDir;
using testing::WriteFileBytes;

std::string ConfigPath(const std::string& folder) {
  return std::string(COLIBRI_SHARED_DATA) + "/model-configs/" + folder + "/config.json";
}

struct Expected {
  const char* folder;
  size_t moe_layers;
  uint32_t first_moe_layer;
  uint32_t last_moe_layer;
  uint32_t experts;
  uint32_t top_k;
  uint64_t expert_bytes_bf16;  // every layer
  uint32_t total_layers;
  uint32_t hidden_size;
};

// By hand from each config.json: matrices x hidden x expert FFN width x 2 bytes.
const Expected kExpected[] = {
    {"qwen3", 48, 0, 47, 128, 8, 3ull * 2048 * 768 * 2, 48, 2048},  // moe_intermediate_size, step 1
    {"qwen", 24, 0, 23, 60, 4, 3ull * 2048 * 1408 * 2, 24, 2048},   // Qwen1.5-MoE
    {"qwen2", 28, 0, 27, 64, 8, 3ull * 3584 * 2560 * 2, 28, 3584},  // Qwen2-57B-A14B
    {"mixtral", 32, 0, 31, 8, 2, 3ull * 4096 * 14336 * 2, 32, 4096},
    {"llamamoe2", 32, 0, 31, 8, 2, 3ull * 4096 * 1792 * 2, 32, 4096},  // model_type mixtral
    {"llamamoe2s", 32, 0, 31, 7, 1, 3ull * 4096 * 1792 * 2, 32, 4096},
    {"olmoe", 16, 0, 15, 64, 8, 3ull * 2048 * 1024 * 2, 16, 2048},
    {"olmoesft", 16, 0, 15, 64, 8, 3ull * 2048 * 1024 * 2, 16, 2048},
    {"olmoedpo", 16, 0, 15, 64, 8, 3ull * 2048 * 1024 * 2, 16, 2048},
    {"olmoeins", 16, 0, 15, 64, 8, 3ull * 2048 * 1024 * 2, 16, 2048},
    {"deepseek", 27, 1, 27, 64, 6, 3ull * 2048 * 1408 * 2, 28, 2048},   // first_k_dense_replace 1
    {"deepseek2", 26, 1, 26, 64, 6, 3ull * 2048 * 1408 * 2, 27, 2048},  // DeepSeek-V2-Lite
    {"phi", 32, 0, 31, 16, 2, 3ull * 4096 * 6400 * 2, 32, 4096},
    {"grin", 32, 0, 31, 16, 2, 3ull * 4096 * 6400 * 2, 32, 4096},
    {"powermoe", 32, 0, 31, 40, 8, 3ull * 1536 * 512 * 2, 32, 1536},    // granitemoe
    {"jetmoe", 24, 0, 23, 8, 2, 3ull * 2048 * 5632 * 2, 24, 2048},      // moe_top_k, not top_k
    {"jetmoechat", 24, 0, 23, 8, 2, 3ull * 2048 * 5632 * 2, 24, 2048},  // n_embd, n_layer
    {"jetmoesft", 24, 0, 23, 8, 2, 3ull * 2048 * 5632 * 2, 24, 2048},
    {"switch", 6, 1, 11, 128, 1, 2ull * 768 * 3072 * 2, 12, 768},     // encoder layers 1,3,..,11; wi+wo
    {"jamba", 16, 1, 31, 16, 2, 3ull * 4096 * 14336 * 2, 32, 4096},   // period 2, offset 1
    {"llamamoe", 32, 0, 31, 16, 4, 3ull * 4096 * 688 * 2, 32, 4096},  // size_experts 688
    {"llamamoes", 32, 0, 31, 16, 4, 3ull * 4096 * 688 * 2, 32, 4096},
};

TEST(ModelConfigTest, SupportedFamiliesMatchHandChecks) {
  EXPECT_EQ(std::size(kExpected), 22u);  // every supported config in the folder
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.folder);
    auto shape = ShapeFromHfConfig(ConfigPath(e.folder), "bf16");
    ASSERT_TRUE(shape.ok()) << shape.status().message();
    EXPECT_EQ(shape->num_moe_layers(), e.moe_layers);
    EXPECT_EQ(shape->moe_layer_ids.front(), e.first_moe_layer);
    EXPECT_EQ(shape->moe_layer_ids.back(), e.last_moe_layer);
    EXPECT_EQ(shape->experts_per_layer, e.experts);
    EXPECT_EQ(shape->top_k, e.top_k);
    EXPECT_EQ(shape->expert_bytes, std::vector<uint64_t>(e.moe_layers, e.expert_bytes_bf16));
    EXPECT_EQ(shape->total_layers, e.total_layers);
    EXPECT_EQ(shape->hidden_size, e.hidden_size);
    EXPECT_EQ(shape->dtype, "bf16");
    EXPECT_TRUE(shape->dense_bytes.empty());
    EXPECT_TRUE(shape->Validate().ok());
  }
}

TEST(ModelConfigTest, LayerPatterns) {
  auto switch_shape = ShapeFromHfConfig(ConfigPath("switch"), "fp32");
  ASSERT_TRUE(switch_shape.ok());
  EXPECT_EQ(switch_shape->moe_layer_ids, (std::vector<uint32_t>{1, 3, 5, 7, 9, 11}));
  auto jamba = ShapeFromHfConfig(ConfigPath("jamba"), "bf16");
  ASSERT_TRUE(jamba.ok());
  for (uint32_t layer : jamba->moe_layer_ids) EXPECT_EQ(layer % 2, 1u);

  // Qwen-MoE pattern fields on a hand-written config: step 2 and mlp_only_layers.
  TempDir dir;
  WriteFileBytes(dir.File("config.json"), R"({"model_type": "qwen2_moe", "num_hidden_layers": 8, "num_experts": 4,
      "num_experts_per_tok": 2, "hidden_size": 16, "moe_intermediate_size": 8, "decoder_sparse_step": 2,
      "mlp_only_layers": [3]})");
  auto qwen = ShapeFromHfConfig(dir.File("config.json"), "bf16");
  ASSERT_TRUE(qwen.ok()) << qwen.status().message();
  EXPECT_EQ(qwen->moe_layer_ids, (std::vector<uint32_t>{1, 5, 7}));
  EXPECT_EQ(qwen->model_name, "qwen2_moe");  // no _name_or_path, no architectures
}

TEST(ModelConfigTest, DtypesAndInt8Scales) {
  auto fp32 = ShapeFromHfConfig(ConfigPath("qwen3"), "fp32");
  auto int8 = ShapeFromHfConfig(ConfigPath("qwen3"), "int8");
  ASSERT_TRUE(fp32.ok() && int8.ok());
  EXPECT_EQ(fp32->expert_bytes[0], 3ull * 2048 * 768 * 4);
  // int8 weights plus one fp32 scale per output row: gate and up rows = 768, down rows = 2048.
  EXPECT_EQ(int8->expert_bytes[0], 3ull * 2048 * 768 + 4ull * (768 + 768 + 2048));
  auto switch_int8 = ShapeFromHfConfig(ConfigPath("switch"), "int8");
  ASSERT_TRUE(switch_int8.ok());
  EXPECT_EQ(switch_int8->expert_bytes[0], 2ull * 768 * 3072 + 4ull * (3072 + 768));  // wi rows d_ff, wo rows d_model

  auto bad = ShapeFromHfConfig(ConfigPath("qwen3"), "fp8");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("fp8"), std::string::npos);
  EXPECT_EQ(WeightDtypeBytes("bf16").value(), 2u);
}

TEST(ModelConfigTest, ModelNames) {
  EXPECT_EQ(ShapeFromHfConfig(ConfigPath("phi"), "bf16")->model_name, "Phi-3.5-MoE-instruct");   // _name_or_path
  EXPECT_EQ(ShapeFromHfConfig(ConfigPath("qwen3"), "bf16")->model_name, "Qwen3MoeForCausalLM");  // architectures[0]
}

TEST(ModelConfigTest, UnsupportedFamiliesAreRefused) {
  for (const char* folder : {"xverse", "yuan", "openmoe", "nllb", "minicpm"}) {
    SCOPED_TRACE(folder);
    auto shape = ShapeFromHfConfig(ConfigPath(folder), "bf16");
    ASSERT_FALSE(shape.ok());
    EXPECT_EQ(shape.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(shape.status().message().find(ConfigPath(folder)), std::string::npos);
    EXPECT_NE(shape.status().message().find("supported: "), std::string::npos) << shape.status().message();
    EXPECT_NE(shape.status().message().find("qwen3_moe"), std::string::npos);
  }
}

// Every config in config.jsonl either imports with the summary's experts and
// top-k, or is one of the refused families.
TEST(ModelConfigTest, AgreesWithConfigJsonlSummary) {
  std::ifstream in(std::string(COLIBRI_SHARED_DATA) + "/model-configs/config.jsonl");
  ASSERT_TRUE(in);
  std::string line;
  size_t supported = 0;
  std::vector<std::string> refused;
  while (std::getline(in, line)) {
    const auto summary = nlohmann::json::parse(line);
    const std::string key = summary["key"].get<std::string>();
    auto shape = ShapeFromHfConfig(ConfigPath(key), "bf16");
    if (!shape.ok()) {
      refused.push_back(key);
      continue;
    }
    ++supported;
    EXPECT_EQ(shape->experts_per_layer, summary["num_experts"].get<uint32_t>()) << key;
    EXPECT_EQ(shape->top_k, summary["top_k"].get<uint32_t>()) << key;
  }
  EXPECT_EQ(supported, 22u);
  std::sort(refused.begin(), refused.end());
  EXPECT_EQ(refused, (std::vector<std::string>{"minicpm", "nllb", "openmoe", "xverse", "yuan"}));
}

TEST(ModelConfigTest, ErrorsNameFileAndField) {
  TempDir dir;
  const std::string path = dir.File("config.json");
  auto expect_error = [&](const std::string& json, const std::string& field) {
    WriteFileBytes(path, json);
    auto shape = ShapeFromHfConfig(path, "bf16");
    ASSERT_FALSE(shape.ok()) << json;
    EXPECT_NE(shape.status().message().find(path), std::string::npos) << shape.status().message();
    EXPECT_NE(shape.status().message().find(field), std::string::npos) << shape.status().message();
  };
  const std::string mixtral_head = R"({"model_type": "mixtral", "num_hidden_layers": 4, "hidden_size": 8, )";
  expect_error(mixtral_head + R"("num_experts_per_tok": 2, "intermediate_size": 8})", "'num_local_experts': missing");
  expect_error(mixtral_head + R"("num_local_experts": 4, "num_experts_per_tok": "two", "intermediate_size": 8})",
               "'num_experts_per_tok': expected a non-negative integer");
  expect_error(mixtral_head + R"("num_local_experts": 4, "num_experts_per_tok": 5, "intermediate_size": 8})",
               "top-k 5 not in 1..4");
  expect_error(mixtral_head + R"("num_local_experts": 4, "num_experts_per_tok": -2, "intermediate_size": 8})",
               "found -2");
  expect_error(R"({"model_type": "qwen3_moe", "num_hidden_layers": 4, "hidden_size": 8, "num_experts": 4,
      "num_experts_per_tok": 2, "moe_intermediate_size": 8, "decoder_sparse_step": 0})",
               "'decoder_sparse_step': must be at least 1");
  expect_error(R"({"model_type": "qwen3_moe", "num_hidden_layers": 4000000000})", "'num_hidden_layers'");
  expect_error(R"({"model_type": "jetmoe", "num_hidden_layers": 4, "hidden_size": 8, "moe_num_experts": 4,
      "top_k": 50, "ffn_hidden_size": 8})",
               "'moe_top_k' or 'num_experts_per_tok': missing");
  expect_error(R"({"model_type": "switch_transformers", "num_layers": 4, "d_model": 8, "d_ff": 8, "num_experts": 4,
      "num_selected_experts": 2, "encoder_sparse_step": 2})",
               "'num_selected_experts'");
  expect_error(R"([1, 2])", "expected a JSON object");
  expect_error(R"({"model_type": )", "byte ");
  expect_error("", "empty file");
  auto missing = ShapeFromHfConfig(dir.File("absent.json"), "bf16");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("absent.json"), std::string::npos);
}

}  // namespace
}  // namespace colibri::traces
