// A run recorded from the engine replays through the engine: with the
// recorded routing and with the router recomputed (on the recorded hidden
// states, or on the recorded logits alone), the re-recorded selections equal
// the original ones, and with recorded hidden states the MoE outputs are
// bit-identical to the original run's.
#include "colibri/replay/engine_replay.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "colibri/engine/local_engine.h"
#include "colibri/traces/reader.h"

namespace colibri::replay {
namespace {

namespace fs = std::filesystem;

class EngineReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("colibri-engine-replay-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    engine::ModelConfig shape;
    shape.dtype = engine::DType::kBf16;
    shape.layer_ids = {1, 3, 5};
    shape.experts = 16;
    shape.top_k = 4;
    shape.hidden = 64;
    shape.intermediate = 32;
    ASSERT_TRUE(engine::SynthModel(shape, 11, Path("model")).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // A LocalEngine whose L2 holds 6 experts (so there are misses and evictions).
  std::unique_ptr<engine::LocalEngine> Open() const {
    engine::LocalEngineOptions options;
    options.model_dir = Path("model");
    options.storage = "pread";
    auto probe = engine::OpenModel(Path("model"), false);
    EXPECT_TRUE(probe.ok());
    options.engine.l2_bytes = 6 * probe.value().config().layout.block_bytes;
    auto e = engine::LocalEngine::Open(options);
    EXPECT_TRUE(e.ok()) << e.status().message();
    return e.ok() ? std::move(e).value() : nullptr;
  }

  // Records 2 requests: a prefill of 5 tokens each, then 4 decode passes over both.
  // Returns every layer batch's output.
  std::vector<std::vector<float>> Record(const std::string& trace, const RecorderOptions& options) const {
    auto e = Open();
    auto recorder = TraceRecorder::Create(trace, e->model.config(), traces::Provenance{}, options);
    EXPECT_TRUE(recorder.ok());
    e->moe->set_observer(recorder.value().get());
    std::mt19937_64 rng(3);
    std::vector<std::vector<float>> outputs;
    auto pass = [&](uint64_t pass_id, bool prefill, std::vector<BatchRow> rows) {
      const uint32_t hidden = e->model.config().hidden;
      recorder.value()->BeginPass(pass_id, prefill, rows);
      for (uint32_t layer = 0; layer < 3; ++layer) {
        std::vector<float> x(rows.size() * hidden), y(rows.size() * hidden);
        for (float& v : x) v = static_cast<float>(rng() % 2001) / 1000.0f - 1.0f;
        ASSERT_TRUE(e->moe->Forward(layer, x.data(), rows.size(), y.data()).ok());
        outputs.push_back(y);
      }
    };
    for (uint64_t r = 0; r < 2; ++r) {
      std::vector<BatchRow> rows;
      for (uint64_t p = 0; p < 5; ++p) rows.push_back({r, p, static_cast<uint32_t>(100 + p)});
      pass(r, true, rows);
    }
    for (uint64_t step = 0; step < 4; ++step) pass(2 + step, false, {{0, 5 + step, 7}, {1, 5 + step, 8}});
    EXPECT_TRUE(recorder.value()->Close().ok());
    return outputs;
  }

  // Replays `trace` through a fresh engine, re-recording to `again`; returns every batch's output.
  Result<std::vector<std::vector<float>>> Replay(const std::string& trace, RoutingMode mode, const std::string& again) {
    auto e = Open();
    COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<traces::TraceReader> reader, traces::TraceReader::Open(trace));
    COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<TraceRecorder> recorder,
                             TraceRecorder::Create(again, e->model.config(), traces::Provenance{}, RecorderOptions{}));
    COLIBRI_ASSIGN_OR_RETURN(EngineReplayer replayer,
                             EngineReplayer::Create(e->moe.get(), reader->header().shape, mode, recorder.get()));
    LayerBatchReader batches(reader.get());
    LayerBatch batch;
    std::vector<std::vector<float>> outputs;
    while (true) {
      COLIBRI_ASSIGN_OR_RETURN(const bool more, batches.Next(&batch));
      if (!more) break;
      engine::LayerBatchReport report;
      COLIBRI_RETURN_IF_ERROR(replayer.Run(batch, &report));
      outputs.push_back(replayer.output());
    }
    COLIBRI_RETURN_IF_ERROR(recorder->Close());
    return outputs;
  }

  // Every record's (request, pass, layer, positions, token ids, expert ids, gate weights).
  static std::vector<traces::TraceRecord> Selections(const std::string& trace) {
    std::vector<traces::TraceRecord> records;
    auto reader = traces::TraceReader::Open(trace);
    EXPECT_TRUE(reader.ok());
    traces::TraceRecord r;
    while (reader.value()->Next(&r).value()) {
      r.router_logits.clear();
      r.hidden_states.clear();
      records.push_back(r);
    }
    return records;
  }

  fs::path dir_;
};

TEST_F(EngineReplayTest, RecordedAndRecomputedRoutingReproduceTheSelections) {
  const std::string trace = Path("run.ctrace");
  const auto original = Record(trace, RecorderOptions{true, true, {}});
  const auto recorded = Selections(trace);
  ASSERT_EQ(recorded.size(), 2u * 3 + 4u * 2 * 3);  // prefill: 1 record per layer; decode: 2 per layer
  for (RoutingMode mode : {RoutingMode::kRecorded, RoutingMode::kRecompute}) {
    const std::string again = Path("again.ctrace");
    auto outputs = Replay(trace, mode, again);
    ASSERT_TRUE(outputs.ok()) << outputs.status().message();
    EXPECT_EQ(Selections(again), recorded);
    EXPECT_EQ(outputs.value(), original);  // hidden states recorded in fp32: bit-identical outputs
  }
}

TEST_F(EngineReplayTest, RecomputeFromLogitsAloneReproducesTheSelections) {
  const std::string trace = Path("logits.ctrace");
  Record(trace, RecorderOptions{true, false, {}});
  auto outputs = Replay(trace, RoutingMode::kRecompute, Path("again.ctrace"));
  ASSERT_TRUE(outputs.ok()) << outputs.status().message();
  EXPECT_EQ(Selections(Path("again.ctrace")), Selections(trace));
}

TEST_F(EngineReplayTest, RecomputeWithoutLogitsOrHiddenIsAClearError) {
  const std::string trace = Path("ids.ctrace");
  Record(trace, RecorderOptions{false, false, {}});
  auto outputs = Replay(trace, RoutingMode::kRecompute, Path("again.ctrace"));
  ASSERT_FALSE(outputs.ok());
  EXPECT_NE(outputs.status().message().find("no recorded router logits"), std::string::npos)
      << outputs.status().message();
}

TEST_F(EngineReplayTest, ShapeMismatchIsAClearError) {
  auto e = Open();
  traces::ModelShape shape;
  shape.moe_layer_ids = {1, 3, 5};
  shape.experts_per_layer = 8;
  shape.top_k = 4;
  auto replayer = EngineReplayer::Create(e->moe.get(), shape, RoutingMode::kRecorded, nullptr);
  ASSERT_FALSE(replayer.ok());
  EXPECT_NE(replayer.status().message().find("does not match the model"), std::string::npos);
  EXPECT_EQ(ParseRoutingMode("sometimes").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace colibri::replay
