// The MoE layout of a Hugging Face config.json: the project's one reader of
// that file, for the families Colibri supports explicitly; any other family is
// refused with the list, never guessed. The engine's model tools
// (ModelShapeFromHf, ExportModel) take it for the families whose weights they
// can name; traces::ShapeFromHfConfig computes a trace's expert bytes from it.
//
// Families: deepseek, deepseek_v2, granitemoe, grinmoe, jamba, jetmoe,
// llama_moe, mixtral, olmoe, phimoe, qwen2_moe, qwen3_moe, switch_transformers
// (docs/TRACE_FORMAT.md). One small reader per family extracts the layout
// under that family's field names and its layer pattern (decoder_sparse_step,
// mlp_only_layers, first_k_dense_replace, moe_layer_freq, expert_layer_period,
// ...; hf_config.cc says which per family). Only fields a family's own config
// class defines are read; optional layer pattern fields take that class's
// default when absent. Switch Transformers layouts cover the encoder's sparse
// layers only (the layer ids of its encoder-only router traces).
//
// Free functions, thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "colibri/status.h"

namespace colibri::engine {

struct HfMoeLayout {
  std::string model_type;
  std::string model_name;                  // _name_or_path, else architectures[0], else model_type
  std::vector<uint32_t> moe_layer_ids;     // ascending; never empty
  std::vector<uint32_t> expert_ffn_width;  // per MoE layer, each > 0
  uint32_t total_layers = 0;
  uint32_t experts = 0;      // > 0
  uint32_t top_k = 0;        // in 1..experts
  uint32_t hidden_size = 0;  // > 0
  uint32_t matrices = 3;     // 3: gate, up, down (gated FFN); 2: in, out (Switch, JetMoE without glu)
};

// The largest values a reader accepts (a field above one is an error naming it).
struct HfMoeLimits {
  uint32_t layers = 1u << 16;
  uint32_t experts = UINT32_MAX;
  uint32_t dimension = 1u << 24;  // hidden size, FFN width: keeps byte sizes far from overflow
};

// The model_types read, comma-separated in name order.
std::string HfMoeFamilies();

// The MoE layout of `config`, the parsed config.json at `path`. Errors name
// `path` and the field ("<path>: field '<field>': <why>"): kUnsupported for
// a missing model_type or a family not listed (and a llama_moe layer of
// experts of different widths); kInvalidArgument for a field missing, of the
// wrong type or above `limits`, and for a layout with no MoE layer, no
// expert, a top-k outside 1..experts or a zero size.
Result<HfMoeLayout> ReadHfMoeLayout(const nlohmann::json& config, const std::string& path,
                                    const HfMoeLimits& limits = {});

}  // namespace colibri::engine
