// LruList (cache_policy_util.h).
#include "cache_policy_util.h"

namespace colibri::engine::policy_detail {

void LruList::Insert(ExpertKey key, uint64_t bytes) {
  Erase(key);
  uint32_t n;
  if (free_ != kNone) {
    n = free_;
    free_ = nodes_[n].next;
  } else {
    n = static_cast<uint32_t>(nodes_.size());
    nodes_.emplace_back();
  }
  nodes_[n].key = key;
  nodes_[n].bytes = bytes;
  LinkFront(n);
  index_[key] = n;
  used_bytes_ += bytes;
}

void LruList::Access(ExpertKey key) {
  const uint32_t* n = index_.Find(key);
  if (n == nullptr || *n == head_) return;
  Unlink(*n);
  LinkFront(*n);
}

std::optional<uint64_t> LruList::Erase(ExpertKey key) {
  const uint32_t* found = index_.Find(key);
  if (found == nullptr) return std::nullopt;
  const uint32_t n = *found;
  index_.Erase(key);
  used_bytes_ -= nodes_[n].bytes;
  Unlink(n);
  nodes_[n].next = free_;
  free_ = n;
  return nodes_[n].bytes;
}

std::optional<KeyBytes> LruList::PopLeastRecent() {
  if (tail_ == kNone) return std::nullopt;
  const KeyBytes least{nodes_[tail_].key, nodes_[tail_].bytes};
  Erase(least.key);
  return least;
}

void LruList::LinkFront(uint32_t n) {
  nodes_[n].prev = kNone;
  nodes_[n].next = head_;
  if (head_ != kNone) nodes_[head_].prev = n;
  head_ = n;
  if (tail_ == kNone) tail_ = n;
}

void LruList::Unlink(uint32_t n) {
  const uint32_t prev = nodes_[n].prev, next = nodes_[n].next;
  (prev != kNone ? nodes_[prev].next : head_) = next;
  (next != kNone ? nodes_[next].prev : tail_) = prev;
}

}  // namespace colibri::engine::policy_detail
