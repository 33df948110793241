// Test helpers: a naive fp64 reference of the SwiGLU expert FFN, the gate
// GEMV and softmax top-k routing, reading either the same expert block layout
// as the engine (bf16, fp16 and int8 weights dequantised exactly: every such
// value is an fp32, and int8 x scale is exact in fp64) or plain row-major
// source matrices, plus seeded random experts and activations.
// Header-only, for any test that needs an oracle independent of CpuCompute.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "colibri/engine/dtype.h"
#include "colibri/engine/expert_layout.h"

namespace colibri::engine::reference {

enum class ExpertMatrix { kGate, kUp, kDown };

// Uniform in [-1, 1), from the top 53 bits (portable, unlike std::uniform_real_distribution).
inline double UniformPm1(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1p-52 - 1.0; }

inline float LoadF32(const std::byte* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}

inline void StoreF32(std::byte* p, float f) { std::memcpy(p, &f, 4); }

inline uint16_t LoadU16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

struct MatrixPlace {
  uint64_t offset = 0;
  uint64_t scales_offset = 0;
  uint32_t rows = 0;
  uint32_t cols = 0;
};

inline MatrixPlace PlaceOf(const ExpertLayout& layout, ExpertMatrix which) {
  switch (which) {
    case ExpertMatrix::kGate:
      return {layout.gate_offset, layout.gate_scales_offset, layout.intermediate, layout.hidden};
    case ExpertMatrix::kUp:
      return {layout.up_offset, layout.up_scales_offset, layout.intermediate, layout.hidden};
    case ExpertMatrix::kDown:
      break;
  }
  return {layout.down_offset, layout.down_scales_offset, layout.hidden, layout.intermediate};
}

// The exact value of one weight.
inline double WeightAt(const ExpertView& expert, ExpertMatrix which, uint32_t row, uint32_t col) {
  const MatrixPlace place = PlaceOf(*expert.layout, which);
  const uint64_t index = uint64_t{row} * place.cols + col;
  const std::byte* base = expert.block + place.offset;
  switch (expert.layout->dtype) {
    case DType::kFp32:
      return LoadF32(base + 4 * index);
    case DType::kBf16:
      return Bf16ToFloat(LoadU16(base + 2 * index));
    case DType::kFp16:
      return Fp16ToFloat(LoadU16(base + 2 * index));
    case DType::kInt8:
      break;
  }
  const auto q = static_cast<int8_t>(base[index]);
  return static_cast<double>(q) * LoadF32(expert.block + place.scales_offset + 4 * uint64_t{row});
}

inline double SiluF64(double z) { return z / (1.0 + std::exp(-z)); }

// tokens x hidden outputs of a SwiGLU FFN, down(silu(gate x) * up x), in
// fp64, for tokens x hidden inputs; weight(which, row, col) gives each weight
// (gate, up: intermediate x hidden; down: hidden x intermediate).
template <typename WeightFn>
std::vector<double> ReferenceSwiGluFfn(uint32_t hidden, uint32_t inter, const WeightFn& weight, const float* x,
                                       size_t tokens) {
  std::vector<double> y(tokens * hidden);
  std::vector<double> h(inter);
  for (size_t t = 0; t < tokens; ++t) {
    const float* xt = x + t * hidden;
    for (uint32_t i = 0; i < inter; ++i) {
      double g = 0, u = 0;
      for (uint32_t c = 0; c < hidden; ++c) {
        g += weight(ExpertMatrix::kGate, i, c) * xt[c];
        u += weight(ExpertMatrix::kUp, i, c) * xt[c];
      }
      h[i] = SiluF64(g) * u;
    }
    for (uint32_t r = 0; r < hidden; ++r) {
      double sum = 0;
      for (uint32_t i = 0; i < inter; ++i) sum += weight(ExpertMatrix::kDown, r, i) * h[i];
      y[t * hidden + r] = sum;
    }
  }
  return y;
}

// tokens x hidden outputs of the expert for tokens x hidden inputs.
inline std::vector<double> ReferenceExpertFfn(const ExpertView& expert, const float* x, size_t tokens) {
  const auto weight = [&](ExpertMatrix which, uint32_t row, uint32_t col) { return WeightAt(expert, which, row, col); };
  return ReferenceSwiGluFfn(expert.layout->hidden, expert.layout->intermediate, weight, x, tokens);
}

// An expert as plain row-major fp32 matrices, e.g. a checkpoint's source
// tensors: gate and up intermediate x hidden, down hidden x intermediate.
struct DenseExpert {
  const float* gate = nullptr;
  const float* up = nullptr;
  const float* down = nullptr;
  uint32_t hidden = 0;
  uint32_t intermediate = 0;

