// Model shape from a Hugging Face config.json (see model_config.h). One small
// reader per supported family extracts the MoE layout under that family's
// field names (and its layer pattern: decoder_sparse_step, mlp_only_layers,
// first_k_dense_replace, moe_layer_freq, expert_layer_period, ...); sizes are
// computed in one place. Unknown families are refused, never guessed.
//
// Only fields a family's own config class defines are read; optional layer
// pattern fields take that class's default when absent. Switch Transformers
// shapes cover the encoder's sparse layers only (the layer ids of its
// encoder-only router traces); the decoder's sparse layers are not included.
#include "colibri/traces/model_config.h"

#include <algorithm>
#include <functional>
#include <map>

#include "import_util.h"
#include "colibri/bounded_echo.h"

namespace colibri::traces {
namespace {

using Json = nlohmann::json;

constexpr uint32_t kMaxLayers = 1 << 16;
constexpr uint32_t kMaxDimension = 1 << 24;  // hidden size, FFN width: keeps byte sizes far from overflow
constexpr uint32_t kInt8ScaleBytes = 4;      // one fp32 scale per output row per matrix

// Typed access to one config.json; every error names the file and the field.
class ConfigFields {
 public:
  ConfigFields(std::string path, const Json& json) : path_(std::move(path)), json_(json) {}

  Status Error(const std::string& field, const std::string& why) const {
    return Status::InvalidArgument(path_ + ": field '" + field + "': " + why);
  }

  bool Has(const char* field) const { return json_.contains(field) && !json_[field].is_null(); }

  // A required non-negative integer no larger than `max_value`.
  Result<uint32_t> Uint(const char* field, uint32_t max_value = UINT32_MAX) const {
    if (!Has(field)) return Error(field, "missing");
    return Checked(field, json_[field], max_value);
  }

  // The first present of several names for one setting (required).
  Result<uint32_t> UintAnyOf(const std::vector<const char*>& fields, uint32_t max_value = UINT32_MAX) const {
    std::string names;
    for (const char* field : fields) {
      if (Has(field)) return Checked(field, json_[field], max_value);
      names += (names.empty() ? "" : "' or '") + std::string(field);
    }
    return Error(names, "missing");
  }

  // An optional integer: `fallback` when absent or null.
  Result<uint32_t> UintOr(const char* field, uint32_t fallback) const {
    return Has(field) ? Checked(field, json_[field], UINT32_MAX) : Result<uint32_t>(fallback);
  }

  Result<bool> BoolOr(const char* field, bool fallback) const {
    if (!Has(field)) return fallback;
    if (!json_[field].is_boolean()) return Error(field, "expected true or false, found " + JsonSnippet(json_[field]));
    return json_[field].get<bool>();
  }

  // An optional list of integers: empty when absent or null.
  Result<std::vector<uint32_t>> UintListOr(const char* field) const {
    std::vector<uint32_t> values;
    if (!Has(field)) return values;
    if (!json_[field].is_array()) {
      return Error(field, "expected a list of integers, found " + JsonSnippet(json_[field]));
    }
    for (size_t i = 0; i < json_[field].size(); ++i) {
      COLIBRI_ASSIGN_OR_RETURN(
          uint32_t value, Checked(std::string(field) + "[" + std::to_string(i) + "]", json_[field][i], UINT32_MAX));
      values.push_back(value);
    }
    return values;
  }

  Result<uint32_t> Checked(const std::string& field, const Json& value, uint32_t max_value) const {
    auto number = JsonUint(value, max_value);
    if (!number.ok()) return Error(field, number.status().message());
    return static_cast<uint32_t>(number.value());
  }

