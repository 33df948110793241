// Slicing (by request, token range, layer) and merging (id offsets, shape checks).
#include "colibri/traces/edit.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace colibri::traces {
namespace {

using testing::ReadAll;
using testing::TempDir;

// Request r (0..2) has a 4-token prefill record per layer (positions 0..3, with
// gate weights and token ids) then decode records at positions 4 and 5.
std::vector<TraceRecord> MakeRecords(const ModelShape& shape) {
  std::mt19937_64 rng(11);
  std::vector<TraceRecord> records;
  uint64_t pass = 0;
  for (uint64_t request = 0; request < 3; ++request) {
    for (uint64_t position : {0, 4, 5}) {
      for (uint32_t layer : shape.moe_layer_ids) {
        const size_t tokens = position == 0 ? 4 : 1;
        TraceRecord r = testing::RandomRecord(shape, rng, request, pass, layer, tokens, position);
        r.gate_weights.assign(r.expert_ids.size(), 0.5f);
        for (size_t t = 0; t < tokens; ++t) r.token_ids.push_back(static_cast<uint32_t>(100 * request + position + t));
        records.push_back(r);
      }
      ++pass;
    }
  }
  return records;
}

std::string WriteTrace(const std::string& path, const ModelShape& shape, const std::vector<TraceRecord>& records,
                       const std::string& source) {
  TraceHeader header;
  header.shape = shape;
  header.provenance.sources.push_back({source, "sha-" + source, 1});
  auto writer = TraceWriter::Create(path, header);
  EXPECT_TRUE(writer.ok()) << writer.status().message();
  for (const TraceRecord& r : records) EXPECT_TRUE((*writer)->Append(r).ok());
  EXPECT_TRUE((*writer)->Close().ok());
  return path;
}

WriterOptions Atomic(Compression compression = Compression::kNone) {
  WriterOptions options;
  options.compression = compression;
  return options;
}

class EditTest : public ::testing::Test {
 protected:
  const ModelShape shape_ = testing::SmallShape(16, 2, 3);
  const std::vector<TraceRecord> records_ = MakeRecords(shape_);
  TempDir dir_;
  const std::string input_ = WriteTrace(dir_.File("in.ctrace"), shape_, records_, "a.csv");
};

TEST_F(EditTest, SliceByRequestKeepsRecordsUnchanged) {
  SliceSpec spec;
  spec.requests = {1};
  auto report = SliceTrace(input_, dir_.File("out.ctrace"), spec, Atomic(Compression::kZstd));
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->records_in, records_.size());
  EXPECT_EQ(report->records_out, 9u);
  const auto out = ReadAll(dir_.File("out.ctrace"));
  ASSERT_EQ(out.size(), 9u);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_TRUE(out[i] == records_[9 + i]) << i;
  EXPECT_EQ(ReadTraceHeader(dir_.File("out.ctrace"))->compression, Compression::kZstd);
}

TEST_F(EditTest, SliceByTokensCutsInsideRecords) {
  SliceSpec spec;
  spec.first_token = 2;
  spec.end_token = 5;  // prefill positions 2, 3 and the decode at 4
  auto report = SliceTrace(input_, dir_.File("out.ctrace"), spec, Atomic());
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->records_out, 3u * 2 * 3);
  const auto out = ReadAll(dir_.File("out.ctrace"));
  ASSERT_EQ(out.size(), 18u);
  const TraceRecord& prefill = out[0];
  const TraceRecord& original = records_[0];
  EXPECT_EQ(prefill.positions, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(prefill.expert_ids, std::vector<uint32_t>(original.expert_ids.begin() + 4, original.expert_ids.end()));
  EXPECT_EQ(prefill.gate_weights.size(), 4u);
  EXPECT_EQ(prefill.token_ids, (std::vector<uint32_t>{2, 3}));
  EXPECT_TRUE(out[3] == records_[3]);  // decode at position 4, whole
}

