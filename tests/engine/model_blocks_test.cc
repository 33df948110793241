// Model format 2's block digests (experts.xxh3): written by every writer,
// checked whole by verify and --verify full, block by block on read under
// kBlocks (and kAuto above 1 GiB), and what a format 1 model still gets.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "colibri/engine/model.h"
#include "model_test_util.h"

namespace colibri::engine {
namespace {

using ::testing::HasSubstr;
using testing_util::ExpertBlock;
using testing_util::FindCheck;
using testing_util::ReadBytes;
using testing_util::ScratchDir;
using testing_util::SmallShape;
using testing_util::WriteBytes;
using testing_util::WriteText;

// Flips one byte inside the block of (layer index 1, expert 2).
void FlipBlockByte(const std::string& dir) {
  auto model = OpenModel(dir, ModelVerify::kNone);
  ASSERT_TRUE(model.ok()) << model.status().message();
  std::vector<char> bytes = ReadBytes(dir + "/experts.bin");
  bytes[model->ExpertOffset(1, 2) + 100] ^= 0x10;
  WriteBytes(dir + "/experts.bin", bytes);
}

// Rewrites a format 2 model as format 1: no experts.xxh3.
void MakeFormat1(const std::string& dir) {
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(testing_util::ReadText(dir + "/config.json"));
  config["format_version"] = 1;
  config["files"].erase("block_digests");
  WriteText(dir + "/config.json", config.dump(2));
  std::filesystem::remove(dir + "/experts.xxh3");
}

TEST(ModelBlocksTest, WritersRecordADigestOfEveryBlock) {
  ScratchDir scratch;
  const std::string dir = scratch.Path("m");
  auto written = SynthModel(SmallShape(DType::kBf16), 3, dir);
  ASSERT_TRUE(written.ok()) << written.status().message();
  ASSERT_TRUE(written->block_digests_file.has_value());
  EXPECT_EQ(written->block_digests_file->name, "experts.xxh3");
  EXPECT_EQ(written->block_digests_file->bytes, 32u + 8u * 2 * 4);
  EXPECT_EQ(std::filesystem::file_size(dir + "/experts.xxh3"), written->block_digests_file->bytes);
  const auto config = nlohmann::json::parse(testing_util::ReadText(dir + "/config.json"));
  EXPECT_EQ(config["format_version"], 2);
  EXPECT_EQ(config["files"]["block_digests"]["sha256"], written->block_digests_file->sha256);

  auto model = OpenModel(dir, ModelVerify::kBlocks);
  ASSERT_TRUE(model.ok()) << model.status().message();
  EXPECT_FALSE(model->experts_verified());
  EXPECT_TRUE(model->check_blocks_on_read());
  for (uint32_t layer = 0; layer < 2; ++layer) {
    for (uint32_t expert = 0; expert < 4; ++expert) {
      EXPECT_TRUE(model->CheckExpertBlock(layer, expert, ExpertBlock(*model, layer, expert).data()).ok());
    }
  }
  // A block is checked against its own digest, not any digest.
  EXPECT_EQ(model->CheckExpertBlock(0, 1, ExpertBlock(*model, 0, 0).data()).code(), StatusCode::kCorruption);

  // Hashed whole at open: nothing left to check on read.
  for (ModelVerify verify : {ModelVerify::kAuto, ModelVerify::kFull}) {
    auto whole = OpenModel(dir, verify);
    ASSERT_TRUE(whole.ok()) << whole.status().message();
    EXPECT_TRUE(whole->experts_verified());
    EXPECT_FALSE(whole->check_blocks_on_read());
  }
  auto unchecked = OpenModel(dir, ModelVerify::kNone);
  ASSERT_TRUE(unchecked.ok());
  EXPECT_FALSE(unchecked->check_blocks_on_read());
}

TEST(ModelBlocksTest, AChangedBlockIsNamedByVerifyAndOnRead) {
  ScratchDir scratch;
  const std::string dir = scratch.Path("m");
  ASSERT_TRUE(SynthModel(SmallShape(DType::kBf16), 3, dir).ok());
  FlipBlockByte(dir);

  auto report = VerifyModel(dir, true);
  ASSERT_TRUE(report.ok());
  const ModelCheck* blocks = FindCheck(*report, "blocks");
  ASSERT_NE(blocks, nullptr);
  EXPECT_EQ(blocks->status.code(), StatusCode::kCorruption);
  EXPECT_THAT(blocks->status.message(),
              HasSubstr("experts.bin: 1 of 8 blocks differ from experts.xxh3 (layer index 1 (source layer 1), expert 2 at byte "));
  EXPECT_FALSE(FindCheck(*report, "experts_sha256")->status.ok());
  EXPECT_TRUE(FindCheck(*report, "block_digests_sha256")->status.ok());

  // --verify full refuses at open; kBlocks opens and refuses that block when read.
  auto full = OpenModel(dir, ModelVerify::kFull);
  ASSERT_FALSE(full.ok());
  EXPECT_THAT(full.status().message(), HasSubstr("experts.bin: sha256"));
  auto model = OpenModel(dir, ModelVerify::kBlocks);
  ASSERT_TRUE(model.ok()) << model.status().message();
  EXPECT_TRUE(model->CheckExpertBlock(1, 1, ExpertBlock(*model, 1, 1).data()).ok());
  const Status changed = model->CheckExpertBlock(1, 2, ExpertBlock(*model, 1, 2).data());
  EXPECT_EQ(changed.code(), StatusCode::kCorruption);
  EXPECT_THAT(changed.message(), HasSubstr(dir + "/experts.bin: layer index 1 (source layer 1), expert 2 at byte " +
                                           std::to_string(model->ExpertOffset(1, 2))));
  EXPECT_THAT(changed.message(), HasSubstr("reads as xxh3 0x"));
  EXPECT_THAT(changed.message(), HasSubstr("experts.xxh3 records 0x"));
}

TEST(ModelBlocksTest, AChangedDigestFileIsRefusedAtOpen) {
  ScratchDir scratch;
  const std::string dir = scratch.Path("m");
  ASSERT_TRUE(SynthModel(SmallShape(DType::kBf16), 3, dir).ok());
  std::vector<char> bytes = ReadBytes(dir + "/experts.xxh3");
  bytes[40] ^= 0x01;  // the digest of block 1
  WriteBytes(dir + "/experts.xxh3", bytes);
  for (ModelVerify verify : {ModelVerify::kBlocks, ModelVerify::kAuto, ModelVerify::kFull}) {
    auto opened = OpenModel(dir, verify);
    ASSERT_FALSE(opened.ok());
    EXPECT_EQ(opened.status().code(), StatusCode::kCorruption);
    EXPECT_THAT(opened.status().message(), HasSubstr("experts.xxh3: sha256"));
  }
  // A header that disagrees with config.json is named field by field.
  bytes = ReadBytes(dir + "/experts.xxh3");
  bytes[40] ^= 0x01;
  bytes[16] = 9;  // experts
  WriteBytes(dir + "/experts.xxh3", bytes);
  auto opened = OpenModel(dir, ModelVerify::kNone);
  ASSERT_FALSE(opened.ok());
  EXPECT_THAT(opened.status().message(), HasSubstr("experts.xxh3: header says experts 9, expected 4"));
  std::filesystem::resize_file(dir + "/experts.xxh3", 50);
  opened = OpenModel(dir, ModelVerify::kNone);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kTruncated);
  std::filesystem::remove(dir + "/experts.xxh3");
  opened = OpenModel(dir, ModelVerify::kNone);
  ASSERT_FALSE(opened.ok());
  EXPECT_THAT(opened.status().message(), HasSubstr("experts.xxh3"));
}

TEST(ModelBlocksTest, Format1ModelsStillOpenWithoutBlockChecks) {
  ScratchDir scratch;
  const std::string dir = scratch.Path("m");
  ASSERT_TRUE(SynthModel(SmallShape(DType::kBf16), 3, dir).ok());
  MakeFormat1(dir);
  auto model = OpenModel(dir, ModelVerify::kAuto);
  ASSERT_TRUE(model.ok()) << model.status().message();
  EXPECT_TRUE(model->experts_verified());
  EXPECT_FALSE(model->has_block_digests());
  EXPECT_FALSE(model->config().block_digests_file.has_value());
  auto blocks = OpenModel(dir, ModelVerify::kBlocks);
  ASSERT_FALSE(blocks.ok());
  EXPECT_THAT(blocks.status().message(), HasSubstr("a format 1 model has no block digests"));
  auto report = VerifyModel(dir, true);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok());
  EXPECT_EQ(FindCheck(*report, "blocks"), nullptr);
}

