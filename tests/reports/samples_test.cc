#include "colibri/reports/samples.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "colibri/reports/latency_histogram.h"

namespace colibri::reports {
namespace {

// first, first + 1, ..., last.
std::vector<int64_t> Range(int64_t first, int64_t last) {
  std::vector<int64_t> values(static_cast<size_t>(last - first + 1));
  std::iota(values.begin(), values.end(), first);
  return values;
}

int64_t Rank(std::vector<int64_t> values, double p) { return NearestRank(&values, p); }

// Rank ceil(p / 100 x n) of the sorted values.
TEST(NearestRankTest, OneToTen) {
  const auto values = Range(1, 10);
  EXPECT_EQ(Rank(values, 50), 5);    // ceil(5)
  EXPECT_EQ(Rank(values, 90), 9);    // ceil(9)
  EXPECT_EQ(Rank(values, 99), 10);   // ceil(9.9)
  EXPECT_EQ(Rank(values, 99.9), 10); // ceil(9.99)
  EXPECT_EQ(Rank(values, 100), 10);
  EXPECT_EQ(Rank(values, 0.1), 1);   // ceil(0.01)
}

TEST(NearestRankTest, OneToAHundredAndAThousand) {
  EXPECT_EQ(Rank(Range(1, 100), 50), 50);
  EXPECT_EQ(Rank(Range(1, 100), 99), 99);      // ceil(99)
  EXPECT_EQ(Rank(Range(1, 100), 99.9), 100);   // ceil(99.9)
  EXPECT_EQ(Rank(Range(1, 1000), 99), 990);    // ceil(990)
  EXPECT_EQ(Rank(Range(1, 1000), 99.9), 999);  // ceil(999): binary 99.9 is a little above 99.9
}

TEST(NearestRankTest, RankOfDecimalPercentilesIsExact) {
  EXPECT_EQ(NearestRankOf(1000, 99.9), 999u);
  EXPECT_EQ(NearestRankOf(10000, 99.9), 9990u);
  EXPECT_EQ(NearestRankOf(100000, 99.9), 99900u);
  // 0.999 x 10,000,999 = 9,990,998.001: just above an integer, so the rank is 9,990,999.
  EXPECT_EQ(NearestRankOf(10'000'999, 99.9), 9'990'999u);
  EXPECT_EQ(NearestRankOf(12000, 70.525), 8463u);  // 0.70525 x 12,000 = 8463
  EXPECT_EQ(NearestRankOf(7, 50), 4u);             // ceil(3.5)
  EXPECT_EQ(NearestRankOf(7, 0), 1u);              // clamped to the first rank
  EXPECT_EQ(NearestRankOf(7, 150), 7u);            // clamped to the last
}

TEST(NearestRankTest, SingleEmptyUnsortedAndDuplicates) {
  EXPECT_EQ(Rank({42}, 0.1), 42);
  EXPECT_EQ(Rank({42}, 100), 42);
  EXPECT_EQ(Rank({}, 50), 0);
  std::vector<int64_t> shuffled = Range(1, 100);
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(7));
  EXPECT_EQ(Rank(shuffled, 50), 50);
  EXPECT_EQ(Rank(shuffled, 99), 99);
  // Sorted: 1 1 5 5 5 9 (n = 6).
  const std::vector<int64_t> dups = {5, 9, 1, 5, 1, 5};
  EXPECT_EQ(Rank(dups, 10), 1);   // ceil(0.6) = 1
  EXPECT_EQ(Rank(dups, 34), 5);   // ceil(2.04) = 3
  EXPECT_EQ(Rank(dups, 50), 5);   // ceil(3) = 3
  EXPECT_EQ(Rank(dups, 90), 9);   // ceil(5.4) = 6
}

TEST(SamplesTest, SummarizeRawByHand) {
  // Sorted: 1 1 2 3 4 5 6 9; sum 31.
  const Percentiles p = SummarizeRaw({3, 1, 4, 1, 5, 9, 2, 6});
  EXPECT_EQ(p.count, 8u);
  EXPECT_EQ(p.min, 1);
  EXPECT_EQ(p.max, 9);
  EXPECT_DOUBLE_EQ(p.mean, 31.0 / 8.0);
  EXPECT_EQ(p.p50, 3);   // rank ceil(4) = 4
  EXPECT_EQ(p.p90, 9);   // rank ceil(7.2) = 8
  EXPECT_EQ(p.p99, 9);
  EXPECT_EQ(p.p999, 9);
  EXPECT_FALSE(p.from_histogram);
  EXPECT_TRUE(p.low_confidence());
}

TEST(SamplesTest, SummarizeRawRanges) {
  std::vector<int64_t> values = Range(1, 1000);
  std::shuffle(values.begin(), values.end(), std::mt19937_64(3));
  const Percentiles p = SummarizeRaw(values);
  EXPECT_EQ(p.count, 1000u);
  EXPECT_EQ(p.min, 1);
  EXPECT_EQ(p.max, 1000);
  EXPECT_DOUBLE_EQ(p.mean, 500.5);  // (1 + 1000) / 2
  EXPECT_EQ(p.p50, 500);
  EXPECT_EQ(p.p90, 900);
  EXPECT_EQ(p.p99, 990);
  EXPECT_EQ(p.p999, 999);
  EXPECT_FALSE(p.low_confidence());

  const Percentiles ten = SummarizeRaw(Range(1, 10));
  EXPECT_EQ(ten.p50, 5);
  EXPECT_EQ(ten.p90, 9);
  EXPECT_EQ(ten.p99, 10);
  EXPECT_EQ(ten.p999, 10);
}

TEST(SamplesTest, SummarizeRawSingleAndEmpty) {
  const Percentiles one = SummarizeRaw({7});
  EXPECT_EQ(one.count, 1u);
  EXPECT_EQ(one.min, 7);
  EXPECT_EQ(one.p50, 7);
  EXPECT_EQ(one.p999, 7);
  EXPECT_EQ(one.max, 7);
  EXPECT_EQ(one.mean, 7.0);
  const Percentiles none = SummarizeRaw({});
  EXPECT_EQ(none.count, 0u);
  EXPECT_EQ(none.min, 0);
  EXPECT_EQ(none.p50, 0);
  EXPECT_EQ(none.max, 0);
  EXPECT_EQ(none.mean, 0.0);
  EXPECT_TRUE(none.low_confidence());
}

TEST(SamplesTest, LowConfidenceBelowAHundredSamples) {
  EXPECT_TRUE(SummarizeRaw(Range(1, 99)).low_confidence());
  EXPECT_FALSE(SummarizeRaw(Range(1, 100)).low_confidence());
}

TEST(SamplesTest, DropRawSwitchesToTheHistogram) {
  Samples s;
  for (int64_t v = 1; v <= 1000; ++v) s.Add(v);
  EXPECT_TRUE(s.has_raw());
  EXPECT_EQ(s.raw().size(), 1000u);
  EXPECT_FALSE(s.Summarize().from_histogram);
  EXPECT_EQ(s.Summarize().p50, 500);
  s.DropRaw();
  EXPECT_FALSE(s.has_raw());
  EXPECT_TRUE(s.raw().empty());
  s.Add(2000);  // counts in the histogram only
  EXPECT_TRUE(s.raw().empty());
  EXPECT_EQ(s.count(), 1001u);
  const Percentiles p = s.Summarize();
  EXPECT_TRUE(p.from_histogram);
  EXPECT_EQ(p.count, 1001u);
  EXPECT_EQ(p.min, 1);
  EXPECT_EQ(p.max, 2000);
  EXPECT_DOUBLE_EQ(p.mean, (500500.0 + 2000.0) / 1001.0);  // 1 + ... + 1000 = 500,500
  // Rank ceil(500.5) = 501 is 501, in the bucket [500, 501] (width 2 in [256, 512)).
  EXPECT_EQ(p.p50, 501);
}

TEST(SamplesTest, NegativeValuesCountAsZero) {
  Samples s;
  s.Add(-5);
  EXPECT_EQ(s.raw(), std::vector<int64_t>{0});
  EXPECT_EQ(s.histogram().min(), 0);
  const Samples rebuilt = Samples::FromRaw({-5, 3});
  EXPECT_EQ(rebuilt.raw(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(rebuilt.Summarize().min, 0);
}

TEST(SamplesTest, FromRawAndFromHistogram) {
  const Samples raw = Samples::FromRaw({7, 3, 5});
  EXPECT_TRUE(raw.has_raw());
  EXPECT_EQ(raw.raw(), (std::vector<int64_t>{7, 3, 5}));
  EXPECT_EQ(raw.count(), 3u);
  EXPECT_EQ(raw.histogram().min(), 3);
  EXPECT_EQ(raw.histogram().max(), 7);
  EXPECT_EQ(raw.histogram().sum(), 15);
  EXPECT_FALSE(raw.Summarize().from_histogram);
  EXPECT_EQ(raw.Summarize().p50, 5);  // sorted 3 5 7, rank ceil(1.5) = 2

  const Samples hist = Samples::FromHistogram(raw.histogram());
  EXPECT_FALSE(hist.has_raw());
  EXPECT_TRUE(hist.raw().empty());
  EXPECT_EQ(hist.count(), 3u);
  const Percentiles p = hist.Summarize();
  EXPECT_TRUE(p.from_histogram);
  EXPECT_EQ(p.p50, 5);  // exact below 256
  EXPECT_EQ(p.mean, 5.0);
}

TEST(LatencyHistogramTest, ExactBelow256) {
  LatencyHistogram h;
  std::vector<int64_t> raw;
  std::mt19937_64 rng(11);
  for (int i = 0; i < 1000; ++i) {
    const auto v = static_cast<int64_t>(rng() % 256);
    h.Add(v);
    raw.push_back(v);
  }
  for (double p = 0.1; p <= 100; p += 0.1) EXPECT_EQ(h.Percentile(p), Rank(raw, p)) << p;
  for (const LatencyHistogram::Bucket& b : h.NonEmptyBuckets()) {
    EXPECT_EQ(static_cast<uint64_t>(std::count(raw.begin(), raw.end(), b.upper_ns)), b.count) << b.upper_ns;
  }
}

TEST(LatencyHistogramTest, EmptyAndNegative) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.Percentile(50), 0);
  EXPECT_EQ(h.min(), 0);
  EXPECT_EQ(h.max(), 0);
  EXPECT_TRUE(h.NonEmptyBuckets().empty());
  h.Add(-3);
  EXPECT_EQ(h.count(), 1u);
  EXPECT_EQ(h.Percentile(50), 0);
  EXPECT_EQ(h.sum(), 0);
}

TEST(LatencyHistogramTest, WithinOnePercentOfTheRawNearestRank) {
  // 10^5 values log-uniform between 1 ns and 10^10 ns.
  std::mt19937_64 rng(2024);
  std::uniform_real_distribution<double> exponent(0.0, 10.0);
  LatencyHistogram h;
  std::vector<int64_t> raw;
  int64_t sum = 0;
  for (int i = 0; i < 100000; ++i) {
    const auto v = static_cast<int64_t>(std::llround(std::pow(10.0, exponent(rng))));
    h.Add(v);
    raw.push_back(v);
    sum += v;
  }
  EXPECT_EQ(h.count(), 100000u);
  EXPECT_EQ(h.sum(), sum);
  EXPECT_EQ(h.min(), *std::min_element(raw.begin(), raw.end()));
  EXPECT_EQ(h.max(), *std::max_element(raw.begin(), raw.end()));
  for (double p : {0.1, 1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99, 100.0}) {
    const int64_t exact = Rank(raw, p);
    const int64_t estimate = h.Percentile(p);
    EXPECT_GE(estimate, exact) << p;  // a bucket's upper bound
    EXPECT_LE(static_cast<double>(estimate - exact), 0.01 * static_cast<double>(exact)) << p;
  }
}

LatencyHistogram LogUniform(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> exponent(0.0, 10.0);
  LatencyHistogram h;
  for (int i = 0; i < n; ++i) h.Add(std::llround(std::pow(10.0, exponent(rng))));
  return h;
}

TEST(LatencyHistogramTest, SerializeRoundTrip) {
  for (const LatencyHistogram& h : {LogUniform(5000, 5), LatencyHistogram()}) {
    auto back = LatencyHistogram::Deserialize(h.Serialize());
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->count(), h.count());
    EXPECT_EQ(back->min(), h.min());
    EXPECT_EQ(back->max(), h.max());
    EXPECT_EQ(back->sum(), h.sum());
    for (double p = 0.1; p <= 100; p += 0.1) EXPECT_EQ(back->Percentile(p), h.Percentile(p)) << p;
    const auto a = h.NonEmptyBuckets(), b = back->NonEmptyBuckets();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].upper_ns, b[i].upper_ns);
      EXPECT_EQ(a[i].count, b[i].count);
    }
  }
}

