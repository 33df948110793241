#include "colibri/reports/stability.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../traces/test_util.h"

namespace colibri::reports {
namespace {

using traces::Compression;
using traces::ModelShape;
using traces::TraceRecord;
using traces::testing::ReadFileBytes;
using traces::testing::TempDir;
using traces::testing::WriteFileBytes;

// 16 experts, top-2, MoE layers 1, 3 and 5.
const ModelShape kShape = traces::testing::SmallShape(16, 2, 3);

// The ranked list of a token: {(request + position + layer) % 16, (request + position + layer + 7) % 16}.
void AppendDecision(uint64_t request, uint64_t position, uint32_t layer, TraceRecord* record) {
  const auto base = static_cast<uint32_t>(request + position + layer);
  record->positions.push_back(position);
  record->expert_ids.insert(record->expert_ids.end(), {base % 16, (base + 7) % 16});
}

// Three passes, each visiting layers 1, 3, 5 in order (9 records):
//   pass 0: request 1 prefills positions 0-2  (3 tokens x 3 layers = 9 keys)
//   pass 1: request 2 prefills positions 0-1  (2 x 3 = 6 keys)
//   pass 2: request 1 decodes position 3      (1 x 3 = 3 keys)
// 9 + 6 + 3 = 18 keys in all.
std::vector<TraceRecord> BaselineRecords() {
  struct Pass {
    uint64_t request;
    uint64_t first_position, tokens;
  };
  const Pass passes[] = {{1, 0, 3}, {2, 0, 2}, {1, 3, 1}};
  std::vector<TraceRecord> records;
  for (uint64_t pass = 0; pass < 3; ++pass) {
    for (uint32_t layer : kShape.moe_layer_ids) {
      TraceRecord r;
      r.request_id = passes[pass].request;
      r.pass_id = pass;
      r.layer = layer;
      r.prefill = passes[pass].tokens > 1;
      for (uint64_t t = 0; t < passes[pass].tokens; ++t) {
        AppendDecision(r.request_id, passes[pass].first_position + t, layer, &r);
      }
      records.push_back(r);
    }
  }
  return records;
}

constexpr uint64_t kKeys = 18;

// Index in BaselineRecords() of a pass's record at a layer.
size_t RecordAt(uint64_t pass, uint32_t layer) { return pass * 3 + static_cast<size_t>(kShape.LayerIndex(layer)); }

std::string WriteTrace(const TempDir& dir, const std::string& name, const std::vector<TraceRecord>& records,
                       const ModelShape& shape = kShape, Compression compression = Compression::kNone) {
  const std::string path = dir.File(name);
  traces::TraceHeader header;
  header.shape = shape;
  header.provenance.importer = "stability_test";
  traces::WriterOptions options;
  options.compression = compression;
  auto writer = traces::TraceWriter::Create(path, header, options);
  EXPECT_TRUE(writer.ok()) << writer.status().message();
  for (const TraceRecord& r : records) EXPECT_TRUE((*writer)->Append(r).ok());
  EXPECT_TRUE((*writer)->Close().ok());
  return path;
}

RoutingStability Compare(const std::string& baseline, const std::string& candidate) {
  auto result = CompareRouting(baseline, candidate);
  EXPECT_TRUE(result.ok()) << result.status().message();
  return result.ok() ? result.value() : RoutingStability{};
}

void ExpectAllIdentical(const RoutingStability& s) {
  EXPECT_EQ(s.compared, kKeys);
  EXPECT_EQ(s.set_identical, kKeys);
  EXPECT_EQ(s.ranked_identical, kKeys);
  EXPECT_EQ(s.jaccard_sum, 18.0);
  EXPECT_EQ(s.set_identical_fraction(), 1.0);
  EXPECT_EQ(s.ranked_identical_fraction(), 1.0);
  EXPECT_EQ(s.mean_jaccard(), 1.0);
  EXPECT_EQ(s.missing_in_baseline + s.missing_in_candidate, 0u);
  EXPECT_FALSE(s.diverged);
}

void ExpectDivergence(const RoutingStability& s, const RoutingDivergence& expected) {
  ASSERT_TRUE(s.diverged);
  EXPECT_EQ(s.first.request_id, expected.request_id);
  EXPECT_EQ(s.first.position, expected.position);
  EXPECT_EQ(s.first.layer, expected.layer);
  EXPECT_EQ(s.first.baseline, expected.baseline);
  EXPECT_EQ(s.first.candidate, expected.candidate);
}

// Candidate records in reverse order: the first pair already differs, so the map fallback does all the work.
std::vector<TraceRecord> Reversed(std::vector<TraceRecord> records) {
  std::reverse(records.begin(), records.end());
  return records;
}

// Sets the ranked list of token `token` of the record (pass, layer).
void SetDecision(std::vector<TraceRecord>* records, uint64_t pass, uint32_t layer, size_t token,
                 std::vector<uint32_t> ranked) {
  std::copy(ranked.begin(), ranked.end(), (*records)[RecordAt(pass, layer)].expert_ids.begin() + token * 2);
}

TEST(StabilityTest, SameFileTwiceIsIdentical) {
  TempDir dir;
  const std::string path = WriteTrace(dir, "a.ctrace", BaselineRecords());
  ExpectAllIdentical(Compare(path, path));
}

TEST(StabilityTest, TwoFilesWithTheSameContentAreIdentical) {
  TempDir dir;
  const std::string a = WriteTrace(dir, "a.ctrace", BaselineRecords());
  const std::string b = WriteTrace(dir, "b.ctrace", BaselineRecords(), kShape, Compression::kZstd);
  ExpectAllIdentical(Compare(a, b));
  ExpectAllIdentical(Compare(b, a));
}

TEST(StabilityTest, OneFlippedDecision) {
  TempDir dir;
  auto flipped = BaselineRecords();
  // Request 1, position 1, layer 3 (token 1 of pass 0 at layer 3) was {(1 + 1 + 3) % 16, (5 + 7) % 16} = {5, 12}:
  // its second expert changes.
  SetDecision(&flipped, 0, 3, 1, {5, 9});
  const std::string a = WriteTrace(dir, "a.ctrace", BaselineRecords());
  const std::string b = WriteTrace(dir, "b.ctrace", flipped);
  const RoutingStability s = Compare(a, b);
  EXPECT_EQ(s.compared, 18u);
  EXPECT_EQ(s.set_identical, 17u);  // (n - 1) / n = 17 / 18
  EXPECT_DOUBLE_EQ(s.set_identical_fraction(), 17.0 / 18.0);
  EXPECT_EQ(s.ranked_identical, 17u);
  // 17 identical keys count 1; {5, 12} vs {5, 9}: |{5}| / |{5, 9, 12}| = 1/3.
  EXPECT_DOUBLE_EQ(s.jaccard_sum, 17.0 + 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.mean_jaccard(), (17.0 + 1.0 / 3.0) / 18.0);
  EXPECT_EQ(s.missing_in_baseline + s.missing_in_candidate, 0u);
  ExpectDivergence(s, {1, 1, 3, {5, 12}, {5, 9}});
}

TEST(StabilityTest, RankSwapChangesRankedButNotSetOrJaccard) {
  TempDir dir;
  auto swapped = BaselineRecords();
  SetDecision(&swapped, 0, 3, 1, {12, 5});  // request 1, position 1, layer 3: was {5, 12}
  const std::string a = WriteTrace(dir, "a.ctrace", BaselineRecords());
  const std::string b = WriteTrace(dir, "b.ctrace", swapped);
  const RoutingStability s = Compare(a, b);
  EXPECT_EQ(s.compared, 18u);
  EXPECT_EQ(s.set_identical, 18u);
  EXPECT_EQ(s.ranked_identical, 17u);
  EXPECT_EQ(s.jaccard_sum, 18.0);
  EXPECT_EQ(s.mean_jaccard(), 1.0);
  ExpectDivergence(s, {1, 1, 3, {5, 12}, {12, 5}});
}

TEST(StabilityTest, FirstDivergenceFollowsTheBaselineRecordOrder) {
  TempDir dir;
  auto changed = BaselineRecords();
  // Request 1, position 3, layer 1 (pass 2) comes first in key order, request 2, position 0, layer 5
  // (pass 1) first in record order. Baseline lists: {(1 + 3 + 1) % 16, (5 + 7) % 16} = {5, 12} and
  // {(2 + 0 + 5) % 16, (7 + 7) % 16} = {7, 14}.
  SetDecision(&changed, 2, 1, 0, {5, 0});
  SetDecision(&changed, 1, 5, 0, {14, 7});
  const std::string a = WriteTrace(dir, "a.ctrace", BaselineRecords());
  for (const auto& candidate : {changed, Reversed(changed)}) {
    const RoutingStability s = Compare(a, WriteTrace(dir, "b.ctrace", candidate));
    EXPECT_EQ(s.set_identical, 17u);   // the swap keeps its set
    EXPECT_EQ(s.ranked_identical, 16u);
    EXPECT_DOUBLE_EQ(s.jaccard_sum, 17.0 + 1.0 / 3.0);  // {5, 12} vs {5, 0}: 1/3
    ExpectDivergence(s, {2, 0, 5, {7, 14}, {14, 7}});
  }
}

TEST(StabilityTest, RecordMissingInTheCandidate) {
  TempDir dir;
  auto fewer = BaselineRecords();
  fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(RecordAt(1, 3)));  // request 2, positions 0-1, layer 3
  const std::string full = WriteTrace(dir, "full.ctrace", BaselineRecords());
  const std::string part = WriteTrace(dir, "part.ctrace", fewer);
  const RoutingStability s = Compare(full, part);
  EXPECT_EQ(s.compared, 18u);
  EXPECT_EQ(s.missing_in_candidate, 2u);
  EXPECT_EQ(s.missing_in_baseline, 0u);
  EXPECT_EQ(s.set_identical, 16u);  // 18 - 2 missing
  EXPECT_EQ(s.ranked_identical, 16u);
  EXPECT_EQ(s.jaccard_sum, 16.0);
  // Request 2, position 0, layer 3: {(2 + 0 + 3) % 16, (5 + 7) % 16} = {5, 12}.
  ExpectDivergence(s, {2, 0, 3, {5, 12}, {}});
}

TEST(StabilityTest, RecordMissingInTheBaseline) {
  TempDir dir;
  auto fewer = BaselineRecords();
  fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(RecordAt(1, 3)));
  const std::string part = WriteTrace(dir, "part.ctrace", fewer);
  const RoutingStability s = Compare(part, WriteTrace(dir, "full.ctrace", BaselineRecords()));
  EXPECT_EQ(s.compared, 18u);
  EXPECT_EQ(s.missing_in_baseline, 2u);
  EXPECT_EQ(s.missing_in_candidate, 0u);
  EXPECT_EQ(s.set_identical, 16u);
  EXPECT_EQ(s.jaccard_sum, 16.0);
  // Only candidate keys differ: the first of them in the candidate's order.
  ExpectDivergence(s, {2, 0, 3, {}, {5, 12}});
}

