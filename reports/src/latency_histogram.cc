#include "colibri/reports/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace colibri::reports {

// In integers: p as millionths of n (p rounded to 1e-4 percent), so a decimal p such as 99.9 ranks exactly
// at every n; split at multiples of a million so that nothing overflows.
uint64_t NearestRankOf(uint64_t n, double p) {
  constexpr uint64_t kMillion = 1'000'000;
  const auto millionths = static_cast<uint64_t>(std::llround(std::clamp(p, 0.0, 100.0) * 1e4));
  const uint64_t rank = n / kMillion * millionths + (n % kMillion * millionths + kMillion - 1) / kMillion;
  return std::clamp<uint64_t>(rank, 1, n);
}

int LatencyHistogram::BucketOf(uint64_t value) {
  if (value < static_cast<uint64_t>(kExact)) return static_cast<int>(value);
  const int top = std::bit_width(value) - 1;  // >= kSubBits + 1
  const int shift = top - kSubBits;             // keep the leading 1 + kSubBits bits
  const auto sub = static_cast<int>((value >> shift) & ((1u << kSubBits) - 1));
  return kExact + (top - (kSubBits + 1)) * (1 << kSubBits) + sub;
}

uint64_t LatencyHistogram::UpperBoundOf(int bucket) {
  if (bucket < kExact) return static_cast<uint64_t>(bucket);
  const int top = kSubBits + 1 + (bucket - kExact) / (1 << kSubBits);
  const int sub = (bucket - kExact) % (1 << kSubBits);
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
  sum_ = v > INT64_MAX - sum_ ? INT64_MAX : sum_ + v;  // saturates (only absurd inputs reach it)
}

int64_t LatencyHistogram::Percentile(double p) const {
  if (count_ == 0) return 0;
  const uint64_t rank = NearestRankOf(count_, p);
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += buckets_[static_cast<size_t>(b)];
    if (seen >= rank) return std::clamp(static_cast<int64_t>(UpperBoundOf(b)), min(), max_);
  }
  return max_;
}

std::vector<LatencyHistogram::Bucket> LatencyHistogram::NonEmptyBuckets() const {
  std::vector<Bucket> out;
  for (int b = 0; b < kBuckets; ++b) {
    const uint64_t n = buckets_[static_cast<size_t>(b)];
    if (n != 0) out.push_back(Bucket{std::clamp(static_cast<int64_t>(UpperBoundOf(b)), min(), max_), n});
  }
  return out;
}

namespace {

void PutU64(uint64_t v, std::string* out) {
  char bytes[8];
  std::memcpy(bytes, &v, 8);  // little-endian hosts only (x86-64, aarch64)
  out->append(bytes, 8);
}

bool GetU64(std::string_view* in, uint64_t* v) {
  if (in->size() < 8) return false;
  std::memcpy(v, in->data(), 8);
  in->remove_prefix(8);
  return true;
}

}  // namespace

// Layout: "LH1" + kSubBits byte, count, min, max, sum, non-empty bucket count, then (bucket index, samples) pairs.
std::string LatencyHistogram::Serialize() const {
  std::string out = "LH1";
  out.push_back(static_cast<char>(kSubBits));
  PutU64(count_, &out);
  PutU64(static_cast<uint64_t>(min()), &out);
  PutU64(static_cast<uint64_t>(max_), &out);
  PutU64(static_cast<uint64_t>(sum_), &out);
  const size_t count_at = out.size();
  PutU64(0, &out);
  uint64_t non_empty = 0;
  for (int b = 0; b < kBuckets; ++b) {
    if (buckets_[static_cast<size_t>(b)] == 0) continue;
    PutU64(static_cast<uint64_t>(b), &out);
    PutU64(buckets_[static_cast<size_t>(b)], &out);
    ++non_empty;
  }
  std::memcpy(out.data() + count_at, &non_empty, 8);
  return out;
}

Result<LatencyHistogram> LatencyHistogram::Deserialize(std::string_view in) {
  auto bad = [](const std::string& what) { return Status::Corruption("latency histogram: " + what); };
  if (in.size() < 4 || in.substr(0, 3) != "LH1") return bad("expected the \"LH1\" magic");
  if (in[3] != static_cast<char>(kSubBits)) return bad("expected " + std::to_string(kSubBits) + " sub-bucket bits");
  in.remove_prefix(4);
  LatencyHistogram h;
  uint64_t count = 0, min = 0, max = 0, sum = 0, non_empty = 0;
  if (!GetU64(&in, &count) || !GetU64(&in, &min) || !GetU64(&in, &max) || !GetU64(&in, &sum) ||
      !GetU64(&in, &non_empty)) {
    return bad("header cut short");
  }
  if (in.size() % 16 != 0 || in.size() / 16 != non_empty) {
    return bad("expected " + std::to_string(non_empty) + " buckets of 16 bytes, found " + std::to_string(in.size()) +
               " bytes");
  }
  uint64_t total = 0;
  int64_t first = -1, last = -1;
  for (uint64_t i = 0; i < non_empty; ++i) {
    uint64_t bucket = 0, n = 0;
    GetU64(&in, &bucket);
    GetU64(&in, &n);
    if (bucket >= static_cast<uint64_t>(kBuckets) || static_cast<int64_t>(bucket) <= last || n == 0) {
      return bad("bucket " + std::to_string(i) + ": index out of order or range, or empty");
    }
    if (n > count - total) return bad("bucket counts exceed the header's count " + std::to_string(count));
    if (first < 0) first = static_cast<int64_t>(bucket);
    last = static_cast<int64_t>(bucket);
    h.buckets_[bucket] = n;
    total += n;
  }
  if (total != count) {
    return bad("bucket counts sum to " + std::to_string(total) + ", header says " + std::to_string(count));
  }
  if (count == 0 && (min != 0 || max != 0 || sum != 0)) return bad("no samples but a nonzero min, max or sum");
  if (count > 0 && (min > max || static_cast<int64_t>(max) < 0)) return bad("min above max");
  if (count > 0 && (BucketOf(min) != first || BucketOf(max) != last)) {
    return bad("min " + std::to_string(min) + " or max " + std::to_string(max) +
               " outside the lowest and highest non-empty buckets");
  }
  const auto sum_low = static_cast<__int128>(count) * min, sum_high = static_cast<__int128>(count) * max;
  const bool saturated = sum == static_cast<uint64_t>(INT64_MAX) && sum_high >= INT64_MAX;
  if (count > 0 && !saturated && (sum < sum_low || sum > sum_high)) {
    return bad("sum " + std::to_string(sum) + " outside count x [min, max]");
  }
  h.count_ = count;
  h.min_ = count == 0 ? INT64_MAX : static_cast<int64_t>(min);
  h.max_ = static_cast<int64_t>(max);
  h.sum_ = static_cast<int64_t>(sum);
  return h;
}

}  // namespace colibri::reports
