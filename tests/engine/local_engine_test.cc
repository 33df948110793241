// LocalEngine on this machine's backends: io_uring reads land in the engine's
// pools registered as fixed buffers, and the output does not depend on the
// storage backend.
#include "colibri/engine/local_engine.h"

#include <gtest/gtest.h>

#include <random>

#include "model_test_util.h"

namespace colibri::engine {
namespace {

using testing_util::ScratchDir;

struct ForwardResult {
  std::vector<float> out;
  StorageCounters counters;
  std::string warning;
};

// Two passes over every layer of a small synthetic model, experts streamed through a one-expert L2.
Result<ForwardResult> ForwardTwice(const std::string& dir, const std::string& storage) {
  LocalEngineOptions options;
  options.model_dir = dir;
  options.storage = storage;
  COLIBRI_ASSIGN_OR_RETURN(Model probe, OpenModel(dir, false));
  options.engine.l2_bytes = probe.config().layout.block_bytes;
  options.engine.l1_bytes = 0;
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<LocalEngine> e, LocalEngine::Open(options));
  const uint32_t hidden = e->model.config().hidden;
  const size_t tokens = 3;
  std::vector<float> x(tokens * hidden), y(tokens * hidden);
  std::mt19937_64 rng(7);
  for (float& v : x) v = static_cast<float>(rng() % 2001) / 1000.0f - 1.0f;
  ForwardResult r;
  for (int pass = 0; pass < 2; ++pass) {
    for (uint32_t layer = 0; layer < e->model.config().layers(); ++layer) {
      COLIBRI_RETURN_IF_ERROR(e->moe->Forward(layer, x.data(), tokens, y.data()));
      r.out.insert(r.out.end(), y.begin(), y.end());
    }
  }
  r.counters = e->storage->counters();
  r.warning = e->warning;
  return r;
}

TEST(LocalEngineTest, UringReadsLandInRegisteredPoolsAndMatchPread) {
  ScratchDir scratch;
  ASSERT_TRUE(SynthModel(testing_util::SmallShape(DType::kBf16), 3, scratch.Path("m")).ok());
  auto uring = ForwardTwice(scratch.Path("m"), "uring");
  if (!uring.ok() && uring.status().code() == StatusCode::kUnsupported) GTEST_SKIP() << uring.status().message();
  ASSERT_TRUE(uring.ok()) << uring.status().message();
  auto pread = ForwardTwice(scratch.Path("m"), "pread");
  ASSERT_TRUE(pread.ok()) << pread.status().message();
  EXPECT_EQ(uring.value().warning.find("registering"), std::string::npos) << uring.value().warning;
  EXPECT_GT(uring.value().counters.reads, 0u);
  EXPECT_EQ(uring.value().counters.registered_reads, uring.value().counters.reads);
  EXPECT_EQ(pread.value().counters.registered_reads, 0u);
  EXPECT_EQ(uring.value().counters.reads, pread.value().counters.reads);
  EXPECT_EQ(uring.value().out, pread.value().out);
}

TEST(LocalEngineTest, RegisteringBuffersIsValidated) {
  ScratchDir scratch;
  ASSERT_TRUE(SynthModel(testing_util::SmallShape(DType::kFp32), 3, scratch.Path("m")).ok());
  MonotonicClock clock;
  StorageOptions options;
  options.clock = &clock;
  auto storage = OpenUringStorage(scratch.Path("m") + "/experts.bin", options);
  if (!storage.ok() && storage.status().code() == StatusCode::kUnsupported) GTEST_SKIP();
  ASSERT_TRUE(storage.ok()) << storage.status().message();
  EXPECT_EQ(storage.value()->RegisterBuffers({MemoryRegion{nullptr, 4096}}).code(), StatusCode::kInvalidArgument);
  alignas(4096) static std::byte buffer[2 * 4096];
  ASSERT_TRUE(storage.value()->RegisterBuffers({MemoryRegion{buffer, 4096}}).ok());
  // Replacing the set works; a read inside it is a registered read.
  ASSERT_TRUE(storage.value()->RegisterBuffers({MemoryRegion{buffer, sizeof(buffer)}}).ok());
  ASSERT_TRUE(storage.value()->Submit(ReadRequest{0, 4096, buffer + 4096, 1}).ok());
  EXPECT_EQ(storage.value()->RegisterBuffers({}).code(), StatusCode::kInvalidArgument);  // a read is outstanding
  std::vector<ReadCompletion> done;
  while (done.empty()) ASSERT_TRUE(storage.value()->Poll(true, &done).ok());
  EXPECT_TRUE(done[0].status.ok());
  EXPECT_EQ(storage.value()->counters().registered_reads, 1u);
}

}  // namespace
}  // namespace colibri::engine
