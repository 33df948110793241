// Trace statistics against values computed by hand on a tiny trace
// (docs/METRICS.md gives the definitions).
#include "colibri/traces/stats.h"

#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"

namespace colibri::traces {
namespace {

using testing::ReadFileBytes;
using testing::TempDir;
using testing::WriteFileBytes;

TraceRecord Record(uint64_t request, uint32_t layer, bool prefill, std::vector<uint64_t> positions,
                   std::vector<uint32_t> ids) {
  TraceRecord r;
  r.request_id = request;
  r.layer = layer;
  r.prefill = prefill;
  r.positions = std::move(positions);
  r.expert_ids = std::move(ids);
  return r;
}

// 4 experts, top-2, MoE layers 1, 3, 5 (expert bytes 1000, 1001, 1002); layer 5 has no records.
//   layer 1 loads [5, 5, 1, 1]; decode pairs: request 0 {0,1}->{1,3} = 1/2, request 1 {0,1}->{0,1} = 1
//   layer 3 loads [2, 4, 2, 0]; decode pairs: request 0 {1,2}->{2,1} = 1
std::string WriteHandTrace(const TempDir& dir) {
  const std::string path = dir.File("hand.ctrace");
  TraceHeader header;
  header.shape = testing::SmallShape(4, 2, 3);
  auto writer = TraceWriter::Create(path, header);
  EXPECT_TRUE(writer.ok()) << writer.status().message();
  const std::vector<TraceRecord> records = {
      Record(0, 1, true, {0, 1}, {0, 1, 0, 2}), Record(0, 3, true, {0, 1}, {0, 1, 1, 0}),
      Record(0, 1, false, {2}, {0, 1}),         Record(1, 1, false, {5}, {0, 1}),
      Record(0, 3, false, {2}, {1, 2}),         Record(0, 1, false, {3}, {1, 3}),
      Record(1, 1, false, {6}, {0, 1}),         Record(0, 3, false, {3}, {2, 1}),
  };
  for (const TraceRecord& r : records) EXPECT_TRUE((*writer)->Append(r).ok());
  EXPECT_TRUE((*writer)->Close().ok());
  return path;
}

TEST(LoadDeviationTest, HandComputedValues) {
  const LoadDeviation a = ComputeLoadDeviation({5, 5, 1, 1});
  EXPECT_DOUBLE_EQ(a.cv, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(a.max_over_mean, 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(a.gini, 1.0 / 3.0);
  EXPECT_EQ(a.unused, 0u);

  const LoadDeviation one_hot = ComputeLoadDeviation({0, 0, 0, 8});
  EXPECT_DOUBLE_EQ(one_hot.cv, std::sqrt(3.0));
  EXPECT_DOUBLE_EQ(one_hot.max_over_mean, 4.0);
  EXPECT_DOUBLE_EQ(one_hot.gini, 0.75);  // (n - 1) / n
  EXPECT_EQ(one_hot.unused, 3u);

  const LoadDeviation uniform = ComputeLoadDeviation({7, 7, 7});
  EXPECT_EQ(uniform.cv, 0.0);
  EXPECT_EQ(uniform.gini, 0.0);
  EXPECT_DOUBLE_EQ(uniform.max_over_mean, 1.0);

  const LoadDeviation idle = ComputeLoadDeviation({0, 0});
  EXPECT_EQ(idle.cv, 0.0);
  EXPECT_EQ(idle.max_over_mean, 0.0);
  EXPECT_EQ(idle.gini, 0.0);
  EXPECT_EQ(idle.unused, 2u);
}

TEST(LoadDeviationTest, GiniMatchesAllPairsDefinition) {
  std::mt19937_64 rng(5);
  std::vector<uint64_t> loads(97);
  for (uint64_t& load : loads) load = rng() % 1000;
  loads[3] = 0;
  double total = 0, pairs = 0;
  for (uint64_t x : loads) {
    total += static_cast<double>(x);
    for (uint64_t y : loads) pairs += std::abs(static_cast<double>(x) - static_cast<double>(y));
  }
  const double n = static_cast<double>(loads.size());
  const double mean = total / n;
  EXPECT_NEAR(ComputeLoadDeviation(loads).gini, pairs / (n * n) / (2 * mean), 1e-12);
}

TEST(TraceStatsTest, HandBuiltTrace) {
  TempDir dir;
  auto stats = ComputeTraceStats(WriteHandTrace(dir));
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  const TraceStats& s = stats.value();
  ASSERT_EQ(s.layers.size(), 2u);  // layer 5 has no records
  const LayerStats& l1 = s.layers[0];
  const LayerStats& l3 = s.layers[1];
  EXPECT_EQ(l1.layer, 1u);
  EXPECT_EQ(l1.loads, (std::vector<uint64_t>{5, 5, 1, 1}));
  EXPECT_DOUBLE_EQ(l1.deviation.cv, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(l1.decode_reuse, 0.75);
  EXPECT_EQ(l1.decode_pairs, 2u);
  EXPECT_EQ(l3.layer, 3u);
  EXPECT_EQ(l3.loads, (std::vector<uint64_t>{2, 4, 2, 0}));
  EXPECT_DOUBLE_EQ(l3.deviation.cv, std::sqrt(2.0) / 2);
  EXPECT_DOUBLE_EQ(l3.deviation.max_over_mean, 2.0);
  EXPECT_DOUBLE_EQ(l3.deviation.gini, 0.375);
  EXPECT_EQ(l3.deviation.unused, 1u);
  EXPECT_DOUBLE_EQ(l3.decode_reuse, 1.0);
  EXPECT_EQ(l3.decode_pairs, 1u);

  EXPECT_DOUBLE_EQ(s.load_cv_mean, (2.0 / 3.0 + std::sqrt(2.0) / 2) / 2);
  EXPECT_DOUBLE_EQ(s.load_cv_max, std::sqrt(2.0) / 2);
  EXPECT_DOUBLE_EQ(s.decode_reuse_mean, 0.875);
  EXPECT_EQ(s.token_cycle_bytes, 2u * (1000 + 1001 + 1002));
  EXPECT_EQ(s.records, 8u);
  EXPECT_EQ(s.requests, 2u);
  EXPECT_EQ(s.tokens, 6u);  // request 0: positions 0..3, request 1: 5, 6
  EXPECT_EQ(s.prefill_tokens, 2u);
  EXPECT_EQ(s.decode_tokens, 4u);
  EXPECT_EQ(s.selections, 20u);
  EXPECT_FALSE(s.truncated);
}

TEST(TraceStatsTest, TornTailCoversCompleteRecords) {
  TempDir dir;
  const std::string path = WriteHandTrace(dir);
  const std::string bytes = ReadFileBytes(path);
  const std::string cut = dir.File("cut.ctrace");
  WriteFileBytes(cut, bytes.substr(0, bytes.size() - 41 - 3));  // inside the last record (41: the end marker + trailer)
  EXPECT_EQ(ComputeTraceStats(cut).status().code(), StatusCode::kTruncated);
  auto stats = ComputeTraceStats(cut, ReadOptions{.allow_torn = true});
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_TRUE(stats->truncated);
  EXPECT_EQ(stats->records, 7u);
  EXPECT_LT(stats->truncated_at_offset, bytes.size() - 41 - 3);
  EXPECT_EQ(stats->layers[1].loads, (std::vector<uint64_t>{2, 3, 1, 0}));  // last {2, 1} missing
  EXPECT_EQ(stats->layers[1].decode_pairs, 0u);
}

TEST(TraceStatsTest, CorruptionAndMissingFileAreErrors) {
  TempDir dir;
  const std::string path = WriteHandTrace(dir);
  std::string bytes = ReadFileBytes(path);
  bytes[bytes.size() - 5] ^= 0x10;
  WriteFileBytes(path, bytes);
  EXPECT_EQ(ComputeTraceStats(path).status().code(), StatusCode::kCorruption);
  EXPECT_EQ(ComputeTraceStats(dir.File("missing")).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace colibri::traces
