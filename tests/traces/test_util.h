// Helpers shared by the traces tests: temp dirs, small shapes and records.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "colibri/traces/importers.h"
#include "colibri/traces/reader.h"
#include "colibri/traces/trace.h"
#include "colibri/traces/writer.h"

namespace colibri::traces::testing {

// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "colibri-test-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return (std::filesystem::path(path_) / name).string(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline ModelShape SmallShape(uint32_t experts = 16, uint32_t top_k = 2, uint32_t layers = 3) {
  ModelShape shape;
  shape.model_name = "test";
  for (uint32_t l = 0; l < layers; ++l) {
    shape.moe_layer_ids.push_back(1 + 2 * l);
    shape.expert_bytes.push_back(1000 + l);
  }
  shape.experts_per_layer = experts;
  shape.top_k = top_k;
  shape.dtype = "bf16";
  return shape;
}

// Distinct ids per token, deterministic from the rng.
inline TraceRecord RandomRecord(const ModelShape& shape, std::mt19937_64& rng, uint64_t request, uint64_t pass,
                                uint32_t layer, size_t tokens, uint64_t first_position) {
  TraceRecord r;
  r.request_id = request;
  r.pass_id = pass;
  r.layer = layer;
  r.prefill = tokens > 1;
  for (size_t t = 0; t < tokens; ++t) {
    r.positions.push_back(first_position + t);
    std::vector<uint32_t> ids(shape.experts_per_layer);
    for (uint32_t e = 0; e < ids.size(); ++e) ids[e] = e;
    std::shuffle(ids.begin(), ids.end(), rng);
    for (uint32_t s = 0; s < shape.top_k; ++s) r.expert_ids.push_back(ids[s]);
  }
  return r;
}

inline std::vector<TraceRecord> ReadAll(const std::string& path) {
  std::vector<TraceRecord> out;
  auto reader = TraceReader::Open(path);
  if (!reader.ok()) return out;
  TraceRecord r;
  while (true) {
    auto more = (*reader)->Next(&r);
    if (!more.ok() || !more.value()) break;
    out.push_back(r);
  }
  return out;
}

inline std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void WriteFileBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Expert ids of every routed token: (request, position, layer) -> ids in rank order.
using TokenSelections = std::map<std::tuple<uint64_t, uint64_t, uint32_t>, std::vector<uint32_t>>;

inline TokenSelections SelectionsByToken(const std::vector<TraceRecord>& records, uint32_t top_k) {
  TokenSelections out;
  for (const TraceRecord& r : records) {
    for (size_t t = 0; t < r.token_count(); ++t) {
      const auto first = r.expert_ids.begin() + static_cast<std::ptrdiff_t>(t * top_k);
      out[{r.request_id, r.positions[t], r.layer}] = std::vector<uint32_t>(first, first + top_k);
    }
  }
  return out;
}

// An import written to a trace file in `dir` and read back.
struct ImportedTrace {
  ImportReport report;
  TraceHeader header;
  std::vector<TraceRecord> records;
};

inline Result<ImportedTrace> ImportAndReadBack(const ImportOptions& options, const TempDir& dir) {
  const std::string path = dir.File("imported.ctrace");
  auto report = ImportToFile(options, path, WriterOptions{});
  if (!report.ok()) return report.status();
  auto header = ReadTraceHeader(path);
  if (!header.ok()) return header.status();
  return ImportedTrace{report.value(), header.value(), ReadAll(path)};
}

}  // namespace colibri::traces::testing