TEST(StabilityTest, CandidateEndingEarlyOrRunningLonger) {
  TempDir dir;
  auto shorter = BaselineRecords();
  shorter.pop_back();  // request 1, position 3, layer 5: {(1 + 3 + 5) % 16, (9 + 7) % 16} = {9, 0}
  const std::string full = WriteTrace(dir, "full.ctrace", BaselineRecords());
  const std::string part = WriteTrace(dir, "part.ctrace", shorter);
  const RoutingStability cut = Compare(full, part);
  EXPECT_EQ(cut.compared, 18u);
  EXPECT_EQ(cut.missing_in_candidate, 1u);
  EXPECT_EQ(cut.set_identical, 17u);
  ExpectDivergence(cut, {1, 3, 5, {9, 0}, {}});
  const RoutingStability longer = Compare(part, full);
  EXPECT_EQ(longer.compared, 18u);
  EXPECT_EQ(longer.missing_in_baseline, 1u);
  EXPECT_EQ(longer.set_identical, 17u);
  ExpectDivergence(longer, {1, 3, 5, {}, {9, 0}});
}

TEST(StabilityTest, ReorderedCandidateGivesTheInOrderNumbers) {
  TempDir dir;
  const std::string a = WriteTrace(dir, "a.ctrace", BaselineRecords());
  ExpectAllIdentical(Compare(a, WriteTrace(dir, "reversed.ctrace", Reversed(BaselineRecords()))));

  auto flipped = BaselineRecords();
  SetDecision(&flipped, 0, 3, 1, {5, 9});  // as in OneFlippedDecision
  const RoutingStability s = Compare(a, WriteTrace(dir, "flipped.ctrace", Reversed(flipped)));
  EXPECT_EQ(s.compared, 18u);
  EXPECT_EQ(s.set_identical, 17u);
  EXPECT_EQ(s.ranked_identical, 17u);
  EXPECT_DOUBLE_EQ(s.jaccard_sum, 17.0 + 1.0 / 3.0);
  ExpectDivergence(s, {1, 1, 3, {5, 12}, {5, 9}});

  // In order for the first pass, then out of order: lockstep first, the map for the rest.
  auto partly = flipped;
  std::swap(partly[RecordAt(1, 1)], partly[RecordAt(2, 5)]);
  const RoutingStability p = Compare(a, WriteTrace(dir, "partly.ctrace", partly));
  EXPECT_EQ(p.set_identical, 17u);
  EXPECT_DOUBLE_EQ(p.jaccard_sum, 17.0 + 1.0 / 3.0);
  ExpectDivergence(p, {1, 1, 3, {5, 12}, {5, 9}});
}

