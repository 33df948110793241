// Trace statistics (definitions in docs/METRICS.md): expert load per layer and
// its deviation (CV, max/mean, Gini, unused experts), decode reuse, token
// cycle bytes. The load-deviation functions are the one implementation that
// reports/ shares. Thread-safety: free functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "colibri/status.h"
#include "colibri/traces/reader.h"
#include "colibri/traces/trace.h"

namespace colibri::traces {

struct LoadDeviation {
  double cv = 0;             // population std / mean, zero-load experts included
  double max_over_mean = 0;
  double gini = 0;           // mean absolute difference over all pairs / (2 x mean)
  uint32_t unused = 0;       // experts with zero load
};

// Deviation of one layer's loads (one entry per expert). All zero loads give zeros.
LoadDeviation ComputeLoadDeviation(const std::vector<uint64_t>& loads);

struct LayerStats {
  uint32_t layer = 0;
  std::vector<uint64_t> loads;  // per expert
  LoadDeviation deviation;
  double decode_reuse = 0;      // mean |S_t ∩ S_t-1| / k over consecutive decode tokens
  uint64_t decode_pairs = 0;    // pairs averaged
};

struct TraceStats {
  std::vector<LayerStats> layers;
  uint64_t records = 0;
  uint64_t requests = 0;
  uint64_t tokens = 0;          // distinct (request, position) routed, prefill + decode
  uint64_t prefill_tokens = 0;
  uint64_t decode_tokens = 0;
  uint64_t selections = 0;
  double load_cv_mean = 0;
  double load_cv_max = 0;
  double decode_reuse_mean = 0;  // mean over layers that have decode pairs
  uint64_t token_cycle_bytes = 0;
  bool truncated = false;
  uint64_t truncated_at_offset = 0;
};

// Streams the trace at `path` and computes its statistics. A torn tail is not
// an error: stats cover the complete records and `truncated` is set.
// A torn file is an error unless options.allow_torn (then `truncated` is set).
Result<TraceStats> ComputeTraceStats(const std::string& path, const ReadOptions& options = {});

}  // namespace colibri::traces
