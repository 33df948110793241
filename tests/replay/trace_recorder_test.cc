#include "colibri/replay/trace_recorder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "colibri/traces/reader.h"

namespace colibri::replay {
namespace {

engine::ModelConfig SmallConfig() {
  engine::ModelConfig c;
  c.model_name = "tiny";
  c.dtype = engine::DType::kFp32;
  c.layer_ids = {0, 2};
  c.experts = 4;
  c.top_k = 2;
  c.hidden = 3;
  c.intermediate = 8;
  c.layout = engine::ExpertLayout::Make(c.dtype, c.hidden, c.intermediate);
  return c;
}

TEST(TraceRecorderTest, SplitsLayerBatchesIntoRecordsPerRequest) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("colibri-recorder-" + std::to_string(::getpid()) + ".ctrace")).string();
  RecorderOptions options{true, true, {}};
  auto recorder = TraceRecorder::Create(path, SmallConfig(), traces::Provenance{}, options);
  ASSERT_TRUE(recorder.ok()) << recorder.status().message();
  // A decode pass with rows of requests 7, 9, 7 (positions 5, 3, 6).
  (*recorder)->BeginPass(4, false, {{7, 5}, {9, 3}, {7, 6}});
  const uint32_t ids[] = {0, 1, 2, 3, 1, 3};
  const float weights[] = {0.6f, 0.4f, 0.5f, 0.5f, 0.9f, 0.1f};
  std::vector<float> logits(3 * 4, 0.25f), hidden(3 * 3, 1.5f);
  (*recorder)->OnRouting(engine::RoutingDecision{1, 3, 2, 4, 3, ids, weights, logits.data(), hidden.data()});
  ASSERT_TRUE((*recorder)->Close().ok());

  auto reader = traces::TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  EXPECT_EQ((*reader)->header().shape.moe_layer_ids, (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ((*reader)->header().shape.expert_bytes[0], SmallConfig().layout.block_bytes);
  traces::TraceRecord r;
  ASSERT_TRUE((*reader)->Next(&r).value());
  EXPECT_EQ(r.request_id, 7u);
  EXPECT_EQ(r.pass_id, 4u);
  EXPECT_EQ(r.layer, 2u);  // layer index 1 is MoE layer id 2
  EXPECT_EQ(r.positions, (std::vector<uint64_t>{5, 6}));
  EXPECT_EQ(r.expert_ids, (std::vector<uint32_t>{0, 1, 1, 3}));
  EXPECT_EQ(r.router_logits.size(), 8u);
  EXPECT_EQ(r.hidden_states.size(), 2u * 3 * sizeof(float));
  ASSERT_TRUE((*reader)->Next(&r).value());
  EXPECT_EQ(r.request_id, 9u);
  EXPECT_EQ(r.expert_ids, (std::vector<uint32_t>{2, 3}));
  EXPECT_FALSE((*reader)->Next(&r).value());
  std::filesystem::remove(path);
}

TEST(TraceRecorderTest, RowCountMismatchIsAnError) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("colibri-recorder-bad-" + std::to_string(::getpid()) + ".ctrace")).string();
  auto recorder = TraceRecorder::Create(path, SmallConfig(), traces::Provenance{}, RecorderOptions{});
  ASSERT_TRUE(recorder.ok());
  (*recorder)->BeginPass(0, true, {{1, 0}});
  const uint32_t ids[] = {0, 1, 2, 3};
  const float weights[] = {0.5f, 0.5f, 0.5f, 0.5f};
  (*recorder)->OnRouting(engine::RoutingDecision{0, 2, 2, 4, 3, ids, weights, nullptr, nullptr});
  EXPECT_EQ((*recorder)->status().code(), StatusCode::kInternal);
  EXPECT_FALSE((*recorder)->Close().ok());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace colibri::replay
