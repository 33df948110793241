// "belady": the offline optimum (Belady's MIN) for replay, over one budget.
//
// The policy reads the future from CachePolicyOptions::next_use (batch
// numbers as the cache's BeginBatch counts them, from 0) and keeps each
// resident entry ranked by its next use:
//   - OnBatchBegin(b): the current batch becomes b; entries whose recorded
//     next use is before b (inserted in an earlier batch, see OnInsert) are
//     re-ranked by their first use at or after b.
//   - OnAccess in batch b: next use = NextUseAfter(key, b).
//   - OnInsert in batch b: next use = the first use at or after b (a miss's
//     insert: b itself, re-ranked when the next batch begins; a prefetch: the
//     batch it serves). In batch 0, whose own uses the index cannot tell
//     apart, an insert counts as used in batch 0.
// The victim is the untouched entry with the furthest next use,
// never-used-again (UINT64_MAX) first, ties to the lower key; MakeRoom and
// Shrink take victims in that order until the budget holds. Untouched
// entries keep their rank through a batch. O(log n) per operation.
// Ownership: shares the NextUseIndex (read-only); owned by its ExpertCache.
// Thread-safety: none (the index may be shared with other policies).
#include "cache_policy_util.h"

namespace colibri::engine::policy_detail {
namespace {

class BeladyPolicy final : public CachePolicy {
 public:
  BeladyPolicy(uint64_t budget_bytes, std::shared_ptr<const NextUseIndex> next_use)
      : budget_bytes_(budget_bytes), next_use_(std::move(next_use)) {}
  const char* name() const override { return "belady"; }
  uint64_t budget_bytes() const override { return budget_bytes_; }

  void OnBatchBegin(uint64_t batch) override {
    batch_ = batch;
    for (const Item* last = order_.last(); last != nullptr && NextUseOf(last->rank) < batch; last = order_.last()) {
      const ExpertKey key = last->key;
      order_.Update(key, RankOf(FirstUseFrom(key, batch)));
    }
  }
  void OnInsert(ExpertKey key, uint64_t bytes) override {
    order_.Insert(key, bytes, RankOf(FirstUseFrom(key, batch_)));
  }
  void OnAccess(ExpertKey key) override { order_.Update(key, RankOf(next_use_->NextUseAfter(key, batch_))); }
  void OnErase(ExpertKey key) override { order_.Erase(key); }
  bool MakeRoom(ExpertKey, uint64_t bytes, const TouchedFn& touched, std::vector<ExpertKey>* victims) override {
    return MakeRoomFrom(ExcessBytes(order_.used_bytes(), bytes, budget_bytes_), touched, victims, order_);
  }
  void Shrink(const TouchedFn& touched, std::vector<ExpertKey>* victims) override {
    CollectVictims(ExcessBytes(order_.used_bytes(), 0, budget_bytes_), touched, victims, order_);
  }

 private:
  // The rank puts the furthest next use first: UINT64_MAX - next use.
  using Item = RankedList<uint64_t>::Item;
  static uint64_t RankOf(uint64_t next_use) { return UINT64_MAX - next_use; }
  static uint64_t NextUseOf(uint64_t rank) { return UINT64_MAX - rank; }

  uint64_t FirstUseFrom(ExpertKey key, uint64_t batch) const {
    return batch == 0 ? 0 : next_use_->NextUseAfter(key, batch - 1);
  }

  uint64_t budget_bytes_;
  std::shared_ptr<const NextUseIndex> next_use_;
  uint64_t batch_ = 0;
  RankedList<uint64_t> order_;  // rank: RankOf(next use)
};

}  // namespace

std::unique_ptr<CachePolicy> MakeBeladyPolicy(uint64_t budget_bytes, std::shared_ptr<const NextUseIndex> next_use) {
  return std::make_unique<BeladyPolicy>(budget_bytes, std::move(next_use));
}

}  // namespace colibri::engine::policy_detail
