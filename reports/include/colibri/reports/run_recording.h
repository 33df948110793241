// Helpers for whoever records a run (replay, `colibri run`), so both store
// the same figures the same way.
//
// RequestTimes / AddRequestLatencies: the per-request latencies, TTFT and
// TPOT from a request's pass ends; ThroughputOf: tokens and steps per second
// (docs/METRICS.md, "Latencies" and "Throughput").
//
// HitRateSeries: the cumulative cache outcome over a run, kept to at most
// kMaxPoints points that span the whole run: a point every `stride` layer
// batches; when the series is full every other point goes and the stride
// doubles. Deterministic (no clock, no randomness).
// Thread-safety: a plain value. Errors: none.
#pragma once

#include <cstdint>
#include <vector>

#include "colibri/reports/run_store.h"
#include "colibri/reports/samples.h"

namespace colibri::reports {

class HitRateSeries {
 public:
  static constexpr size_t kMaxPoints = 2048;

  // After layer batch number `layer_batch` (1-based) ended at `elapsed_ns`
  // with `lookups` lookups and `served` hits so far.
  void Add(uint64_t layer_batch, int64_t elapsed_ns, uint64_t lookups, uint64_t served) {
    if (layer_batch % stride_ != 0) return;
    points_.push_back(HitRatePoint{layer_batch, elapsed_ns, lookups, served});
    if (points_.size() < kMaxPoints) return;
    std::vector<HitRatePoint> kept;
    for (size_t i = 1; i < points_.size(); i += 2) kept.push_back(points_[i]);
    points_ = std::move(kept);
    stride_ *= 2;
  }
  const std::vector<HitRatePoint>& points() const { return points_; }

 private:
  std::vector<HitRatePoint> points_;
  uint64_t stride_ = 1;
};

// Adds one layer batch's step times (values[i] to steps[i], i < n) under the
// run's raw cap: raw values are kept while the total over all n steps stays
// within `raw_cap`; from the batch that would exceed it on, every step keeps
// only its histogram (docs/RUNS.md, "Bounded memory").
inline void AddStepSamples(Samples* steps, const int64_t* values, size_t n, uint64_t batches_before,
                           uint64_t raw_cap) {
  if (steps[0].has_raw() && (batches_before + 1) * n > raw_cap) {
    for (size_t i = 0; i < n; ++i) steps[i].DropRaw();
  }
  for (size_t i = 0; i < n; ++i) steps[i].Add(values[i]);
}

// A run's cache outcome, per lookup (a lookup = one distinct expert of a layer batch).
struct CacheOutcome {
  uint64_t lookups = 0, served = 0, lookups_decode = 0, served_decode = 0;  // served by any tier
  uint64_t l1_lookups = 0, l1_hits = 0, l1_hits_decode = 0;
  uint64_t l2_lookups = 0, l2_hits = 0, l2_hits_decode = 0;
  uint64_t read_bytes = 0;
};

// Tiers "all", then "l1" and "l2" when they saw lookups; L2 sees L1's misses.
std::vector<TierCounters> TiersOf(const CacheOutcome& c);

// One request's passes on a run's clock.
struct RequestTimes {
  int64_t start_ns = 0;           // arrival (open loop) or the start of its first layer batch (closed loop)
  int64_t first_pass_end_ns = 0;  // the end of its first pass (read only when passes > 1)
  int64_t last_end_ns = 0;        // the end of its last layer batch
  uint64_t passes = 0;
};

// Adds a request that ran (passes > 0; others are skipped) to the
// distributions: request latency = last end - start, TTFT = the end of its
// first pass - start, and when passes > 1, TPOT = (last end - first pass end)
// / (passes - 1).
void AddRequestLatencies(const RequestTimes& t, Samples* request_latency_ns, Samples* ttft_ns, Samples* tpot_ns);

// Per second of a run's clock (all 0 when elapsed_ns <= 0).
struct Throughput {
  double tokens_per_s = 0;            // generated tokens: one per request pass
  double processed_tokens_per_s = 0;  // every token the passes carried (prompt and decode)
  double steps_per_s = 0;             // (token, MoE layer) steps
};
Throughput ThroughputOf(uint64_t request_passes, uint64_t processed_tokens, uint64_t steps, int64_t elapsed_ns);

}  // namespace colibri::reports