// Serialized layout (latency_histogram.cc): "LH1", the sub-bucket bits byte, then u64 count (offset 4),
// min (12), max (20), sum (28), buckets (36), and (index, samples) u64 pairs from offset 44.
constexpr size_t kCountAt = 4, kMinAt = 12, kMaxAt = 20, kBucketsAt = 36, kPairsAt = 44;

void PutU64At(std::string* bytes, size_t at, uint64_t v) { std::memcpy(bytes->data() + at, &v, 8); }

uint64_t U64At(const std::string& bytes, size_t at) {
  uint64_t v = 0;
  std::memcpy(&v, bytes.data() + at, 8);
  return v;
}

void ExpectCorruption(const std::string& bytes, const std::string& what) {
  auto h = LatencyHistogram::Deserialize(bytes);
  ASSERT_FALSE(h.ok()) << what;
  EXPECT_EQ(h.status().code(), StatusCode::kCorruption) << what;
}

TEST(LatencyHistogramTest, DeserializeRejectsTruncations) {
  const std::string bytes = LogUniform(100, 9).Serialize();
  for (size_t n = 0; n < bytes.size(); ++n) ExpectCorruption(bytes.substr(0, n), "cut at " + std::to_string(n));
  ExpectCorruption(bytes + "x", "a trailing byte");
}

