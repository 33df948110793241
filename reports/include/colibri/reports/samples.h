// Samples: one distribution as a run records it -- every value in arrival
// order while raw values are kept, and always a LatencyHistogram of all of
// them. A run keeps raw per-step samples up to a cap (replay decides when to
// DropRaw); per-request samples are always kept raw. Percentiles come from the
// raw values when kept (nearest rank, exact) and from the histogram otherwise
// (within 1%); the summary says which (docs/METRICS.md).
//
// Thread-safety: a plain value. Errors: none.
#pragma once

#include <cstdint>
#include <vector>

#include "colibri/reports/latency_histogram.h"

namespace colibri::reports {

// The one summary of a distribution every command prints and compares.
struct Percentiles {
  uint64_t count = 0;
  int64_t min = 0, p50 = 0, p90 = 0, p99 = 0, p999 = 0, max = 0;
  double mean = 0;
  bool from_histogram = false;  // false: nearest rank on the raw samples
  // Fewer than 100 samples: P99 is the maximum, not a tail estimate.
  bool low_confidence() const { return count < 100; }
};

// Nearest rank: the value at 1-based rank ceil(p / 100 x n) of the sorted
// values, p in (0, 100]. Reorders `values` partially; 0 when empty.
int64_t NearestRank(std::vector<int64_t>* values, double p);

// Percentiles of raw values (a copy is sorted partially) or of a histogram.
Percentiles SummarizeRaw(std::vector<int64_t> values);
Percentiles SummarizeHistogram(const LatencyHistogram& histogram);

// A bootstrap interval of the nearest-rank percentile p of `values`: `resamples`
// resamples with replacement, seeded; returns the 2.5th and 97.5th percentiles
// of the resampled values (a 95% interval). Each resample costs O(1): its
// p-th order statistic is sorted[floor(n x U)] with U ~ Beta(r, n + 1 - r),
// the r-th order statistic of n uniforms. Empty values give {0, 0}.
struct Interval {
  int64_t low = 0, high = 0;
};
Interval BootstrapPercentile(std::vector<int64_t> values, double p, uint32_t resamples, uint64_t seed);

// The median of `values` (the mean of the middle two for an even count); 0
// when empty. For a handful of per-run figures (rates, seconds), not samples.
double Median(std::vector<double> values);

class Samples {
 public:
  void Add(int64_t value_ns) {
    histogram_.Add(value_ns);
    if (keep_raw_) raw_.push_back(value_ns < 0 ? 0 : value_ns);
  }
  // Frees the raw values: from now on only the histogram counts.
  void DropRaw() {
    keep_raw_ = false;
    raw_ = {};
  }
  bool has_raw() const { return keep_raw_; }
  uint64_t count() const { return histogram_.count(); }
  int64_t min() const { return histogram_.min(); }  // exact, raw kept or not
  int64_t max() const { return histogram_.max(); }
  const std::vector<int64_t>& raw() const { return raw_; }
  const LatencyHistogram& histogram() const { return histogram_; }
  Percentiles Summarize() const { return keep_raw_ ? SummarizeRaw(raw_) : SummarizeHistogram(histogram_); }

  // Rebuilds from stored parts: raw values (histogram recomputed) or a histogram alone.
  static Samples FromRaw(std::vector<int64_t> values);
  static Samples FromHistogram(LatencyHistogram histogram);

 private:
  std::vector<int64_t> raw_;
  LatencyHistogram histogram_;
  bool keep_raw_ = true;
};

}  // namespace colibri::reports