TEST(ModelBlocksTest, UpgradeAddsTheDigestsSynthWouldHaveWritten) {
  ScratchDir scratch;
  const std::string dir = scratch.Path("m");
  ASSERT_TRUE(SynthModel(SmallShape(DType::kBf16), 3, dir).ok());
  const std::vector<char> digests = ReadBytes(dir + "/experts.xxh3");
  const std::string config = testing_util::ReadText(dir + "/config.json");
  MakeFormat1(dir);
  auto upgraded = UpgradeModel(dir);
  ASSERT_TRUE(upgraded.ok()) << upgraded.status().message();
  EXPECT_EQ(ReadBytes(dir + "/experts.xxh3"), digests);
  EXPECT_EQ(nlohmann::json::parse(testing_util::ReadText(dir + "/config.json")), nlohmann::json::parse(config));
  auto model = OpenModel(dir, ModelVerify::kBlocks);
  ASSERT_TRUE(model.ok()) << model.status().message();
  EXPECT_TRUE(model->check_blocks_on_read());
  const Status again = UpgradeModel(dir).status();
  EXPECT_EQ(again.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(again.message(), HasSubstr("already format 2"));

  // A changed byte is refused before anything is written: the digests would
  // otherwise bless it.
  MakeFormat1(dir);
  const std::string format1 = testing_util::ReadText(dir + "/config.json");
  FlipBlockByte(dir);
  const Status changed = UpgradeModel(dir).status();
  EXPECT_EQ(changed.code(), StatusCode::kCorruption);
  EXPECT_THAT(changed.message(), HasSubstr("experts.bin: sha256"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/experts.xxh3"));
  EXPECT_EQ(testing_util::ReadText(dir + "/config.json"), format1);
}

TEST(ModelBlocksTest, ConfigFieldsOfEachFormatVersion) {
  ScratchDir scratch;
  const std::string dir = scratch.Path("m");
  ASSERT_TRUE(SynthModel(SmallShape(DType::kBf16), 3, dir).ok());
  const std::string text = testing_util::ReadText(dir + "/config.json");
  auto with = [&](const std::function<void(nlohmann::ordered_json&)>& edit) {
    nlohmann::ordered_json config = nlohmann::ordered_json::parse(text);
    edit(config);
    WriteText(dir + "/config.json", config.dump(2));
    return OpenModel(dir, ModelVerify::kNone).status();
  };
  EXPECT_THAT(with([](auto& c) { c["files"].erase("block_digests"); }).message(),
              HasSubstr("field 'files.block_digests': missing"));
  EXPECT_THAT(with([](auto& c) { c["format_version"] = 1; }).message(),
              HasSubstr("field 'files.block_digests': unknown field"));
  EXPECT_THAT(with([](auto& c) { c["format_version"] = 3; }).message(),
              HasSubstr("field 'format_version': 3, this build reads 1..2"));
  EXPECT_THAT(with([](auto& c) { c["files"]["block_digests"]["bytes"] = 8; }).message(),
              HasSubstr("field 'files.block_digests.bytes': 8 but the shape needs 96"));
  EXPECT_THAT(with([](auto& c) { c["files"]["block_digests"]["name"] = "gating.bin"; }).message(),
              HasSubstr("block_digests shares the name 'gating.bin'"));
}

}  // namespace
}  // namespace colibri::engine
