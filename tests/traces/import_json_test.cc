// The JSON importers (switch-json, expert-selection-json, routed-experts-json):
// round trips against an independent parse of the source (the real
// switch-base-8 capture and the fixtures in tests/data/importers), request
// and pass mapping, bad inputs with file and location in the error, and
// --skip-bad counts.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "colibri/traces/importers.h"
#include "test_util.h"

namespace colibri::traces {
namespace {

using Json = nlohmann::json;
using testing::ImportAndReadBack;
using testing::ImportedTrace;
using testing::ReadFileBytes;
using testing::SelectionsByToken;
using testing::TempDir;
using testing::TokenSelections;
using testing::WriteFileBytes;

const std::string kSwitchDir = std::string(COLIBRI_SHARED_DATA) + "/switch-base-8";
const std::string kSwitchTrace = kSwitchDir + "/router-trace.v2.json";
const std::string kFixtures = std::string(COLIBRI_TEST_DATA) + "/importers";

Json ParseFile(const std::string& path) { return Json::parse(ReadFileBytes(path)); }

std::vector<uint32_t> Ids(const Json& list) { return list.get<std::vector<uint32_t>>(); }

ImportOptions Options(const std::string& format, std::vector<std::string> inputs) {
  ImportOptions options;
  options.format = format;
  options.inputs = std::move(inputs);
  return options;
}

// Runs the import; the error message, or "" on success.
std::string ImportError(const ImportOptions& options) {
  TempDir dir;
  auto imported = ImportAndReadBack(options, dir);
  return imported.ok() ? "" : imported.status().message();
}

void ExpectErrorMentions(const ImportOptions& options, const std::vector<std::string>& parts) {
  const std::string message = ImportError(options);
  ASSERT_FALSE(message.empty()) << "import succeeded";
  for (const std::string& part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
}

// --- switch-json ---

ImportOptions SwitchOptions(const std::string& trace = kSwitchTrace) {
  ImportOptions options = Options("switch-json", {trace});
  options.expert_bytes = 2ull * 768 * 3072 * 4;  // wi + wo of switch-base-8, fp32
  return options;
}

TEST(SwitchJsonTest, RealCaptureRoundTripsWithRequestsFromMetadata) {
  TempDir dir;
  auto imported = ImportAndReadBack(SwitchOptions(), dir);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  const Json source = ParseFile(kSwitchTrace);
  const Json metadata = ParseFile(kSwitchDir + "/capture-metadata.json");
  const std::vector<uint32_t> layers = metadata["sparse_encoder_block_indices"].get<std::vector<uint32_t>>();
  EXPECT_EQ(layers, (std::vector<uint32_t>{1, 3, 5, 7, 9, 11}));

  TokenSelections expected;
  const Json& spans = metadata["prompt_spans"];
  for (size_t request = 0; request < spans.size(); ++request) {
    const uint64_t start = spans[request]["token_start"].get<uint64_t>();
    const uint64_t end = spans[request]["token_end_exclusive"].get<uint64_t>();
    for (uint64_t token = start; token < end; ++token) {
      for (size_t l = 0; l < layers.size(); ++l) {
        expected[{request, token - start, layers[l]}] = Ids(source["selections"][token][l]);
      }
    }
  }
  const ImportedTrace& trace = imported.value();
  EXPECT_EQ(SelectionsByToken(trace.records, 1), expected);
  EXPECT_EQ(expected.size(), 215u * 6);

  const ModelShape& shape = trace.header.shape;
  EXPECT_EQ(shape.moe_layer_ids, layers);
  EXPECT_EQ(shape.experts_per_layer, 8u);
  EXPECT_EQ(shape.top_k, 1u);
  EXPECT_EQ(shape.model_name, "google/switch-base-8@92fe2d22b024d9937146fe097ba3d3a7ba146e1b");
  EXPECT_EQ(trace.header.provenance.source_engine, "huggingface-transformers");
  EXPECT_EQ(trace.header.provenance.license, "Apache-2.0");
  EXPECT_EQ(trace.header.provenance.importer, "switch-json");
  ASSERT_EQ(trace.header.provenance.sources.size(), 2u);  // trace + metadata
  EXPECT_EQ(trace.header.provenance.sources[0].sha256, metadata["trace_sha256"].get<std::string>());
  EXPECT_NE(trace.header.provenance.notes.find("argmax(raw_encoder_router_logits)"), std::string::npos);

  // One prefill pass per prompt span: 10 requests x 6 layers, pass id = request.
  EXPECT_EQ(trace.records.size(), 10u * 6);
  for (const TraceRecord& r : trace.records) {
    EXPECT_TRUE(r.prefill);
    EXPECT_EQ(r.pass_id, r.request_id);
    const uint64_t span_tokens =
        spans[r.request_id]["token_end_exclusive"].get<uint64_t>() - spans[r.request_id]["token_start"].get<uint64_t>();
    EXPECT_EQ(r.token_count(), span_tokens);
    EXPECT_EQ(r.positions.front(), 0u);
  }
  EXPECT_EQ(trace.report.rows_read, 215u * 6);
  EXPECT_EQ(trace.report.requests, 10u);
  EXPECT_EQ(trace.report.tokens, 215u);
}

TEST(SwitchJsonTest, WithoutMetadataOneRequestAndLayersFromZero) {
  TempDir dir;
  const std::string copy = dir.File("router-trace.v2.json");
  WriteFileBytes(copy, ReadFileBytes(kSwitchTrace));
  TempDir out;
  auto imported = ImportAndReadBack(SwitchOptions(copy), out);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(imported->header.shape.moe_layer_ids, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5}));
  ASSERT_EQ(imported->records.size(), 6u);
  for (const TraceRecord& r : imported->records) {
    EXPECT_EQ(r.request_id, 0u);
    EXPECT_EQ(r.token_count(), 215u);
    EXPECT_EQ(r.positions.back(), 214u);
  }
}

TEST(SwitchJsonTest, RefusesSwitchBase128ConfigAndMissingSizes) {
  ImportOptions options = Options("switch-json", {kSwitchTrace});
  options.model_config_path = std::string(COLIBRI_SHARED_DATA) + "/model-configs/switch/config.json";
  ExpectErrorMentions(options, {"128 experts per layer", "expertsPerLayer 8", "model-configs/switch/config.json"});
  ExpectErrorMentions(Options("switch-json", {kSwitchTrace}), {"--expert-bytes"});
  ImportOptions wrong_experts = SwitchOptions();
  wrong_experts.experts = 16;
  ExpectErrorMentions(wrong_experts, {"--experts 16", "expertsPerLayer 8"});
}

TEST(SwitchJsonTest, BadInputsNameFileAndLocation) {
  TempDir dir;
  const std::string path = dir.File("router-trace.v2.json");
  const Json good = ParseFile(kSwitchTrace);
  auto with = [&](const std::function<void(Json&)>& edit) {
    Json bad = good;
    edit(bad);
    WriteFileBytes(path, bad.dump());
    return SwitchOptions(path);
  };
  ExpectErrorMentions(with([](Json& j) { j["selections"][5][2][0] = 9; }),
                      {path, "selections[5][2]", "expert id 9 out of range"});
  ExpectErrorMentions(with([](Json& j) { j["selections"][7][0][0] = -1; }), {"selections[7][0]", "negative"});
  ExpectErrorMentions(with([](Json& j) {
                        j["selections"][3][1] = Json::array({1, 2});
                      }),
                      {"selections[3][1]", "ragged top-k"});
  ExpectErrorMentions(with([](Json& j) { j["selections"][4].erase(0); }), {"selections[4]", "6 layer entries"});
  ExpectErrorMentions(with([](Json& j) { j["tokens"] = 300; }), {path, "'tokens' says 300"});
  ExpectErrorMentions(with([](Json& j) { j.erase("topK"); }), {path, "'topK': missing"});
  // A 20 MB value is echoed as its first 80 bytes and its length.
  const ImportOptions huge = with([](Json& j) { j["topK"] = std::string(20 << 20, 'k'); });
  ExpectErrorMentions(huge, {"'topK'", "... (20971522 bytes)"});
  EXPECT_LT(ImportError(huge).size(), 1000u) << "an unbounded echo";
  WriteFileBytes(path, ReadFileBytes(kSwitchTrace).substr(0, 500));
  ExpectErrorMentions(SwitchOptions(path), {path, "byte ", "invalid JSON"});
  WriteFileBytes(path, "");
  ExpectErrorMentions(SwitchOptions(path), {path, "empty file"});

  // Metadata that belongs to another capture.
  WriteFileBytes(path, good.dump());
  Json metadata = ParseFile(kSwitchDir + "/capture-metadata.json");
  WriteFileBytes(dir.File("capture-metadata.json"), metadata.dump());
  ExpectErrorMentions(SwitchOptions(path), {"capture-metadata.json", "trace_sha256"});
  metadata.erase("trace_sha256");
  metadata["prompt_spans"][3]["token_start"] = 60;  // overlaps the previous span
  WriteFileBytes(dir.File("capture-metadata.json"), metadata.dump());
  ExpectErrorMentions(SwitchOptions(path), {"capture-metadata.json", "prompt_spans[3]"});
}

TEST(SwitchJsonTest, SkipBadCountsSkippedSelections) {
  TempDir dir;
  const std::string path = dir.File("router-trace.v2.json");
  Json bad = ParseFile(kSwitchTrace);
  bad["selections"][0][0][0] = 8;
  bad["selections"][10][5][0] = "x";
  bad["selections"][20] = 3;
  WriteFileBytes(path, bad.dump());
  ImportOptions options = SwitchOptions(path);
  options.skip_bad = true;
  TempDir out;
  auto imported = ImportAndReadBack(options, out);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(imported->report.rows_skipped, 3u);
  EXPECT_EQ(imported->report.skipped_reasons.size(), 3u);
  EXPECT_EQ(imported->report.rows_read, 214u * 6 + 1);
  EXPECT_EQ(imported->report.selections, 214u * 6 - 2);
  EXPECT_EQ(SelectionsByToken(imported->records, 1).count({0, 0, 0}), 0u);
}

// --- expert-selection-json ---

const std::string kSelectionDir = kFixtures + "/expert-selection";

ImportOptions SelectionOptions(std::vector<std::string> inputs) {
  ImportOptions options = Options("expert-selection-json", std::move(inputs));
  options.experts = 16;
  options.expert_bytes = 4096;
  return options;
}

// (request, position, layer) -> ids, straight from the fixture files in name order.
TokenSelections ParseSelectionFiles(const std::vector<std::string>& sorted_files) {
  TokenSelections out;
  for (size_t request = 0; request < sorted_files.size(); ++request) {
    uint64_t position = 0;
    for (const Json& pass : ParseFile(sorted_files[request])) {
      size_t tokens = 0;
      for (const auto& [key, list] : pass.items()) {
        if (list.is_null()) continue;
        for (size_t t = 0; t < list.size(); ++t) out[{request, position + t, std::stoul(key)}] = Ids(list[t]);
        tokens = list.size();
      }
      position += tokens;
    }
  }
  return out;
}

TEST(ExpertSelectionJsonTest, FixturesRoundTripOneRequestPerFileInNameOrder) {
  const std::string first = kSelectionDir + "/request-01.json";
  const std::string second = kSelectionDir + "/request-02.json";
  TempDir dir;
  auto imported = ImportAndReadBack(SelectionOptions({second, first}), dir);  // given out of order
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(SelectionsByToken(imported->records, 2), ParseSelectionFiles({first, second}));
  EXPECT_EQ(imported->header.shape.moe_layer_ids, (std::vector<uint32_t>{1, 2, 10}));
  EXPECT_EQ(imported->header.shape.top_k, 2u);
  EXPECT_EQ(imported->header.provenance.source_engine, "sglang");
  EXPECT_EQ(imported->header.provenance.sources.size(), 2u);

  // request-01: prefill (3 tokens) + 2 decode steps; request-02: prefill (2) + 1 step.
  // Each pass has its own id; records come in pass order, 3 layers each.
  ASSERT_EQ(imported->records.size(), 5u * 3);
  std::vector<std::tuple<uint64_t, uint64_t, bool, size_t>> passes;  // request, pass, prefill, tokens
  for (const TraceRecord& r : imported->records) {
    if (r.layer == 1) passes.emplace_back(r.request_id, r.pass_id, r.prefill, r.token_count());
  }
  EXPECT_EQ(passes, (std::vector<std::tuple<uint64_t, uint64_t, bool, size_t>>{
                        {0, 0, true, 3}, {0, 1, false, 1}, {0, 2, false, 1}, {1, 3, true, 2}, {1, 4, false, 1}}));
  EXPECT_EQ(imported->records[3].positions, (std::vector<uint64_t>{3}));  // first decode step follows the prompt
  EXPECT_EQ(imported->report.rows_read, (3u + 1 + 1 + 2 + 1) * 3);
}

TEST(ExpertSelectionJsonTest, WithModelConfig) {
  // Qwen1.5-MoE: 24 MoE layers, 60 experts; the fixture's layers 1, 2, 10 are MoE layers there.
  ImportOptions options = Options("expert-selection-json", {kSelectionDir + "/request-01.json"});
  options.model_config_path = std::string(COLIBRI_SHARED_DATA) + "/model-configs/qwen/config.json";
  TempDir dir;
  auto imported = ImportAndReadBack(options, dir);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(imported->header.shape.num_moe_layers(), 24u);
  EXPECT_EQ(imported->header.shape.top_k, 2u);  // from the data
  EXPECT_EQ(imported->header.shape.expert_bytes[0], 3ull * 2048 * 1408 * 2);
}

TEST(ExpertSelectionJsonTest, BadInputsNameFileAndLocation) {
  TempDir dir;
  const std::string path = dir.File("bad.json");
  const Json good = ParseFile(kSelectionDir + "/request-01.json");
  auto with = [&](const std::function<void(Json&)>& edit) {
    Json bad = good;
    edit(bad);
    WriteFileBytes(path, bad.dump());
    return SelectionOptions({path});
  };
  ExpectErrorMentions(with([](Json& j) {
                        j[0]["2"][1] = Json::array({16, 1});
                      }),
                      {path, "[0][\"2\"][1]", "expert id 16 out of range"});
  ExpectErrorMentions(with([](Json& j) { j[1]["1"][0] = Json::array({4, 4}); }), {"[1][\"1\"][0]", "duplicate"});
  ExpectErrorMentions(with([](Json& j) { j[2]["10"][0] = Json::array({1, 2, 3}); }), {"[2][\"10\"][0]", "ragged"});
  ExpectErrorMentions(with([](Json& j) {
                        j[1]["7"] = Json::array({Json::array({1, 2})});
                      }),
                      {"[1][\"7\"]", "layer 7 is not a MoE layer"});
  ExpectErrorMentions(with([](Json& j) { j[1]["x"] = nullptr; }), {"[1][\"x\"]", "layer key"});
  ExpectErrorMentions(with([](Json& j) { j[0]["1"].erase(0); }), {"[0][\"", "tokens, but other layers"});
  ExpectErrorMentions(with([](Json& j) { j = Json::array(); }), {path, "non-empty list"});
  ExpectErrorMentions(with([](Json& j) { j[0] = Json::object({{"1", nullptr}}); }), {path, "no MoE layer"});

  // Mixed models: a second file with other layers or another top-k.
  const std::string other = dir.File("zz-other.json");
  WriteFileBytes(other, R"([{"1": [[1, 2]], "2": [[3, 4]]}])");
  ExpectErrorMentions(SelectionOptions({kSelectionDir + "/request-01.json", other}),
                      {other, "mixed models", "request-01.json"});
  WriteFileBytes(other, R"([{"1": [[1, 2, 3]], "2": [[3, 4, 5]], "10": [[6, 7, 8]]}])");
  ExpectErrorMentions(SelectionOptions({kSelectionDir + "/request-01.json", other}), {other, "top-k 3"});
}

TEST(ExpertSelectionJsonTest, SkipBadCountsSkippedTokens) {
  TempDir dir;
  const std::string path = dir.File("bad.json");
  Json bad = ParseFile(kSelectionDir + "/request-01.json");
  bad[0]["2"][1] = Json::array({16, 1});
  bad[1]["1"][0] = Json::array({-3, 1});
  bad[2] = "not a pass";
  WriteFileBytes(path, bad.dump());
  ImportOptions options = SelectionOptions({path});
  options.skip_bad = true;
  TempDir out;
  auto imported = ImportAndReadBack(options, out);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(imported->report.rows_skipped, 3u);
  EXPECT_EQ(imported->report.selections, (3u * 3 + 3 - 2) * 2);
  EXPECT_EQ(SelectionsByToken(imported->records, 2).count({0, 1, 2}), 0u);  // the skipped prefill token
}

// --- routed-experts-json ---

const std::string kRoutedDir = kFixtures + "/routed-experts";

ImportOptions RoutedOptions(std::vector<std::string> inputs) {
  ImportOptions options = Options("routed-experts-json", std::move(inputs));
  options.experts = 8;
  options.expert_bytes = 1024;
  return options;
}

TEST(RoutedExpertsJsonTest, FixturesRoundTripAsOnePrefillPassPerFile) {
  const std::vector<std::string> files = {kRoutedDir + "/request-a.json", kRoutedDir + "/request-b.json"};
  TempDir dir;
  auto imported = ImportAndReadBack(RoutedOptions(files), dir);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  TokenSelections expected;
  for (size_t request = 0; request < files.size(); ++request) {
    const Json tokens = ParseFile(files[request])["routed_experts"];
    for (size_t t = 0; t < tokens.size(); ++t) {
      for (uint32_t layer : {1u, 3u}) expected[{request, t, layer}] = Ids(tokens[t][layer]);
    }
  }
  EXPECT_EQ(SelectionsByToken(imported->records, 2), expected);
  EXPECT_EQ(imported->header.shape.moe_layer_ids, (std::vector<uint32_t>{1, 3}));  // -1 and [-1, -1] are dense
  ASSERT_EQ(imported->records.size(), 4u);
  for (const TraceRecord& r : imported->records) {
    EXPECT_TRUE(r.prefill);
    EXPECT_EQ(r.pass_id, r.request_id);
  }
  EXPECT_EQ(imported->report.rows_read, (3u + 2) * 2);
}

TEST(RoutedExpertsJsonTest, BadInputsNameFileAndLocation) {
  TempDir dir;
  const std::string path = dir.File("bad.json");
  const Json good = ParseFile(kRoutedDir + "/request-a.json");
  auto with = [&](const std::function<void(Json&)>& edit) {
    Json bad = good;
    edit(bad);
    WriteFileBytes(path, bad.dump());
    return RoutedOptions({path});
  };
  ExpectErrorMentions(with([](Json& j) {
                        j["routed_experts"][1][3] = Json::array({8, 1});
                      }),
                      {path, "routed_experts[1][3]", "expert id 8 out of range"});
  ExpectErrorMentions(with([](Json& j) {
                        j["routed_experts"][2][1] = Json::array({5, -1});
                      }),
                      {"routed_experts[2][1]", "negative expert id -1"});
  ExpectErrorMentions(with([](Json& j) {
                        j["routed_experts"][2][0] = Json::array({5, 1});
                      }),
                      {"routed_experts[2][0]", "not a MoE layer"});
  ExpectErrorMentions(with([](Json& j) { j["routed_experts"][1].erase(0); }),
                      {"routed_experts[1]", "expected 4 layer entries"});
  ExpectErrorMentions(with([](Json& j) { j = Json::object({{"experts", 1}}); }), {path, "'routed_experts'"});
  ExpectErrorMentions(with([](Json& j) { j["routed_experts"][0] = Json::array({-1, -1}); }), {path, "no MoE layer"});
  WriteFileBytes(dir.File("three.json"), R"({"routed_experts": [[-1, [1, 2, 3], -1, [4, 5, 6]]]})");
  ExpectErrorMentions(RoutedOptions({kRoutedDir + "/request-a.json", dir.File("three.json")}),
                      {"three.json", "mixed models", "top-k 3"});
  WriteFileBytes(dir.File("layers.json"), R"({"routed_experts": [[[1, 2], [1, 2], -1, [4, 5]]]})");
  ExpectErrorMentions(RoutedOptions({kRoutedDir + "/request-a.json", dir.File("layers.json")}),
                      {"layers.json", "mixed models", "[0,1,3]"});
}

TEST(RoutedExpertsJsonTest, SkipBadCountsSkippedTokens) {
  TempDir dir;
  const std::string path = dir.File("bad.json");
  Json bad = ParseFile(kRoutedDir + "/request-a.json");
  bad["routed_experts"][1][1] = Json::array({2, 2});
  bad["routed_experts"][2] = "oops";
  WriteFileBytes(path, bad.dump());
  ImportOptions options = RoutedOptions({path});
  options.skip_bad = true;
  TempDir out;
  auto imported = ImportAndReadBack(options, out);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(imported->report.rows_skipped, 2u);
  EXPECT_EQ(imported->report.selections, 3u * 2);
}

}  // namespace
}  // namespace colibri::traces
