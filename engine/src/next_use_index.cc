// NextUseIndex (cache_policy.h): per key, its lookup batches in increasing
// order (a repeat of the last batch, or a decrease, is ignored); NextUseAfter
// is a binary search. Memory: 8 bytes per recorded (key, batch).
#include <algorithm>

#include "colibri/engine/cache_policy.h"

namespace colibri::engine {

void NextUseIndex::Add(ExpertKey key, uint64_t batch) {
  std::vector<uint64_t>& uses = uses_[key];
  if (uses.empty() || uses.back() < batch) uses.push_back(batch);
}

uint64_t NextUseIndex::NextUseAfter(ExpertKey key, uint64_t batch) const {
  const std::vector<uint64_t>* uses = uses_.Find(key);
  if (uses == nullptr) return UINT64_MAX;
  const auto next = std::upper_bound(uses->begin(), uses->end(), batch);
  return next == uses->end() ? UINT64_MAX : *next;
}

}  // namespace colibri::engine
