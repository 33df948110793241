// Model shape from a Hugging Face config.json (see model_config.h): the MoE
// layout comes from the project's one config.json reader,
// engine::ReadHfMoeLayout (colibri/engine/hf_config.h: the families, their
// field names and layer patterns); the sizes are computed here. Unknown
// families are refused, never guessed.
#include "colibri/traces/model_config.h"

#include <map>

#include "colibri/bounded_echo.h"
#include "colibri/engine/hf_config.h"
#include "import_util.h"

namespace colibri::traces {
namespace {

constexpr uint32_t kInt8ScaleBytes = 4;  // one fp32 scale per output row per matrix

// Bytes of one expert: matrices x hidden x width weights; int8 adds one fp32
// scale per output row (gate/up/in rows = width, down/out rows = hidden).
uint64_t ExpertBytes(const engine::HfMoeLayout& layout, uint32_t width, uint32_t dtype_bytes, bool int8) {
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
  COLIBRI_ASSIGN_OR_RETURN(nlohmann::json json, ReadJsonFile(path));
  if (!json.is_object()) return Status::InvalidArgument(path + ": expected a JSON object (a config.json)");
  COLIBRI_ASSIGN_OR_RETURN(const engine::HfMoeLayout layout, engine::ReadHfMoeLayout(json, path));

  ModelShape shape;
  shape.model_name = layout.model_name;
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
