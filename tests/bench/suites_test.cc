// The suites on tiny inputs: the figures each returns, in order, the files
// it leaves (none unless asked), its progress; and the engine streaming a
// model's experts.
#include <gtest/gtest.h>

#include <filesystem>

#include "../traces/test_util.h"
#include "colibri/bench/compute_bench.h"
#include "colibri/bench/engine_streaming.h"
#include "colibri/bench/io_bench.h"
#include "colibri/bench/store_bench.h"
#include "colibri/engine/model.h"

namespace colibri::bench {
namespace {

using traces::testing::TempDir;

std::vector<std::string> Keys(const Json& doc) {
  std::vector<std::string> keys;
  for (const auto& item : doc.items()) keys.push_back(item.key());
  return keys;
}

size_t FilesIn(const std::string& dir) {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) n += entry.is_regular_file() ? 1 : 0;
  return n;
}

TEST(SuitesTest, CpuComputeAgainstItsReferences) {
  CpuComputeBenchOptions o;
  o.dtypes = {engine::DType::kBf16, engine::DType::kInt8};
  o.hidden = 64;
  o.intermediate = 32;
  o.batches = {1, 4};
  o.threads = {1};
  o.working_set_bytes = 256 * 1024;
  o.seconds = 0.002;
  o.repeats = 1;
  uint64_t steps = 0;
  Observer observer;
  observer.progress = [&](uint64_t, uint64_t total) { steps = total; };
  auto doc = RunCpuComputeBench(o, observer);
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  const Json& r = doc.value();
  EXPECT_EQ(Keys(r), (std::vector<std::string>{"machine", "working_set_bytes", "stream_copy_1_thread", "openblas_core",
                                                "openblas_sgemm_fp32", "results"}));
  EXPECT_EQ(steps, 4u);
  EXPECT_EQ(r["working_set_bytes"].get<uint64_t>(), 256u * 1024);
  ASSERT_EQ(r["results"].size(), 4u);
  EXPECT_EQ(r["openblas_sgemm_fp32"].size(), 2u);
  for (const Json& row : r["results"]) {
    EXPECT_GT(row["gflops"].get<double>(), 0);
    EXPECT_GT(row["bandwidth_over_stream"].get<double>(), 0);
    EXPECT_GT(row["gflops_over_openblas"].get<double>(), 0);
  }
  o.threads.clear();
  EXPECT_EQ(RunCpuComputeBench(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(SuitesTest, IoOnACreatedFileWithoutFio) {
  TempDir dir;
  IoBenchOptions o;
  o.dir = dir.path();
  o.size_bytes = 1 << 20;
  o.block_bytes = 60000;  // rounded up to 15 x 4 KiB
  o.queue_depth = 2;
  o.seconds = 1;
  o.backend = "pread";
  o.fio = "none";
  auto doc = RunIoBench(o);
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  const Json& r = doc.value();
  EXPECT_EQ(Keys(r).front(), "file");
  EXPECT_EQ(Keys(r).back(), "engine");
  EXPECT_TRUE(r["created_file"].get<bool>());
  EXPECT_EQ(r["block_bytes"].get<uint64_t>(), 61440u);
  EXPECT_EQ(r["read_bytes"].get<uint64_t>(), r["reads"].get<uint64_t>() * 61440);
  EXPECT_EQ(r["read_latency_ns"]["samples"].get<uint64_t>(), r["reads"].get<uint64_t>());
  EXPECT_FALSE(r["registered_buffers"].get<bool>());  // pread registers nothing
  EXPECT_TRUE(r["fio"].is_null());
  EXPECT_EQ(r["fio_note"].get<std::string>(), "skipped (--fio none)");
  EXPECT_TRUE(r["engine"].is_null());
  EXPECT_EQ(FilesIn(dir.path()), 0u);  // the created file is gone
  o.file = dir.File("missing.bin");
  EXPECT_EQ(RunIoBench(o).status().code(), StatusCode::kNotFound);
}

TEST(SuitesTest, EngineStreamsAModelsExpertBlocks) {
  TempDir dir;
  engine::ModelConfig shape;
  shape.dtype = engine::DType::kBf16;
  shape.layer_ids = {0, 1};
  shape.experts = 8;
  shape.top_k = 2;
  shape.hidden = 64;
  shape.intermediate = 32;
  ASSERT_TRUE(engine::SynthModel(shape, 3, dir.File("model")).ok());
  auto blocks = ModelBlocksOf(dir.File("model"));
  ASSERT_TRUE(blocks.ok()) << blocks.status().message();
  EXPECT_EQ(blocks.value().offsets.size(), 16u);
  EXPECT_EQ(blocks.value().block_bytes % 4096, 0u);
  EngineStreamingOptions o{.model_dir = dir.File("model"), .storage = "pread", .queue_depth = 2, .threads = 1,
                           .batch_tokens = 4, .duration_ns = 20'000'000};
  auto run = MeasureEngineStreaming(o);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_GT(run.value().layer_batches, 0u);
  EXPECT_GT(run.value().reads, 0u);  // all-miss: every expert read
  EXPECT_EQ(run.value().read_bytes, run.value().reads * blocks.value().block_bytes);
  EXPECT_GE(run.value().distinct_experts, run.value().layer_batches * 2);
  EXPECT_FALSE(ModelBlocksOf(dir.File("none")).ok());
}

TEST(SuitesTest, StoreComparesAgainstTheReferenceAndRemovesItsFiles) {
  TempDir dir;
  StoreBenchOptions o;
  o.runs = 2;
  o.samples = 800;
  o.dir = dir.path();
  int stamped = 0;
  o.stamp_run = [&](reports::RunInfo* info) {
    info->tool_version = "test";
    ++stamped;
  };
  auto doc = RunStoreBench(o);
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  const Json& r = doc.value();
  EXPECT_EQ(stamped, 2);
  EXPECT_TRUE(r["percentiles_match"].get<bool>());
  EXPECT_EQ(r["store_s"]["per_run"].size(), 2u);
  EXPECT_EQ(r["stored_samples"].get<uint64_t>(), 2u * (800 + 3 * 1000));
  EXPECT_FALSE(r["kept"].get<bool>());
  EXPECT_EQ(Keys(r).back(), "peak_rss_bytes");
  EXPECT_EQ(FilesIn(dir.path()), 0u);
  o.dir = dir.File("missing");
  EXPECT_EQ(RunStoreBench(o).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace colibri::bench
