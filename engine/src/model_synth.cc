// `SynthModel`: seeded random weights. Uniform in [-b, b] with b =
// sqrt(3 / fan_in), so every weight has standard deviation 1/sqrt(fan_in)
// and a matrix keeps unit-variance inputs at unit variance. The router bias
// is drawn like one more weight column (it is zero in real checkpoints, but
// a non-zero one exercises the bias path).
#include <cmath>
#include <string>
#include <vector>

#include "colibri/engine/model.h"
#include "model_codec.h"
#include "model_random.h"
#include "model_writer.h"

namespace colibri::engine {
namespace {

using model_detail::MatrixKind;
using model_detail::SeededUniform;

float UniformBound(uint32_t fan_in) { return std::sqrt(3.0f / static_cast<float>(fan_in)); }

Status FillExpert(const ModelConfig& config, uint64_t seed, uint32_t layer_index, uint32_t expert, std::byte* block) {
  SeededUniform rng(seed, "expert." + std::to_string(config.layer_ids[layer_index]) + "." + std::to_string(expert));
  std::vector<float> row(std::max(config.hidden, config.intermediate));
  for (MatrixKind kind : model_detail::kMatrixKinds) {
    const model_detail::MatrixShape shape = model_detail::ShapeOf(config.layout, kind);
    const float bound = UniformBound(shape.cols);
    for (uint32_t r = 0; r < shape.rows; ++r) {
      rng.Fill(bound, row.data(), shape.cols);
      COLIBRI_RETURN_IF_ERROR(model_detail::EncodeRow(config.layout, kind, r, row.data(), block));
    }
  }
  return Status::Ok();
}

void FillRouter(const ModelConfig& config, uint64_t seed, uint32_t layer_index, float* weight, float* bias) {
  SeededUniform rng(seed, "router." + std::to_string(config.layer_ids[layer_index]));
  const float bound = UniformBound(config.hidden);
  rng.Fill(bound, weight, uint64_t{config.experts} * config.hidden);
  rng.Fill(bound, bias, config.experts);
}

}  // namespace

Result<ModelConfig> SynthModel(const ModelConfig& shape, uint64_t seed, const std::string& dir) {
  ModelConfig config = shape;
  if (config.model_name.empty()) config.model_name = "synthetic";
  config.source["tool"] = "colibri model synth";
  config.source["seed"] = std::to_string(seed);
  auto fill_expert = [seed](const ModelConfig& c, uint32_t layer_index, uint32_t expert, std::byte* block) {
    return FillExpert(c, seed, layer_index, expert, block);
  };
  auto fill_router = [seed](const ModelConfig& c, uint32_t layer_index, float* weight, float* bias) {
    FillRouter(c, seed, layer_index, weight, bias);
    return Status::Ok();
  };
  return model_detail::WriteModel(config, fill_expert, fill_router, dir);
}

}  // namespace colibri::engine
