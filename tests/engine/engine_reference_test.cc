// The whole engine path (model on disk -> pread storage -> L2 -> CpuCompute,
// routed by MoeEngine::Forward) against a naive fp64 reference of routing and
// expert FFNs, for every dtype, on synthetic models.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

#include "colibri/engine/cpu_compute.h"
#include "colibri/engine/model.h"
#include "colibri/engine/moe_engine.h"
#include "model_test_util.h"
#include "reference_ffn.h"

namespace colibri::engine {
namespace {

// Relative error of the output vector norm allowed per dtype: the engine and
// the reference see the same (dequantised) weights, so only fp32 vs fp64
// accumulation differs.
constexpr double kTolerance = 1e-5;

struct CapturedRouting : EngineObserver {
  std::vector<uint32_t> ids;
  void OnRouting(const RoutingDecision& d) override { ids.assign(d.expert_ids, d.expert_ids + d.tokens * d.top_k); }
};

std::vector<std::byte> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  std::vector<std::byte> out(bytes.size());
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

class EngineReferenceTest : public ::testing::TestWithParam<DType> {};

TEST_P(EngineReferenceTest, ForwardMatchesNaiveFp64Reference) {
  testing_util::ScratchDir dir;
  ModelConfig shape;
  shape.model_name = "reference";
  shape.dtype = GetParam();
  shape.layer_ids = {0, 3};
  shape.experts = 8;
  shape.top_k = 2;
  shape.norm_topk_prob = true;
  shape.hidden = 64;
  shape.intermediate = 96;
  ASSERT_TRUE(SynthModel(shape, 11, dir.Path("m")).ok());
  auto model = OpenModel(dir.Path("m"), true);
  ASSERT_TRUE(model.ok()) << model.status().message();
  const ModelConfig& c = model->config();

  RealEventLoop loop;
  StorageOptions storage_options;
  storage_options.clock = &loop;
  auto storage = OpenPreadStorage(model->experts_path(), storage_options);
  ASSERT_TRUE(storage.ok()) << storage.status().message();
  auto transfer = MakeCpuTransfer(&loop);
  auto compute = CpuCompute::Create(CpuComputeOptions{2, std::nullopt});
  ASSERT_TRUE(compute.ok());
  CapturedRouting routing;
  auto engine = MoeEngine::Create(EngineModelOf(*model), EngineOptions{0, 4 * c.layout.block_bytes, "lru", "lru", 2},
                                  EngineBackends{&loop, storage->get(), transfer.get(), compute->get(), &routing});
  ASSERT_TRUE(engine.ok()) << engine.status().message();

  const std::vector<std::byte> experts_bin = ReadAll(model->experts_path());
  const size_t tokens = 6;
  int compared = 0;
  for (uint32_t layer = 0; layer < c.layers(); ++layer) {
    const std::vector<float> x = reference::RandomActivations(tokens * c.hidden, 100 + layer);
    std::vector<float> out(tokens * c.hidden);
    ASSERT_TRUE((*engine)->Forward(layer, x.data(), tokens, out.data()).ok());
    const std::vector<double> logits =
        reference::ReferenceGateGemv(model->GateWeight(layer), model->GateBias(layer), c.experts, c.hidden, x.data(), tokens);
    for (size_t t = 0; t < tokens; ++t) {
      const reference::ReferenceRouting r =
          reference::ReferenceRouteTopK(&logits[t * c.experts], c.experts, c.top_k, /*renormalize=*/true);
      const std::vector<uint32_t>& ids = r.ids;
      const std::vector<double>& weights = r.weights;
      if (r.margin < 1e-5) continue;  // a near-tie: fp32 and fp64 may rank differently
      ASSERT_EQ(std::vector<uint32_t>(routing.ids.begin() + t * c.top_k, routing.ids.begin() + (t + 1) * c.top_k), ids);
      std::vector<double> want(c.hidden, 0.0);
      for (uint32_t s = 0; s < c.top_k; ++s) {
        const ExpertView view{&c.layout, experts_bin.data() + model->ExpertOffset(layer, ids[s])};
        const std::vector<double> y = reference::ReferenceExpertFfn(view, x.data() + t * c.hidden, 1);
        for (uint32_t h = 0; h < c.hidden; ++h) want[h] += weights[s] * y[h];
      }
      EXPECT_LE(reference::RelativeNormError(out.data() + t * c.hidden, want), kTolerance)
          << DTypeName(GetParam()) << " layer " << layer << " token " << t;
      ++compared;
    }
  }
  EXPECT_GE(compared, 10);
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, EngineReferenceTest,
                         ::testing::Values(DType::kFp32, DType::kBf16, DType::kFp16, DType::kInt8),
                         [](const ::testing::TestParamInfo<DType>& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace colibri::engine
