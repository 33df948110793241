// Open-loop pacing: the request store keeps each request's passes whatever
// the trace's record order, arrivals are scheduled from an arrival trace or
// the recorded times (scaled, cycled), the batcher forms prefill and decode
// passes as documented, and RunReplay paces requests by their arrivals.
#include "colibri/replay/continuous_batching.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "colibri/replay/replay_run.h"
#include "replay_test_util.h"

namespace colibri::replay {
namespace {

namespace fs = std::filesystem;
using Kind = ContinuousBatcher::Step::Kind;

class ContinuousBatchingTest : public testing::ReplayTest {
 protected:
  ContinuousBatchingTest() : ReplayTest("open-loop") {}

  static RequestStore Load(const std::string& path) {
    auto reader = traces::TraceReader::Open(path);
    EXPECT_TRUE(reader.ok()) << reader.status().message();
    LayerBatchReader batches(reader.value().get());
    auto store = RequestStore::Load(&batches, reader.value()->header().shape);
    EXPECT_TRUE(store.ok()) << store.status().message();
    return std::move(store).value();
  }

  static traces::ArrivalTrace Arrivals(std::vector<int64_t> times_ns) {
    traces::ArrivalTrace trace{traces::ArrivalFormat::kMooncakeJsonl, {}};
    for (int64_t t : times_ns) trace.arrivals.push_back(traces::Arrival{t, 10, 10});
    return trace;
  }