TEST_F(EditTest, SliceByLayersKeepsTheHeaderLayers) {
  SliceSpec spec;
  spec.layers = {3};
  auto report = SliceTrace(input_, dir_.File("out.ctrace"), spec, Atomic());
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->records_out, 9u);
  for (const TraceRecord& r : ReadAll(dir_.File("out.ctrace"))) EXPECT_EQ(r.layer, 3u);
  EXPECT_EQ(ReadTraceHeader(dir_.File("out.ctrace"))->shape.moe_layer_ids, shape_.moe_layer_ids);
}

TEST_F(EditTest, SliceInPlaceReplacesTheInput) {
  SliceSpec spec;
  spec.requests = {2};
  auto report = SliceTrace(input_, input_, spec, WriterOptions{});  // written atomically even so
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->records_in, records_.size());
  EXPECT_EQ(ReadAll(input_).size(), 9u);
}

TEST_F(EditTest, SliceRefusesBadSpecsAndTornInput) {
  SliceSpec not_moe;
  not_moe.layers = {2};
  EXPECT_EQ(SliceTrace(input_, dir_.File("out.ctrace"), not_moe, Atomic()).status().code(),
            StatusCode::kInvalidArgument);
  SliceSpec empty_range;
  empty_range.first_token = 5;
  empty_range.end_token = 5;
  EXPECT_EQ(SliceTrace(input_, dir_.File("out.ctrace"), empty_range, Atomic()).status().code(),
            StatusCode::kInvalidArgument);

  const std::string bytes = testing::ReadFileBytes(input_);
  testing::WriteFileBytes(dir_.File("torn.ctrace"), bytes.substr(0, bytes.size() - 2));
  auto torn = SliceTrace(dir_.File("torn.ctrace"), dir_.File("out.ctrace"), SliceSpec{}, Atomic());
  EXPECT_EQ(torn.status().code(), StatusCode::kTruncated);
  EXPECT_NE(torn.status().message().find("byte offset"), std::string::npos) << torn.status().message();
  EXPECT_FALSE(std::filesystem::exists(dir_.File("out.ctrace")));
}

TEST_F(EditTest, MergeOffsetsIdsAndUnitesSources) {
  const std::string second = WriteTrace(dir_.File("b.ctrace"), shape_, records_, "b.csv");
  auto report = MergeTraces({input_, second, input_}, dir_.File("out.ctrace"), Atomic());
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->records_out, 3 * records_.size());
  const auto out = ReadAll(dir_.File("out.ctrace"));
  ASSERT_EQ(out.size(), 3 * records_.size());
  // Inputs have requests 0..2 and passes 0..8: the second starts at 3 / 9, the third at 6 / 18.
  for (size_t i = 0; i < out.size(); ++i) {
    const TraceRecord& original = records_[i % records_.size()];
    const uint64_t input = i / records_.size();
    EXPECT_EQ(out[i].request_id, original.request_id + 3 * input);
    EXPECT_EQ(out[i].pass_id, original.pass_id + 9 * input);
    EXPECT_EQ(out[i].expert_ids, original.expert_ids);
  }
  const auto header = ReadTraceHeader(dir_.File("out.ctrace"));
  ASSERT_EQ(header->provenance.sources.size(), 2u);
  EXPECT_EQ(header->provenance.sources[1].path, "b.csv");
}

TEST_F(EditTest, MergeRefusesShapeMismatch) {
  const ModelShape other = testing::SmallShape(8, 2, 3);
  const std::string second = WriteTrace(dir_.File("b.ctrace"), other, {}, "b.csv");
  auto report = MergeTraces({input_, second}, dir_.File("out.ctrace"), Atomic());
  EXPECT_EQ(report.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(report.status().message().find("experts_per_layer"), std::string::npos) << report.status().message();
  EXPECT_FALSE(std::filesystem::exists(dir_.File("out.ctrace")));
}

}  // namespace
}  // namespace colibri::traces
