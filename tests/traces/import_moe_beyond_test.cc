// The moe-beyond-csv importer: round trip of the fixtures in
// tests/data/importers/moe-beyond (quoted tokens with commas, "" escapes and
// line breaks; CRLF line ends) against an independent regex parse, bad rows
// with file:line in the error, and --skip-bad counts.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <sstream>

#include "colibri/traces/importers.h"
#include "test_util.h"

namespace colibri::traces {
namespace {

using testing::ImportAndReadBack;
using testing::ReadFileBytes;
using testing::SelectionsByToken;
using testing::TempDir;
using testing::TokenSelections;
using testing::WriteFileBytes;

const std::string kDir = std::string(COLIBRI_TEST_DATA) + "/importers/moe-beyond";
const std::string kDeepseekV2Lite = std::string(COLIBRI_SHARED_DATA) + "/model-configs/deepseek2/config.json";
const std::string kHeader = "Layer ID,Batch Number,Token,Activated Expert IDs\n";

ImportOptions CsvOptions(std::vector<std::string> inputs) {
  ImportOptions options;
  options.format = "moe-beyond-csv";
  options.inputs = std::move(inputs);
  options.model_config_path = kDeepseekV2Lite;  // 64 experts; MoE layers 1..26
  return options;
}

// (request, position, layer) -> ids: each data row is `layer,batch,token,"[ids]"`
// with the token possibly quoted; positions count rows per layer.
TokenSelections ParseRowsByRegex(const std::vector<std::string>& files) {
  static const std::regex kRow(R"((?:^|\n)(\d+),\d+,(?:"(?:[^"]|"")*"|[^,\r\n]*),"\[([0-9, ]*)\]")");
  TokenSelections out;
  for (size_t request = 0; request < files.size(); ++request) {
    const std::string text = ReadFileBytes(files[request]);
    std::map<uint32_t, uint64_t> rows_per_layer;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), kRow); it != std::sregex_iterator(); ++it) {
      const uint32_t layer = static_cast<uint32_t>(std::stoul((*it)[1]));
      std::vector<uint32_t> ids;
      std::stringstream list((*it)[2]);
      for (std::string id; std::getline(list, id, ',');) ids.push_back(static_cast<uint32_t>(std::stoul(id)));
      out[{request, rows_per_layer[layer]++, layer}] = ids;
    }
  }
  return out;
}

TEST(MoeBeyondCsvTest, FixturesRoundTripOnePrefillPassPerFile) {
  const std::vector<std::string> files = {kDir + "/prompt-a.csv", kDir + "/prompt-b.csv"};
  TempDir dir;
  auto imported = ImportAndReadBack(CsvOptions(files), dir);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  const TokenSelections expected = ParseRowsByRegex(files);
  EXPECT_EQ(expected.size(), (4u + 2) * 2);
  EXPECT_EQ(SelectionsByToken(imported->records, 6), expected);

  const ModelShape& shape = imported->header.shape;
  EXPECT_EQ(shape.experts_per_layer, 64u);
  EXPECT_EQ(shape.top_k, 6u);
  EXPECT_EQ(shape.num_moe_layers(), 26u);
  EXPECT_EQ(imported->header.provenance.importer, "moe-beyond-csv");
  ASSERT_EQ(imported->records.size(), 4u);  // 2 files x 2 layers
  for (const TraceRecord& r : imported->records) {
    EXPECT_TRUE(r.prefill);
    EXPECT_EQ(r.pass_id, r.request_id);
    EXPECT_TRUE(r.token_ids.empty());
  }
  EXPECT_EQ(imported->records[0].positions, (std::vector<uint64_t>{0, 1, 2, 3}));
  EXPECT_EQ(imported->report.rows_read, 12u);
  EXPECT_EQ(imported->report.requests, 2u);
}

