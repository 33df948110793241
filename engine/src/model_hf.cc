// Hugging Face config.json fields per family (defaults as in each family's
// transformers config class):
//   mixtral      num_local_experts, intermediate_size; every layer MoE; always
//                renormalises the top-k probabilities (no norm_topk_prob field)
//   olmoe        num_experts, intermediate_size; every layer MoE
//   qwen2_moe,   num_experts, moe_intermediate_size; layer i is MoE unless in
//   qwen3_moe    mlp_only_layers, when (i + 1) % decoder_sparse_step == 0
//   deepseek,    n_routed_experts, moe_intermediate_size; layer i is MoE when
//   deepseek_v2  i >= first_k_dense_replace and i % moe_layer_freq == 0; only
//                plain softmax top-k routing (topk_method greedy, scoring_func
//                softmax, routed_scaling_factor 1), which the format can express
// All: hidden_size, num_hidden_layers, num_experts_per_tok, norm_topk_prob
// (default false).
#include "model_hf.h"

#include <algorithm>
#include <optional>

#include "model_format.h"
#include "model_json.h"

namespace colibri::engine::model_detail {
namespace {

constexpr uint64_t kMaxHfConfigBytes = 16ull << 20;

enum class LayerPattern { kEveryLayer, kQwen, kDeepseek };

struct Family {
  const char* model_type;
  const char* experts_field;
  const char* intermediate_field;
  LayerPattern pattern;
  bool mixtral_names;
  std::optional<bool> fixed_norm_topk_prob;  // set when the family has no such field
};

constexpr Family kFamilies[] = {
    {"deepseek", "n_routed_experts", "moe_intermediate_size", LayerPattern::kDeepseek, false, std::nullopt},
    {"deepseek_v2", "n_routed_experts", "moe_intermediate_size", LayerPattern::kDeepseek, false, std::nullopt},
    {"mixtral", "num_local_experts", "intermediate_size", LayerPattern::kEveryLayer, true, true},
    {"olmoe", "num_experts", "intermediate_size", LayerPattern::kEveryLayer, false, std::nullopt},
    {"qwen2_moe", "num_experts", "moe_intermediate_size", LayerPattern::kQwen, false, std::nullopt},
    {"qwen3_moe", "num_experts", "moe_intermediate_size", LayerPattern::kQwen, false, std::nullopt},
};

std::string SupportedFamilies() {
  std::string names;
  for (const Family& family : kFamilies) names += (names.empty() ? "" : ", ") + std::string(family.model_type);
  return names;
}

Result<const Family*> FindFamily(const JsonObject& c, const std::string& path) {
  COLIBRI_ASSIGN_OR_RETURN(std::string model_type, c.String("model_type"));
  for (const Family& family : kFamilies) {
    if (model_type == family.model_type) return &family;
  }
  return Status::Unsupported(path + ": model_type '" + model_type +
                             "' is not supported (supported: " + SupportedFamilies() + ")");
}

Result<std::vector<uint32_t>> MoeLayerIds(const JsonObject& c, LayerPattern pattern) {
  COLIBRI_ASSIGN_OR_RETURN(uint64_t layers, c.Uint("num_hidden_layers", 1, kMaxLayers));
  std::vector<uint64_t> dense_layers;
  uint64_t step = 1;
  uint64_t first_moe = 0;
  if (pattern == LayerPattern::kQwen) {
    COLIBRI_ASSIGN_OR_RETURN(step, c.UintOr("decoder_sparse_step", 1, 1, kMaxLayers));
    COLIBRI_ASSIGN_OR_RETURN(dense_layers, c.UintListOr("mlp_only_layers", 0, UINT32_MAX));
  } else if (pattern == LayerPattern::kDeepseek) {
    COLIBRI_ASSIGN_OR_RETURN(step, c.UintOr("moe_layer_freq", 1, 1, kMaxLayers));
    COLIBRI_ASSIGN_OR_RETURN(first_moe, c.UintOr("first_k_dense_replace", 0, 0, kMaxLayers));
  }
  std::vector<uint32_t> ids;
  for (uint32_t layer = 0; layer < layers; ++layer) {
    const bool dense = std::find(dense_layers.begin(), dense_layers.end(), layer) != dense_layers.end();
    const bool on_step = pattern == LayerPattern::kQwen ? (layer + 1) % step == 0 : layer % step == 0;
    if (!dense && on_step && layer >= first_moe) ids.push_back(layer);
  }
  return ids;
}

// DeepSeek's grouped, sigmoid or scaled routing is not plain softmax top-k.
Status CheckDeepseekRouting(const JsonObject& c) {
  COLIBRI_ASSIGN_OR_RETURN(std::string topk_method, c.StringOr("topk_method", "greedy"));
  if (topk_method != "greedy") {
    return Status::Unsupported(
        c.Error("topk_method", "'" + topk_method + "' routing is not supported (only greedy softmax top-k)").message());
  }
  COLIBRI_ASSIGN_OR_RETURN(std::string scoring, c.StringOr("scoring_func", "softmax"));
  if (scoring != "softmax") {
    return Status::Unsupported(c.Error("scoring_func", "'" + scoring + "' is not supported (only softmax)").message());
  }
  if (c.Has("routed_scaling_factor")) {
    COLIBRI_ASSIGN_OR_RETURN(double factor, c.Number("routed_scaling_factor"));
    if (factor != 1.0) {
      return Status::Unsupported(
          c.Error("routed_scaling_factor", "scaling routed outputs is not supported (only 1)").message());
    }
  }
  return Status::Ok();
}

std::string ModelName(const JsonObject& c, const std::string& model_type) {
  const Json& json = c.json();
  if (json.contains("_name_or_path") && json["_name_or_path"].is_string() &&
      !json["_name_or_path"].get<std::string>().empty()) {
    return json["_name_or_path"].get<std::string>();
  }
  if (json.contains("architectures") && json["architectures"].is_array() && !json["architectures"].empty() &&
      json["architectures"][0].is_string()) {
    return json["architectures"][0].get<std::string>();
  }
  return model_type;
}

Status KeepFirstLayers(uint32_t max_layers, const std::string& path, std::vector<uint32_t>* ids) {
  if (ids->empty()) return Status::InvalidArgument(path + ": the layer pattern leaves no MoE layer");
  if (max_layers == 0) return Status::Ok();
  if (max_layers > ids->size()) {
    return Status::InvalidArgument("asked for " + std::to_string(max_layers) + " layers but " + path + " has " +
                                   std::to_string(ids->size()) + " MoE layers");
  }
  ids->resize(max_layers);
  return Status::Ok();
}

}  // namespace

std::string HfMoeModel::ExpertTensor(uint32_t layer_id, uint32_t expert, MatrixKind kind) const {
  static const char* const kMixtral[] = {"w1", "w3", "w2"};
  static const char* const kMlp[] = {"gate_proj", "up_proj", "down_proj"};
  const auto k = static_cast<size_t>(kind);
  return "model.layers." + std::to_string(layer_id) + (mixtral_names ? ".block_sparse_moe" : ".mlp") + ".experts." +
         std::to_string(expert) + "." + (mixtral_names ? kMixtral[k] : kMlp[k]) + ".weight";
}

std::string HfMoeModel::RouterTensor(uint32_t layer_id) const {
  return "model.layers." + std::to_string(layer_id) + (mixtral_names ? ".block_sparse_moe" : ".mlp") + ".gate.weight";
}

Result<HfMoeModel> ReadHfMoeConfig(const std::string& path, uint32_t max_layers) {
  COLIBRI_ASSIGN_OR_RETURN(Json json, ReadJsonFile(path, kMaxHfConfigBytes));
  COLIBRI_ASSIGN_OR_RETURN(JsonObject c, JsonObject::Of(json, path));
  COLIBRI_ASSIGN_OR_RETURN(const Family* family, FindFamily(c, path));
  if (family->pattern == LayerPattern::kDeepseek) COLIBRI_RETURN_IF_ERROR(CheckDeepseekRouting(c));

  HfMoeModel model;
  model.model_type = family->model_type;
  model.mixtral_names = family->mixtral_names;
  ModelConfig& shape = model.shape;
  shape.model_name = ModelName(c, model.model_type);
  shape.source = {{"hf_config", path}, {"model_type", model.model_type}};
  COLIBRI_ASSIGN_OR_RETURN(shape.layer_ids, MoeLayerIds(c, family->pattern));
  COLIBRI_RETURN_IF_ERROR(KeepFirstLayers(max_layers, path, &shape.layer_ids));
  COLIBRI_ASSIGN_OR_RETURN(shape.experts, c.Uint(family->experts_field, 1, kMaxExperts));
  COLIBRI_ASSIGN_OR_RETURN(shape.top_k, c.Uint("num_experts_per_tok", 1, shape.experts));
  COLIBRI_ASSIGN_OR_RETURN(shape.hidden, c.Uint("hidden_size", 1, kMaxDimension));
  COLIBRI_ASSIGN_OR_RETURN(shape.intermediate, c.Uint(family->intermediate_field, 1, kMaxDimension));
  if (family->fixed_norm_topk_prob) {
    shape.norm_topk_prob = *family->fixed_norm_topk_prob;
  } else {
    COLIBRI_ASSIGN_OR_RETURN(shape.norm_topk_prob, c.BoolOr("norm_topk_prob", false));
  }
  return model;
}

}  // namespace colibri::engine::model_detail

namespace colibri::engine {

Result<ModelConfig> ModelShapeFromHf(const std::string& config_path, DType dtype, uint32_t max_layers) {
  COLIBRI_ASSIGN_OR_RETURN(model_detail::HfMoeModel model, model_detail::ReadHfMoeConfig(config_path, max_layers));
  model.shape.dtype = dtype;
  return model.shape;
}

}  // namespace colibri::engine
