#include "latency_json.h"

#include <algorithm>
#include <cmath>

namespace colibri::cli {

int64_t NearestRank(const std::vector<int64_t>& sorted, double p) {
  const double n = static_cast<double>(sorted.size());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * n - 1e-9));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

Json LatencyJson(std::vector<int64_t> samples) {
  if (samples.empty()) return Json{{"p50", 0}, {"p90", 0}, {"p99", 0}, {"p999", 0}, {"max", 0}, {"samples", 0}};
  std::sort(samples.begin(), samples.end());
  return Json{{"p50", NearestRank(samples, 50)},   {"p90", NearestRank(samples, 90)},
              {"p99", NearestRank(samples, 99)},   {"p999", NearestRank(samples, 99.9)},
              {"max", samples.back()},             {"samples", samples.size()}};
}

double Pct(uint64_t part, uint64_t whole) { return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / whole; }

Json TierJson(uint64_t lookups, uint64_t hits) {
  return Json{{"lookups", lookups}, {"hits", hits}, {"misses", lookups - hits}, {"hit_pct_cum", Pct(hits, lookups)}};
}

}  // namespace colibri::cli
