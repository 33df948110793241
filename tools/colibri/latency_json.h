// Latency distributions and hit rates as the CLI prints them:
// {p50, p90, p99, p999, max, samples, source, low_confidence} (reports'
// Percentiles: nearest rank on raw samples, or a histogram when the raw ones
// were dropped), per-tier lookups/hits and throughput (docs/METRICS.md).
// Free functions.
#pragma once

#include <cstdint>
#include <vector>

#include "cli_common.h"
#include "colibri/reports/run_recording.h"
#include "colibri/reports/samples.h"

namespace colibri::cli {

Json PercentilesJson(const reports::Percentiles& p);
// PercentilesJson of raw samples. Empty: all zero.
Json LatencyJson(std::vector<int64_t> samples);
// PercentilesJson of a distribution (raw, or its histogram once the raw values were dropped).
Json SamplesJson(const reports::Samples& samples);

// 100 x part / whole, 0 when whole is 0.
double Pct(uint64_t part, uint64_t whole);

// One cache tier: {lookups, hits, misses, hit_pct_cum}.
Json TierJson(uint64_t lookups, uint64_t hits);

// {tokens_per_s (generated: one per request pass), processed_tokens_per_s, steps_per_s}.
Json ThroughputJson(const reports::Throughput& t);

}  // namespace colibri::cli
