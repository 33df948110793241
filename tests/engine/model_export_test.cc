// `ExportModel` from small hand-written safetensors checkpoints: the exported
// blocks decode back to the source values (exactly for fp32/bf16/fp16, within
// half a scale step for int8), for Mixtral and Qwen/OLMoE/DeepSeek naming.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "colibri/engine/model.h"
#include "model_codec.h"
#include "model_test_util.h"
#include "safetensors_test_util.h"

namespace colibri::engine {
namespace {

using model_detail::MatrixKind;
using ::testing::HasSubstr;
using testing_util::CheckpointBuilder;
using testing_util::CheckpointShape;
using testing_util::ExpertBlock;
using testing_util::ReadBytes;
using testing_util::ScratchDir;
using testing_util::SourceTensor;
using testing_util::Tensors;
using testing_util::WriteSafetensors;
using testing_util::WriteText;

constexpr uint32_t kLayers = 2;
constexpr uint32_t kExperts = 4;
constexpr uint32_t kHidden = 8;

// The builder at this file's shape: kExperts experts of kHidden x intermediate.
CheckpointBuilder Builder(const std::string& dtype, bool mixtral_names, uint32_t intermediate) {
  return CheckpointBuilder(dtype, mixtral_names, CheckpointShape{kExperts, kHidden, intermediate});
}

std::string HfConfig(bool mixtral_names, uint32_t intermediate) {
  nlohmann::json config = {{"hidden_size", kHidden},
                           {"num_hidden_layers", kLayers},
                           {"num_experts_per_tok", 2},
                           {"architectures", {"TinyForCausalLM"}}};
  if (mixtral_names) {
    config.update({{"model_type", "mixtral"}, {"num_local_experts", kExperts}, {"intermediate_size", intermediate}});
  } else {
    config.update({{"model_type", "qwen3_moe"},
                   {"num_experts", kExperts},
                   {"moe_intermediate_size", intermediate},
                   {"intermediate_size", 999},
                   {"norm_topk_prob", true}});
  }
  return config.dump(2);
}

// Writes a one-file checkpoint of `dtype` and returns its tensors.
Tensors WriteCheckpoint(const std::string& dir, const std::string& dtype, bool mixtral_names, uint32_t intermediate) {
  std::filesystem::create_directories(dir);
  WriteText(dir + "/config.json", HfConfig(mixtral_names, intermediate));
  Tensors tensors = Builder(dtype, mixtral_names, intermediate).Build({0, 1});
  WriteSafetensors(dir + "/model.safetensors", tensors);
  return tensors;
}

ExportOptions From(const std::string& checkpoint) {
  ExportOptions options;
  options.checkpoint_dir = checkpoint;
  return options;
}

// Calls check(source_row, decoded_row, cols) for every row of every expert
// matrix, the source row zero-padded to the stored width.
template <typename Check>
void ForEachRow(const Model& model, const Tensors& tensors, const CheckpointBuilder& names, Check check) {
  const ModelConfig& c = model.config();
  for (uint32_t l = 0; l < c.layers(); ++l) {
    for (uint32_t e = 0; e < c.experts; ++e) {
      const std::vector<char> block = ExpertBlock(model, l, e);
      for (MatrixKind kind : model_detail::kMatrixKinds) {
        const SourceTensor& t = tensors.at(names.ExpertName(c.layer_ids[l], e, kind));
        const model_detail::MatrixShape shape = model_detail::ShapeOf(c.layout, kind);
        std::vector<float> decoded(shape.cols), source(shape.cols);
        for (uint32_t r = 0; r < shape.rows; ++r) {
          std::fill(source.begin(), source.end(), 0.0f);
          if (r < t.shape[0]) std::copy_n(t.values.begin() + r * t.shape[1], t.shape[1], source.begin());
          model_detail::DecodeRow(c.layout, kind, r, reinterpret_cast<const std::byte*>(block.data()), decoded.data());
          check(source, decoded);
        }
      }
    }
  }
}

void ExpectRoutersEqual(const Model& model, const Tensors& tensors, const CheckpointBuilder& names) {
  for (uint32_t l = 0; l < model.config().layers(); ++l) {
    const SourceTensor& router = tensors.at(names.RouterName(model.config().layer_ids[l]));
    EXPECT_EQ(std::vector<float>(model.GateWeight(l), model.GateWeight(l) + kExperts * kHidden), router.values);
    EXPECT_EQ(std::vector<float>(model.GateBias(l), model.GateBias(l) + kExperts), std::vector<float>(kExperts, 0));
  }
}

TEST(ModelExportTest, ExportedBlocksDecodeToTheSourceValues) {
  ScratchDir scratch;
  for (const bool mixtral : {true, false}) {
    for (const char* dtype : {"F32", "BF16", "F16"}) {
      const std::string name = std::string(mixtral ? "mixtral-" : "qwen-") + dtype;
      SCOPED_TRACE(name);
      const std::string checkpoint = scratch.Path(name);
      const Tensors tensors = WriteCheckpoint(checkpoint, dtype, mixtral, 16);
      auto report = ExportModel(From(checkpoint), scratch.Path(name + ".colibri"));
      ASSERT_TRUE(report.ok()) << report.status().message();
      EXPECT_EQ(report->model_type, mixtral ? "mixtral" : "qwen3_moe");
      EXPECT_EQ(report->tensors_read, kLayers * (3 * kExperts + 1));
      EXPECT_EQ(report->config.norm_topk_prob, true);
      EXPECT_EQ(report->config.model_name, "TinyForCausalLM");
      EXPECT_EQ(report->config.dtype, report->source_dtype);
      EXPECT_EQ(report->config.layer_ids, (std::vector<uint32_t>{0, 1}));

      auto model = OpenModel(scratch.Path(name + ".colibri"), true);
      ASSERT_TRUE(model.ok()) << model.status().message();
      EXPECT_EQ(model->config().intermediate, 16u);
      ForEachRow(
          model.value(), tensors, Builder(dtype, mixtral, 16),
          [](const std::vector<float>& source, const std::vector<float>& decoded) { ASSERT_EQ(decoded, source); });
      ExpectRoutersEqual(model.value(), tensors, Builder(dtype, mixtral, 16));
    }
  }
}

TEST(ModelExportTest, ConvertingDtypesRoundsOnce) {
  ScratchDir scratch;
  const Tensors tensors = WriteCheckpoint(scratch.Path("ckpt"), "F32", false, 16);
  const CheckpointBuilder names = Builder("F32", false, 16);
  for (DType dtype : {DType::kBf16, DType::kInt8}) {
    ExportOptions options = From(scratch.Path("ckpt"));
    options.dtype = dtype;
    ASSERT_TRUE(ExportModel(options, scratch.Path(DTypeName(dtype))).ok());
  }

  auto bf16 = OpenModel(scratch.Path("bf16"), true);
  ASSERT_TRUE(bf16.ok());
  ForEachRow(bf16.value(), tensors, names, [](const std::vector<float>& source, const std::vector<float>& decoded) {
    for (size_t i = 0; i < source.size(); ++i) ASSERT_EQ(decoded[i], Bf16ToFloat(FloatToBf16(source[i])));
  });

  auto int8 = OpenModel(scratch.Path("int8"), true);
  ASSERT_TRUE(int8.ok());
  EXPECT_EQ(int8->config().source.at("source_dtype"), "fp32");
  ForEachRow(int8.value(), tensors, names, [](const std::vector<float>& source, const std::vector<float>& decoded) {
    float max_abs = 0;
    for (float v : source) max_abs = std::max(max_abs, std::fabs(v));
    const float half_scale = max_abs / 127.0f / 2.0f;
    for (size_t i = 0; i < source.size(); ++i) ASSERT_LE(std::fabs(decoded[i] - source[i]), half_scale * 1.0001f);
  });
  ExpectRoutersEqual(int8.value(), tensors, names);  // the gating stays fp32
}

TEST(ModelExportTest, PadIntermediateAddsZeroRowsAndColumns) {
  ScratchDir scratch;
  const Tensors tensors = WriteCheckpoint(scratch.Path("ckpt"), "BF16", false, 12);
  ExportOptions options = From(scratch.Path("ckpt"));
  options.pad_intermediate = 16;
  auto report = ExportModel(options, scratch.Path("m"));
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->config.intermediate, 16u);
  EXPECT_EQ(report->config.source_intermediate, 12u);
  EXPECT_EQ(report->config.intermediate_multiple, 16u);
  auto model = OpenModel(scratch.Path("m"), true);
  ASSERT_TRUE(model.ok()) << model.status().message();
  int rows = 0;
  ForEachRow(model.value(), tensors, Builder("BF16", false, 12),
             [&](const std::vector<float>& source, const std::vector<float>& decoded) {
               ++rows;
               ASSERT_EQ(decoded, source);  // zero-padded source: padded rows and columns are zero
             });
  EXPECT_EQ(rows, static_cast<int>(kLayers * kExperts * (16 + 16 + kHidden)));

