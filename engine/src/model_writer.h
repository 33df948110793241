// Writes a model directory from callbacks that fill expert blocks and router
// weights; shared by synth, export and quantize.
//
// The files go to a temporary sibling directory ("<dir>.partial-<pid>"),
// hashed as they are written; config.json is written last and the directory
// renamed into place, so `dir` never holds a partial model. On error the
// temporary directory is removed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "colibri/engine/model.h"
#include "colibri/status.h"

namespace colibri::engine::model_detail {

// Fills the zeroed block (config.layout.block_bytes) of one expert; `config`
// is the completed config being written. Called from several threads at
// once, for distinct blocks: must be thread-safe.
using ExpertFiller =
    std::function<Status(const ModelConfig& config, uint32_t layer_index, uint32_t expert, std::byte* block)>;
// Fills one layer's router: weight experts x hidden row-major, bias experts
// (both zeroed). Called from the writing thread only.
using GatingFiller = std::function<Status(const ModelConfig& config, uint32_t layer_index, float* weight, float* bias)>;

// Completes `config` (source_intermediate when 0, layout, file names, sizes,
// checksums), validates its shape and alignment rule, writes the model to
// `dir` (absent or empty) and returns the completed config.
Result<ModelConfig> WriteModel(ModelConfig config, const ExpertFiller& fill_expert, const GatingFiller& fill_gating,
                               const std::string& dir);

// kInvalidArgument unless `dir` is absent or an empty directory: checked
// by WriteModel, and by the tools before their slow work.
Status CheckOutputDir(const std::string& dir);

}  // namespace colibri::engine::model_detail
