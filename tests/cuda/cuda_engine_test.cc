// The engine on the GPU: LocalEngine with CudaTransfer and CudaCompute
// against the same engine on CpuTransfer and CpuCompute (the oracle).
// Forward's outputs must be bit-identical (cuda_compute.h says why they can
// be) for every dtype, on synthetic models and on a model exported from a
// safetensors checkpoint, whatever the L1 and L2 budgets (the placement
// invariant on the device: experts computed from L1, or staged through the
// device staging slot, or streamed through staging slots). Without a GPU or
// driver every test skips with ProbeCudaDevice's reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "../engine/model_test_util.h"
#include "../engine/safetensors_test_util.h"
#include "colibri/cuda/cuda_compute.h"
#include "colibri/cuda/cuda_transfer.h"
#include "colibri/cuda/device.h"
#include "cuda_test_util.h"
#include "colibri/engine/local_engine.h"

namespace colibri::cuda {
namespace {

using engine::DType;
using engine::testing_util::ScratchDir;

struct Budget {
  uint64_t l1_blocks;
  uint64_t l2_blocks;
};

// Every L1/L2 arrangement the engine has: no tiers (staging only), L2 only,
// a small L1 over L2, and tiers that hold the whole model.
constexpr Budget kBudgets[] = {{0, 0}, {0, 3}, {2, 5}, {64, 64}};

struct ForwardRun {
  std::vector<float> out;
  uint64_t device_staged = 0;
  uint64_t l1_hits = 0;
};

struct Counter : engine::EngineObserver {
  void OnLayerBatch(const engine::LayerBatchReport& r) override {
    device_staged += r.device_staged;
    l1_hits += r.l1_hits;
  }
  uint64_t device_staged = 0;
  uint64_t l1_hits = 0;
};

// Two passes over every MoE layer, a prefill of 9 tokens then a decode token,
// on the CPU or the CUDA backends.
Result<ForwardRun> Forward(const std::string& dir, bool on_gpu, Budget budget) {
  engine::LocalEngineOptions o;
  o.model_dir = dir;
  o.storage = "pread";
  COLIBRI_ASSIGN_OR_RETURN(engine::Model probe, engine::OpenModel(dir, false));
  const uint64_t block = probe.config().layout.block_bytes;
  o.engine.l1_bytes = budget.l1_blocks * block;
  o.engine.l2_bytes = budget.l2_blocks * block;
  o.engine.staging_slots = 2;
  if (on_gpu) {
    o.make_transfer = [](const engine::Clock* clock) -> Result<std::unique_ptr<engine::TransferBackend>> {
      COLIBRI_ASSIGN_OR_RETURN(auto transfer, CudaTransfer::Create(0, clock));
      return std::unique_ptr<engine::TransferBackend>(std::move(transfer));
    };
    o.make_compute = []() -> Result<std::unique_ptr<engine::ComputeBackend>> {
      COLIBRI_ASSIGN_OR_RETURN(auto compute, CudaCompute::Create(0, CudaComputeOptions{/*keep_gate_weights=*/true}));
      return std::unique_ptr<engine::ComputeBackend>(std::move(compute));
    };
  }
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<engine::LocalEngine> e, engine::LocalEngine::Open(o));
  Counter counter;
  e->moe->set_observer(&counter);
  const uint32_t hidden = e->model.config().hidden;
  std::mt19937_64 rng(2026);
  ForwardRun run;
  for (size_t tokens : {size_t{9}, size_t{1}}) {
    std::vector<float> x(tokens * hidden), y(tokens * hidden);
    for (float& v : x) v = static_cast<float>(rng() % 2001) / 1000.0f - 1.0f;
    for (uint32_t layer = 0; layer < e->model.config().layers(); ++layer) {
      COLIBRI_RETURN_IF_ERROR(e->moe->Forward(layer, x.data(), tokens, y.data()));
      run.out.insert(run.out.end(), y.begin(), y.end());
    }
  }
  e->moe->set_observer(nullptr);
  run.device_staged = counter.device_staged;
  run.l1_hits = counter.l1_hits;
  return run;
}

// The CUDA engine's outputs equal the CPU engine's, bit for bit, for every budget.
void ExpectGpuMatchesCpu(const std::string& dir) {
  auto cpu = Forward(dir, /*on_gpu=*/false, Budget{0, 64});
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  for (const Budget& budget : kBudgets) {
    SCOPED_TRACE("L1 " + std::to_string(budget.l1_blocks) + " blocks, L2 " + std::to_string(budget.l2_blocks));
    auto gpu = Forward(dir, /*on_gpu=*/true, budget);
    ASSERT_TRUE(gpu.ok()) << gpu.status().message();
    ASSERT_EQ(gpu->out.size(), cpu->out.size());
    size_t differing = 0;
    float worst = 0.0f;
    for (size_t i = 0; i < cpu->out.size(); ++i) {
      if (std::memcmp(&gpu->out[i], &cpu->out[i], sizeof(float)) != 0) {
        ++differing;
        worst = std::max(worst, std::fabs(gpu->out[i] - cpu->out[i]));
      }
    }
    EXPECT_EQ(differing, 0u) << "elements not bit-identical to the CPU oracle (largest difference " << worst << ")";
    if (budget.l1_blocks == 0) {
      EXPECT_GT(gpu->device_staged, 0u) << "without L1 blocks go through the staging slot";
    }
    if (budget.l1_blocks == 64) {
      EXPECT_GT(gpu->l1_hits, 0u);
    }
  }
}

class CudaEngineTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { SKIP_WITHOUT_CUDA_DEVICE(); }
};

TEST_P(CudaEngineTest, SyntheticModelOutputsMatchTheCpuEngineWhateverThePlacement) {
  ScratchDir scratch;
  engine::ModelConfig shape = engine::testing_util::SmallShape(GetParam());
  shape.layer_ids = {0, 1, 2};
  shape.experts = 8;
  shape.hidden = 256;
  shape.intermediate = 96;
  const std::string dir = scratch.Path("model");
  auto made = engine::SynthModel(shape, 77, dir);
  ASSERT_TRUE(made.ok()) << made.status().message();
  ExpectGpuMatchesCpu(dir);
}

TEST_P(CudaEngineTest, ExportedModelOutputsMatchTheCpuEngineWhateverThePlacement) {
  ScratchDir scratch;
  const std::string checkpoint = scratch.Path("checkpoint");
  std::filesystem::create_directories(checkpoint);
  const nlohmann::json config{{"model_type", "mixtral"},  {"hidden_size", 64},        {"num_hidden_layers", 2},
                              {"num_local_experts", 8},   {"num_experts_per_tok", 2}, {"intermediate_size", 48}};
  engine::testing_util::WriteText(checkpoint + "/config.json", config.dump(2));
  engine::testing_util::CheckpointBuilder builder("BF16", /*mixtral_names=*/true, {8, 64, 48, true}, 4242);
  engine::testing_util::WriteSafetensors(checkpoint + "/model.safetensors", builder.Build({0, 1}));
  engine::ExportOptions options;
  options.checkpoint_dir = checkpoint;
  options.dtype = GetParam();
  const std::string dir = scratch.Path("model");
  auto report = engine::ExportModel(options, dir);
  ASSERT_TRUE(report.ok()) << report.status().message();
  ExpectGpuMatchesCpu(dir);
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaEngineTest, ::testing::ValuesIn(engine::testing_util::kAllDTypes),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(engine::DTypeName(info.param));
                         });

}  // namespace
}  // namespace colibri::cuda
