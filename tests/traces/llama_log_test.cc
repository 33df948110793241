// The llama.cpp log reader (llama_log.h) on small written logs and on the
// bigmoe captures' own logs, and bmoe-csv's --llama-log: the attention shape,
// KV bytes, hidden size and other dense bytes land in the trace header.
#include "colibri/traces/llama_log.h"

#include <gtest/gtest.h>

#include "colibri/traces/importers.h"
#include "colibri/traces/reader.h"
#include "test_util.h"

namespace colibri::traces {
namespace {

using testing::TempDir;
using testing::WriteFileBytes;

// A two-layer gemma-like log: per-layer kv heads, the second layer sliding.
constexpr const char* kLog =
    "llama_model_loader: - kv   0: general.architecture str = tiny\n"
    "print_info: n_layer               = 2\n"
    "print_info: n_embd                = 64\n"
    "print_info: n_head                = 4\n"
    "print_info: n_head_kv             = [2, 1]\n"
    "print_info: n_swa                 = 16\n"
    "print_info: n_embd_head_k         = 32\n"
    "print_info: n_embd_head_v         = 32\n"
    "print_info: n_embd_head_k_swa     = 16\n"
    "print_info: n_embd_head_v_swa     = 8\n"
    "print_info: n_embd_k_gqa          = [64, 16]\n"
    "print_info: n_embd_v_gqa          = [64, 8]\n"
    "load_tensors: layer   0 assigned to device CPU, is_swa = 0\n"
    "load_tensors: layer   1 assigned to device CPU, is_swa = 1\n"
    "load_tensors: layer   2 assigned to device CPU, is_swa = 0\n"
    "load_tensors:   CPU_Mapped model buffer size =     1.50 MiB\n"
    "llama_kv_cache: size =    0.50 MiB (  2048 cells,   2 layers,  1/1 seqs), K (f16):    0.25 MiB, V (f16):    0.25 MiB\n";

Result<LlamaLogFacts> ReadText(const TempDir& dir, const std::string& text) {
  const std::string path = dir.File("run.log");
  WriteFileBytes(path, text);
  return ReadLlamaLog(path);
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

TEST(LlamaLogTest, ReadsPerLayerAttentionKvTypeAndMappedBytes) {
  TempDir dir;
  auto facts = ReadText(dir, kLog);
  ASSERT_TRUE(facts.ok()) << facts.status().message();
  EXPECT_EQ(facts->layers, 2u);
  EXPECT_EQ(facts->hidden_size, 64u);
  ASSERT_EQ(facts->attention.size(), 2u);
  EXPECT_EQ(facts->attention[0], (AttentionShape{4, 2, 32, 32, 0}));
  EXPECT_EQ(facts->attention[1], (AttentionShape{4, 1, 16, 8, 16}));  // the sliding layer's head sizes and window
  EXPECT_EQ(facts->kv_element_bytes, 2u);
  EXPECT_EQ(facts->mapped_bytes, 1572864u);  // 1.50 MiB
  EXPECT_EQ(facts->attention[0].KvBytesPerPosition(2), 2u * (32 + 32) * 2);
  EXPECT_EQ(facts->attention[1].AttendedPositions(3), 4u);
  EXPECT_EQ(facts->attention[1].AttendedPositions(100), 16u);
  EXPECT_EQ(facts->attention[0].AttendedPositions(100), 101u);
}

TEST(LlamaLogTest, BadLogsAreRefusedNamingTheFileAndWhat) {
  TempDir dir;
  const std::string path = dir.File("run.log");
  struct Case {
    std::string text;
    std::string expected;
  };
  const Case cases[] = {
      {Replace(kLog, "print_info: n_embd                = 64\n", ""), "no 'print_info: n_embd = ...' line"},
      {Replace(kLog, "[2, 1]", "[2, 1, 1]"), "n_head_kv: 3 values, expected one per layer (2)"},
      {Replace(kLog, "n_embd_k_gqa          = [64, 16]", "n_embd_k_gqa          = [64, 32]"),
       "layer 1: n_embd_k_gqa 32 is not n_head_kv x head size (16)"},
      {Replace(kLog, "K (f16)", "K (q8_0)"), "KV cache type 'q8_0' is not supported"},
      {Replace(kLog, "V (f16)", "V (f32)"), "KV cache types of different sizes"},
      {Replace(kLog, "= [2, 1]", "= [2, x]"), "n_head_kv: expected a non-negative integer or a list"},
      {Replace(kLog, "llama_kv_cache: size", "llama_kv_cache: sz"), "no 'llama_kv_cache: size = ... K (type): ...' line"},
  };
  for (const Case& c : cases) {
    auto facts = ReadText(dir, c.text);
    ASSERT_FALSE(facts.ok()) << c.expected;
    EXPECT_EQ(facts.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(facts.status().message().starts_with(path)) << facts.status().message();
    EXPECT_NE(facts.status().message().find(c.expected), std::string::npos) << facts.status().message();
  }
}

constexpr const char* kCsv =
    "# route_trace v1\n"
    "# model=/x/Tiny-Q8_0.gguf arch=tiny n_layer=2 n_expert=8 n_expert_used=2\n"
    "# layer=0 expert_bytes=65536 dense_bytes=100000\n"
    "# layer=1 expert_bytes=65536 dense_bytes=200000\n"
    "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes\n"
    "0,1,5,0,0,1,0.6,0,65536\n0,1,5,0,1,2,0.4,0,65536\n"
    "0,1,5,1,0,3,0.6,0,65536\n0,1,5,1,1,4,0.4,0,65536\n";

TEST(LlamaLogTest, BmoeImportPutsTheLogsFactsInTheHeader) {
  TempDir dir;
  WriteFileBytes(dir.File("in.route.csv"), kCsv);
  WriteFileBytes(dir.File("run.log"), kLog);
  ImportOptions options;
  options.format = "bmoe-csv";
  options.inputs = {dir.File("in.route.csv")};
  options.llama_log_path = dir.File("run.log");
  auto report = ImportToFile(options, dir.File("t.ctrace"), WriterOptions{});
  ASSERT_TRUE(report.ok()) << report.status().message();
  auto header = ReadTraceHeader(dir.File("t.ctrace"));
  ASSERT_TRUE(header.ok()) << header.status().message();
  const ModelShape& s = header->shape;
  ASSERT_EQ(s.attention.size(), 2u);
  EXPECT_EQ(s.attention[1], (AttentionShape{4, 1, 16, 8, 16}));
  EXPECT_EQ(s.kv_element_bytes, 2u);
  EXPECT_EQ(s.hidden_size, 64u);
  // 1.5 MiB mapped - 2 layers x 8 experts x 65,536 - 300,000 dense.
  EXPECT_EQ(s.other_dense_bytes, 1572864u - 2 * 8 * 65536 - 300000);
  ASSERT_EQ(header->provenance.sources.size(), 2u);
  EXPECT_EQ(header->provenance.sources[1].path, dir.File("run.log"));

  // A log of another model (layer count) is refused; other formats do not take a log.
  std::string three = Replace(kLog, "n_layer               = 2", "n_layer               = 3");
  three = Replace(three, "= [2, 1]", "= 2");
  three = Replace(three, "print_info: n_embd_k_gqa          = [64, 16]\n", "");
  three = Replace(three, "print_info: n_embd_v_gqa          = [64, 8]\n", "");
  WriteFileBytes(dir.File("three.log"), three);
  options.llama_log_path = dir.File("three.log");
  auto refused = ImportToFile(options, dir.File("u.ctrace"), WriterOptions{});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("n_layer 3, the route trace's n_layer is 2"), std::string::npos)
      << refused.status().message();
  options.format = "switch-json";
  options.llama_log_path = dir.File("run.log");
  refused = ImportToFile(options, dir.File("u.ctrace"), WriterOptions{});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--llama-log applies to bmoe-csv"), std::string::npos);
}

TEST(LlamaLogTest, TheCapturesOwnLogsGiveTheirModelsAttention) {
  const std::string dir = std::string(COLIBRI_SHARED_DATA) + "/bigmoe-route-traces/";
  if (!std::filesystem::exists(dir + "qwen.log")) GTEST_SKIP() << dir << " not present";
  auto qwen = ReadLlamaLog(dir + "qwen.log");
  ASSERT_TRUE(qwen.ok()) << qwen.status().message();
  EXPECT_EQ(qwen->layers, 48u);
  EXPECT_EQ(qwen->hidden_size, 2048u);
  for (const AttentionShape& a : qwen->attention) EXPECT_EQ(a, (AttentionShape{32, 4, 128, 128, 0}));
  EXPECT_EQ(qwen->kv_element_bytes, 2u);
  EXPECT_EQ(qwen->mapped_bytes, 18550714532u);  // 17,691.34 MiB
  // The log's own KV cache size: 2,048 cells x 48 layers x 4 x (128 + 128) x 2 bytes = 192 MiB.
  uint64_t kv = 0;
  for (const AttentionShape& a : qwen->attention) kv += a.KvBytesPerPosition(2) * 2048;
  EXPECT_EQ(kv, 192u << 20);

  auto gemma = ReadLlamaLog(dir + "gemma.log");
  ASSERT_TRUE(gemma.ok()) << gemma.status().message();
  EXPECT_EQ(gemma->layers, 30u);
  EXPECT_EQ(gemma->hidden_size, 2816u);
  uint64_t full = 0, sliding = 0;
  for (uint32_t l = 0; l < 30; ++l) {
    const AttentionShape& a = gemma->attention[l];
    if (l % 6 == 5) {
      EXPECT_EQ(a, (AttentionShape{16, 2, 512, 512, 0})) << l;
      full += a.KvBytesPerPosition(2) * 2048;
    } else {
      EXPECT_EQ(a, (AttentionShape{16, 8, 256, 256, 1024})) << l;
      sliding += a.KvBytesPerPosition(2) * 2048;
    }
  }
  // The log's two KV caches: 40 MiB (5 full layers) and 400 MiB (25 sliding ones, full size).
  EXPECT_EQ(full, 40u << 20);
  EXPECT_EQ(sliding, 400u << 20);
}

}  // namespace
}  // namespace colibri::traces
