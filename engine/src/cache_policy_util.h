// Pieces shared by the built-in cache policies (cache_policies.cc and
// cache_policy_*.cc): the eviction orders (LruList: recency; RankedList: any
// rank, e.g. LfuList: frequency, then recency, from a UseCounter), the victim
// collection every policy runs over its orders, and the factories of the
// policies that live in their own files (MakeCachePolicy, cache_policies.cc,
// is the public entry).
//
// An "order" is any type with
//   template <typename Fn> void ForEachVictim(Fn fn) const;
// calling fn(key, bytes) on its entries from the first to evict to the last,
// until fn returns false. Orders follow their own links, never a hash
// container's layout, so victim choices are deterministic.
//
// Ownership: plain values. Thread-safety: none (each policy owns its pieces).
// Errors: none; a call for a key the order does not hold is a no-op.
#pragma once

#include <compare>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "colibri/engine/cache_policy.h"
#include "colibri/engine/key_map.h"

namespace colibri::engine::policy_detail {

struct KeyBytes {
  ExpertKey key = 0;
  uint64_t bytes = 0;
};

// A recency order: a doubly linked list threaded through a vector of nodes
// (freed nodes are reused: no allocation once warm), indexed by key.
class LruList {
 public:
  // Makes `key` the most recent entry at `bytes` (replacing it if present).
  void Insert(ExpertKey key, uint64_t bytes);
  // Makes `key` the most recent entry; no-op when absent.
  void Access(ExpertKey key);
  // Removes `key`; its bytes, or nullopt when absent.
  std::optional<uint64_t> Erase(ExpertKey key);
  // Removes and returns the least recent entry; nullopt when empty.
  std::optional<KeyBytes> PopLeastRecent();

  bool Contains(ExpertKey key) const { return index_.Contains(key); }
  uint64_t used_bytes() const { return used_bytes_; }

  // Least recent first.
  template <typename Fn>
  void ForEachVictim(Fn fn) const {
    for (uint32_t n = tail_; n != kNone; n = nodes_[n].prev) {
      if (!fn(nodes_[n].key, nodes_[n].bytes)) return;
    }
  }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  struct Node {
    ExpertKey key = 0;
    uint64_t bytes = 0;
    uint32_t prev = kNone;  // towards the most recent
    uint32_t next = kNone;  // towards the least recent; the free list's link when free
  };
  void LinkFront(uint32_t n);
  void Unlink(uint32_t n);

  uint64_t used_bytes_ = 0;
  std::vector<Node> nodes_;
  uint32_t head_ = kNone;  // most recently used
  uint32_t tail_ = kNone;  // least recently used
  uint32_t free_ = kNone;  // freed nodes, linked through next
  KeyMap<uint32_t> index_;  // key -> node
};

// A key's use count and the tick of its last use, ordered by count, then tick.
struct Use {
  uint64_t count = 0;
  uint64_t tick = 0;
  auto operator<=>(const Use&) const = default;
};

// The uses of every key ever counted (kept across evictions, so a
// re-inserted key resumes its count). Ticks come from one counter-local
// clock: a later use has a larger tick.
class UseCounter {
 public:
  // Counts one use of `key` now; returns its updated Use.
  Use Count(ExpertKey key) {
    Use& use = uses_[key];
    ++use.count;
    use.tick = ++clock_;
    return use;
  }
  // The Use of `key` so far (zero when never counted).
  Use Get(ExpertKey key) const {
    const Use* use = uses_.Find(key);
    return use != nullptr ? *use : Use{};
  }

 private:
  KeyMap<Use> uses_;
  uint64_t clock_ = 0;
};

// An order by rank: entries sorted by (rank, key) ascending, the first
// evicted first. Rank is any totally ordered value type. O(log n) per
// operation (an ordered set).
template <typename Rank>
class RankedList {
 public:
  struct Item {
    Rank rank{};
    ExpertKey key = 0;
    uint64_t bytes = 0;
    bool operator<(const Item& o) const { return rank < o.rank || (!(o.rank < rank) && key < o.key); }
  };

