// Latency distributions and hit rates as the CLI prints them:
// {p50, p90, p99, p999, max} by nearest rank on raw samples, and per-tier
// lookups/hits (docs/METRICS.md). Free functions.
#pragma once

#include <cstdint>
#include <vector>

#include "cli_common.h"

namespace colibri::cli {

// Nearest-rank percentile p (0 < p <= 100) of `sorted` (ascending, non-empty):
// the value at rank ceil(p / 100 x n).
int64_t NearestRank(const std::vector<int64_t>& sorted, double p);

// {p50, p90, p99, p999, max, samples}; sorts `samples`. Empty: all zero.
Json LatencyJson(std::vector<int64_t> samples);

// 100 x part / whole, 0 when whole is 0.
double Pct(uint64_t part, uint64_t whole);

// One cache tier: {lookups, hits, misses, hit_pct_cum}.
Json TierJson(uint64_t lookups, uint64_t hits);

}  // namespace colibri::cli