TEST(LatencyHistogramTest, DeserializeRejectsBadMagicAndLayout) {
  LatencyHistogram h;
  for (int64_t v : {10, 20, 30, 5000}) h.Add(v);
  const std::string good = h.Serialize();
  ASSERT_EQ(U64At(good, kBucketsAt), 4u);
  ASSERT_TRUE(LatencyHistogram::Deserialize(good).ok());

  std::string magic = good;
  magic[0] = 'X';
  ExpectCorruption(magic, "bad magic");
  std::string bits = good;
  bits[3] = 8;
  ExpectCorruption(bits, "other sub-bucket bits");

  std::string swapped = good;  // buckets 10 and 20 in the wrong order
  std::swap_ranges(swapped.begin() + kPairsAt, swapped.begin() + kPairsAt + 16, swapped.begin() + kPairsAt + 16);
  ExpectCorruption(swapped, "out-of-order buckets");
  std::string repeated = good;  // bucket 10 twice
  PutU64At(&repeated, kPairsAt + 16, U64At(good, kPairsAt));
  ExpectCorruption(repeated, "a repeated bucket");
  std::string out_of_range = good;
  PutU64At(&out_of_range, kPairsAt + 48, 1u << 20);
  ExpectCorruption(out_of_range, "a bucket index out of range");
  std::string empty_bucket = good;
  PutU64At(&empty_bucket, kPairsAt + 8, 0);
  PutU64At(&empty_bucket, kCountAt, 3);
  ExpectCorruption(empty_bucket, "an empty bucket");
}

