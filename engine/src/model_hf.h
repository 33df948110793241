// Hugging Face MoE checkpoints: the shape in config.json and the safetensors
// names of the routed experts and routers, per supported family. Families
// not listed are refused, never guessed. Plain values, thread-safe to share.
#pragma once

#include <cstdint>
#include <string>

#include "colibri/engine/model.h"
#include "model_codec.h"

namespace colibri::engine::model_detail {

struct HfMoeModel {
  std::string model_type;
  ModelConfig shape;           // model_name, source, layer_ids, experts, top_k, norm_topk_prob, hidden, intermediate
  bool mixtral_names = false;  // block_sparse_moe.experts.{e}.w1/w3/w2; else mlp.experts.{e}.*_proj

  // The [rows, cols] weight of one expert matrix, by source layer id.
  std::string ExpertTensor(uint32_t layer_id, uint32_t expert, MatrixKind kind) const;
  // The router weight [experts, hidden] of a layer, by source layer id.
  std::string RouterTensor(uint32_t layer_id) const;
};

// Reads a config.json of qwen2_moe, qwen3_moe, olmoe, mixtral, deepseek or
// deepseek_v2 (the layout through ReadHfMoeLayout, within the format's
// limits); keeps the first `max_layers` MoE layers (0 = all). Errors name the
// file and the field.
Result<HfMoeModel> ReadHfMoeConfig(const std::string& path, uint32_t max_layers);

}  // namespace colibri::engine::model_detail
