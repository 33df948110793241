// "arc": Adaptive Replacement Cache (Megiddo & Modha, FAST 2003) with byte
// sizes. c = the budget in bytes.
//
//   - T1 (resident, seen once since it entered) and T2 (resident, hit since)
//     are LRU orders; B1 and B2 are their ghosts: the keys (with bytes) of
//     entries that left T1 and T2. p, the target bytes of T1, starts at 0.
//   - OnInsert of a key in B1: p += max(bytes, bytes x bytes(B2) / bytes(B1))
//     (at most c); the key leaves B1 and enters T2. In B2: p -= max(bytes,
//     bytes x bytes(B1) / bytes(B2)) (at least 0); the key leaves B2 and
//     enters T2. Otherwise it enters T1. (A prefetch's insert is an insert
//     like any other; an insert of a key already resident counts as a hit.)
//   - OnAccess (a hit): the entry becomes the most recent of T2.
//   - OnErase: an entry of T1 becomes the most recent of B1, of T2 of B2.
//     Every erase counts (an eviction or a slot the caller released).
//   - Ghosts are trimmed from their least recent end after every change:
//     B1 while bytes(T1) + bytes(B1) > c, then B2 (B1 once B2 is empty) while
//     bytes(T1 + T2 + B1 + B2) > 2c.
//   - Victims follow REPLACE for each victim in turn, untouched entries only:
//     T1's least recent while bytes(T1) > p, or bytes(T1) == p and the
//     incoming key is in B2 (bytes(T1) falls as T1 victims are taken); else
//     T2's least recent; whichever list has an untouched entry when the other
//     has none. MakeRoom uses the p the incoming key's insert will set (the
//     paper adapts p before REPLACE); Shrink, after the batch's inserts, has
//     no incoming key (the "in B2" tie rule is off). Unlike the paper, a
//     complete miss with T1 + B1 full also evicts by REPLACE rather than
//     always from T1 (ghost trimming keeps the lists' bound).
// Ownership: owned by its ExpertCache. Thread-safety: none.
#include <algorithm>

#include "cache_policy_util.h"

namespace colibri::engine::policy_detail {
namespace {

// bytes x num / den, exactly, saturating at UINT64_MAX; 0 when den is 0.
uint64_t ScaledBytes(uint64_t bytes, uint64_t num, uint64_t den) {
  if (den == 0) return 0;
  const unsigned __int128 scaled = static_cast<unsigned __int128>(bytes) * num / den;
  return scaled > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(scaled);
}

class ArcPolicy final : public CachePolicy {
 public:
  explicit ArcPolicy(uint64_t budget_bytes) : budget_bytes_(budget_bytes) {}
  const char* name() const override { return "arc"; }
  uint64_t budget_bytes() const override { return budget_bytes_; }

  void OnInsert(ExpertKey key, uint64_t bytes) override {
    if (t1_.Erase(key) || t2_.Erase(key)) {
      t2_.Insert(key, bytes);
      return;
    }
    target_bytes_ = TargetAfterInsert(key, bytes);
    if (b1_.Erase(key) || b2_.Erase(key)) {
      t2_.Insert(key, bytes);
    } else {
      t1_.Insert(key, bytes);
    }
    TrimGhosts();
  }
  void OnAccess(ExpertKey key) override {
    if (const std::optional<uint64_t> bytes = t1_.Erase(key)) {
      t2_.Insert(key, *bytes);
    } else {
      t2_.Access(key);
    }
  }
  void OnErase(ExpertKey key) override {
    if (const std::optional<uint64_t> bytes = t1_.Erase(key)) b1_.Insert(key, *bytes);
    if (const std::optional<uint64_t> bytes = t2_.Erase(key)) b2_.Insert(key, *bytes);
    TrimGhosts();
  }
  bool MakeRoom(ExpertKey key, uint64_t bytes, const TouchedFn& touched, std::vector<ExpertKey>* victims) override {
    const uint64_t excess = ExcessBytes(used_bytes(), bytes, budget_bytes_);
    const size_t first = victims->size();
    if (Replace(excess, TargetAfterInsert(key, bytes), b2_.Contains(key), touched, victims) >= excess) return true;
    victims->resize(first);
    return false;
  }
  void Shrink(const TouchedFn& touched, std::vector<ExpertKey>* victims) override {
    Replace(ExcessBytes(used_bytes(), 0, budget_bytes_), target_bytes_, false, touched, victims);
  }

 private:
  uint64_t used_bytes() const { return t1_.used_bytes() + t2_.used_bytes(); }

  // p once `key` (`bytes`) is inserted: adapted when the key is a ghost.
  uint64_t TargetAfterInsert(ExpertKey key, uint64_t bytes) const {
    if (b1_.Contains(key)) {
      const uint64_t delta = std::max(bytes, ScaledBytes(bytes, b2_.used_bytes(), b1_.used_bytes()));
      return target_bytes_ + std::min(delta, budget_bytes_ - target_bytes_);
    }
    if (b2_.Contains(key)) {
      const uint64_t delta = std::max(bytes, ScaledBytes(bytes, b1_.used_bytes(), b2_.used_bytes()));
      return target_bytes_ - std::min(delta, target_bytes_);
    }
    return target_bytes_;
  }

  // Appends REPLACE's untouched victims until they free `excess` bytes (or
  // run out); returns the bytes freed. Phases: T1 while over the target, then
  // T2, then the rest of T1.
  uint64_t Replace(uint64_t excess, uint64_t target, bool from_b2, const TouchedFn& touched,
                   std::vector<ExpertKey>* victims) const {
    uint64_t freed = 0, t1_bytes = t1_.used_bytes();
    size_t t1_taken = 0;
    t1_.ForEachVictim([&](ExpertKey key, uint64_t bytes) {
      if (freed >= excess || !(t1_bytes > target || (t1_bytes == target && from_b2))) return false;
      if (touched(key)) return true;
      victims->push_back(key);
      freed += bytes;
      t1_bytes -= bytes;
      ++t1_taken;
      return true;
    });
    if (freed < excess) freed += CollectVictims(excess - freed, touched, victims, t2_);
    size_t skip = t1_taken;
    t1_.ForEachVictim([&](ExpertKey key, uint64_t bytes) {
      if (freed >= excess) return false;
      if (touched(key)) return true;
      if (skip > 0) {
        --skip;
        return true;
      }
      victims->push_back(key);
      freed += bytes;
      return true;
    });
    return freed;
  }

  void TrimGhosts() {
    while (t1_.used_bytes() + b1_.used_bytes() > budget_bytes_ && b1_.PopLeastRecent()) continue;
    while (OverTwoBudgets() && (b2_.PopLeastRecent() || b1_.PopLeastRecent())) continue;
  }
  // bytes(T1 + T2 + B1 + B2) > 2c, without overflow.
  bool OverTwoBudgets() const {
    const uint64_t all_bytes = used_bytes() + b1_.used_bytes() + b2_.used_bytes();
    return all_bytes > budget_bytes_ && all_bytes - budget_bytes_ > budget_bytes_;
  }

  uint64_t budget_bytes_;
  uint64_t target_bytes_ = 0;  // p
  LruList t1_, t2_, b1_, b2_;
};

}  // namespace

std::unique_ptr<CachePolicy> MakeArcPolicy(uint64_t budget_bytes) { return std::make_unique<ArcPolicy>(budget_bytes); }

}  // namespace colibri::engine::policy_detail
