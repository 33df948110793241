// Test helpers that write small Hugging Face style safetensors checkpoints:
// the file writer, and a builder of seeded random routed experts and routers
// in Mixtral (block_sparse_moe.experts.N.w1/w3/w2) or Qwen/OLMoE/DeepSeek
// (mlp.experts.N.gate_proj/up_proj/down_proj) naming. Used by the export tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "colibri/engine/dtype.h"
#include "model_codec.h"
#include "model_test_util.h"

namespace colibri::engine::testing_util {

struct SourceTensor {
  std::string dtype;  // safetensors name: F32, BF16, F16 (or I64: zero bytes)
  std::vector<uint64_t> shape;
  std::vector<float> values;  // row-major, exactly representable in dtype
};
using Tensors = std::map<std::string, SourceTensor>;

// `value` rounded to a safetensors dtype (F32: unchanged).
inline float RoundTo(const std::string& dtype, float value) {
  if (dtype == "BF16") return Bf16ToFloat(FloatToBf16(value));
  if (dtype == "F16") return Fp16ToFloat(FloatToFp16(value));
  return value;
}

inline void AppendEncoded(const SourceTensor& t, std::string* data) {
  for (float v : t.values) {
    if (t.dtype == "F32") {
      data->append(reinterpret_cast<const char*>(&v), 4);
    } else {
      const uint16_t bits = t.dtype == "BF16" ? FloatToBf16(v) : FloatToFp16(v);
      data->append(reinterpret_cast<const char*>(&bits), 2);
    }
  }
}

// Writes tensors as one safetensors file; I64 tensors get zero bytes.
inline void WriteSafetensors(const std::string& path, const Tensors& tensors) {
  nlohmann::json header = {{"__metadata__", {{"format", "pt"}}}};
  std::string data;
  for (const auto& [name, t] : tensors) {
    const size_t begin = data.size();
    if (t.dtype == "I64") {
      data.append(8 * t.shape[0], '\0');
    } else {
      AppendEncoded(t, &data);
    }
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t length = text.size();
  std::string file(reinterpret_cast<const char*>(&length), 8);
  WriteText(path, file + text + data);
}

// The MoE shape of a checkpoint's routed experts.
struct CheckpointShape {
  uint32_t experts = 0;
  uint32_t hidden = 0;
  uint32_t intermediate = 0;
  // Weights are uniform in [-1, 1); with this set, divided by sqrt(fan_in)
  // (as in a trained layer: unit-variance inputs give O(1) pre-activations).
  bool scale_by_fan_in = false;
};

// Builds a checkpoint: the routed experts and routers of `layer_ids`, plus
// tensors export must ignore. Values come from std::mt19937(seed), in tensor
// name order of creation; the same arguments give the same tensors.
class CheckpointBuilder {
 public:
  CheckpointBuilder(std::string dtype, bool mixtral_names, CheckpointShape shape, uint32_t seed = 12345)
      : dtype_(std::move(dtype)), mixtral_(mixtral_names), shape_(shape), rng_(seed) {}

  Tensors Build(const std::vector<uint32_t>& layer_ids) {
    using model_detail::MatrixKind;
    Tensors tensors;
    for (uint32_t layer : layer_ids) {
      for (uint32_t e = 0; e < shape_.experts; ++e) {
        for (MatrixKind kind : model_detail::kMatrixKinds) {
          const bool down = kind == MatrixKind::kDown;
          tensors[ExpertName(layer, e, kind)] =
              Random(down ? shape_.hidden : shape_.intermediate, down ? shape_.intermediate : shape_.hidden);
        }
      }
      tensors[RouterName(layer)] = Random(shape_.experts, shape_.hidden);
    }
    tensors["model.embed_tokens.weight"] = Random(3, shape_.hidden);
    tensors["model.position_ids"] = SourceTensor{"I64", {2}, {}};
    return tensors;
  }

  std::string ExpertName(uint32_t layer, uint32_t expert, model_detail::MatrixKind kind) const {
    static const char* const kMixtral[] = {"w1", "w3", "w2"};
    static const char* const kMlp[] = {"gate_proj", "up_proj", "down_proj"};
    const auto k = static_cast<size_t>(kind);
    return Prefix(layer) + "experts." + std::to_string(expert) + "." + (mixtral_ ? kMixtral[k] : kMlp[k]) + ".weight";
  }
  std::string RouterName(uint32_t layer) const { return Prefix(layer) + "gate.weight"; }
  std::string Prefix(uint32_t layer) const {
    return "model.layers." + std::to_string(layer) + (mixtral_ ? ".block_sparse_moe." : ".mlp.");
  }

 private:
  SourceTensor Random(uint64_t rows, uint64_t cols) {
    SourceTensor t{dtype_, {rows, cols}, {}};
    const float scale = shape_.scale_by_fan_in ? 1.0f / std::sqrt(static_cast<float>(cols)) : 1.0f;
    for (uint64_t i = 0; i < rows * cols; ++i) {
      const float uniform = static_cast<float>(static_cast<int32_t>(rng_())) / 2147483648.0f;  // [-1, 1)
      t.values.push_back(RoundTo(dtype_, uniform * scale));
    }
    return t;
  }

  std::string dtype_;
  bool mixtral_;
  CheckpointShape shape_;
  std::mt19937 rng_;
};

}  // namespace colibri::engine::testing_util
