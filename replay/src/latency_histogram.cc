#include "colibri/replay/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace colibri::replay {

int LatencyHistogram::BucketOf(uint64_t value) {
  if (value < 128) return static_cast<int>(value);
  const int top = std::bit_width(value) - 1;  // >= 7
  const int shift = top - kSubBits;             // keep the leading 1 + 6 bits
  const auto sub = static_cast<int>((value >> shift) & ((1u << kSubBits) - 1));
  return 128 + (top - 7) * (1 << kSubBits) + sub;
}

uint64_t LatencyHistogram::UpperBoundOf(int bucket) {
  if (bucket < 128) return static_cast<uint64_t>(bucket);
  const int top = 7 + (bucket - 128) / (1 << kSubBits);
  const int sub = (bucket - 128) % (1 << kSubBits);
  const int shift = top - kSubBits;
  const uint64_t first = (uint64_t{1} << top) | (static_cast<uint64_t>(sub) << shift);
  return first + ((uint64_t{1} << shift) - 1);
}

void LatencyHistogram::Add(int64_t value_ns) {
  const int64_t v = std::max<int64_t>(value_ns, 0);
  ++buckets_[static_cast<size_t>(BucketOf(static_cast<uint64_t>(v)))];
  ++count_;
  min_ = std::min(min_, v);
  max_ = std::max(max_, v);
}

int64_t LatencyHistogram::Percentile(double p) const {
  if (count_ == 0) return 0;
  const auto rank = std::clamp<uint64_t>(static_cast<uint64_t>(std::ceil(p / 100.0 * static_cast<double>(count_))), 1,
                                         count_);
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += buckets_[static_cast<size_t>(b)];
    if (seen >= rank) return std::clamp(static_cast<int64_t>(UpperBoundOf(b)), min(), max_);
  }
  return max_;
}

}  // namespace colibri::replay
