// LatencyHistogram: a log-linear histogram of non-negative integer ns with
// constant memory, for runs too long to keep every sample (a replay of 10^7
// layer batches). Values below 128 ns are exact; above, each power of two is
// split into 64 buckets, so a bucket spans at most 1/64 (1.6%) of its values.
// Percentiles use the nearest rank (docs/METRICS.md) over the buckets and
// report the bucket's upper bound, clamped to the exact minimum and maximum.
//
// Thread-safety: a plain value. Errors: none (negative values count as 0).
#pragma once

#include <array>
#include <cstdint>

namespace colibri::replay {

class LatencyHistogram {
 public:
  void Add(int64_t value_ns);
  uint64_t count() const { return count_; }
  int64_t max() const { return max_; }
  int64_t min() const { return count_ == 0 ? 0 : min_; }
  // Nearest-rank percentile p in (0, 100]; 0 when empty.
  int64_t Percentile(double p) const;

 private:
  static constexpr int kSubBits = 6;                   // 64 buckets per power of two
  static constexpr int kBuckets = 128 + (63 - 7 + 1) * (1 << kSubBits);
  static int BucketOf(uint64_t value);
  static uint64_t UpperBoundOf(int bucket);

  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0;
  int64_t min_ = INT64_MAX;
  int64_t max_ = 0;
};

}  // namespace colibri::replay
