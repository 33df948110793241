#include "colibri/reports/latency_json.h"

namespace colibri::reports {

using Json = nlohmann::ordered_json;

Json PercentilesJson(const Percentiles& p) {
  return Json{{"p50", p.p50},   {"p90", p.p90},         {"p99", p.p99},
              {"p999", p.p999}, {"max", p.max},         {"samples", p.count},
              {"source", p.from_histogram ? "histogram" : "raw"}, {"low_confidence", p.low_confidence()}};
}

Json LatencyJson(std::vector<int64_t> samples) { return PercentilesJson(SummarizeRaw(std::move(samples))); }
Json SamplesJson(const Samples& samples) { return PercentilesJson(samples.Summarize()); }
double Pct(uint64_t part, uint64_t whole) { return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / whole; }

Json TierJson(uint64_t lookups, uint64_t hits) {
  return Json{{"lookups", lookups}, {"hits", hits}, {"misses", lookups - hits}, {"hit_pct_cum", Pct(hits, lookups)}};
}

Json ThroughputJson(const Throughput& t) {
  return Json{{"tokens_per_s", t.tokens_per_s},
              {"processed_tokens_per_s", t.processed_tokens_per_s},
              {"steps_per_s", t.steps_per_s}};
}

}  // namespace colibri::reports