  // An open-loop replay.
  ReplayConfig Config(const std::string& trace, const std::string& machine) const {
    ReplayConfig c = ReplayTest::Config(trace, machine);
    c.pacing = Pacing::kOpen;
    return c;
  }
};

TEST_F(ContinuousBatchingTest, StoreKeepsEachRequestsPassesWhateverTheRecordOrder) {
  const testing::TestTrace t{3, 4, 5, 7, std::nullopt, false};
  testing::TestTrace pass_major = t;
  pass_major.pass_major = true;
  const RequestStore a = Load(Write("a.ctrace", t)), b = Load(Write("b.ctrace", pass_major));
  ASSERT_EQ(a.requests(), 3u);
  ASSERT_EQ(b.requests(), 3u);
  for (size_t r = 0; r < 3; ++r) {
    ASSERT_EQ(a.passes(r), 4u);
    ASSERT_EQ(b.passes(r), 4u);
    for (size_t p = 0; p < 4; ++p) {
      LayerBatch x, y;
      RequestStore::Cursor ca = a.Begin(r, p), cb = b.Begin(r, p);
      for (uint32_t layer = 0; layer < 2; ++layer) {
        ASSERT_EQ(a.Layer(ca), layer);
        ASSERT_EQ(b.Layer(cb), layer);
        a.AppendSegment(&ca, 9, &x);
        b.AppendSegment(&cb, 9, &y);
      }
      EXPECT_FALSE(a.Layer(ca).has_value());
      EXPECT_EQ(x.expert_ids, y.expert_ids);
      EXPECT_EQ(x.rows.size(), p == 0 ? 10u : 2u);  // 5 prompt tokens or 1 token, at 2 layers
      EXPECT_EQ(x.prefill, p == 0);
      EXPECT_EQ(x.rows[0].request_id, 9u);
    }
  }
}

TEST_F(ContinuousBatchingTest, PrefillPassesFirstThenDecodePassesUpToMaxBatch) {
  const RequestStore store = Load(Write("t.ctrace", testing::TestTrace{3, 3, 4, 1, std::nullopt, false}));
  const traces::ArrivalTrace arrivals = Arrivals({0, 0, 0});
  auto schedule = ScheduleArrivals(store, ArrivalOptions{&arrivals, 1.0, false, 0});
  ASSERT_TRUE(schedule.ok()) << schedule.status().message();
  ContinuousBatcher batcher(&store, schedule.value().requests, 2);
  const std::vector<std::pair<std::vector<size_t>, bool>> expected = {
      {{0, 1}, true}, {{0, 1}, false}, {{0, 1}, false}, {{2}, true}, {{2}, false}, {{2}, false}};
  for (const auto& [members, prefill] : expected) {
    ASSERT_EQ(batcher.Next(0).kind, Kind::kPass);
    EXPECT_EQ(batcher.members(), members);
    EXPECT_EQ(batcher.prefill_pass(), prefill);
    LayerBatch batch;
    for (uint32_t layer = 0; layer < 2; ++layer) {
      ASSERT_TRUE(batcher.NextLayerBatch(&batch));
      EXPECT_EQ(batch.layer_index, layer);
      EXPECT_EQ(batch.prefill, prefill);
      EXPECT_EQ(batch.tokens(), members.size() * (prefill ? 4 : 1));
      EXPECT_EQ(batch.rows.front().request_id, members.front());
    }
    EXPECT_FALSE(batcher.NextLayerBatch(&batch));
  }
  EXPECT_EQ(batcher.Next(0).kind, Kind::kDone);
  EXPECT_EQ(batcher.passes(), 6u);
  EXPECT_EQ(batcher.max_pass_requests(), 2u);
}

TEST_F(ContinuousBatchingTest, ANewArrivalIsPrefilledBeforeTheNextDecodePass) {
  const RequestStore store = Load(Write("t.ctrace", testing::TestTrace{3, 3, 2, 1, std::nullopt, false}));
  const traces::ArrivalTrace arrivals = Arrivals({0, 0, 100});
  auto schedule = ScheduleArrivals(store, ArrivalOptions{&arrivals, 1.0, false, 0});
  ASSERT_TRUE(schedule.ok());
  ContinuousBatcher batcher(&store, schedule.value().requests, 3);
  const std::vector<std::pair<std::vector<size_t>, bool>> expected = {
      {{0, 1}, true}, {{2}, true}, {{0, 1, 2}, false}, {{0, 1, 2}, false}};
  engine::TimeNs now_ns = 0;  // request 2 arrives while the first pass runs
  for (const auto& [members, prefill] : expected) {
    ASSERT_EQ(batcher.Next(now_ns).kind, Kind::kPass);
    EXPECT_EQ(batcher.members(), members);
    EXPECT_EQ(batcher.prefill_pass(), prefill);
    LayerBatch batch;
    while (batcher.NextLayerBatch(&batch)) {
    }
    now_ns += 200;
  }
  EXPECT_EQ(batcher.Next(now_ns).kind, Kind::kDone);
}

TEST_F(ContinuousBatchingTest, WaitsForTheNextArrivalWhenIdle) {
  const RequestStore store = Load(Write("t.ctrace", testing::TestTrace{2, 1, 0, 1, std::nullopt, false}));
  const traces::ArrivalTrace arrivals = Arrivals({0, 1000});
  auto schedule = ScheduleArrivals(store, ArrivalOptions{&arrivals, 1.0, false, 0});
  ASSERT_TRUE(schedule.ok());
  ContinuousBatcher batcher(&store, schedule.value().requests, 8);
  LayerBatch batch;
  ASSERT_EQ(batcher.Next(0).kind, Kind::kPass);
  while (batcher.NextLayerBatch(&batch)) {
  }
  const ContinuousBatcher::Step wait = batcher.Next(500);
  ASSERT_EQ(wait.kind, Kind::kWait);
  EXPECT_EQ(wait.wait_until_ns, 1000);
  ASSERT_EQ(batcher.Next(1000).kind, Kind::kPass);
  EXPECT_EQ(batcher.members(), std::vector<size_t>{1});
  while (batcher.NextLayerBatch(&batch)) {
  }
  EXPECT_EQ(batcher.Next(1000).kind, Kind::kDone);
}

TEST_F(ContinuousBatchingTest, ArrivalsAreScaledCycledAndCut) {
  const RequestStore store = Load(Write("t.ctrace", testing::TestTrace{2, 1, 0, 1, std::nullopt, false}));
  const traces::ArrivalTrace arrivals = Arrivals({0, 1001, 3000, 5000, 7000});
  auto cycled = ScheduleArrivals(store, ArrivalOptions{&arrivals, 2.0, true, 0});
  ASSERT_TRUE(cycled.ok());
  ASSERT_EQ(cycled.value().requests.size(), 5u);
  EXPECT_EQ(cycled.value().arrivals_total, 5u);
  EXPECT_EQ(cycled.value().requests[1].arrival_ns, 501);  // 1001 / 2, rounded half away from zero
  EXPECT_EQ(cycled.value().requests[4].arrival_ns, 3500);
  EXPECT_EQ(cycled.value().requests[4].request, 0u);
  EXPECT_EQ(cycled.value().requests[3].request, 1u);
  auto once = ScheduleArrivals(store, ArrivalOptions{&arrivals, 1.0, false, 0});
  ASSERT_TRUE(once.ok());
  EXPECT_EQ(once.value().requests.size(), 2u);  // one arrival per trace request without --repeat
  auto cut = ScheduleArrivals(store, ArrivalOptions{&arrivals, 1.0, true, 3});
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut.value().requests.size(), 3u);
}

TEST_F(ContinuousBatchingTest, RecordedArrivalsOrBadOptionsAreClearErrors) {
  const RequestStore none = Load(Write("none.ctrace", testing::TestTrace{2, 1, 0, 1, std::nullopt, false}));
  auto missing = ScheduleArrivals(none, ArrivalOptions{});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--arrivals"), std::string::npos);
  const RequestStore recorded = Load(Write("rec.ctrace", testing::TestTrace{3, 1, 0, 1, 4000, false}));
  auto from_trace = ScheduleArrivals(recorded, ArrivalOptions{nullptr, 4.0, false, 0});
  ASSERT_TRUE(from_trace.ok()) << from_trace.status().message();
  EXPECT_EQ(from_trace.value().requests[2].arrival_ns, 2000);
  EXPECT_FALSE(ScheduleArrivals(recorded, ArrivalOptions{nullptr, 1.0, true, 0}).ok());  // --repeat needs --arrivals
  EXPECT_FALSE(ScheduleArrivals(recorded, ArrivalOptions{nullptr, 0.0, false, 0}).ok());
  EXPECT_FALSE(ScheduleArrivals(recorded, ArrivalOptions{nullptr, -1.0, false, 0}).ok());
}

TEST_F(ContinuousBatchingTest, RequestsFarApartRunAloneAndNeverQueue) {
  const uint64_t gap_ns = 1'000'000'000;
  const std::string trace = Write("t.ctrace", testing::TestTrace{3, 4, 3, 2, gap_ns, false});
  ReplayConfig open = Config(trace, "serial-h100");
  auto r = RunReplay(open);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ReplayConfig closed = open;
  closed.pacing = Pacing::kClosed;
  auto c = RunReplay(closed);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(r.value().open_loop);
  EXPECT_EQ(r.value().requests, 3u);
  EXPECT_EQ(r.value().passes, 12u);
  EXPECT_EQ(r.value().queue_ns.max(), 0);
  EXPECT_EQ(r.value().moe_ns, c.value().moe_ns);  // all-miss: the same work, only spread out
  EXPECT_EQ(r.value().read_bytes, c.value().read_bytes);
  EXPECT_GT(r.value().elapsed_ns, static_cast<int64_t>(2 * gap_ns));
  EXPECT_LT(r.value().elapsed_ns, static_cast<int64_t>(2 * gap_ns) + c.value().elapsed_ns);
  EXPECT_EQ(r.value().max_pass_requests, 1u);
}

TEST_F(ContinuousBatchingTest, SimultaneousArrivalsShareDecodePassesOrQueue) {
  const std::string trace = Write("t.ctrace", testing::TestTrace{4, 5, 2, 3, 0, false});
  ReplayConfig batched = Config(trace, "serial-h100");
  auto all = RunReplay(batched);
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(all.value().max_pass_requests, 4u);
  EXPECT_EQ(all.value().layer_batches, 5u * 2);  // one prefill pass and 4 decode passes, 2 layers each
  EXPECT_EQ(all.value().steps, 4u * (2 + 4) * 2);
  ReplayConfig serial = batched;
  serial.max_batch = 1;
  auto one = RunReplay(serial);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one.value().layer_batches, 4u * 5 * 2);
  EXPECT_EQ(one.value().request_latency_ns.max(), one.value().elapsed_ns);  // the last waited for the others
  EXPECT_GT(one.value().queue_ns.max(), 0);
  EXPECT_EQ(one.value().steps, all.value().steps);
}

