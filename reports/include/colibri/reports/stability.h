// Routing stability between two runs over the same trace (docs/METRICS.md):
// for every (request, token position, MoE layer) routed in the baseline, is
// the candidate's top-k set identical (order ignored), is its ranked list
// identical, the Jaccard index of the two sets, and the first divergence in
// the baseline's record order. Both sides are trace files read through the
// traces/ library.
//
// Memory: both traces stream record by record when they list the same keys
// in the same order (the common case: two runs over one trace); otherwise the
// candidate's decisions are held in an ordered map.
//
// Thread-safety: free functions. Errors: the traces' errors (kNotFound,
// kCorruption, ...) with the file path; kInvalidArgument when the two traces
// have different shapes (layers, experts, top-k) -- they cannot be compared.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "colibri/status.h"

namespace colibri::reports {

struct RoutingDivergence {
  uint64_t request_id = 0;
  uint64_t position = 0;                  // the token's position in its request
  uint32_t layer = 0;                     // the trace's layer id
  std::vector<uint32_t> baseline, candidate;  // ranked expert ids; empty: missing on that side
};

struct RoutingStability {
  uint64_t compared = 0;          // (request, token, layer) keys in the baseline or the candidate
  uint64_t set_identical = 0;     // top-k sets equal
  uint64_t ranked_identical = 0;  // ranked lists equal
  double jaccard_sum = 0;         // a key missing on one side counts 0
  uint64_t missing_in_candidate = 0, missing_in_baseline = 0;
  bool diverged = false;
  RoutingDivergence first;        // valid when diverged

  double set_identical_fraction() const { return compared ? static_cast<double>(set_identical) / compared : 1.0; }
  double ranked_identical_fraction() const {
    return compared ? static_cast<double>(ranked_identical) / compared : 1.0;
  }
  double mean_jaccard() const { return compared ? jaccard_sum / static_cast<double>(compared) : 1.0; }
};

Result<RoutingStability> CompareRouting(const std::string& baseline_trace, const std::string& candidate_trace);

}  // namespace colibri::reports
