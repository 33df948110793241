#include "colibri/reports/run_recording.h"

namespace colibri::reports {

std::vector<TierCounters> TiersOf(const CacheOutcome& c) {
  std::vector<TierCounters> tiers{TierCounters{"all", c.lookups, c.served, c.lookups_decode, c.served_decode,
                                               c.read_bytes}};
  if (c.l1_lookups > 0) {
    tiers.push_back(TierCounters{"l1", c.l1_lookups, c.l1_hits, c.lookups_decode, c.l1_hits_decode, 0});
  }
  if (c.l2_lookups > 0) {
    tiers.push_back(TierCounters{"l2", c.l2_lookups, c.l2_hits, c.lookups_decode - c.l1_hits_decode,
                                 c.l2_hits_decode, 0});
  }
  return tiers;
}

void AddRequestLatencies(const RequestTimes& t, Samples* request_latency_ns, Samples* ttft_ns, Samples* tpot_ns) {
  if (t.passes == 0) return;
  request_latency_ns->Add(t.last_end_ns - t.start_ns);
  ttft_ns->Add((t.passes > 1 ? t.first_pass_end_ns : t.last_end_ns) - t.start_ns);
  if (t.passes > 1) tpot_ns->Add((t.last_end_ns - t.first_pass_end_ns) / static_cast<int64_t>(t.passes - 1));
}

Throughput ThroughputOf(uint64_t request_passes, uint64_t processed_tokens, uint64_t steps, int64_t elapsed_ns) {
  const double seconds = static_cast<double>(elapsed_ns) / 1e9;
  auto per_s = [seconds](uint64_t n) { return seconds > 0 ? static_cast<double>(n) / seconds : 0.0; };
  return Throughput{per_s(request_passes), per_s(processed_tokens), per_s(steps)};
}

}  // namespace colibri::reports
