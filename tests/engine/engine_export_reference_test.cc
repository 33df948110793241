// Export + load + engine reproduce the original checkpoint: a small bf16
// safetensors checkpoint with seeded random weights (Mixtral, Qwen3-MoE and
// DeepSeek-V2 tensor naming and config rules) is exported with ExportModel to
// each dtype, opened with LocalEngine (pread and io_uring storage, L1/L2 of
// one and two experts so experts stream through staging slots), and
// MoeEngine::Forward over every MoE layer is compared with a naive fp64
// reference computed from the SOURCE tensors (router logits -> softmax ->
// top-k, ties to the lower id, renormalised as the config says -> SwiGLU ->
// weighted sum), not from the exported model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "colibri/engine/local_engine.h"
#include "colibri/engine/model.h"
#include "model_codec.h"
#include "model_test_util.h"
#include "reference_ffn.h"
#include "safetensors_test_util.h"

namespace colibri::engine {
namespace {

using model_detail::MatrixKind;
using reference::DenseExpert;
using reference::ExpertMatrix;
using testing_util::CheckpointBuilder;
using testing_util::CheckpointShape;
using testing_util::ScratchDir;
using testing_util::Tensors;

// Relative error ||engine - reference||_2 / ||reference||_2 of one token's
// output allowed per exported dtype. The source is bf16, so:
//  - fp32: every bf16 value is an fp32; the weights are exact and only the
//    engine's fp32 accumulation (vs fp64) differs: ~2e-7 measured, 1e-5 allowed.
//  - bf16: the source bits are copied; same as fp32.
//  - fp16: a bf16 value (8 significant bits) is an fp16 whenever its magnitude
//    is at least 2^-17 (fp16 keeps 11 bits down to 2^-14, and its subnormals
//    step by 2^-24); smaller ones move by at most 2^-25, far below the
//    accumulation error here (weights are ~0.1). Same as fp32.
//  - int8: quantisation (symmetric per row, step max|row| / 127) moves each
//    weight by up to half a step. Every output element is checked against the
//    worst-case bound that propagates those half steps through the FFN
//    (Int8OutputBound: loose, ~3% of it is used); the norm is also held to
//    kInt8Tolerance: the rounding error of a uniform weight row has rms
//    step / sqrt(12), ~0.4% of the weights' rms, and three matrices of it
//    give ~0.5-1.3% at the output (1.27% max measured); 2.5% allowed.
//    Both are too coarse to see one bad weight, so int8 is also compared,
//    at kInt8RoundedTolerance, with the reference of the source weights
//    rounded by the format's documented rule (model.h: scale = max|row| / 127
//    in fp32, q = round-half-even(w / scale)), implemented here from that
//    rule: then only fp32 accumulation differs, as for the other dtypes.
constexpr double kFp32Tolerance = 1e-5;
constexpr double kBf16Tolerance = 1e-5;
constexpr double kFp16Tolerance = 1e-5;
constexpr double kInt8Tolerance = 2.5e-2;
constexpr double kInt8RoundedTolerance = 1e-5;
// Slack of the int8 element-wise bound for fp32 accumulation and the fp32
// int8 scale (relative to the token's output norm).
constexpr double kInt8BoundSlack = 1e-5;
// Tokens whose k-th and (k+1)-th reference probabilities are closer than this
// are skipped: the fp32 router may rank a near-tie either way.
constexpr double kMinTopKMargin = 1e-5;
// sup |silu'(z)| = 1.0998...: the Lipschitz constant of SiLU.
constexpr double kSiluLipschitz = 1.1;
// Activations uniform in [-3, 3): gate/up pre-activations of about unit
// standard deviation (weights are uniform / sqrt(fan_in)), so SiLU is used
// beyond its linear part and router logits spread.
constexpr float kActivationScale = 3.0f;
constexpr size_t kTokens = 8;
constexpr int kPasses = 2;  // every layer twice: the second pass finds some experts resident

double ToleranceOf(DType dtype) {
  switch (dtype) {
    case DType::kFp32:
      return kFp32Tolerance;
    case DType::kBf16:
      return kBf16Tolerance;
    case DType::kFp16:
      return kFp16Tolerance;
    case DType::kInt8:
      break;
  }
  return kInt8Tolerance;
}

// One source model family: its config.json, tensor naming and MoE layers.
struct Family {
  const char* name;
  bool mixtral_names;
  CheckpointShape shape;
  uint32_t top_k;
  bool renormalize;                 // what the config says (mixtral: always)
  std::vector<uint32_t> moe_layers;  // source layer ids export must pick
  uint32_t pad_intermediate;
  nlohmann::json config;
};

std::vector<Family> Families() {
  std::vector<Family> families;
  // Mixtral: every layer MoE, top-2 of 8, always renormalised.
  families.push_back({"mixtral", true, {8, 64, 48, true}, 2, true, {0, 1}, 1,
                      nlohmann::json{{"model_type", "mixtral"},
                                     {"hidden_size", 64},
                                     {"num_hidden_layers", 2},
                                     {"num_local_experts", 8},
                                     {"num_experts_per_tok", 2},
                                     {"intermediate_size", 48}}});
  // Qwen3-MoE: layer 1 dense (mlp_only_layers), top-4 of 16, not renormalised.
  families.push_back({"qwen3_moe", false, {16, 64, 32, true}, 4, false, {0, 2}, 1,
                      nlohmann::json{{"model_type", "qwen3_moe"},
                                     {"hidden_size", 64},
                                     {"num_hidden_layers", 3},
                                     {"mlp_only_layers", {1}},
                                     {"num_experts", 16},
                                     {"num_experts_per_tok", 4},
                                     {"moe_intermediate_size", 32},
                                     {"intermediate_size", 999},
                                     {"norm_topk_prob", false}}});
  // DeepSeek-V2: layer 0 dense, top-2 of 8 renormalised, I = 40 zero-padded to 48.
  families.push_back({"deepseek_v2", false, {8, 64, 40, true}, 2, true, {1, 2}, 16,
                      nlohmann::json{{"model_type", "deepseek_v2"},
                                     {"hidden_size", 64},
                                     {"num_hidden_layers", 3},
                                     {"first_k_dense_replace", 1},
                                     {"moe_layer_freq", 1},
                                     {"n_routed_experts", 8},
                                     {"n_shared_experts", 1},
                                     {"num_experts_per_tok", 2},
                                     {"moe_intermediate_size", 40},
                                     {"intermediate_size", 128},
                                     {"norm_topk_prob", true},
                                     {"topk_method", "greedy"},
                                     {"scoring_func", "softmax"},
                                     {"routed_scaling_factor", 1.0}}});
  return families;
}

// The engine's routing of the last batch, and the streaming counts of all.
struct Recorder : EngineObserver {
  std::vector<uint32_t> ids;
  std::vector<float> weights;
  uint64_t nvme_reads = 0;
  uint64_t staged = 0;
  void OnRouting(const RoutingDecision& d) override {
    ids.assign(d.expert_ids, d.expert_ids + d.tokens * d.top_k);
    weights.assign(d.weights, d.weights + d.tokens * d.top_k);
  }
  void OnLayerBatch(const LayerBatchReport& r) override {
    nvme_reads += r.nvme_reads;
    staged += r.staged;
  }
};

// An expert's source weights rounded to int8 by the format's rule (model.h),
// written here from that rule rather than taken from the exporter: per row,
// scale = fp32(max|w| / 127), q = round-half-even(fp32(w / scale)) clamped to
// +-127 (a zero row: scale 0). At() is q x scale, exact in fp64.
class RoundedInt8Expert {
 public:
  explicit RoundedInt8Expert(const DenseExpert& e) : hidden_(e.hidden), intermediate_(e.intermediate) {
    for (ExpertMatrix which : {ExpertMatrix::kGate, ExpertMatrix::kUp, ExpertMatrix::kDown}) {
      const bool down = which == ExpertMatrix::kDown;
      const uint32_t rows = down ? e.hidden : e.intermediate, cols = down ? e.intermediate : e.hidden;
      const auto w = [&](uint32_t r, uint32_t c) { return static_cast<float>(e.At(which, r, c)); };  // exact
      Matrix& m = matrices_[static_cast<size_t>(which)];
      for (uint32_t r = 0; r < rows; ++r) {
        float max_abs = 0;
        for (uint32_t c = 0; c < cols; ++c) max_abs = std::max(max_abs, std::fabs(w(r, c)));
        const float scale = max_abs / 127.0f;
        m.scales.push_back(scale);
        for (uint32_t c = 0; c < cols; ++c) {
          const float ratio = scale > 0 ? w(r, c) / scale : 0.0f;
          m.q.push_back(static_cast<int8_t>(std::nearbyint(std::clamp(ratio, -127.0f, 127.0f))));
        }
      }
    }
  }
  double At(ExpertMatrix which, uint32_t row, uint32_t col) const {
    const Matrix& m = matrices_[static_cast<size_t>(which)];
    const uint32_t cols = which == ExpertMatrix::kDown ? intermediate_ : hidden_;
    return static_cast<double>(m.q[uint64_t{row} * cols + col]) * m.scales[row];
  }
  std::vector<double> Ffn(const float* x) const {
    const auto weight = [&](ExpertMatrix which, uint32_t row, uint32_t col) { return At(which, row, col); };
    return reference::ReferenceSwiGluFfn(hidden_, intermediate_, weight, x, 1);
  }

