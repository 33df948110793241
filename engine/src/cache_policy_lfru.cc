// "lfru": Least Frequently Recently Used, two segments sharing one budget.
//
//   - The privileged segment is an LRU order holding at most half the budget
//     (budget / 2 bytes); the unprivileged segment is an LFU order (as "lfu":
//     frequency = OnInsert + OnAccess calls so far, kept across evictions,
//     ties to the least recently used) holding the rest.
//   - OnInsert: the entry enters unprivileged.
//   - OnAccess (a hit): an unprivileged entry is promoted to the most recent
//     end of privileged; a privileged entry becomes its most recent. When
//     privileged then holds more than its half, its least recent entries are
//     demoted, one by one until it fits, to unprivileged, ranked there by
//     their frequency and last use. Demotion never evicts.
//   - Victims (MakeRoom, Shrink) bring the total within the budget: untouched
//     unprivileged entries first, lowest frequency first; only when
//     unprivileged has no untouched entry left, privileged's least recent
//     untouched entries.
// Ownership: owned by its ExpertCache. Thread-safety: none.
#include "cache_policy_util.h"

namespace colibri::engine::policy_detail {
namespace {

class LfruPolicy final : public CachePolicy {
 public:
  explicit LfruPolicy(uint64_t budget_bytes)
      : budget_bytes_(budget_bytes), privileged_budget_bytes_(budget_bytes / 2) {}
  const char* name() const override { return "lfru"; }
  uint64_t budget_bytes() const override { return budget_bytes_; }

  void OnInsert(ExpertKey key, uint64_t bytes) override {
    privileged_.Erase(key);
    unprivileged_.Insert(key, bytes, uses_.Count(key));
  }
  void OnAccess(ExpertKey key) override {
    uses_.Count(key);
    if (privileged_.Contains(key)) {
      privileged_.Access(key);
      return;
    }
    const std::optional<uint64_t> bytes = unprivileged_.Erase(key);
    if (!bytes) return;
    privileged_.Insert(key, *bytes);
    Demote();
  }
  void OnErase(ExpertKey key) override {
    if (!privileged_.Erase(key)) unprivileged_.Erase(key);
  }
  bool MakeRoom(ExpertKey, uint64_t bytes, const TouchedFn& touched, std::vector<ExpertKey>* victims) override {
    return MakeRoomFrom(ExcessBytes(used_bytes(), bytes, budget_bytes_), touched, victims, unprivileged_, privileged_);
  }
  void Shrink(const TouchedFn& touched, std::vector<ExpertKey>* victims) override {
    CollectVictims(ExcessBytes(used_bytes(), 0, budget_bytes_), touched, victims, unprivileged_, privileged_);
  }

 private:
  uint64_t used_bytes() const { return privileged_.used_bytes() + unprivileged_.used_bytes(); }
  void Demote() {
    while (privileged_.used_bytes() > privileged_budget_bytes_) {
      const KeyBytes least = *privileged_.PopLeastRecent();
      unprivileged_.Insert(least.key, least.bytes, uses_.Get(least.key));
    }
  }

  uint64_t budget_bytes_;
  uint64_t privileged_budget_bytes_;
  UseCounter uses_;
  LruList privileged_;
  LfuList unprivileged_;
};

}  // namespace

std::unique_ptr<CachePolicy> MakeLfruPolicy(uint64_t budget_bytes) {
  return std::make_unique<LfruPolicy>(budget_bytes);
}

}  // namespace colibri::engine::policy_detail
