// "pinned": a static hot set (CachePolicyOptions::pinned, e.g. learned from a
// profiling trace) whose keys are never chosen as victims; the bytes of its
// resident keys count in the budget; every other entry is in one LRU order
// (as "lru") over what the budget leaves. The policy learns sizes only as
// entries are inserted, so the caller checks that the pinned set fits the
// budget (MakeCachePolicy only refuses an empty set); a resident pinned set
// over the budget leaves MakeRoom nothing to evict. A pinned key leaves only
// by an explicit erase (ExpertCache::Erase).
// Ownership: owned by its ExpertCache. Thread-safety: none.
#include "cache_policy_util.h"

namespace colibri::engine::policy_detail {
namespace {

class PinnedPolicy final : public CachePolicy {
 public:
  PinnedPolicy(uint64_t budget_bytes, const std::vector<ExpertKey>& pinned) : budget_bytes_(budget_bytes) {
    for (ExpertKey key : pinned) pinned_bytes_of_[key] = 0;
  }
  const char* name() const override { return "pinned"; }
  uint64_t budget_bytes() const override { return budget_bytes_; }

  void OnInsert(ExpertKey key, uint64_t bytes) override {
    uint64_t* pinned = pinned_bytes_of_.Find(key);
    if (pinned == nullptr) {
      others_.Insert(key, bytes);
      return;
    }
    pinned_bytes_ = pinned_bytes_ - *pinned + bytes;
    *pinned = bytes;
  }
  void OnAccess(ExpertKey key) override { others_.Access(key); }
  void OnErase(ExpertKey key) override {
    uint64_t* pinned = pinned_bytes_of_.Find(key);
    if (pinned == nullptr) {
      others_.Erase(key);
      return;
    }
    pinned_bytes_ -= *pinned;
    *pinned = 0;
  }
  bool MakeRoom(ExpertKey, uint64_t bytes, const TouchedFn& touched, std::vector<ExpertKey>* victims) override {
    return MakeRoomFrom(ExcessBytes(used_bytes(), bytes, budget_bytes_), touched, victims, others_);
  }
  void Shrink(const TouchedFn& touched, std::vector<ExpertKey>* victims) override {
    CollectVictims(ExcessBytes(used_bytes(), 0, budget_bytes_), touched, victims, others_);
  }

 private:
  uint64_t used_bytes() const { return pinned_bytes_ + others_.used_bytes(); }

  uint64_t budget_bytes_;
  KeyMap<uint64_t> pinned_bytes_of_;  // pinned key -> its resident bytes (0 when not resident)
  uint64_t pinned_bytes_ = 0;         // resident pinned bytes
  LruList others_;
};

}  // namespace

std::unique_ptr<CachePolicy> MakePinnedPolicy(uint64_t budget_bytes, const std::vector<ExpertKey>& pinned) {
  return std::make_unique<PinnedPolicy>(budget_bytes, pinned);
}

}  // namespace colibri::engine::policy_detail
