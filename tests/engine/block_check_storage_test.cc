// CheckBlocksOnRead (block_check.h): a changed block read through real storage
// completes with kCorruption naming the block, the other blocks and partial
// reads pass, the caller's tags come back even when they repeat, and the
// counters count the bad read as an error. The StorageBackend contract over
// the decorator is in storage_conformance_test.cc.
#include "colibri/engine/block_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "colibri/engine/clock.h"
#include "model_test_util.h"

namespace colibri::engine {
namespace {

using ::testing::HasSubstr;
using testing_util::ReadBytes;
using testing_util::ScratchDir;
using testing_util::SmallShape;
using testing_util::WriteBytes;


// Polls until nothing is outstanding.
std::vector<ReadCompletion> PollAll(StorageBackend* storage) {
  std::vector<ReadCompletion> done;
  while (storage->outstanding() > 0 && storage->Poll(true, &done).ok()) {
  }
  return done;
}

class BlockCheckStorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_.Path("m");
    ASSERT_TRUE(SynthModel(SmallShape(DType::kBf16), 5, dir_).ok());
  }
  std::unique_ptr<StorageBackend> OpenOn(const Model& model) {
    StorageOptions options;
    options.clock = &clock_;
    options.queue_depth = 4;
    options.direct_io = false;
    auto storage = OpenPreadStorage(model.experts_path(), options);
    EXPECT_TRUE(storage.ok()) << storage.status().message();
    return CheckBlocksOnRead(model, std::move(storage).value());
  }

  ScratchDir scratch_;
  std::string dir_;
  MonotonicClock clock_;
};

TEST_F(BlockCheckStorageTest, AChangedBlockFailsItsReadNamingTheBlock) {
  {
    auto clean = OpenModel(dir_, ModelVerify::kNone);
    ASSERT_TRUE(clean.ok());
    std::vector<char> bytes = ReadBytes(dir_ + "/experts.bin");
    bytes[clean->ExpertOffset(1, 2) + 7] ^= 0x01;
    WriteBytes(dir_ + "/experts.bin", bytes);
  }
  auto model = OpenModel(dir_, ModelVerify::kBlocks);
  ASSERT_TRUE(model.ok()) << model.status().message();
  std::unique_ptr<StorageBackend> storage = OpenOn(*model);
  const uint64_t block_bytes = model->config().layout.block_bytes;
  std::vector<std::byte> buffers(8 * block_bytes);  // buffered reads: no alignment needed
  // Every block, with the tag 100 + expert: tags repeat across layers.
  for (uint32_t layer = 0; layer < 2; ++layer) {
    for (uint32_t expert = 0; expert < 4; ++expert) {
      const uint64_t slot = layer * 4 + expert;
      ASSERT_TRUE(storage
                      ->Submit({model->ExpertOffset(layer, expert), block_bytes, buffers.data() + slot * block_bytes,
                                100 + expert})
                      .ok());
    }
  }
  std::map<uint64_t, int> tags;
  int failed = 0;
  for (const ReadCompletion& c : PollAll(storage.get())) {
    ++tags[c.tag];
    if (c.status.ok()) continue;
    ++failed;
    EXPECT_EQ(c.tag, 102u);
    EXPECT_EQ(c.status.code(), StatusCode::kCorruption);
    EXPECT_THAT(c.status.message(), HasSubstr(dir_ + "/experts.bin: layer index 1 (source layer 1), expert 2 at byte " +
                                              std::to_string(model->ExpertOffset(1, 2))));
    EXPECT_THAT(c.status.message(), HasSubstr("experts.xxh3 records"));
  }
  EXPECT_EQ(failed, 1);
  EXPECT_EQ(tags, (std::map<uint64_t, int>{{100, 2}, {101, 2}, {102, 2}, {103, 2}}));
  EXPECT_EQ(storage->counters().reads, 7u);
  EXPECT_EQ(storage->counters().read_errors, 1u);
  EXPECT_EQ(storage->counters().read_bytes, 7 * block_bytes);

  // A read that is not one whole block is not checked, even over the change.
  ASSERT_TRUE(storage->Submit({model->ExpertOffset(1, 2), 4096, buffers.data(), 9}).ok());
  const std::vector<ReadCompletion> partial = PollAll(storage.get());
  ASSERT_EQ(partial.size(), 1u);
  EXPECT_TRUE(partial[0].status.ok()) << partial[0].status.message();
  EXPECT_EQ(partial[0].tag, 9u);
}

TEST_F(BlockCheckStorageTest, WrapsOnlyWhenTheModelAsksForIt) {
  for (ModelVerify verify : {ModelVerify::kNone, ModelVerify::kAuto, ModelVerify::kFull}) {
    auto model = OpenModel(dir_, verify);
    ASSERT_TRUE(model.ok());
    StorageOptions options;
    options.clock = &clock_;
    options.direct_io = false;
    auto storage = OpenPreadStorage(model->experts_path(), options);
    ASSERT_TRUE(storage.ok());
    StorageBackend* inner = storage->get();
    EXPECT_EQ(CheckBlocksOnRead(*model, std::move(storage).value()).get(), inner);
  }
}

}  // namespace
}  // namespace colibri::engine