TEST(MoeBeyondCsvTest, ShapeFromFlagsUsesTheDataLayers) {
  ImportOptions options = CsvOptions({kDir + "/prompt-b.csv"});
  options.model_config_path.reset();
  options.experts = 64;
  options.expert_bytes = 1 << 20;
  TempDir dir;
  auto imported = ImportAndReadBack(options, dir);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(imported->header.shape.moe_layer_ids, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(imported->header.shape.expert_bytes, (std::vector<uint64_t>{1 << 20, 1 << 20}));
}

// Writes `rows` after the header and returns the import's error message.
std::string ErrorFor(const TempDir& dir, const std::string& rows, bool with_header = true) {
  const std::string path = dir.File("bad.csv");
  WriteFileBytes(path, (with_header ? kHeader : "") + rows);
  TempDir out;
  auto imported = ImportAndReadBack(CsvOptions({path}), out);
  return imported.ok() ? "" : imported.status().message();
}

TEST(MoeBeyondCsvTest, BadRowsNameFileAndLine) {
  TempDir dir;
  const std::string path = dir.File("bad.csv");
  const std::string good_row = "1,0,a,\"[1, 2, 3, 4, 5, 6]\"\n";
  struct Case {
    std::string rows;
    std::string expected;
  };
  const Case cases[] = {
      {good_row + "1,0,b,\"[1, 2, 3, 4, 5, 64]\"\n", ":3: expert id 64 out of range"},
      {good_row + "1,0,b,\"[1, 2, 3, 4, 5, -6]\"\n", ":3: negative expert id -6"},
      {good_row + "1,0,b,\"[1, 2, 3, 4, 5, 5]\"\n", ":3: duplicate expert id 5"},
      {good_row + "1,0,b,\"[1, 2, 3, 4, 5]\"\n", ":3: ragged top-k: 5 expert ids, expected 6"},
      {good_row + "1,0,b\n", ":3: 3 fields, expected 4"},
      {good_row + "x,0,b,\"[1, 2, 3, 4, 5, 6]\"\n", ":3: Layer ID: 'x' is not a number"},
      {good_row + "1,-1,b,\"[1, 2, 3, 4, 5, 6]\"\n", ":3: Batch Number"},
      {good_row + "1,0,b,\"1, 2, 3, 4, 5, 6\"\n", ":3: Activated Expert IDs"},
      {good_row + "1,0,\"b,\"[1, 2, 3, 4, 5, 6]\"\n", ":3: text after the closing quote"},
      {good_row + "1,0,\"b\n", ":3: quoted field is never closed"},
      {good_row + "1,0,b\"c,\"[1, 2, 3, 4, 5, 6]\"\n", ":3: quote inside an unquoted field"},
      {good_row + "2,0,a,\"[1, 2, 3, 4, 5, 6]\"\n" + good_row, ":4: layer 1 again after other layers"},
      {"27,0,a,\"[1, 2, 3, 4, 5, 6]\"\n", "layer 27 in the data is not a MoE layer"},
      {"0,0,a,\"[1, 2, 3, 4, 5, 6]\"\n", "layer 0 in the data is not a MoE layer"},  // DeepSeek layer 0 is dense
      {"", "no usable data rows"},
  };
  for (const Case& c : cases) {
    const std::string message = ErrorFor(dir, c.rows);
    EXPECT_NE(message.find(c.expected), std::string::npos) << "rows:\n" << c.rows << "message: " << message;
    EXPECT_NE(message.find("bad.csv"), std::string::npos) << message;
  }
  EXPECT_NE(ErrorFor(dir, good_row, false).find("bad.csv:1: header '1,0,a,[1, 2, 3, 4, 5, 6]'"), std::string::npos);
  // A 20 MB field is echoed as its first 80 bytes and its length.
  const std::string huge = ErrorFor(dir, good_row + "1,0,b,\"" + std::string(20 << 20, '[') + "\"\n");
  EXPECT_NE(huge.find("Activated Expert IDs '[[[["), std::string::npos) << huge.substr(0, 300);
  EXPECT_NE(huge.find("... (20971520 bytes)'"), std::string::npos) << huge.substr(0, 300);
  EXPECT_LT(huge.size(), 1000u) << "an unbounded echo";
  WriteFileBytes(path, "");
  EXPECT_NE(ErrorFor(dir, "", false).find("bad.csv: empty file"), std::string::npos);
}

TEST(MoeBeyondCsvTest, MixedModelsAcrossFiles) {
  TempDir dir;
  const std::string other = dir.File("other.csv");
  WriteFileBytes(other, kHeader + "1,0,a,\"[1, 2, 3, 4]\"\n2,0,a,\"[1, 2, 3, 4]\"\n");
  TempDir out;
  auto imported = ImportAndReadBack(CsvOptions({kDir + "/prompt-a.csv", other}), out);
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find("other.csv: mixed models: top-k 4"), std::string::npos)
      << imported.status().message();
  WriteFileBytes(other, kHeader + "1,0,a,\"[1, 2, 3, 4, 5, 6]\"\n3,0,a,\"[1, 2, 3, 4, 5, 6]\"\n");
  imported = ImportAndReadBack(CsvOptions({kDir + "/prompt-a.csv", other}), out);
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find("mixed models: MoE layers [1,3]"), std::string::npos)
      << imported.status().message();
}

TEST(MoeBeyondCsvTest, SkipBadKeepsPositionsAndCounts) {
  TempDir dir;
  const std::string path = dir.File("bad.csv");
  WriteFileBytes(path, kHeader +
                           "1,0,a,\"[1, 2, 3, 4, 5, 6]\"\n"
                           "1,0,b,\"[1, 2, 3, 4, 5, 99]\"\n"  // out of range: skipped, keeps position 1
                           "1,0,c,\"[6, 5, 4, 3, 2, 1]\"\n"
                           "1,0,\"d\n");  // never closed: the rest of the file is lost
  ImportOptions options = CsvOptions({path});
  options.skip_bad = true;
  TempDir out;
  auto imported = ImportAndReadBack(options, out);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(imported->report.rows_skipped, 2u);
  EXPECT_EQ(imported->report.rows_read, 4u);
  ASSERT_EQ(imported->records.size(), 1u);
  EXPECT_EQ(imported->records[0].positions, (std::vector<uint64_t>{0, 2}));
  // CSV structure is checked while reading, ids once the shape is known: reasons come in that order.
  ASSERT_EQ(imported->report.skipped_reasons.size(), 2u);
  EXPECT_NE(imported->report.skipped_reasons[0].find("bad.csv:5: quoted field is never closed"), std::string::npos);
  EXPECT_NE(imported->report.skipped_reasons[1].find("bad.csv:3: expert id 99 out of range"), std::string::npos);
}

}  // namespace
}  // namespace colibri::traces
