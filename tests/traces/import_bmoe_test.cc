#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <tuple>

#include "colibri/traces/importers.h"
#include "test_util.h"

namespace colibri::traces {
namespace {

using testing::TempDir;
using testing::WriteFileBytes;

// (turn, step, layer, slot) -> (expert, weight, residency), parsed independently of the importer.
using Selections = std::map<std::tuple<uint64_t, uint64_t, uint32_t, uint32_t>, std::tuple<uint32_t, float, uint8_t>>;

Selections ParseCsvNaively(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  Selections out;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line[0] == 't') continue;
    std::stringstream ss(line);
    std::string f[9];
    for (auto& field : f) std::getline(ss, field, ',');
    out[{std::stoull(f[0]), std::stoull(f[2]), static_cast<uint32_t>(std::stoul(f[3])),
         static_cast<uint32_t>(std::stoul(f[4]))}] = {static_cast<uint32_t>(std::stoul(f[5])), std::stof(f[6]),
                                                      static_cast<uint8_t>(std::stoul(f[7]))};
  }
  return out;
}

Selections SelectionsOfTrace(const std::string& path, uint32_t top_k) {
  Selections out;
  for (const TraceRecord& r : testing::ReadAll(path)) {
    for (size_t t = 0; t < r.token_count(); ++t) {
      for (uint32_t s = 0; s < top_k; ++s) {
        const size_t i = t * top_k + s;
        out[{r.request_id, r.positions[t], r.layer, s}] = {r.expert_ids[i], r.gate_weights[i], r.cache_outcomes[i]};
      }
    }
  }
  return out;
}

class BmoeRealTraceTest : public ::testing::TestWithParam<const char*> {};

TEST_P(BmoeRealTraceTest, RoundTripMatchesSource) {
  const std::string csv = std::string(COLIBRI_SHARED_DATA) + "/bigmoe-route-traces/" + GetParam() + ".route.csv";
  if (!std::filesystem::exists(csv)) GTEST_SKIP() << csv << " not present";
  TempDir dir;
  ImportOptions options;
  options.format = "bmoe-csv";
  options.inputs = {csv};
  auto report = ImportToFile(options, dir.File("t.ctrace"), WriterOptions{});
  ASSERT_TRUE(report.ok()) << report.status().message();
  auto header = ReadTraceHeader(dir.File("t.ctrace"));
  ASSERT_TRUE(header.ok());
  const Selections source = ParseCsvNaively(csv);
  EXPECT_EQ(SelectionsOfTrace(dir.File("t.ctrace"), header->shape.top_k), source);
  EXPECT_EQ(report->selections, source.size());
  EXPECT_EQ(header->shape.top_k, 6u);
  EXPECT_EQ(header->shape.experts_per_layer, 128u);
  EXPECT_EQ(header->shape.dense_bytes.size(), header->shape.moe_layer_ids.size());
  EXPECT_EQ(header->provenance.sources.size(), 1u);
  EXPECT_EQ(header->provenance.sources[0].sha256.size(), 64u);
  // Passes: one prefill pass, then one per decode token (128), each with one record per layer.
  std::set<uint64_t> passes;
  uint64_t prefill_records = 0;
  for (const TraceRecord& r : testing::ReadAll(dir.File("t.ctrace"))) {
    passes.insert(r.pass_id);
    prefill_records += r.prefill;
  }
  EXPECT_EQ(passes.size(), 129u);
  EXPECT_EQ(prefill_records, header->shape.num_moe_layers());
}

INSTANTIATE_TEST_SUITE_P(RealTraces, BmoeRealTraceTest, ::testing::Values("qwen", "gemma"));

TEST(BmoeRaggedPrefillTest, QwenLastLayerRoutesOnlyTheLastPromptToken) {
  const std::string csv = std::string(COLIBRI_SHARED_DATA) + "/bigmoe-route-traces/qwen.route.csv";
  if (!std::filesystem::exists(csv)) GTEST_SKIP() << csv << " not present";
  TempDir dir;
  ImportOptions options;
  options.format = "bmoe-csv";
  options.inputs = {csv};
  ASSERT_TRUE(ImportToFile(options, dir.File("t.ctrace"), WriterOptions{}).ok());
  for (const TraceRecord& r : testing::ReadAll(dir.File("t.ctrace"))) {
    if (!r.prefill) continue;
    if (r.layer == 47) {
      EXPECT_EQ(r.positions, std::vector<uint64_t>{27});
    } else {
      EXPECT_EQ(r.token_count(), 28u);
    }
  }
}

constexpr const char* kPreamble =
    "# route_trace v1\n"
    "# model=/x/Tiny-Q8_0.gguf arch=tiny n_layer=2 n_expert=8 n_expert_used=2\n"
    "# layer=0 expert_bytes=100 dense_bytes=10\n"
    "# layer=1 expert_bytes=200 dense_bytes=20\n"
    "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes\n";

