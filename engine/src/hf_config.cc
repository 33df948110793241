// The one reader of a Hugging Face config.json's MoE layout (hf_config.h).
// One small reader per supported family extracts the layout under that
// family's field names; the checks common to all are in one place. Fields are
// read through model_detail::JsonObject, so every error names the file and
// the field. Unknown families are refused, never guessed.
#include "colibri/engine/hf_config.h"

#include <algorithm>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "colibri/bounded_echo.h"
#include "model_json.h"

namespace colibri::engine {
namespace {

using model_detail::Json;
using model_detail::JsonObject;

// A family reader's view of one config.json.
struct Config {
  const JsonObject& fields;
  const HfMoeLimits& limits;
};

// The family's field names (alternatives in order) for the settings every MoE
// config has. An empty top_k or ffn_width: the family sets that itself.
struct FieldNames {
  std::vector<std::string> experts;
  std::vector<std::string> top_k;
  std::vector<std::string> ffn_width;
  std::vector<std::string> hidden = {"hidden_size"};
  std::vector<std::string> layers = {"num_hidden_layers"};
};

// Reads the common settings and makes every layer a MoE layer with one FFN width.
Result<HfMoeLayout> EveryLayerMoe(const Config& config, const FieldNames& names) {
  const JsonObject& c = config.fields;
  HfMoeLayout layout;
  COLIBRI_ASSIGN_OR_RETURN(layout.total_layers, c.UintAnyOf(names.layers, 0, config.limits.layers));
  COLIBRI_ASSIGN_OR_RETURN(layout.experts, c.UintAnyOf(names.experts, 0, config.limits.experts));
  COLIBRI_ASSIGN_OR_RETURN(layout.hidden_size, c.UintAnyOf(names.hidden, 0, config.limits.dimension));
  if (!names.top_k.empty()) {
    COLIBRI_ASSIGN_OR_RETURN(layout.top_k, c.UintAnyOf(names.top_k, 0, UINT32_MAX));
  }
  uint32_t width = 0;
  if (!names.ffn_width.empty()) {
    COLIBRI_ASSIGN_OR_RETURN(width, c.UintAnyOf(names.ffn_width, 0, config.limits.dimension));
  }
  for (uint32_t layer = 0; layer < layout.total_layers; ++layer) layout.moe_layer_ids.push_back(layer);
  layout.expert_ffn_width.assign(layout.total_layers, width);
  return layout;
}

// Keeps the MoE layers for which `is_moe(layer)` holds.
void KeepLayers(HfMoeLayout* layout, const std::function<bool(uint32_t)>& is_moe) {
  HfMoeLayout kept = *layout;
  kept.moe_layer_ids.clear();
  kept.expert_ffn_width.clear();
  for (size_t i = 0; i < layout->moe_layer_ids.size(); ++i) {
    if (!is_moe(layout->moe_layer_ids[i])) continue;
    kept.moe_layer_ids.push_back(layout->moe_layer_ids[i]);
    kept.expert_ffn_width.push_back(layout->expert_ffn_width[i]);
  }
  *layout = std::move(kept);
}

Result<uint32_t> UintOr(const JsonObject& c, const std::string& field, uint32_t fallback) {
  COLIBRI_ASSIGN_OR_RETURN(uint64_t value, c.UintOr(field, fallback, 0, UINT32_MAX));
  return static_cast<uint32_t>(value);
}

Result<uint32_t> PositiveOr(const JsonObject& c, const std::string& field, uint32_t fallback) {
  COLIBRI_ASSIGN_OR_RETURN(uint32_t value, UintOr(c, field, fallback));
  if (value == 0) return c.Error(field, "must be at least 1");
  return value;
}

// Mixtral, Phi-3.5-MoE, GRIN-MoE, GraniteMoE (PowerMoE): every layer sparse.
Result<HfMoeLayout> MixtralLike(const Config& c) {
  return EveryLayerMoe(c, {{"num_local_experts"}, {"num_experts_per_tok"}, {"intermediate_size"}});
}

Result<HfMoeLayout> Olmoe(const Config& c) {
  return EveryLayerMoe(c, {{"num_experts"}, {"num_experts_per_tok"}, {"intermediate_size"}});
}

// Qwen1.5/2/3-MoE: layer i is sparse unless listed in mlp_only_layers, and
// when (i + 1) % decoder_sparse_step == 0.
Result<HfMoeLayout> QwenMoe(const Config& c) {
  COLIBRI_ASSIGN_OR_RETURN(HfMoeLayout layout,
                           EveryLayerMoe(c, {{"num_experts"}, {"num_experts_per_tok"}, {"moe_intermediate_size"}}));
  COLIBRI_ASSIGN_OR_RETURN(uint32_t step, PositiveOr(c.fields, "decoder_sparse_step", 1));
  COLIBRI_ASSIGN_OR_RETURN(std::vector<uint64_t> mlp_only, c.fields.UintListOr("mlp_only_layers", 0, UINT32_MAX));
  KeepLayers(&layout, [&](uint32_t layer) {
    return std::find(mlp_only.begin(), mlp_only.end(), layer) == mlp_only.end() && (layer + 1) % step == 0;
  });
  return layout;
}

// DeepSeekMoE and DeepSeek-V2: layer i is sparse when i >= first_k_dense_replace
// and i % moe_layer_freq == 0.
Result<HfMoeLayout> Deepseek(const Config& c) {
  COLIBRI_ASSIGN_OR_RETURN(
      HfMoeLayout layout, EveryLayerMoe(c, {{"n_routed_experts"}, {"num_experts_per_tok"}, {"moe_intermediate_size"}}));
  COLIBRI_ASSIGN_OR_RETURN(uint32_t first_dense, UintOr(c.fields, "first_k_dense_replace", 0));
  COLIBRI_ASSIGN_OR_RETURN(uint32_t frequency, PositiveOr(c.fields, "moe_layer_freq", 1));
  KeepLayers(&layout, [&](uint32_t layer) { return layer >= first_dense && layer % frequency == 0; });
  return layout;
}

// Jamba: layer i is sparse when i % expert_layer_period == expert_layer_offset.
Result<HfMoeLayout> Jamba(const Config& c) {
  COLIBRI_ASSIGN_OR_RETURN(HfMoeLayout layout,
                           EveryLayerMoe(c, {{"num_experts"}, {"num_experts_per_tok"}, {"intermediate_size"}}));
  COLIBRI_ASSIGN_OR_RETURN(uint32_t period, PositiveOr(c.fields, "expert_layer_period", 2));
  COLIBRI_ASSIGN_OR_RETURN(uint32_t offset, UintOr(c.fields, "expert_layer_offset", 1));
  KeepLayers(&layout, [&](uint32_t layer) { return layer % period == offset; });
  return layout;
}

// JetMoE: every layer sparse; top-k is moe_top_k (its `top_k` is a sampling
// setting). The remote-code configs use moe_num_experts/ffn_hidden_size and
// sometimes n_embd/n_layer; `glu` (default true) makes the FFN gated.
Result<HfMoeLayout> JetMoe(const Config& c) {
  COLIBRI_ASSIGN_OR_RETURN(HfMoeLayout layout,
                           EveryLayerMoe(c, {.experts = {"moe_num_experts", "num_local_experts"},
                                             .top_k = {"moe_top_k", "num_experts_per_tok"},
                                             .ffn_width = {"ffn_hidden_size", "intermediate_size"},
                                             .hidden = {"hidden_size", "n_embd"},
                                             .layers = {"num_hidden_layers", "num_layers", "n_layer"}}));
  COLIBRI_ASSIGN_OR_RETURN(bool gated, c.fields.BoolOr("glu", true));
  layout.matrices = gated ? 3 : 2;
  return layout;
}

// Switch Transformers: top-1, two matrices (wi, wo) per expert; encoder layer
// i is sparse when i % encoder_sparse_step == 1 (or the step is 1).
Result<HfMoeLayout> Switch(const Config& c) {
  COLIBRI_ASSIGN_OR_RETURN(HfMoeLayout layout, EveryLayerMoe(c, {.experts = {"num_experts"},
                                                                 .top_k = {},
                                                                 .ffn_width = {"d_ff"},
                                                                 .hidden = {"d_model"},
                                                                 .layers = {"num_layers"}}));
  COLIBRI_ASSIGN_OR_RETURN(uint32_t selected, UintOr(c.fields, "num_selected_experts", 1));
  if (selected != 1) {
    return c.fields.Error("num_selected_experts",
                          "Switch Transformers routes top-1, found " + std::to_string(selected));
  }
  layout.top_k = 1;
  layout.matrices = 2;
  COLIBRI_ASSIGN_OR_RETURN(uint64_t step, c.fields.Uint("encoder_sparse_step", 0, UINT32_MAX));
  if (step == 0) return c.fields.Error("encoder_sparse_step", "0: the encoder has no sparse layers");
  KeepLayers(&layout, [&](uint32_t layer) { return step == 1 || layer % step == 1; });
  return layout;
}

// LLaMA-MoE v1: every layer sparse, top-k is num_selects, expert widths per
// layer in size_experts (all experts of a layer must be the same width).
Result<HfMoeLayout> LlamaMoe(const Config& c) {
  COLIBRI_ASSIGN_OR_RETURN(HfMoeLayout layout,
                           EveryLayerMoe(c, {.experts = {"num_experts"}, .top_k = {"num_selects"}, .ffn_width = {}}));
  static const Json kAbsent;
  const Json& sizes = c.fields.Has("size_experts") ? c.fields.json()["size_experts"] : kAbsent;
  if (!sizes.is_array() || sizes.size() != layout.total_layers) {
    return c.fields.Error("size_experts", "expected one list of expert widths per layer (" +
                                              std::to_string(layout.total_layers) + ")");
  }
  for (uint32_t layer = 0; layer < layout.total_layers; ++layer) {
    const std::string field = "size_experts[" + std::to_string(layer) + "]";
    if (!sizes[layer].is_array() || sizes[layer].empty() || sizes[layer].size() != layout.experts) {
      return c.fields.Error(field, "expected " + std::to_string(layout.experts) + " expert widths");
    }
    COLIBRI_ASSIGN_OR_RETURN(uint64_t width, c.fields.CheckedUint(field + "[0]", sizes[layer][0], 0, c.limits.dimension));
    for (const Json& other : sizes[layer]) {
      if (other != sizes[layer][0]) {
        return Status::Unsupported(
            c.fields.Error(field, "experts of different widths in one layer are not supported").message());
      }
    }
    layout.expert_ffn_width[layer] = static_cast<uint32_t>(width);
  }
  return layout;
}

using FamilyReader = Result<HfMoeLayout> (*)(const Config&);

const std::map<std::string, FamilyReader>& Families() {
  static const std::map<std::string, FamilyReader> kFamilies = {
      {"deepseek", &Deepseek},          {"deepseek_v2", &Deepseek}, {"granitemoe", &MixtralLike},
      {"grinmoe", &MixtralLike},        {"jamba", &Jamba},          {"jetmoe", &JetMoe},
      {"llama_moe", &LlamaMoe},         {"mixtral", &MixtralLike},  {"olmoe", &Olmoe},
      {"phimoe", &MixtralLike},         {"qwen2_moe", &QwenMoe},    {"qwen3_moe", &QwenMoe},
      {"switch_transformers", &Switch},
  };
  return kFamilies;
}

Status CheckLayout(const std::string& path, const HfMoeLayout& layout) {
  auto error = [&](const std::string& why) { return Status::InvalidArgument(path + ": " + why); };
  if (layout.experts == 0) return error("0 routed experts");
  if (layout.top_k == 0 || layout.top_k > layout.experts) {
    return error("top-k " + std::to_string(layout.top_k) + " not in 1.." + std::to_string(layout.experts));
  }
  if (layout.moe_layer_ids.empty()) return error("the layer pattern leaves no MoE layer");
  if (layout.hidden_size == 0) return error("hidden size is 0");
  for (uint32_t width : layout.expert_ffn_width) {
    if (width == 0) return error("expert FFN width is 0");
  }
  return Status::Ok();
}

std::string ModelName(const Json& json, const std::string& model_type) {
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

}  // namespace

std::string HfMoeFamilies() {
  std::string names;
  for (const auto& entry : Families()) names += (names.empty() ? "" : ", ") + entry.first;
  return names;
}

Result<HfMoeLayout> ReadHfMoeLayout(const Json& config, const std::string& path, const HfMoeLimits& limits) {
  COLIBRI_ASSIGN_OR_RETURN(const JsonObject fields, JsonObject::Of(config, path));
  if (!config.contains("model_type") || !config["model_type"].is_string()) {
    return Status::Unsupported(
        fields.Error("model_type", "missing; the model family must be named (supported: " + HfMoeFamilies() + ")")
            .message());
  }
  const std::string model_type = config["model_type"].get<std::string>();
  auto family = Families().find(model_type);
  if (family == Families().end()) {
    return Status::Unsupported(path + ": model_type '" + BoundedEcho(model_type) + "' is not supported (supported: " +
                               HfMoeFamilies() + "); other families are refused rather than guessed");
  }
  COLIBRI_ASSIGN_OR_RETURN(HfMoeLayout layout, family->second(Config{fields, limits}));
  COLIBRI_RETURN_IF_ERROR(CheckLayout(path, layout));
  layout.model_type = model_type;
  layout.model_name = ModelName(config, model_type);
  return layout;
}

}  // namespace colibri::engine