 private:
  struct Matrix {
    std::vector<int8_t> q;  // row-major
    std::vector<float> scales;
  };
  uint32_t hidden_;
  uint32_t intermediate_;
  Matrix matrices_[3];  // gate, up, down
};

// A layer's source tensors, as the reference reads them.
struct SourceLayer {
  const std::vector<float>* router = nullptr;  // experts x hidden
  std::vector<DenseExpert> experts;
  std::vector<RoundedInt8Expert> rounded;  // the same, int8-rounded (compared for int8 only)
};

SourceLayer SourceLayerOf(const Tensors& tensors, const CheckpointBuilder& names, const CheckpointShape& shape,
                          uint32_t layer_id) {
  SourceLayer layer;
  layer.router = &tensors.at(names.RouterName(layer_id)).values;
  for (uint32_t e = 0; e < shape.experts; ++e) {
    const auto values = [&](MatrixKind kind) { return tensors.at(names.ExpertName(layer_id, e, kind)).values.data(); };
    layer.experts.push_back(DenseExpert{values(MatrixKind::kGate), values(MatrixKind::kUp), values(MatrixKind::kDown),
                                        shape.hidden, shape.intermediate});
    layer.rounded.emplace_back(layer.experts.back());
  }
  return layer;
}

// Worst-case |FFN(quantised weights) - FFN(source weights)| per output element
// for one token x, with every weight off by up to half its row's int8 step
// s = max|row| / 127 (ExportModel's symmetric per-row quantisation):
//   gate/up row i: |dg_i| <= s_i / 2 * ||x||_1 (likewise du_i);
//   h_i = silu(g_i) u_i: |dh_i| <= L |dg_i| (|u_i| + |du_i|) + |silu(g_i)| |du_i|;
//   down row r: |dy_r| <= sum_i |Wd_ri| |dh_i| + s_r / 2 * sum_i (|h_i| + |dh_i|).
std::vector<double> Int8OutputBound(const DenseExpert& e, const float* x) {
  // The scale is stored as fp32: allow its rounding.
  const auto half_step = [&](ExpertMatrix which, uint32_t row, uint32_t cols) {
    double max = 0;
    for (uint32_t c = 0; c < cols; ++c) max = std::max(max, std::fabs(e.At(which, row, c)));
    return max / 127 / 2 * (1 + 1e-6);
  };
  double x_l1 = 0;
  for (uint32_t c = 0; c < e.hidden; ++c) x_l1 += std::fabs(x[c]);
  std::vector<double> h(e.intermediate), dh(e.intermediate);
  for (uint32_t i = 0; i < e.intermediate; ++i) {
    double g = 0, u = 0;
    for (uint32_t c = 0; c < e.hidden; ++c) {
      g += e.At(ExpertMatrix::kGate, i, c) * x[c];
      u += e.At(ExpertMatrix::kUp, i, c) * x[c];
    }
    const double dg = half_step(ExpertMatrix::kGate, i, e.hidden) * x_l1;
    const double du = half_step(ExpertMatrix::kUp, i, e.hidden) * x_l1;
    h[i] = reference::SiluF64(g) * u;
    dh[i] = kSiluLipschitz * dg * (std::fabs(u) + du) + std::fabs(reference::SiluF64(g)) * du;
  }
  std::vector<double> bound(e.hidden);
  for (uint32_t r = 0; r < e.hidden; ++r) {
    double propagated = 0, own = 0;
    for (uint32_t i = 0; i < e.intermediate; ++i) {
      propagated += std::fabs(e.At(ExpertMatrix::kDown, r, i)) * dh[i];
      own += std::fabs(h[i]) + dh[i];
    }
    bound[r] = propagated + half_step(ExpertMatrix::kDown, r, e.intermediate) * own;
  }
  return bound;
}

double Norm(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x * x;
  return std::sqrt(sum);
}

struct Measured {
  int compared = 0;
  int skipped = 0;  // near-ties
  double max_relative = 0;
  double max_bound_fraction = 0;  // int8: max |error| / bound over elements
  double max_rounded_relative = 0;  // int8: relative error vs the rounded source
};

// Forward over every layer (kPasses times) and the comparison per token.
void CheckEngine(LocalEngine& engine, const Family& family, const std::vector<SourceLayer>& source, DType dtype,
                 Measured* measured) {
  const ModelConfig& c = engine.model.config();
  Recorder recorder;
  engine.moe->set_observer(&recorder);
  for (int pass = 0; pass < kPasses; ++pass) {
    for (uint32_t layer = 0; layer < c.layers(); ++layer) {
      SCOPED_TRACE("pass " + std::to_string(pass) + " layer " + std::to_string(layer));
      std::vector<float> x = reference::RandomActivations(kTokens * c.hidden, 1000 * (pass + 1) + layer);
      for (float& v : x) v *= kActivationScale;
      std::vector<float> out(kTokens * c.hidden);
      const Status forward = engine.moe->Forward(layer, x.data(), kTokens, out.data());
      ASSERT_TRUE(forward.ok()) << forward.message();
      const SourceLayer& src = source[layer];
      const std::vector<double> logits =
          reference::ReferenceGateGemv(src.router->data(), nullptr, c.experts, c.hidden, x.data(), kTokens);
      for (size_t t = 0; t < kTokens; ++t) {
        const float* xt = x.data() + t * c.hidden;
        const float* got = out.data() + t * c.hidden;
        const reference::ReferenceRouting route =
            reference::ReferenceRouteTopK(&logits[t * c.experts], c.experts, family.top_k, family.renormalize);
        if (route.margin < kMinTopKMargin) {
          ++measured->skipped;
          continue;
        }
        const auto slot = recorder.ids.begin() + static_cast<std::ptrdiff_t>(t * c.top_k);
        ASSERT_EQ(std::vector<uint32_t>(slot, slot + c.top_k), route.ids) << "token " << t;
        std::vector<double> want(c.hidden, 0.0), bound(c.hidden, 0.0), want_rounded(c.hidden, 0.0);
        for (uint32_t s = 0; s < c.top_k; ++s) {
          EXPECT_NEAR(recorder.weights[t * c.top_k + s], route.weights[s], 1e-6) << "token " << t << " slot " << s;
          const DenseExpert& expert = src.experts[route.ids[s]];
          const std::vector<double> y = reference::ReferenceExpertFfn(expert, xt, 1);
          for (uint32_t h = 0; h < c.hidden; ++h) want[h] += route.weights[s] * y[h];
          if (dtype != DType::kInt8) continue;
          const std::vector<double> b = Int8OutputBound(expert, xt);
          const std::vector<double> yq = src.rounded[route.ids[s]].Ffn(xt);
          for (uint32_t h = 0; h < c.hidden; ++h) {
            bound[h] += route.weights[s] * b[h];
            want_rounded[h] += route.weights[s] * yq[h];
          }
        }
        const double relative = reference::RelativeNormError(got, want);
        EXPECT_LE(relative, ToleranceOf(dtype)) << "token " << t;
        measured->max_relative = std::max(measured->max_relative, relative);
        if (dtype == DType::kInt8) {
          const double rounded = reference::RelativeNormError(got, want_rounded);
          EXPECT_LE(rounded, kInt8RoundedTolerance) << "token " << t << " (vs the int8-rounded source)";
          measured->max_rounded_relative = std::max(measured->max_rounded_relative, rounded);
          const double slack = kInt8BoundSlack * Norm(want);
          for (uint32_t h = 0; h < c.hidden; ++h) {
            const double error = std::fabs(got[h] - want[h]);
            EXPECT_LE(error, bound[h] + slack) << "token " << t << " element " << h;
            measured->max_bound_fraction = std::max(measured->max_bound_fraction, error / (bound[h] + slack));
          }
        }
        ++measured->compared;
      }
    }
  }
  engine.moe->set_observer(nullptr);
  EXPECT_GT(recorder.nvme_reads, 0u);
  EXPECT_GT(recorder.staged, 0u) << "L1/L2 budgets meant to force streaming through staging slots";
}

class EngineExportReferenceTest : public ::testing::TestWithParam<std::tuple<size_t, DType>> {};

TEST_P(EngineExportReferenceTest, ForwardMatchesFp64ReferenceOfTheSourceCheckpoint) {
  const Family family = Families()[std::get<0>(GetParam())];
  const DType dtype = std::get<1>(GetParam());
  ScratchDir scratch;
  const std::string checkpoint = scratch.Path("checkpoint");
  std::filesystem::create_directories(checkpoint);
  testing_util::WriteText(checkpoint + "/config.json", family.config.dump(2));
  CheckpointBuilder builder("BF16", family.mixtral_names, family.shape, 20240 + std::get<0>(GetParam()));
  const Tensors tensors = builder.Build(family.moe_layers);
  testing_util::WriteSafetensors(checkpoint + "/model.safetensors", tensors);

  ExportOptions options;
  options.checkpoint_dir = checkpoint;
  options.dtype = dtype;
  options.pad_intermediate = family.pad_intermediate;
  const std::string model_dir = scratch.Path("model");
  auto report = ExportModel(options, model_dir);
  ASSERT_TRUE(report.ok()) << report.status().message();
  ASSERT_EQ(report->source_dtype, DType::kBf16);
  ASSERT_EQ(report->config.dtype, dtype);
  ASSERT_EQ(report->config.layer_ids, family.moe_layers);
  ASSERT_EQ(report->config.top_k, family.top_k);
  ASSERT_EQ(report->config.norm_topk_prob, family.renormalize);
  ASSERT_EQ(report->config.source_intermediate, family.shape.intermediate);

  std::vector<SourceLayer> source;
  for (uint32_t id : family.moe_layers) source.push_back(SourceLayerOf(tensors, builder, family.shape, id));

  const uint64_t block = report->config.layout.block_bytes;
  for (const char* storage : {"pread", "uring"}) {
    SCOPED_TRACE(storage);
    LocalEngineOptions o;
    o.model_dir = model_dir;
    o.verify = ModelVerify::kFull;
    o.storage = storage;
    o.queue_depth = 4;
    o.threads = 2;
    o.engine.l1_bytes = block;      // one expert
    o.engine.l2_bytes = 2 * block;  // two experts: a batch union of up to 8-16 streams
    o.engine.staging_slots = 2;
    auto engine = LocalEngine::Open(o);
    if (!engine.ok() && std::string(storage) == "uring" && engine.status().code() == StatusCode::kUnsupported) {
      std::printf("[ skipped  ] uring storage: %s\n", engine.status().message().c_str());
      continue;
    }
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    Measured measured;
    CheckEngine(**engine, family, source, dtype, &measured);
    if (HasFatalFailure()) return;
    std::printf("[ measured ] %s %s %s: %d tokens compared, %d near-ties skipped, max relative error %.3g",
                family.name, DTypeName(dtype), storage, measured.compared, measured.skipped, measured.max_relative);
    if (dtype == DType::kInt8) {
      std::printf(", max |error| / bound %.3g, max relative error vs the int8-rounded source %.3g",
                  measured.max_bound_fraction, measured.max_rounded_relative);
    }
    std::printf("\n");
    EXPECT_GE(measured.compared, static_cast<int>(kPasses * kTokens * family.moe_layers.size()) - 4);
  }
}

INSTANTIATE_TEST_SUITE_P(
    FamiliesAndDtypes, EngineExportReferenceTest,
    ::testing::Combine(::testing::Range<size_t>(0, 3),
                       ::testing::Values(DType::kFp32, DType::kBf16, DType::kFp16, DType::kInt8)),
    [](const ::testing::TestParamInfo<std::tuple<size_t, DType>>& info) {
      return std::string(Families()[std::get<0>(info.param)].name) + "_" + DTypeName(std::get<1>(info.param));
    });

}  // namespace
}  // namespace colibri::engine
