// The expert cache of one tier (L1 device pool or L2 host cache), with the
// accounting convention shared by the engine and offline replay
// (ARCHITECTURE.md, "Cache accounting"):
//   - a layer batch is one forward pass at one MoE layer;
//   - one Lookup per distinct (layer, expert) per batch (the caller forms the
//     batch union; repeats only refresh recency), all of them before the
//     first Insert, so the whole union counts as touched;
//   - a miss makes the entry resident at its size;
//   - eviction never evicts an entry the current batch touched.
// Two modes. kHardBudget (the engine): Insert evicts untouched victims first
// and refuses when the entry cannot fit (the engine then works in waves), so
// the budget is never exceeded. kEvictAfterBatch (offline replay): Insert
// always succeeds and EndBatch evicts until the budget holds. Both give the
// same hits and misses whenever every batch's union fits the budget.
//
// The eviction order is the pluggable CachePolicy's (cache_policy.h).
// Ownership: owns its policy. Thread-safety: not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "colibri/engine/cache_policy.h"
#include "colibri/engine/key_map.h"
#include "colibri/status.h"

namespace colibri::engine {

enum class CacheMode { kHardBudget, kEvictAfterBatch };

struct CacheCounters {
  uint64_t lookups = 0;
  uint64_t hits = 0;            // demand hits and prefetch hits
  uint64_t misses = 0;
  uint64_t inserted_bytes = 0;  // bytes made resident by misses
  uint64_t evictions = 0;
  // Prefetch: entries made resident ahead of their lookup.
  uint64_t prefetches = 0, prefetched_bytes = 0;
  uint64_t prefetch_hits = 0;           // a lookup's first hit on a prefetched entry
  uint64_t prefetch_wasted_bytes = 0;   // prefetched entries evicted before any lookup
};

class ExpertCache {
 public:
  ExpertCache(std::unique_ptr<CachePolicy> policy, CacheMode mode);

  // Starts a layer batch: nothing is touched yet.
  void BeginBatch();
  // One lookup of `key` in this batch: true on a hit (the policy sees the
  // access). Either way `key` counts as touched for the rest of the batch.
  bool Lookup(ExpertKey key);
  // Makes `key` (a miss of this batch) resident. Appends evicted keys to
  // `evicted` (the caller frees their memory). kHardBudget: false when it
  // cannot fit without evicting touched entries (nothing changes then).
  bool Insert(ExpertKey key, uint64_t bytes, std::vector<ExpertKey>* evicted);
  // Makes `key` resident ahead of its lookup (a prefetch), not as a lookup: a
  // resident key is left alone (false). kHardBudget: evicts untouched entries
  // to fit, false when it cannot; kEvictAfterBatch: always fits, and the next
  // EndBatch evicts down to the budget (an unused prefetch is untouched).
  bool Prefetch(ExpertKey key, uint64_t bytes, std::vector<ExpertKey>* evicted);
  // Keeps a resident `key` from eviction for the rest of this batch, as if
  // touched, without a lookup (e.g. an expert a prefetch expects next).
  void Protect(ExpertKey key);
  // Ends the batch; kEvictAfterBatch evicts until the budget holds.
  void EndBatch(std::vector<ExpertKey>* evicted);
  // Removes a resident entry (e.g. a slot released between waves).
  void Erase(ExpertKey key);

  bool Contains(ExpertKey key) const {
    const Entry* e = entries_.Find(key);
    return e != nullptr && e->resident;
  }
  uint64_t resident_bytes() const { return resident_bytes_; }
  size_t resident_entries() const { return resident_entries_; }
  const CacheCounters& counters() const { return counters_; }
  const CachePolicy& policy() const { return *policy_; }

 private:
  // Every key looked up or inserted so far (lookup only; never iterated).
  struct Entry {
    uint64_t bytes = 0;  // when resident
    uint64_t touched_in = UINT64_MAX;  // the batch number of its last lookup (UINT64_MAX: none yet)
    bool resident = false;
    bool prefetched_unused = false;    // resident by a prefetch, not looked up since
  };
  bool Touched(ExpertKey key) const;
  void EvictAll(const std::vector<ExpertKey>& victims, std::vector<ExpertKey>* evicted);

  std::unique_ptr<CachePolicy> policy_;
  CacheMode mode_;
  KeyMap<Entry> entries_;
  uint64_t batch_ = 0;
  uint64_t resident_bytes_ = 0;
  size_t resident_entries_ = 0;
  CacheCounters counters_;
  std::vector<ExpertKey> scratch_;
};

}  // namespace colibri::engine