  const Json& json() const { return json_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const Json& json_;
};

// What a family reader extracts; ShapeFromHfConfig computes sizes from it.
struct MoeLayout {
  std::vector<uint32_t> moe_layer_ids;
  std::vector<uint32_t> expert_ffn_width;  // per MoE layer
  uint32_t total_layers = 0;
  uint32_t experts = 0;
  uint32_t top_k = 0;
  uint32_t hidden_size = 0;
  uint32_t matrices = 3;  // 3: gate, up, down (gated FFN); 2: in, out
};

// The family's field names (alternatives in order) for the settings every MoE
// config has. An empty top_k or ffn_width: the family sets that itself.
struct FieldNames {
  std::vector<const char*> experts;
  std::vector<const char*> top_k;
  std::vector<const char*> ffn_width;
  std::vector<const char*> hidden = {"hidden_size"};
  std::vector<const char*> layers = {"num_hidden_layers"};
};

// Reads the common settings and makes every layer a MoE layer with one FFN width.
Result<MoeLayout> EveryLayerMoe(const ConfigFields& c, const FieldNames& names) {
  MoeLayout layout;
  COLIBRI_ASSIGN_OR_RETURN(layout.total_layers, c.UintAnyOf(names.layers, kMaxLayers));
  COLIBRI_ASSIGN_OR_RETURN(layout.experts, c.UintAnyOf(names.experts));
  COLIBRI_ASSIGN_OR_RETURN(layout.hidden_size, c.UintAnyOf(names.hidden, kMaxDimension));
  if (!names.top_k.empty()) {
    COLIBRI_ASSIGN_OR_RETURN(layout.top_k, c.UintAnyOf(names.top_k));
  }
  uint32_t width = 0;
  if (!names.ffn_width.empty()) {
    COLIBRI_ASSIGN_OR_RETURN(width, c.UintAnyOf(names.ffn_width, kMaxDimension));
  }
  for (uint32_t layer = 0; layer < layout.total_layers; ++layer) layout.moe_layer_ids.push_back(layer);
  layout.expert_ffn_width.assign(layout.total_layers, width);
  return layout;
}

// Keeps the MoE layers for which `is_moe(layer)` holds.
void KeepLayers(MoeLayout* layout, const std::function<bool(uint32_t)>& is_moe) {
  MoeLayout kept = *layout;
  kept.moe_layer_ids.clear();
  kept.expert_ffn_width.clear();
  for (size_t i = 0; i < layout->moe_layer_ids.size(); ++i) {
    if (!is_moe(layout->moe_layer_ids[i])) continue;
    kept.moe_layer_ids.push_back(layout->moe_layer_ids[i]);
    kept.expert_ffn_width.push_back(layout->expert_ffn_width[i]);
  }
  *layout = std::move(kept);
}

Result<uint32_t> PositiveOr(const ConfigFields& c, const char* field, uint32_t fallback) {
  COLIBRI_ASSIGN_OR_RETURN(uint32_t value, c.UintOr(field, fallback));
  if (value == 0) return c.Error(field, "must be at least 1");
  return value;
}

// Mixtral, Phi-3.5-MoE, GRIN-MoE, GraniteMoE (PowerMoE): every layer sparse.
Result<MoeLayout> MixtralLike(const ConfigFields& c) {
  return EveryLayerMoe(c, {{"num_local_experts"}, {"num_experts_per_tok"}, {"intermediate_size"}});
}

Result<MoeLayout> Olmoe(const ConfigFields& c) {
  return EveryLayerMoe(c, {{"num_experts"}, {"num_experts_per_tok"}, {"intermediate_size"}});
}

// Qwen1.5/2/3-MoE: layer i is sparse unless listed in mlp_only_layers, and
// when (i + 1) % decoder_sparse_step == 0.
Result<MoeLayout> QwenMoe(const ConfigFields& c) {
  COLIBRI_ASSIGN_OR_RETURN(MoeLayout layout,
                           EveryLayerMoe(c, {{"num_experts"}, {"num_experts_per_tok"}, {"moe_intermediate_size"}}));
  COLIBRI_ASSIGN_OR_RETURN(uint32_t step, PositiveOr(c, "decoder_sparse_step", 1));
  COLIBRI_ASSIGN_OR_RETURN(std::vector<uint32_t> mlp_only, c.UintListOr("mlp_only_layers"));
  KeepLayers(&layout, [&](uint32_t layer) {
    return std::find(mlp_only.begin(), mlp_only.end(), layer) == mlp_only.end() && (layer + 1) % step == 0;
  });
  return layout;
}

// DeepSeekMoE and DeepSeek-V2: layer i is sparse when i >= first_k_dense_replace
// and i % moe_layer_freq == 0.
Result<MoeLayout> Deepseek(const ConfigFields& c) {
  COLIBRI_ASSIGN_OR_RETURN(
      MoeLayout layout, EveryLayerMoe(c, {{"n_routed_experts"}, {"num_experts_per_tok"}, {"moe_intermediate_size"}}));
  COLIBRI_ASSIGN_OR_RETURN(uint32_t first_dense, c.UintOr("first_k_dense_replace", 0));
  COLIBRI_ASSIGN_OR_RETURN(uint32_t frequency, PositiveOr(c, "moe_layer_freq", 1));
  KeepLayers(&layout, [&](uint32_t layer) { return layer >= first_dense && layer % frequency == 0; });
  return layout;
}

// Jamba: layer i is sparse when i % expert_layer_period == expert_layer_offset.
Result<MoeLayout> Jamba(const ConfigFields& c) {
  COLIBRI_ASSIGN_OR_RETURN(MoeLayout layout,
                           EveryLayerMoe(c, {{"num_experts"}, {"num_experts_per_tok"}, {"intermediate_size"}}));
  COLIBRI_ASSIGN_OR_RETURN(uint32_t period, PositiveOr(c, "expert_layer_period", 2));
  COLIBRI_ASSIGN_OR_RETURN(uint32_t offset, c.UintOr("expert_layer_offset", 1));
  KeepLayers(&layout, [&](uint32_t layer) { return layer % period == offset; });
  return layout;
}

// JetMoE: every layer sparse; top-k is moe_top_k (its `top_k` is a sampling
// setting). The remote-code configs use moe_num_experts/ffn_hidden_size and
// sometimes n_embd/n_layer; `glu` (default true) makes the FFN gated.
Result<MoeLayout> JetMoe(const ConfigFields& c) {
  COLIBRI_ASSIGN_OR_RETURN(MoeLayout layout,
                           EveryLayerMoe(c, {.experts = {"moe_num_experts", "num_local_experts"},
                                             .top_k = {"moe_top_k", "num_experts_per_tok"},
                                             .ffn_width = {"ffn_hidden_size", "intermediate_size"},
                                             .hidden = {"hidden_size", "n_embd"},
                                             .layers = {"num_hidden_layers", "num_layers", "n_layer"}}));
  COLIBRI_ASSIGN_OR_RETURN(bool gated, c.BoolOr("glu", true));
  layout.matrices = gated ? 3 : 2;
  return layout;
}

// Switch Transformers: top-1, two matrices (wi, wo) per expert; encoder layer
// i is sparse when i % encoder_sparse_step == 1 (or the step is 1).
Result<MoeLayout> Switch(const ConfigFields& c) {
  COLIBRI_ASSIGN_OR_RETURN(MoeLayout layout, EveryLayerMoe(c, {.experts = {"num_experts"},
                                                               .top_k = {},
                                                               .ffn_width = {"d_ff"},
                                                               .hidden = {"d_model"},
                                                               .layers = {"num_layers"}}));
  COLIBRI_ASSIGN_OR_RETURN(uint32_t selected, c.UintOr("num_selected_experts", 1));
  if (selected != 1) {
    return c.Error("num_selected_experts", "Switch Transformers routes top-1, found " + std::to_string(selected));
  }
  layout.top_k = 1;
  layout.matrices = 2;
  COLIBRI_ASSIGN_OR_RETURN(uint32_t step, c.Uint("encoder_sparse_step"));
  if (step == 0) return c.Error("encoder_sparse_step", "0: the encoder has no sparse layers");
  KeepLayers(&layout, [&](uint32_t layer) { return step == 1 || layer % step == 1; });
  return layout;
}

// LLaMA-MoE v1: every layer sparse, top-k is num_selects, expert widths per
// layer in size_experts (all experts of a layer must be the same width).
Result<MoeLayout> LlamaMoe(const ConfigFields& c) {
  COLIBRI_ASSIGN_OR_RETURN(MoeLayout layout,
                           EveryLayerMoe(c, {.experts = {"num_experts"}, .top_k = {"num_selects"}, .ffn_width = {}}));
  static const Json kAbsent;
  const Json& sizes = c.Has("size_experts") ? c.json()["size_experts"] : kAbsent;
  if (!sizes.is_array() || sizes.size() != layout.total_layers) {
    return c.Error("size_experts",
                   "expected one list of expert widths per layer (" + std::to_string(layout.total_layers) + ")");
  }
  for (uint32_t layer = 0; layer < layout.total_layers; ++layer) {
    const std::string field = "size_experts[" + std::to_string(layer) + "]";
    if (!sizes[layer].is_array() || sizes[layer].empty() || sizes[layer].size() != layout.experts) {
      return c.Error(field, "expected " + std::to_string(layout.experts) + " expert widths");
    }
    COLIBRI_ASSIGN_OR_RETURN(uint32_t width, c.Checked(field + "[0]", sizes[layer][0], kMaxDimension));
    for (const Json& other : sizes[layer]) {
      if (other != sizes[layer][0]) {
        return Status::Unsupported(
            c.Error(field, "experts of different widths in one layer are not supported").message());
      }
    }
    layout.expert_ffn_width[layer] = width;
  }
  return layout;
}

using FamilyReader = Result<MoeLayout> (*)(const ConfigFields&);

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

std::string SupportedFamilies() {
  std::string names;
  for (const auto& entry : Families()) names += (names.empty() ? "" : ", ") + entry.first;
  return names;
}

Status CheckLayout(const ConfigFields& c, const MoeLayout& layout) {
  auto error = [&](const std::string& why) { return Status::InvalidArgument(c.path() + ": " + why); };
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

// Bytes of one expert: matrices x hidden x width weights; int8 adds one fp32
// scale per output row (gate/up/in rows = width, down/out rows = hidden).
uint64_t ExpertBytes(const MoeLayout& layout, uint32_t width, uint32_t dtype_bytes, bool int8) {
  const uint64_t hidden = layout.hidden_size;
  uint64_t bytes = uint64_t{layout.matrices} * hidden * width * dtype_bytes;
  if (int8) bytes += kInt8ScaleBytes * (uint64_t{layout.matrices - 1} * width + hidden);
  return bytes;
}

}  // namespace

Result<uint32_t> WeightDtypeBytes(const std::string& dtype) {
  static const std::map<std::string, uint32_t> kBytes = {{"fp32", 4}, {"bf16", 2}, {"fp16", 2}, {"int8", 1}};
  auto it = kBytes.find(dtype);
  if (it == kBytes.end()) {
    return Status::InvalidArgument("weight dtype '" + BoundedEcho(dtype) + "' not supported (one of: fp32, bf16, fp16, int8)");
  }
  return it->second;
}

Result<ModelShape> ShapeFromHfConfig(const std::string& path, const std::string& dtype) {
  COLIBRI_ASSIGN_OR_RETURN(uint32_t dtype_bytes, WeightDtypeBytes(dtype));
  COLIBRI_ASSIGN_OR_RETURN(Json json, ReadJsonFile(path));
  if (!json.is_object()) return Status::InvalidArgument(path + ": expected a JSON object (a config.json)");
  const ConfigFields fields(path, json);
  if (!json.contains("model_type") || !json["model_type"].is_string()) {
    return Status::Unsupported(
        fields.Error("model_type", "missing; the model family must be named (supported: " + SupportedFamilies() + ")")
            .message());
  }
  const std::string model_type = json["model_type"].get<std::string>();
  auto family = Families().find(model_type);
  if (family == Families().end()) {
    return Status::Unsupported(path + ": model_type '" + BoundedEcho(model_type) + "' is not supported (supported: " +
                               SupportedFamilies() + "); other families are refused rather than guessed");
  }
  COLIBRI_ASSIGN_OR_RETURN(MoeLayout layout, family->second(fields));
  COLIBRI_RETURN_IF_ERROR(CheckLayout(fields, layout));

  ModelShape shape;
  shape.model_name = ModelName(json, model_type);
  shape.moe_layer_ids = layout.moe_layer_ids;
  shape.experts_per_layer = layout.experts;
  shape.top_k = layout.top_k;
  for (uint32_t width : layout.expert_ffn_width) {
    shape.expert_bytes.push_back(ExpertBytes(layout, width, dtype_bytes, dtype == "int8"));
  }
  shape.dtype = dtype;
  shape.hidden_size = layout.hidden_size;
  shape.total_layers = layout.total_layers;
  COLIBRI_RETURN_IF_ERROR(shape.Validate().WithPrefix(path));
  return shape;
}

}  // namespace colibri::traces
