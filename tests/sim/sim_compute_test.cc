// SimCompute's roofline by hand-computed figures (see sim_compute.h).
#include "colibri/sim/sim_compute.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "colibri/sim/event_log.h"
#include "colibri/sim/sim_event_loop.h"

namespace colibri::sim {
namespace {

using engine::DType;
using engine::ExpertLayout;
using engine::TimeNs;

// An H100-like device: 1 PFLOP/s fp16, 2 POP/s int8, 67 TFLOP/s fp32, 3.35 TB/s, 5 us per launch.
ComputeProfile Gpu() {
  ComputeProfile p;
  p.id = "test-gpu";
  p.kind = ComputeKind::kGpu;
  p.peak_flops_per_s = {{"fp16", 1'000'000'000'000'000},
                        {"int8", 2'000'000'000'000'000},
                        {"fp32", 67'000'000'000'000}};
  p.memory_bytes_per_s = 3'350'000'000'000;
  p.launch_ns = 5'000;
  return p;
}

class SimComputeTest : public ::testing::Test {
 protected:
  std::unique_ptr<SimCompute> Make(const ComputeProfile& profile) {
    auto compute = MakeSimCompute(profile, SimComputeOptions{&loop_, &log_});
    EXPECT_TRUE(compute.ok()) << compute.status().message();
    return compute.ok() ? std::move(compute).value() : nullptr;
  }

  TimeNs FfnNs(const SimCompute& compute, DType dtype, size_t tokens) {
    auto ns = compute.ExpertFfnNs(ExpertLayout::Make(dtype, 1024, 4096), tokens);
    EXPECT_TRUE(ns.ok()) << ns.status().message();
    return ns.ok() ? ns.value() : -1;
  }

  SimEventLoop loop_;
  EventLog log_;
};

// fp16 expert, H = 1024, I = 4096: weights 3 x 1024 x 4096 x 2 = 25'165'824 B.
// 1 token: flops 6 x 1024 x 4096 = 25'165'824 -> 26 ns at 1 PFLOP/s; bytes
// 25'165'824 + 4 x (2 x 1024 + 2 x 4096) = 25'206'784 -> 7'525 ns at 3.35 TB/s:
// memory-bound, 5'000 + 7'525.
TEST_F(SimComputeTest, FewTokensAreMemoryBound) {
  auto compute = Make(Gpu());
  ASSERT_NE(compute, nullptr);
  EXPECT_EQ(FfnNs(*compute, DType::kFp16, 1), 12'525);
}

// 4096 tokens: flops 25'165'824 x 4096 -> 103'080 ns; bytes 25'165'824 +
// 4096 x 40'960 = 192'937'984 -> 57'594 ns: compute-bound, 5'000 + 103'080.
TEST_F(SimComputeTest, ManyTokensAreComputeBound) {
  auto compute = Make(Gpu());
  ASSERT_NE(compute, nullptr);
  EXPECT_EQ(FfnNs(*compute, DType::kFp16, 4096), 108'080);
}

// int8: weights 3 x 1024 x 4096 + scales 4 x (2 x 4096 + 1024) = 12'619'776 B,
// + 40'960 B of activations -> 3'780 ns; flops at 2 POP/s -> 13 ns.
TEST_F(SimComputeTest, Int8ReadsHalfTheBytesPlusScales) {
  auto compute = Make(Gpu());
  ASSERT_NE(compute, nullptr);
  EXPECT_EQ(FfnNs(*compute, DType::kInt8, 1), 8'780);
}

// Gate GEMV, 64 experts, H = 1024, 1 token: flops 131'072 -> 2 ns at 67 TFLOP/s;
// bytes 4 x (64 x 1024 + 1024 + 64) = 266'496 -> 80 ns.
TEST_F(SimComputeTest, GateGemvByHand) {
  auto compute = Make(Gpu());
  ASSERT_NE(compute, nullptr);
  auto ns = compute->GateGemvNs(64, 1024, 1);
  ASSERT_TRUE(ns.ok());
  EXPECT_EQ(ns.value(), 5'080);
  ASSERT_TRUE(compute->GateGemv(nullptr, nullptr, 64, 1024, nullptr, 1, nullptr).ok());
  EXPECT_EQ(loop_.Now(), 5'080);
}

// 1 GB at 3.35 TB/s: ceil(298'507.46) = 298'508 ns, plus the launch.
TEST_F(SimComputeTest, DenseLayerIsAMemoryBoundPass) {
  auto compute = Make(Gpu());
  ASSERT_NE(compute, nullptr);
  EXPECT_EQ(compute->DenseLayerNs(1'000'000'000), 303'508);
}

// A kernel moves the loop's clock by its cost and never touches its operands.
TEST_F(SimComputeTest, ExpertFfnKeepsTimeOnly) {
  auto compute = Make(Gpu());
  ASSERT_NE(compute, nullptr);
  EXPECT_STREQ(compute->caps().name, "sim");
  EXPECT_TRUE(compute->caps().device_memory);
  EXPECT_FALSE(compute->caps().reads_data);
  const ExpertLayout layout = ExpertLayout::Make(DType::kFp16, 1024, 4096);
  std::vector<float> y(1024, 7.0f);
  loop_.WaitUntil(1'000);
  ASSERT_TRUE(compute->ExpertFfn(engine::ExpertView{&layout, nullptr}, nullptr, 1, y.data()).ok());
  EXPECT_EQ(loop_.Now(), 1'000 + 12'525);
  for (float v : y) ASSERT_EQ(v, 7.0f);
  ASSERT_TRUE(compute->ExpertFfn(engine::ExpertView{&layout, nullptr}, nullptr, 0, y.data()).ok());  // no tokens
  EXPECT_EQ(loop_.Now(), 1'000 + 12'525);
  EXPECT_EQ(compute->counters().kernels, 1u);
  EXPECT_EQ(compute->counters().busy_ns, 12'525);
  EXPECT_EQ(log_.events(), 1u);
}

TEST_F(SimComputeTest, MissingDtypeIsAnErrorNamingProfileAndDtype) {
  auto compute = Make(Gpu());
  ASSERT_NE(compute, nullptr);
  const ExpertLayout layout = ExpertLayout::Make(DType::kBf16, 64, 128);
  const Status status = compute->ExpertFfn(engine::ExpertView{&layout, nullptr}, nullptr, 1, nullptr);
  EXPECT_EQ(status.code(), StatusCode::kUnsupported);
  EXPECT_NE(status.message().find("test-gpu"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("bf16"), std::string::npos) << status.message();
  EXPECT_EQ(loop_.Now(), 0);
  EXPECT_EQ(compute->ExpertFfn(engine::ExpertView{}, nullptr, 1, nullptr).code(), StatusCode::kInvalidArgument);
}

TEST_F(SimComputeTest, CpuProfileHasNoDeviceMemory) {
  ComputeProfile cpu = Gpu();
  cpu.kind = ComputeKind::kCpu;
  auto compute = Make(cpu);
  ASSERT_NE(compute, nullptr);
  EXPECT_FALSE(compute->caps().device_memory);
}

TEST_F(SimComputeTest, AttentionIsARooflineWithoutALaunch) {
  auto compute = Make(Gpu());
  ASSERT_NE(compute, nullptr);
  // Memory-bound: 33.5 MB of KV at 3.35 TB/s = 10,000 ns; 1 GFLOP at 67 TFLOP/s = 14,926 ns (rounded up).
  EXPECT_EQ(compute->AttentionNs(33'500'000, 0).value(), 10'000);
  EXPECT_EQ(compute->AttentionNs(33'500'000, 1'000'000'000).value(), 14'926);
  EXPECT_EQ(compute->AttentionNs(0, 0).value(), 0);
  EXPECT_EQ(loop_.Now(), 0);  // a figure, not a kernel: the clock does not move
  ComputeProfile no_fp32 = Gpu();
  no_fp32.peak_flops_per_s.erase("fp32");
  auto without = Make(no_fp32);
  ASSERT_NE(without, nullptr);
  EXPECT_EQ(without->AttentionNs(1, 1).status().code(), StatusCode::kUnsupported);
}

TEST(SimComputeFactoryTest, RejectsWhatItCannotModel) {
  SimEventLoop loop;
  EXPECT_EQ(MakeSimCompute(Gpu(), SimComputeOptions{}).status().code(), StatusCode::kInvalidArgument);
  ComputeProfile bad = Gpu();
  bad.memory_bytes_per_s = 0;
  auto result = MakeSimCompute(bad, SimComputeOptions{&loop, nullptr});
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("compute profile 'test-gpu': memory_bytes_per_s"), std::string::npos);
  bad = Gpu();
  bad.peak_flops_per_s["bf16"] = 0;
  EXPECT_FALSE(MakeSimCompute(bad, SimComputeOptions{&loop, nullptr}).ok());
}

}  // namespace
}  // namespace colibri::sim
