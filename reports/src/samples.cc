#include "colibri/reports/samples.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace colibri::reports {

namespace {

// The nearest-rank value, searching only from `from` on (every value before it is no larger).
int64_t NearestRankFrom(std::vector<int64_t>* values, size_t from, double p, size_t* at) {
  *at = std::max<size_t>(from, NearestRankOf(values->size(), p) - 1);
  const auto nth = values->begin() + static_cast<std::ptrdiff_t>(*at);
  std::nth_element(values->begin() + static_cast<std::ptrdiff_t>(from), nth, values->end());
  return *nth;
}

}  // namespace

int64_t NearestRank(std::vector<int64_t>* values, double p) {
  if (values->empty()) return 0;
  size_t at = 0;
  return NearestRankFrom(values, 0, p, &at);
}

Percentiles SummarizeRaw(std::vector<int64_t> values) {
  Percentiles out;
  out.count = values.size();
  if (values.empty()) return out;
  double sum = 0;
  for (int64_t v : values) sum += static_cast<double>(v);
  out.mean = sum / static_cast<double>(values.size());
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  out.min = *lo;
  out.max = *hi;
  // Ascending p: each nth_element leaves the larger values after the nth, so
  // the next rank searches a shrinking tail.
  size_t at = 0;
  out.p50 = NearestRankFrom(&values, 0, 50, &at);
  out.p90 = NearestRankFrom(&values, at, 90, &at);
  out.p99 = NearestRankFrom(&values, at, 99, &at);
  out.p999 = NearestRankFrom(&values, at, 99.9, &at);
  return out;
}

Percentiles SummarizeHistogram(const LatencyHistogram& h) {
  Percentiles out;
  out.count = h.count();
  out.from_histogram = true;
  if (h.count() == 0) return out;
  out.min = h.min();
  out.max = h.max();
  out.mean = static_cast<double>(h.sum()) / static_cast<double>(h.count());
  out.p50 = h.Percentile(50);
  out.p90 = h.Percentile(90);
  out.p99 = h.Percentile(99);
  out.p999 = h.Percentile(99.9);
  return out;
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

Interval BootstrapPercentile(std::vector<int64_t> values, double p, uint32_t resamples, uint64_t seed) {
  if (values.empty() || resamples == 0) return {};
  std::sort(values.begin(), values.end());
  const uint64_t n = values.size();
  const double rank = static_cast<double>(NearestRankOf(n, p));
  std::mt19937_64 rng(seed ^ 0x626f6f74737472ull);  // "bootstr"
  std::gamma_distribution<double> a(rank, 1.0), b(static_cast<double>(n) + 1.0 - rank, 1.0);
  std::vector<int64_t> estimates;
  estimates.reserve(resamples);
  for (uint32_t i = 0; i < resamples; ++i) {
    const double x = a(rng), y = b(rng);
    const double u = x / (x + y);  // Beta(rank, n + 1 - rank)
    estimates.push_back(values[std::min<uint64_t>(n - 1, static_cast<uint64_t>(u * static_cast<double>(n)))]);
  }
  Interval out;
  size_t at = 0;
  out.low = NearestRankFrom(&estimates, 0, 2.5, &at);
  out.high = NearestRankFrom(&estimates, at, 97.5, &at);
  return out;
}

Samples Samples::FromRaw(std::vector<int64_t> values) {
  Samples s;
  for (int64_t& v : values) {
    v = std::max<int64_t>(v, 0);  // as Add keeps them
    s.histogram_.Add(v);
  }
  s.raw_ = std::move(values);
  return s;
}

Samples Samples::FromHistogram(LatencyHistogram histogram) {
  Samples s;
  s.histogram_ = std::move(histogram);
  s.keep_raw_ = false;
  return s;
}

}  // namespace colibri::reports
