// CachePolicy: the eviction order of an ExpertCache, and its budget.
//
// A policy is told about every insert, access and erase, and chooses victims
// when an entry must fit (MakeRoom) or when a batch ends over budget
// (Shrink). It never chooses an entry for which `touched(key)` is true.
// Policies are deterministic: no randomness except a seeded stream, no
// dependence on hash-container iteration order.
// Built-ins (MakeCachePolicy; docs/CACHE.md defines each):
//   "lru"       global least-recently-used;
//   "lfu"       least-frequently-used, frequency = lookups so far (one per
//               batch lookup, hit or miss, kept across evictions), ties to
//               the least recently used;
//   "layer"     the budget split equally between MoE layers, LRU inside each;
//   "layerlfu"  the same partition, LFU inside each;
//   "lfru"      a privileged LRU segment (half the budget) over an
//               unprivileged LFU segment: new entries enter unprivileged, a
//               hit promotes to privileged, privileged overflow demotes its
//               least recent entry;
//   "arc"       Adaptive Replacement Cache (Megiddo & Modha, FAST 2003) in
//               bytes: recency and frequency lists with ghost lists that
//               adapt the split;
//   "random"    a uniformly random untouched victim from a seeded stream;
//   "pinned"    the keys of CachePolicyOptions::pinned never leave (their
//               bytes count in the budget); LRU over the rest;
//   "belady"    offline optimum for replay: evict the entry whose next use
//               (CachePolicyOptions::next_use) is furthest in batches,
//               never-used-again first (ties to the lower key).
// Thread-safety: not thread-safe; owned by one ExpertCache.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "colibri/engine/key_map.h"
#include "colibri/status.h"

namespace colibri::engine {

// (MoE layer index, expert id) packed in 64 bits.
using ExpertKey = uint64_t;
inline ExpertKey MakeExpertKey(uint32_t layer_index, uint32_t expert) {
  return (static_cast<uint64_t>(layer_index) << 32) | expert;
}
inline uint32_t LayerIndexOf(ExpertKey key) { return static_cast<uint32_t>(key >> 32); }
inline uint32_t ExpertOf(ExpertKey key) { return static_cast<uint32_t>(key); }

using TouchedFn = std::function<bool(ExpertKey)>;

// For each key, the batches (0-based numbers of the cache's layer batches, in
// order) in which it is looked up: the future that Belady's policy reads.
// Built by offline replay from the whole trace before the run.
// Thread-safety: const methods may be called concurrently (one index serves
// many simulated caches).
class NextUseIndex {
 public:
  // Records that `key` is looked up in `batch`; batches must not decrease per key.
  void Add(ExpertKey key, uint64_t batch);
  // The first batch after `batch` in which `key` is looked up; UINT64_MAX if none.
  uint64_t NextUseAfter(ExpertKey key, uint64_t batch) const;

 private:
  KeyMap<std::vector<uint64_t>> uses_;
};

class CachePolicy {
 public:
  virtual ~CachePolicy() = default;
  virtual const char* name() const = 0;
  virtual uint64_t budget_bytes() const = 0;

  // A layer batch begins: `batch` is its 0-based number on this cache.
  virtual void OnBatchBegin(uint64_t batch) {}
  virtual void OnInsert(ExpertKey key, uint64_t bytes) = 0;
  virtual void OnAccess(ExpertKey key) = 0;
  virtual void OnErase(ExpertKey key) = 0;

  // Appends the victims that make room for `key` (`bytes`) within its budget
  // and returns true; returns false, appending nothing, when untouched
  // entries cannot free enough. The caller erases the victims (OnErase).
  virtual bool MakeRoom(ExpertKey key, uint64_t bytes, const TouchedFn& touched, std::vector<ExpertKey>* victims) = 0;
  // Appends the untouched victims, in eviction order, that bring every
  // budget back within its limit (as far as untouched entries allow).
  virtual void Shrink(const TouchedFn& touched, std::vector<ExpertKey>* victims) = 0;
};

struct CachePolicyOptions {
  uint64_t budget_bytes = 0;
  uint32_t moe_layers = 1;  // for partitioned policies
  uint64_t seed = 1;        // "random": the root seed of its stream
  std::vector<ExpertKey> pinned;  // "pinned": the hot set (e.g. learned from a profiling trace)
  std::shared_ptr<const NextUseIndex> next_use;  // "belady": required
};
// Options with a budget and layer count only (the other fields default).
inline CachePolicyOptions PolicyOptions(uint64_t budget_bytes, uint32_t moe_layers) {
  CachePolicyOptions o;
  o.budget_bytes = budget_bytes;
  o.moe_layers = moe_layers;
  return o;
}

// A built-in by name; an unknown name, a missing next_use for "belady" or an
// empty pinned set for "pinned" is an error (InvalidArgument) naming it. The
// caller checks that a pinned set fits the budget (the policy learns sizes
// only as entries arrive).
Result<std::unique_ptr<CachePolicy>> MakeCachePolicy(const std::string& name, const CachePolicyOptions& options);
// The names MakeCachePolicy accepts.
std::vector<std::string> CachePolicyNames();

}  // namespace colibri::engine