  auto unpadded = ExportModel(From(scratch.Path("ckpt")), scratch.Path("unpadded"));
  ASSERT_TRUE(unpadded.ok());
  EXPECT_EQ(unpadded->config.intermediate, 12u);
  EXPECT_EQ(unpadded->config.intermediate_multiple, 1u);
}

TEST(ModelExportTest, DeepseekSkipsDenseLayersAndShardsFollowTheIndex) {
  ScratchDir scratch;
  const std::string dir = scratch.Path("ckpt");
  std::filesystem::create_directories(dir);
  WriteText(dir + "/config.json", nlohmann::json{{"model_type", "deepseek_v2"},
                                                 {"hidden_size", kHidden},
                                                 {"num_hidden_layers", 3},
                                                 {"first_k_dense_replace", 1},
                                                 {"moe_layer_freq", 1},
                                                 {"n_routed_experts", kExperts},
                                                 {"n_shared_experts", 2},
                                                 {"num_experts_per_tok", 2},
                                                 {"moe_intermediate_size", 16},
                                                 {"intermediate_size", 40},
                                                 {"topk_method", "greedy"},
                                                 {"scoring_func", "softmax"},
                                                 {"routed_scaling_factor", 1.0}}
                                      .dump());
  const CheckpointBuilder names = Builder("BF16", false, 16);
  Tensors tensors = Builder("BF16", false, 16).Build({1, 2});
  Tensors first, second;
  for (const auto& [name, t] : tensors) (name.find("layers.2.") == std::string::npos ? first : second)[name] = t;
  WriteSafetensors(dir + "/model-00001-of-00002.safetensors", first);
  WriteSafetensors(dir + "/model-00002-of-00002.safetensors", second);
  WriteText(dir + "/stray.safetensors", "not listed in the index, never read");
  nlohmann::json weight_map;
  for (const auto& [name, t] : first) weight_map[name] = "model-00001-of-00002.safetensors";
  for (const auto& [name, t] : second) weight_map[name] = "model-00002-of-00002.safetensors";
  WriteText(dir + "/model.safetensors.index.json", nlohmann::json{{"weight_map", weight_map}}.dump());

  ExportOptions options = From(dir);
  options.expert_capacity = 64;
  auto report = ExportModel(options, scratch.Path("m"));
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->source_files.size(), 2u);
  EXPECT_EQ(report->config.layer_ids, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(report->config.expert_capacity, 64u);
  auto model = OpenModel(scratch.Path("m"), true);
  ASSERT_TRUE(model.ok()) << model.status().message();
  ForEachRow(model.value(), tensors, names,
             [](const std::vector<float>& source, const std::vector<float>& decoded) { ASSERT_EQ(decoded, source); });
  ExpectRoutersEqual(model.value(), tensors, names);
}

TEST(ModelExportTest, BadCheckpointsGiveClearErrors) {
  ScratchDir scratch;
  const std::string dir = scratch.Path("ckpt");
  Tensors tensors = WriteCheckpoint(dir, "F32", true, 16);
  const CheckpointBuilder names = Builder("F32", true, 16);
  const std::string victim = names.ExpertName(1, 3, MatrixKind::kDown);
  int run = 0;
  auto export_error = [&] {
    auto report = ExportModel(From(dir), scratch.Path("out" + std::to_string(run++)));
    EXPECT_FALSE(report.ok());
    EXPECT_FALSE(std::filesystem::exists(scratch.Path("out" + std::to_string(run - 1))));
    return report.ok() ? Status::Ok() : report.status();
  };

  Tensors missing = tensors;
  missing.erase(victim);
  WriteSafetensors(dir + "/model.safetensors", missing);
  EXPECT_THAT(export_error().message(), HasSubstr("tensor '" + victim + "' not found"));

  Tensors wrong_shape = tensors;
  wrong_shape[victim].shape = {kHidden, 15};
  wrong_shape[victim].values.resize(kHidden * 15);
  WriteSafetensors(dir + "/model.safetensors", wrong_shape);
  EXPECT_THAT(export_error().message(), HasSubstr("has shape [8, 15], expected [8, 16]"));

  Tensors wrong_dtype = tensors;
  wrong_dtype[victim] = SourceTensor{"I64", {16}, {}};
  WriteSafetensors(dir + "/model.safetensors", wrong_dtype);
  const Status unsupported = export_error();
  EXPECT_EQ(unsupported.code(), StatusCode::kUnsupported);
  EXPECT_THAT(unsupported.message(), HasSubstr("has dtype I64; export reads F32, BF16 or F16"));

  WriteText(dir + "/model.safetensors", std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8) + "{}");
  EXPECT_THAT(export_error().message(), HasSubstr("not a safetensors file"));

  WriteSafetensors(dir + "/model.safetensors", tensors);
  WriteText(dir + "/config.json", R"({"model_type": "llama", "hidden_size": 8})");
  const Status llama = export_error();
  EXPECT_EQ(llama.code(), StatusCode::kUnsupported);
  EXPECT_THAT(llama.message(), HasSubstr("model_type 'llama' is not supported (supported: deepseek, deepseek_v2"));

  WriteText(dir + "/config.json", R"({"model_type": "deepseek_v2", "topk_method": "group_limited_greedy"})");
  EXPECT_THAT(export_error().message(), HasSubstr("field 'topk_method'"));

  WriteText(dir + "/config.json", HfConfig(true, 16));
  EXPECT_TRUE(ExportModel(From(dir), scratch.Path("good")).ok());
}

}  // namespace
}  // namespace colibri::engine