TEST(LatencyHistogramTest, DeserializeRejectsInconsistentCounts) {
  LatencyHistogram h;
  for (int64_t v : {10, 20, 30, 5000}) h.Add(v);
  const std::string good = h.Serialize();

  std::string count = good;
  PutU64At(&count, kCountAt, 5);
  ExpectCorruption(count, "count 5, buckets sum to 4");
  // Bucket samples that wrap around 2^64 to the header's count: 2^63 + 2^63 + 1 + 1 = 2 (mod 2^64).
  std::string wrapped = good;
  PutU64At(&wrapped, kCountAt, 2);
  PutU64At(&wrapped, kPairsAt + 8, uint64_t{1} << 63);
  PutU64At(&wrapped, kPairsAt + 24, uint64_t{1} << 63);
  ExpectCorruption(wrapped, "bucket samples wrapping around");
  // A bucket count whose byte size wraps: (2^60 + 4) x 16 = 64 (mod 2^64), the bytes that follow.
  std::string many = good;
  PutU64At(&many, kBucketsAt, (uint64_t{1} << 60) + 4);
  ExpectCorruption(many, "a bucket count wrapping around");
}

TEST(LatencyHistogramTest, DeserializeRejectsMinMaxOutsideTheBuckets) {
  LatencyHistogram h;
  for (int64_t v : {10, 20, 30, 5000}) h.Add(v);
  const std::string good = h.Serialize();

  std::string min_above = good;
  PutU64At(&min_above, kMinAt, 20);  // the lowest sample is in bucket 10
  ExpectCorruption(min_above, "min above the lowest bucket");
  std::string max_below = good;
  PutU64At(&max_below, kMaxAt, 30);  // the highest sample is in 5000's bucket
  ExpectCorruption(max_below, "max below the highest bucket");
  std::string min_above_max = good;
  PutU64At(&min_above_max, kMinAt, 6000);
  ExpectCorruption(min_above_max, "min above max");

  std::string empty = LatencyHistogram().Serialize();
  PutU64At(&empty, kMaxAt, 7);
  ExpectCorruption(empty, "an empty histogram with a maximum");
}

}  // namespace
}  // namespace colibri::reports