  double At(ExpertMatrix which, uint32_t row, uint32_t col) const {
    switch (which) {
      case ExpertMatrix::kGate:
        return gate[uint64_t{row} * hidden + col];
      case ExpertMatrix::kUp:
        return up[uint64_t{row} * hidden + col];
      case ExpertMatrix::kDown:
        break;
    }
    return down[uint64_t{row} * intermediate + col];
  }
};

inline std::vector<double> ReferenceExpertFfn(const DenseExpert& expert, const float* x, size_t tokens) {
  const auto weight = [&](ExpertMatrix which, uint32_t row, uint32_t col) { return expert.At(which, row, col); };
  return ReferenceSwiGluFfn(expert.hidden, expert.intermediate, weight, x, tokens);
}

// tokens x experts logits; bias may be null.
inline std::vector<double> ReferenceGateGemv(const float* weight, const float* bias, uint32_t experts, uint32_t hidden,
                                             const float* x, size_t tokens) {
  std::vector<double> logits(tokens * experts);
  for (size_t t = 0; t < tokens; ++t) {
    for (uint32_t e = 0; e < experts; ++e) {
      double sum = bias == nullptr ? 0.0 : bias[e];
      for (uint32_t c = 0; c < hidden; ++c) sum += double{weight[uint64_t{e} * hidden + c]} * x[t * hidden + c];
      logits[t * experts + e] = sum;
    }
  }
  return logits;
}

// One token's routing in fp64: softmax over `experts` logits, the top `k` by
// probability (ties to the lower id), weights renormalised to sum to 1 when
// `renormalize`. `margin` is the gap between the k-th and the (k+1)-th
// probability (1 when k == experts): below ~1e-5 an fp32 router may rank
// differently.
struct ReferenceRouting {
  std::vector<uint32_t> ids;  // rank order
  std::vector<double> weights;
  double margin = 0;
};

inline ReferenceRouting ReferenceRouteTopK(const double* logits, uint32_t experts, uint32_t k, bool renormalize) {
  const double max = *std::max_element(logits, logits + experts);
  std::vector<double> p(experts);
  double sum = 0;
  for (uint32_t e = 0; e < experts; ++e) sum += p[e] = std::exp(logits[e] - max);
  for (double& v : p) v /= sum;
  std::vector<uint32_t> order(experts);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return p[a] > p[b]; });
  ReferenceRouting r;
  r.ids.assign(order.begin(), order.begin() + k);
  double kept = 0;
  for (uint32_t s = 0; s < k; ++s) kept += p[order[s]];
  for (uint32_t s = 0; s < k; ++s) r.weights.push_back(renormalize ? p[order[s]] / kept : p[order[s]]);
  r.margin = k < experts ? p[order[k - 1]] - p[order[k]] : 1.0;
  return r;
}

// ||got - want||_2 / ||want||_2.
inline double RelativeNormError(const float* got, const std::vector<double>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(diff / norm);
}

// An expert block with seeded random weights: uniform in [-1, 1) / sqrt(fan_in)
// (rounded to the dtype); int8: uniform q in [-127, 127], per-row scales
// (0.5 .. 1.5) / (127 sqrt(fan_in)). Keep the object in place while a view is used.
class RandomExpert {
 public:
  RandomExpert(DType dtype, uint32_t hidden, uint32_t intermediate, uint64_t seed)
      : layout_(ExpertLayout::Make(dtype, hidden, intermediate)), block_(layout_.block_bytes) {
    std::mt19937_64 rng(seed);
    for (ExpertMatrix which : {ExpertMatrix::kGate, ExpertMatrix::kUp, ExpertMatrix::kDown}) Fill(which, rng);
  }
  ExpertView view() const { return ExpertView{&layout_, block_.data()}; }
  const ExpertLayout& layout() const { return layout_; }

 private:
  void Fill(ExpertMatrix which, std::mt19937_64& rng) {
    const MatrixPlace place = PlaceOf(layout_, which);
    const double range = 1.0 / std::sqrt(static_cast<double>(place.cols));
    std::byte* base = block_.data() + place.offset;
    for (uint64_t i = 0; i < uint64_t{place.rows} * place.cols; ++i) {
      const float w = static_cast<float>(UniformPm1(rng) * range);
      switch (layout_.dtype) {
        case DType::kFp32:
          StoreF32(base + 4 * i, w);
          break;
        case DType::kBf16:
          StoreU16(base + 2 * i, FloatToBf16(w));
          break;
        case DType::kFp16:
          StoreU16(base + 2 * i, FloatToFp16(w));
          break;
        case DType::kInt8:
          base[i] = static_cast<std::byte>(static_cast<int8_t>(std::lround(UniformPm1(rng) * 127)));
          break;
      }
    }
    if (layout_.dtype != DType::kInt8) return;
    for (uint32_t r = 0; r < place.rows; ++r) {
      const double scale = (1.0 + 0.5 * UniformPm1(rng)) * range / 127;
      StoreF32(block_.data() + place.scales_offset + 4 * uint64_t{r}, static_cast<float>(scale));
    }
  }
  static void StoreU16(std::byte* p, uint16_t v) { std::memcpy(p, &v, 2); }

  ExpertLayout layout_;
  std::vector<std::byte> block_;
};

// `count` fp32 values uniform in [-1, 1).
inline std::vector<float> RandomActivations(size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> x(count);
  for (float& v : x) v = static_cast<float>(UniformPm1(rng));
  return x;
}

}  // namespace colibri::engine::reference