  // Adds `key` at `bytes` with `rank` (replacing it if present).
  void Insert(ExpertKey key, uint64_t bytes, Rank rank) {
    Erase(key);
    const Item item{rank, key, bytes};
    order_.insert(item);
    index_[key] = item;
    used_bytes_ += bytes;
  }
  // Re-ranks `key`; no-op when absent.
  void Update(ExpertKey key, Rank rank) {
    Item* item = index_.Find(key);
    if (item == nullptr) return;
    order_.erase(*item);
    item->rank = rank;
    order_.insert(*item);
  }
  // Removes `key`; its bytes, or nullopt when absent.
  std::optional<uint64_t> Erase(ExpertKey key) {
    const Item* item = index_.Find(key);
    if (item == nullptr) return std::nullopt;
    const uint64_t bytes = item->bytes;
    order_.erase(*item);
    index_.Erase(key);
    used_bytes_ -= bytes;
    return bytes;
  }

  bool Contains(ExpertKey key) const { return index_.Contains(key); }
  uint64_t used_bytes() const { return used_bytes_; }
  // The entry evicted last (the highest rank), or null when empty.
  const Item* last() const { return order_.empty() ? nullptr : &*order_.rbegin(); }

  // Lowest rank first.
  template <typename Fn>
  void ForEachVictim(Fn fn) const {
    for (const Item& item : order_) {
      if (!fn(item.key, item.bytes)) return;
    }
  }

 private:
  std::set<Item> order_;
  KeyMap<Item> index_;  // key -> its item in order_
  uint64_t used_bytes_ = 0;
};

// The frequency order: the least frequently used first, ties to the least
// recently used.
using LfuList = RankedList<Use>;

// The bytes over `budget_bytes` once `used_bytes` grows by `bytes` (0 when it fits).
inline uint64_t ExcessBytes(uint64_t used_bytes, uint64_t bytes, uint64_t budget_bytes) {
  return used_bytes + bytes > budget_bytes ? used_bytes + bytes - budget_bytes : 0;
}

// Appends untouched entries of `orders`, visited in turn, each in its
// eviction order, until they free `excess_bytes`; returns the bytes freed
// (less than `excess_bytes` when the untouched entries run out).
template <typename... Orders>
uint64_t CollectVictims(uint64_t excess_bytes, const TouchedFn& touched, std::vector<ExpertKey>* victims,
                        const Orders&... orders) {
  uint64_t freed = 0;
  const auto take = [&](ExpertKey key, uint64_t bytes) {
    if (touched(key)) return true;
    victims->push_back(key);
    freed += bytes;
    return freed < excess_bytes;
  };
  ((freed < excess_bytes ? orders.ForEachVictim(take) : void()), ...);
  return freed;
}

// CollectVictims for CachePolicy::MakeRoom: true when the victims free
// `excess_bytes`; otherwise false, appending nothing.
template <typename... Orders>
bool MakeRoomFrom(uint64_t excess_bytes, const TouchedFn& touched, std::vector<ExpertKey>* victims,
                  const Orders&... orders) {
  const size_t first = victims->size();
  if (CollectVictims(excess_bytes, touched, victims, orders...) >= excess_bytes) return true;
  victims->resize(first);
  return false;
}

// The built-ins defined in their own files (MakeCachePolicy checks options first).
std::unique_ptr<CachePolicy> MakeLfruPolicy(uint64_t budget_bytes);
std::unique_ptr<CachePolicy> MakeArcPolicy(uint64_t budget_bytes);
std::unique_ptr<CachePolicy> MakeRandomPolicy(uint64_t budget_bytes, uint64_t seed);
std::unique_ptr<CachePolicy> MakePinnedPolicy(uint64_t budget_bytes, const std::vector<ExpertKey>& pinned);
std::unique_ptr<CachePolicy> MakeBeladyPolicy(uint64_t budget_bytes, std::shared_ptr<const NextUseIndex> next_use);

}  // namespace colibri::engine::policy_detail
