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

}  // namespace colibri::reports
