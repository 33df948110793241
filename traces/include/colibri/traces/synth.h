// Seeded synthetic traces with a real model's shape and tunable structure,
// for benchmarks and tests that need size. Deterministic: the same options
// give the same bytes. Thread-safety: free functions.
#pragma once

#include <cstdint>
#include <string>

#include "colibri/status.h"
#include "colibri/traces/trace.h"
#include "colibri/traces/writer.h"

namespace colibri::traces {

struct SynthOptions {
  ModelShape shape;              // required (e.g. from ShapeFromHfConfig)
  uint64_t seed = 1;
  uint32_t requests = 8;
  uint32_t concurrency = 4;      // requests decoded together in one pass
  uint32_t prompt_tokens = 128;
  uint32_t output_tokens = 128;
  double zipf_s = 1.0;           // per-layer Zipf exponent of expert popularity (0 = uniform)
  double decode_reuse = 0.5;     // probability that a decode slot reuses the previous token's expert
  bool gate_weights = false;     // also write gate weights
};

struct SynthReport {
  uint64_t records = 0;
  uint64_t selections = 0;
  uint64_t tokens = 0;
};

// Writes the trace to `path` atomically.
Result<SynthReport> SynthesizeTrace(const SynthOptions& options, const std::string& path,
                                    const WriterOptions& writer_options);

}  // namespace colibri::traces