TEST_F(ContinuousBatchingTest, OpenLoopIsDeterministicAndIndependentOfRecordOrder) {
  testing::TestTrace t{3, 6, 2, 4, 30'000, false};
  const std::string request_major = Write("a.ctrace", t);
  t.pass_major = true;
  const std::string pass_major = Write("b.ctrace", t);
  ReplayConfig c = Config(request_major, "a100-pm9a3-gen4");  // latency jitter
  c.l2_bytes = 8 * testing::kTestExpertBytes;
  auto a = RunReplay(c), b = RunReplay(c);
  c.trace_path = pass_major;
  auto other_order = RunReplay(c);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(other_order.ok());
  EXPECT_EQ(a.value().event_digest, b.value().event_digest);
  EXPECT_EQ(a.value().event_digest, other_order.value().event_digest);
  EXPECT_EQ(a.value().ttft_ns.Summarize().p99, other_order.value().ttft_ns.Summarize().p99);
}

TEST_F(ContinuousBatchingTest, ArrivalFileRepeatedCoversEveryArrival) {
  const std::string trace = Write("t.ctrace", testing::TestTrace{2, 3, 0, 5, std::nullopt, false});
  const std::string arrivals = Path("arrivals.jsonl");
  std::ofstream(arrivals) << "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 2}\n"
                             "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 2}\n"
                             "{\"timestamp\": 2, \"input_length\": 5, \"output_length\": 2}\n"
                             "{\"timestamp\": 40, \"input_length\": 5, \"output_length\": 2}\n"
                             "{\"timestamp\": 41, \"input_length\": 5, \"output_length\": 2}\n";
  ReplayConfig c = Config(trace, "h100-p5800x-gen5");
  c.arrivals_path = arrivals;
  c.repeat = true;
  auto r = RunReplay(c);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value().requests, 5u);
  EXPECT_EQ(r.value().arrivals_total, 5u);
  EXPECT_GE(r.value().elapsed_ns, 41'000'000);  // the last arrival, 41 ms in
  c.repeat = false;
  auto once = RunReplay(c);
  ASSERT_TRUE(once.ok());
  EXPECT_EQ(once.value().requests, 2u);
}

