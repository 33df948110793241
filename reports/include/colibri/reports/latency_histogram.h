// LatencyHistogram: a log-linear histogram of non-negative integer ns with
// constant memory, for distributions too long to keep every sample (a replay
// of 10^7 layer batches). Values below 256 ns are exact; above, each power of
// two is split into 128 buckets, so a bucket spans at most 1/128 (0.8%) of its
// values: a percentile read from it is within 1% of the raw one. Percentiles
// use the nearest rank (docs/METRICS.md) over the buckets and report the
// bucket's upper bound, clamped to the exact minimum and maximum.
//
// Serialize() / Deserialize() give a compact form for the run store (the
// non-empty buckets, the count, min, max and sum); Deserialize validates it.
//
// Thread-safety: a plain value. Errors: none when adding (negative values
// count as 0); Deserialize returns kCorruption naming what is wrong.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "colibri/status.h"

namespace colibri::reports {

// The nearest rank of percentile p in (0, 100] among n > 0 values: the 1-based
// rank ceil(p / 100 x n), clamped to [1, n], computed in integers with p
// rounded to 1e-4 percent, so that binary rounding does not push an exact rank
// up by one (P99.9 of 1000 values is rank 999).
uint64_t NearestRankOf(uint64_t n, double p);

class LatencyHistogram {
 public:
  void Add(int64_t value_ns);
  uint64_t count() const { return count_; }
  int64_t max() const { return max_; }
  int64_t min() const { return count_ == 0 ? 0 : min_; }
  int64_t sum() const { return sum_; }  // exact sum of the (clamped) values, saturating at INT64_MAX
  // Nearest-rank percentile p in (0, 100]; 0 when empty.
  int64_t Percentile(double p) const;

  // The non-empty buckets in increasing order: (upper bound clamped to
  // [min, max], samples in the bucket). For CDFs.
  struct Bucket {
    int64_t upper_ns = 0;
    uint64_t count = 0;
  };
  std::vector<Bucket> NonEmptyBuckets() const;

  std::string Serialize() const;
  static Result<LatencyHistogram> Deserialize(std::string_view bytes);

 private:
  static constexpr int kSubBits = 7;  // 128 buckets per power of two
  static constexpr int kExact = 1 << (kSubBits + 1);
  static constexpr int kBuckets = kExact + (63 - (kSubBits + 1) + 1) * (1 << kSubBits);
  static int BucketOf(uint64_t value);
  static uint64_t UpperBoundOf(int bucket);

  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0;
  int64_t min_ = INT64_MAX;
  int64_t max_ = 0;
  int64_t sum_ = 0;
};

}  // namespace colibri::reports
