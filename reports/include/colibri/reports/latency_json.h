// Latency distributions and hit rates as JSON, the shape every command and
// benchmark prints: {p50, p90, p99, p999, max, samples, source,
// low_confidence} (Percentiles: nearest rank on raw samples, or a histogram
// when the raw ones were dropped), and per-tier lookups/hits
// and throughput (docs/METRICS.md). Free functions; no errors.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "colibri/reports/run_recording.h"
#include "colibri/reports/samples.h"

namespace colibri::reports {

nlohmann::ordered_json PercentilesJson(const Percentiles& p);
// PercentilesJson of raw samples. Empty: all zero.
nlohmann::ordered_json LatencyJson(std::vector<int64_t> samples);
// PercentilesJson of a distribution (raw, or its histogram once the raw values were dropped).
nlohmann::ordered_json SamplesJson(const Samples& samples);

// 100 x part / whole, 0 when whole is 0.
double Pct(uint64_t part, uint64_t whole);

// One cache tier: {lookups, hits, misses, hit_pct_cum}.
nlohmann::ordered_json TierJson(uint64_t lookups, uint64_t hits);

// {tokens_per_s (generated: one per request pass), processed_tokens_per_s, steps_per_s}.
nlohmann::ordered_json ThroughputJson(const Throughput& t);

}  // namespace colibri::reports