TEST(StabilityTest, DifferentShapesAreAnError) {
  TempDir dir;
  const std::string a = WriteTrace(dir, "a.ctrace", BaselineRecords());
  struct Case {
    ModelShape shape;
    std::string field;
  };
  const Case cases[] = {{traces::testing::SmallShape(16, 3, 3), "top_k"},
                        {traces::testing::SmallShape(32, 2, 3), "experts_per_layer"},
                        {traces::testing::SmallShape(16, 2, 4), "moe_layer_ids"}};
  for (const Case& c : cases) {
    const std::string b = WriteTrace(dir, "b-" + c.field + ".ctrace", {}, c.shape);
    auto result = CompareRouting(a, b);
    ASSERT_FALSE(result.ok()) << c.field;
    EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(result.status().message().find(a), std::string::npos) << result.status().message();
    EXPECT_NE(result.status().message().find(b), std::string::npos) << result.status().message();
    EXPECT_NE(result.status().message().find(c.field), std::string::npos) << result.status().message();
  }
}

TEST(StabilityTest, TornTailIsAnErrorNamingTheFile) {
  TempDir dir;
  const std::string good = WriteTrace(dir, "good.ctrace", BaselineRecords());
  const std::string torn = dir.File("torn.ctrace");
  const std::string bytes = ReadFileBytes(good);
  WriteFileBytes(torn, bytes.substr(0, bytes.size() - 1));  // inside the trailer: no complete end
  for (const auto& [baseline, candidate] : {std::pair{good, torn}, std::pair{torn, good}}) {
    auto result = CompareRouting(baseline, candidate);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), StatusCode::kTruncated);
    EXPECT_NE(result.status().message().find(torn), std::string::npos) << result.status().message();
  }
}

TEST(StabilityTest, MissingFileIsNotFound) {
  TempDir dir;
  const std::string good = WriteTrace(dir, "good.ctrace", BaselineRecords());
  auto result = CompareRouting(good, dir.File("absent.ctrace"));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kNotFound);
  EXPECT_NE(result.status().message().find("absent.ctrace"), std::string::npos);
}

TEST(StabilityTest, RepoSampleTraceAgainstItself) {
  const std::string path = std::string(COLIBRI_SOURCE_DIR) + "/traces/samples/qwen3-bigmoe.ctrace";
  const RoutingStability s = Compare(path, path);
  // `colibri trace inspect`: 44,766 selections at top-6, so 44,766 / 6 = 7461 (token, layer) keys: 128 decode
  // tokens x 48 layers = 6144, and 1317 prefill keys (the recording has 27 fewer than 28 tokens x 48 layers).
  EXPECT_EQ(s.compared, 7461u);
  EXPECT_EQ(s.set_identical, 7461u);
  EXPECT_EQ(s.ranked_identical, 7461u);
  EXPECT_EQ(s.mean_jaccard(), 1.0);
  EXPECT_FALSE(s.diverged);
}

}  // namespace
}  // namespace colibri::reports
