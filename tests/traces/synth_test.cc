// Synthetic traces: structure, determinism, and that the tunable knobs show
// up in the statistics (Zipf skew in load CV, decode reuse).
#include "colibri/traces/synth.h"

#include <gtest/gtest.h>

#include "colibri/traces/stats.h"
#include "test_util.h"

namespace colibri::traces {
namespace {

using testing::ReadAll;
using testing::ReadFileBytes;
using testing::TempDir;

SynthOptions SmallOptions() {
  SynthOptions o;
  o.shape = testing::SmallShape(16, 2, 3);
  o.requests = 5;
  o.concurrency = 2;
  o.prompt_tokens = 4;
  o.output_tokens = 3;
  return o;
}

std::string Synthesize(const TempDir& dir, const SynthOptions& options, const std::string& name,
                       Compression compression = Compression::kNone) {
  const std::string path = dir.File(name);
  WriterOptions writer_options;
  writer_options.compression = compression;
  auto report = SynthesizeTrace(options, path, writer_options);
  EXPECT_TRUE(report.ok()) << report.status().message();
  return path;
}

TraceStats Stats(const std::string& path) {
  auto stats = ComputeTraceStats(path);
  EXPECT_TRUE(stats.ok()) << stats.status().message();
  return stats.ok() ? stats.value() : TraceStats{};
}

TEST(SynthTest, WavesOfPrefillThenDecodePasses) {
  TempDir dir;
  const SynthOptions o = SmallOptions();
  auto report = SynthesizeTrace(o, dir.File("s.ctrace"), WriterOptions{});
  ASSERT_TRUE(report.ok()) << report.status().message();
  // 5 requests x 3 layers prefill records of 4 tokens, then 3 decode steps x 3 layers per request.
  EXPECT_EQ(report->records, 15u + 45u);
  EXPECT_EQ(report->selections, 15u * 4 * 2 + 45u * 2);
  EXPECT_EQ(report->tokens, 5u * 7);
  const auto records = ReadAll(dir.File("s.ctrace"));
  ASSERT_EQ(records.size(), report->records);
  // Wave 0: prefill passes 0 (request 0) and 1 (request 1), decode passes 2..4, layer-major.
  EXPECT_TRUE(records[0].prefill);
  EXPECT_EQ(records[0].positions, (std::vector<uint64_t>{0, 1, 2, 3}));
  EXPECT_EQ(records[3].request_id, 1u);
  EXPECT_EQ(records[3].pass_id, 1u);
  const TraceRecord& decode = records[6];
  EXPECT_FALSE(decode.prefill);
  EXPECT_EQ(decode.request_id, 0u);
  EXPECT_EQ(decode.pass_id, 2u);
  EXPECT_EQ(decode.positions, (std::vector<uint64_t>{4}));
  EXPECT_EQ(records[7].request_id, 1u);
  EXPECT_EQ(records[7].layer, 1u);
  EXPECT_EQ(records[8].layer, 3u);
  EXPECT_EQ(records.back().request_id, 4u);
  EXPECT_EQ(records.back().pass_id, 2u + 3 + 2 + 3 + 1 + 2);  // passes per wave: 5, 5, 4
  const TraceStats stats = Stats(dir.File("s.ctrace"));
  EXPECT_EQ(stats.tokens, 35u);
  EXPECT_EQ(stats.requests, 5u);
}

TEST(SynthTest, SameSeedSameBytesOtherSeedOtherBytes) {
  TempDir dir;
  SynthOptions o = SmallOptions();
  o.gate_weights = true;
  const std::string a = ReadFileBytes(Synthesize(dir, o, "a.ctrace", Compression::kZstd));
  const std::string b = ReadFileBytes(Synthesize(dir, o, "b.ctrace", Compression::kZstd));
  o.seed = 2;
  const std::string c = ReadFileBytes(Synthesize(dir, o, "c.ctrace", Compression::kZstd));
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(SynthTest, GateWeightsDescendAndSumToOne) {
  TempDir dir;
  SynthOptions o = SmallOptions();
  o.gate_weights = true;
  for (const TraceRecord& r : ReadAll(Synthesize(dir, o, "g.ctrace"))) {
    ASSERT_EQ(r.gate_weights.size(), r.expert_ids.size());
    for (size_t t = 0; t < r.token_count(); ++t) {
      EXPECT_GE(r.gate_weights[2 * t], r.gate_weights[2 * t + 1]);
      EXPECT_NEAR(r.gate_weights[2 * t] + r.gate_weights[2 * t + 1], 1.0f, 1e-6);
    }
  }
}

TEST(SynthTest, ZipfSkewRaisesLoadCv) {
  TempDir dir;
  SynthOptions o = SmallOptions();
  o.shape = testing::SmallShape(64, 4, 2);
  o.requests = 8;
  o.prompt_tokens = 64;
  o.output_tokens = 64;
  double previous_cv = -1;
  for (double s : {0.0, 0.8, 1.6}) {
    o.zipf_s = s;
    const TraceStats stats = Stats(Synthesize(dir, o, "z.ctrace"));
    EXPECT_GT(stats.load_cv_mean, previous_cv) << "zipf " << s;
    previous_cv = stats.load_cv_mean;
  }
  EXPECT_GT(previous_cv, 1.0);
}

TEST(SynthTest, DecodeReuseShowsInStats) {
  TempDir dir;
  SynthOptions o = SmallOptions();
  o.shape = testing::SmallShape(64, 4, 2);
  o.output_tokens = 20;
  o.zipf_s = 0;
  o.decode_reuse = 1;
  EXPECT_DOUBLE_EQ(Stats(Synthesize(dir, o, "r1.ctrace")).decode_reuse_mean, 1.0);
  o.decode_reuse = 0;
  EXPECT_LT(Stats(Synthesize(dir, o, "r0.ctrace")).decode_reuse_mean, 0.2);  // chance: about k / E
}

TEST(SynthTest, ExtremeSkewStillDrawsDistinctExperts) {
  TempDir dir;
  SynthOptions o = SmallOptions();
  o.shape = testing::SmallShape(8, 4, 1);
  o.zipf_s = 60;  // rank r+1 is 2^60 times less likely than rank 0: rejection gives up
  const TraceStats stats = Stats(Synthesize(dir, o, "x.ctrace"));  // the writer checks distinct ids
  EXPECT_EQ(stats.layers.at(0).deviation.unused, 4u);              // only the 4 most popular ranks are chosen
}

TEST(SynthTest, RejectsBadOptions) {
  TempDir dir;
  SynthOptions o = SmallOptions();
  o.requests = 0;
  EXPECT_EQ(SynthesizeTrace(o, dir.File("bad"), {}).status().code(), StatusCode::kInvalidArgument);
  o = SmallOptions();
  o.decode_reuse = 1.5;
  EXPECT_EQ(SynthesizeTrace(o, dir.File("bad"), {}).status().code(), StatusCode::kInvalidArgument);
  o = SmallOptions();
  o.shape.top_k = 0;
  EXPECT_EQ(SynthesizeTrace(o, dir.File("bad"), {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(dir.File("bad")));
}

}  // namespace
}  // namespace colibri::traces