Status ImportText(const TempDir& dir, const std::string& text, bool skip_bad = false, ImportReport* out = nullptr) {
  const std::string csv = dir.File("in.route.csv");
  WriteFileBytes(csv, text);
  ImportOptions options;
  options.format = "bmoe-csv";
  options.inputs = {csv};
  options.skip_bad = skip_bad;
  auto report = ImportToFile(options, dir.File("out.ctrace"), WriterOptions{});
  if (out != nullptr && report.ok()) *out = report.value();
  return report.status();
}

TEST(BmoeBadInputTest, ClearErrorsWithFileAndLine) {
  TempDir dir;
  const std::string good = "0,0,0,0,0,1,0.6,0,100\n0,0,0,0,1,2,0.4,0,100\n";
  EXPECT_TRUE(ImportText(dir, std::string(kPreamble) + good).ok());
  std::filesystem::remove(dir.File("out.ctrace"));

  struct Case {
    std::string text;
    std::string expect;
  } cases[] = {
      {"", "empty file"},
      {std::string(kPreamble), "no data rows"},
      {"a,b,c\n", "expected the header line"},
      {std::string(kPreamble) + "0,0,0,0,0,1,0.6,0\n", "in.route.csv:6: expected 9 comma-separated columns"},
      {std::string(kPreamble) + "0,0,0,0,0,9,0.6,0,100\n0,0,0,0,1,2,0.4,0,100\n", ":6: expert id 9 out of range"},
      {std::string(kPreamble) + "0,0,0,5,0,1,0.6,0,100\n", "layer 5 is not described"},
      {std::string(kPreamble) + "0,0,0,0,0,1,0.6,0,100\n0,0,1,0,0,2,0.4,0,100\n0,0,1,0,1,3,0.4,0,100\n",
       "has 1 slots, expected 2 (ragged top-k)"},
      {std::string(kPreamble) + "0,0,0,0,0,-1,0.6,0,100\n", "not a non-negative integer"},
      {std::string(kPreamble) + "0,0,0,0,0,1,abc,0,100\n", "column weight"},
      {std::string(kPreamble) + "0,0,0,0,0,1,0.6,0,100\n0,0,0,0,1,1,0.4,0,100\n", "chosen twice"},
      // Gate weights are routing probabilities: finite and in [0, 1].
      {std::string(kPreamble) + "0,0,0,0,0,1,nan,0,100\n0,0,0,0,1,2,0.4,0,100\n", "'nan' is not a routing probability"},
      {std::string(kPreamble) + "0,0,0,0,0,1,inf,0,100\n0,0,0,0,1,2,0.4,0,100\n", "'inf' is not a routing probability"},
      {std::string(kPreamble) + "0,0,0,0,0,1,-5.0,0,100\n0,0,0,0,1,2,0.4,0,100\n", "'-5.0' is not a routing"},
      {std::string(kPreamble) + "0,0,0,0,0,1,1.5,0,100\n0,0,0,0,1,2,0.4,0,100\n", "'1.5' is not a routing"},
      // A 20 MB field is echoed as its first 80 bytes and its length.
      {std::string(kPreamble) + "0,0,0,0,0,1," + std::string(20 << 20, '7') + "x,0,100\n",
       "... (20971521 bytes)' is not a number"},
  };
  for (const Case& c : cases) {
    Status s = ImportText(dir, c.text);
    EXPECT_FALSE(s.ok()) << c.expect;
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << "got: " << s.message();
    EXPECT_FALSE(std::filesystem::exists(dir.File("out.ctrace"))) << "partial output left for: " << c.expect;
    EXPECT_LT(s.message().size(), 1000u) << "an unbounded echo";
    EXPECT_TRUE(std::filesystem::is_empty(dir.path()) ||
                (std::filesystem::exists(dir.File("in.route.csv")) &&
                 std::distance(std::filesystem::directory_iterator(dir.path()), {}) == 1))
        << "partial output left for: " << c.expect;
  }
  // A UTF-8 byte-order mark before the first line (a spreadsheet's export) is not an error.
  EXPECT_TRUE(ImportText(dir, "\xEF\xBB\xBF" + std::string(kPreamble) + good).ok());
}

TEST(BmoeBadInputTest, SkipBadCountsAndKeepsGoodRows) {
  TempDir dir;
  const std::string text = std::string(kPreamble) +
                           "0,0,0,0,0,1,0.6,0,100\n0,0,0,0,1,2,0.4,0,100\n"
                           "0,0,1,0,0,1,0.6,0,100\n0,0,1,0,1,99,0.4,0,100\n"  // bad id: token 1 becomes ragged
                           "0,0,2,0,0,3,0.6,0,100\n0,0,2,0,1,4,0.4,0,100\n";
  ImportReport report;
  ASSERT_TRUE(ImportText(dir, text, true, &report).ok());
  EXPECT_EQ(report.rows_skipped, 2u);  // the bad row, then its ragged token
  EXPECT_EQ(report.selections, 4u);
  auto records = testing::ReadAll(dir.File("out.ctrace"));
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].positions, (std::vector<uint64_t>{0, 2}));
  EXPECT_EQ(records[0].expert_ids, (std::vector<uint32_t>{1, 2, 3, 4}));
}

}  // namespace
}  // namespace colibri::traces
