#include "colibri/calibrate/compute_tables.h"

#include <algorithm>

#include "colibri/bench/cpu_ffn.h"
#include "colibri/bench/expert_set.h"
#include "colibri/engine/cpu_compute.h"
#include "colibri/engine/dtype.h"

namespace colibri::calibrate {
namespace {

engine::TimeNs Median(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 1 : std::max<int64_t>(1, v[v.size() / 2]);
}

}  // namespace

std::vector<ExpertShape> DefaultExpertShapes(bool quick) {
  if (quick) return {{2048, 1024, "OLMoE-1B-7B"}};
  std::vector<ExpertShape> shapes = {{2048, 768, "Qwen3-30B-A3B"},
                                     {2048, 1024, "OLMoE-1B-7B"},
                                     {2048, 1408, "DeepSeek-V2-Lite"},
                                     {7168, 2048, "DeepSeek-V3"}};
  for (uint32_t h : {1024u, 2048u, 4096u, 8192u}) {
    for (uint32_t i : {256u, 1024u, 4096u}) {
      const bool named = std::any_of(shapes.begin(), shapes.end(),
                                     [&](const ExpertShape& s) { return s.hidden == h && s.intermediate == i; });
      if (!named) shapes.push_back({h, i, "grid"});
    }
  }
  return shapes;
}

Result<ComputeTables> MeasureComputeTables(const ComputeTableOptions& o) {
  if (o.shapes.empty() || o.dtypes.empty() || o.tokens.empty() || o.threads.empty()) {
    return Status::InvalidArgument("compute tables: no shapes, dtypes, token counts or thread counts");
  }
  if (!std::is_sorted(o.tokens.begin(), o.tokens.end()) ||
      std::adjacent_find(o.tokens.begin(), o.tokens.end()) != o.tokens.end() || o.tokens.front() == 0) {
    return Status::InvalidArgument("compute tables: token counts must ascend from >= 1 without repeats");
  }
  ComputeTables out;
  const size_t total = o.shapes.size() * o.dtypes.size() * o.threads.size() * o.tokens.size();
  size_t done = 0;
  for (const ExpertShape& shape : o.shapes) {
    for (const std::string& name : o.dtypes) {
      COLIBRI_ASSIGN_OR_RETURN(const engine::DType dtype, engine::ParseDType(name));
      const bench::ExpertSet set = bench::MakeExpertSet(dtype, shape.hidden, shape.intermediate, o.working_set_bytes);
      for (uint32_t threads : o.threads) {
        sim::KernelTimes entry;
        entry.dtype = name;
        entry.rows = shape.intermediate;
        entry.hidden = shape.hidden;
        entry.threads = threads;
        for (uint32_t tokens : o.tokens) {
          COLIBRI_ASSIGN_OR_RETURN(const bench::CpuFfnTiming timing,
                                   bench::TimeCpuExpertFfn(set, tokens, threads, std::nullopt, o.seconds_per_point,
                                                           o.windows_per_point));
          const engine::TimeNs ns = Median(timing.best.call_ns);
          entry.tokens.push_back(tokens);
          entry.ns.push_back(ns);
          out.isa = engine::CpuIsaName(timing.isa);
          const double flops = bench::FfnFlopsPerCall(shape.hidden, shape.intermediate, tokens) * 1e9 / ns;
          out.best_flops_per_s[name] = std::max<uint64_t>(out.best_flops_per_s[name], static_cast<uint64_t>(flops));
          if (tokens == 1) {
            const double bytes = static_cast<double>(set.layout.payload_bytes) * 1e9 / ns;
            out.memory_bytes_per_s = std::max<uint64_t>(out.memory_bytes_per_s, static_cast<uint64_t>(bytes));
          }
          if (o.progress) o.progress(++done, total);
        }
        out.ffn.entries.push_back(std::move(entry));
      }
    }
  }
  return out;
}

}  // namespace colibri::calibrate
