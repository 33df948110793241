// The families whose checkpoints the model tools import (defaults as in each
// family's transformers config class); the MoE layout itself comes from the
// one config.json reader, engine::ReadHfMoeLayout (hf_config.h):
//   mixtral      block_sparse_moe.experts.{e}.w1/w3/w2; always renormalises
//                the top-k probabilities (no norm_topk_prob field)
//   olmoe, qwen2_moe, qwen3_moe  mlp.experts.{e}.*_proj
//   deepseek,    mlp.experts.{e}.*_proj; only plain softmax top-k routing
//   deepseek_v2  (topk_method greedy, scoring_func softmax,
//                routed_scaling_factor 1), which the format can express
// All: norm_topk_prob (default false); one expert intermediate size for every
// MoE layer, within the format's limits.
#include "model_hf.h"

#include <optional>

#include "colibri/engine/hf_config.h"
#include "model_format.h"
#include "model_json.h"

namespace colibri::engine::model_detail {
namespace {

constexpr uint64_t kMaxHfConfigBytes = 16ull << 20;

struct Family {
  const char* model_type;
  bool deepseek_routing;  // the routing fields CheckDeepseekRouting reads
  bool mixtral_names;
  std::optional<bool> fixed_norm_topk_prob;  // set when the family has no such field
};

constexpr Family kFamilies[] = {
    {"deepseek", true, false, std::nullopt},   {"deepseek_v2", true, false, std::nullopt},
    {"mixtral", false, true, true},            {"olmoe", false, false, std::nullopt},
    {"qwen2_moe", false, false, std::nullopt}, {"qwen3_moe", false, false, std::nullopt},
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

Status KeepFirstLayers(uint32_t max_layers, const std::string& path, std::vector<uint32_t>* ids) {
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
  if (family->deepseek_routing) COLIBRI_RETURN_IF_ERROR(CheckDeepseekRouting(c));
  COLIBRI_ASSIGN_OR_RETURN(HfMoeLayout layout,
                           ReadHfMoeLayout(json, path, HfMoeLimits{.layers = kMaxLayers,
                                                                   .experts = kMaxExperts,
                                                                   .dimension = kMaxDimension}));

  HfMoeModel model;
  model.model_type = family->model_type;
  model.mixtral_names = family->mixtral_names;
  ModelConfig& shape = model.shape;
  shape.model_name = layout.model_name;
  shape.source = {{"hf_config", path}, {"model_type", model.model_type}};
  shape.layer_ids = std::move(layout.moe_layer_ids);
  COLIBRI_RETURN_IF_ERROR(KeepFirstLayers(max_layers, path, &shape.layer_ids));
  shape.experts = layout.experts;
  shape.top_k = layout.top_k;
  shape.hidden = layout.hidden_size;
  shape.intermediate = layout.expert_ffn_width.front();  // these families: one width for every MoE layer
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
