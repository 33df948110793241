// Model shape from a Hugging Face config.json, for the families Colibri
// supports explicitly (see docs/TRACE_FORMAT.md); any other family is refused
// with a clear message, never guessed. The layout is engine::ReadHfMoeLayout's
// (colibri/engine/hf_config.h), the project's one reader of that file.
// Thread-safety: free functions.
#pragma once

#include <cstdint>
#include <string>

#include "colibri/status.h"
#include "colibri/traces/trace.h"

namespace colibri::traces {

// Bytes of one weight element for "fp32", "bf16", "fp16", "int8"; error otherwise.
Result<uint32_t> WeightDtypeBytes(const std::string& dtype);

// Reads `path` (a config.json) and returns the MoE shape: MoE layer ids (from
// decoder_sparse_step, first_k_dense_replace, moe_layer_freq, ...), experts per
// layer, top-k, expert bytes per layer for `dtype` (gate+up+down = 3 x hidden x
// expert FFN width for gated FFNs, 2 x for Switch; int8 adds one fp32 scale per
// output row per matrix), hidden size, total layers. dense_bytes stays empty.
Result<ModelShape> ShapeFromHfConfig(const std::string& path, const std::string& dtype);

}  // namespace colibri::traces