TEST_F(ContinuousBatchingTest, RealClockWaitsForArrivals) {
  const std::string trace = Write("t.ctrace", testing::TestTrace{3, 2, 0, 6, 3'000'000, false});
  ReplayConfig c = Config(trace, "cpu-local");  // computes from host memory: a memcpy transfer copies nothing
  c.transfer = "cpu";  // a real backend: the real clock
  auto r = RunReplay(c);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r.value().simulated);
  EXPECT_EQ(r.value().requests, 3u);
  EXPECT_GE(r.value().elapsed_ns, 6'000'000);  // never before the last arrival
  EXPECT_GE(r.value().queue_ns.min(), 0);
}

TEST_F(ContinuousBatchingTest, PacingOptionsNeedOpenLoop) {
  ReplayConfig c = Config(Write("t.ctrace", testing::TestTrace{1, 1, 0, 1, std::nullopt, false}), "h100-p5800x-gen5");
  c.pacing = Pacing::kClosed;
  c.time_scale = 2.0;
  auto r = RunReplay(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--pacing open"), std::string::npos);
  c.pacing = Pacing::kOpen;
  c.time_scale = 1.0;
  c.max_batch = 0;
  EXPECT_FALSE(RunReplay(c).ok());
}

}  // namespace
}  // namespace colibri::replay
