// Measuring this machine's CPU compute for a measured compute profile: the
// median time of CpuCompute::ExpertFfn calls (bench/cpu_ffn.h, the engine's
// own call, cycling distinct experts so the weights come from memory) per
// dtype x expert shape x tokens per call x threads, as the ffn_table
// SimCompute interpolates (sim_compute.h), plus the copy bandwidth and the
// best FFN rate per dtype for the profile's roofline figures.
//
// Ownership: allocates each shape's working set while it is measured.
// Thread-safety: one call at a time (it times the cores). Errors: Status
// values from CpuCompute and bad options.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "colibri/sim/hardware.h"
#include "colibri/status.h"

namespace colibri::calibrate {

struct ExpertShape {
  uint32_t hidden = 0;
  uint32_t intermediate = 0;
  std::string note;  // e.g. "Qwen3-30B-A3B", "grid"
};

struct ComputeTableOptions {
  std::vector<ExpertShape> shapes;
  std::vector<std::string> dtypes = {"fp32", "bf16", "fp16", "int8"};
  std::vector<uint32_t> tokens = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  std::vector<uint32_t> threads = {1};
  double seconds_per_point = 0.1;   // one timing window
  int windows_per_point = 3;        // the least disturbed is kept
  uint64_t working_set_bytes = 256ull << 20;  // distinct experts cycled: beyond the caches
  std::function<void(size_t, size_t)> progress;  // (done, total); may be empty
};

struct ComputeTables {
  sim::KernelTable ffn;                          // figure left for the caller
  std::map<std::string, uint64_t> best_flops_per_s;  // per dtype, the best rate measured (a peak figure)
  uint64_t memory_bytes_per_s = 0;               // the weight bytes a 1-token FFN streams per second, best of all
  std::string isa;                               // the CPU kernels' path
};

// The default shapes: the grid hidden {1024, 2048, 4096, 8192} x intermediate
// {256, 1024, 4096} and real models' (Qwen3-30B-A3B 2048 x 768, OLMoE
// 2048 x 1024, DeepSeek-V2-Lite 2048 x 1408, DeepSeek-V3 7168 x 2048); quick:
// 2048 x 1024 alone.
std::vector<ExpertShape> DefaultExpertShapes(bool quick);

Result<ComputeTables> MeasureComputeTables(const ComputeTableOptions& options);

}  // namespace colibri::calibrate
