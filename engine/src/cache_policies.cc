// The single-order built-in cache policies, whole or partitioned by MoE layer,
// and the factory of every built-in (the others live in cache_policy_*.cc).
//
//   "lru"       one recency order over the whole budget: the victim is the
//               least recently used untouched entry (recency = the last
//               OnInsert or OnAccess).
//   "lfu"       one frequency order over the whole budget. The frequency of
//               a key is its number of OnInsert + OnAccess calls so far (the
//               cache calls OnInsert on a miss's insert and OnAccess on a hit,
//               so one per batch lookup; a prefetch's insert counts one too),
//               kept across evictions: a re-inserted key resumes its count.
//               The victim is the untouched entry of lowest frequency, ties
//               to the least recently used. O(log n) per operation.
//   "layer"     the budget split equally between MoE layers (budget /
//               moe_layers bytes each; the key's layer index picks the part),
//               each part an "lru" over its own bytes: an insert evicts only
//               from its own layer, and Shrink brings every part within its
//               share.
//   "layerlfu"  the same partition, each part an "lfu".
// Every built-in treats an OnInsert of a key it already holds as replacing
// that entry (at its new size). For every built-in but "arc" (p adapts
// between a batch's inserts) and "random" (one draw per call), untouched
// entries keep their order through a batch, so ExpertCache's two modes evict
// the same entries whenever every batch's union fits.
// Ownership: MakeCachePolicy returns an owned policy. Thread-safety: none.
// Errors: MakeCachePolicy's (cache_policy.h), as InvalidArgument.
#include <string>
#include <vector>

#include "cache_policy_util.h"
#include "colibri/engine/cache_policy.h"

namespace colibri::engine {
namespace {

using policy_detail::CollectVictims;
using policy_detail::ExcessBytes;
using policy_detail::LfuList;
using policy_detail::LruList;
using policy_detail::MakeRoomFrom;
using policy_detail::UseCounter;

// An eviction order (LruList, LfuList) with its own budget.
template <typename List>
class BudgetedList {
 public:
  explicit BudgetedList(uint64_t budget_bytes) : budget_bytes_(budget_bytes) {}
  void Erase(ExpertKey key) { list_.Erase(key); }
  bool MakeRoom(uint64_t bytes, const TouchedFn& touched, std::vector<ExpertKey>* victims) const {
    return MakeRoomFrom(ExcessBytes(list_.used_bytes(), bytes, budget_bytes_), touched, victims, list_);
  }
  void Shrink(const TouchedFn& touched, std::vector<ExpertKey>* victims) const {
    CollectVictims(ExcessBytes(list_.used_bytes(), 0, budget_bytes_), touched, victims, list_);
  }

 protected:
  uint64_t budget_bytes_;
  List list_;
};

// One recency order with its own budget.
class LruSegment : public BudgetedList<LruList> {
 public:
  using BudgetedList::BudgetedList;
  void Insert(ExpertKey key, uint64_t bytes) { list_.Insert(key, bytes); }
  void Access(ExpertKey key) { list_.Access(key); }
};

// One frequency order with its own budget and use counts.
class LfuSegment : public BudgetedList<LfuList> {
 public:
  using BudgetedList::BudgetedList;
  void Insert(ExpertKey key, uint64_t bytes) { list_.Insert(key, bytes, uses_.Count(key)); }
  void Access(ExpertKey key) { list_.Update(key, uses_.Count(key)); }

 private:
  UseCounter uses_;
};

// A policy that is one segment over the whole budget.
template <typename Segment>
class WholePolicy final : public CachePolicy {
 public:
  WholePolicy(const char* name, uint64_t budget_bytes)
      : name_(name), budget_bytes_(budget_bytes), segment_(budget_bytes) {}
  const char* name() const override { return name_; }
  uint64_t budget_bytes() const override { return budget_bytes_; }
  void OnInsert(ExpertKey key, uint64_t bytes) override { segment_.Insert(key, bytes); }
  void OnAccess(ExpertKey key) override { segment_.Access(key); }
  void OnErase(ExpertKey key) override { segment_.Erase(key); }
  bool MakeRoom(ExpertKey, uint64_t bytes, const TouchedFn& touched, std::vector<ExpertKey>* victims) override {
    return segment_.MakeRoom(bytes, touched, victims);
  }
  void Shrink(const TouchedFn& touched, std::vector<ExpertKey>* victims) override { segment_.Shrink(touched, victims); }

 private:
  const char* name_;
  uint64_t budget_bytes_;
  Segment segment_;
};

// The budget split equally (in bytes) between MoE layers; one segment per layer.
template <typename Segment>
class LayerPartitionedPolicy final : public CachePolicy {
 public:
  LayerPartitionedPolicy(const char* name, uint64_t budget_bytes, uint32_t layers)
      : name_(name), budget_bytes_(budget_bytes), layers_(layers, Segment(budget_bytes / layers)) {}
  const char* name() const override { return name_; }
  uint64_t budget_bytes() const override { return budget_bytes_; }
  void OnInsert(ExpertKey key, uint64_t bytes) override { Layer(key).Insert(key, bytes); }
  void OnAccess(ExpertKey key) override { Layer(key).Access(key); }
  void OnErase(ExpertKey key) override { Layer(key).Erase(key); }
  bool MakeRoom(ExpertKey key, uint64_t bytes, const TouchedFn& touched, std::vector<ExpertKey>* victims) override {
    return Layer(key).MakeRoom(bytes, touched, victims);
  }
  void Shrink(const TouchedFn& touched, std::vector<ExpertKey>* victims) override {
    for (const Segment& layer : layers_) layer.Shrink(touched, victims);
  }

 private:
  Segment& Layer(ExpertKey key) { return layers_.at(LayerIndexOf(key)); }
  const char* name_;
  uint64_t budget_bytes_;
  std::vector<Segment> layers_;
};

template <typename Segment>
Result<std::unique_ptr<CachePolicy>> MakePartitioned(const char* name, const CachePolicyOptions& options) {
  if (options.moe_layers == 0) {
    return Status::InvalidArgument(std::string("policy '") + name + "' needs at least one MoE layer");
  }
  return std::unique_ptr<CachePolicy>(
      new LayerPartitionedPolicy<Segment>(name, options.budget_bytes, options.moe_layers));
}

Status UnknownPolicy(const std::string& name) {
  std::string known;
  for (const std::string& n : CachePolicyNames()) known += (known.empty() ? "" : ", ") + n;
  return Status::InvalidArgument("unknown cache policy '" + name + "' (known: " + known + ")");
}

}  // namespace

std::vector<std::string> CachePolicyNames() {
  return {"lru", "lfu", "layer", "layerlfu", "lfru", "arc", "random", "pinned", "belady"};
}

Result<std::unique_ptr<CachePolicy>> MakeCachePolicy(const std::string& name, const CachePolicyOptions& options) {
  const uint64_t budget = options.budget_bytes;
  if (name == "lru") return std::unique_ptr<CachePolicy>(new WholePolicy<LruSegment>("lru", budget));
  if (name == "lfu") return std::unique_ptr<CachePolicy>(new WholePolicy<LfuSegment>("lfu", budget));
  if (name == "layer") return MakePartitioned<LruSegment>("layer", options);
  if (name == "layerlfu") return MakePartitioned<LfuSegment>("layerlfu", options);
  if (name == "lfru") return policy_detail::MakeLfruPolicy(budget);
  if (name == "arc") return policy_detail::MakeArcPolicy(budget);
  if (name == "random") return policy_detail::MakeRandomPolicy(budget, options.seed);
  if (name == "pinned") {
    if (options.pinned.empty()) {
      return Status::InvalidArgument("policy 'pinned' needs a hot set: the keys it keeps (CachePolicyOptions::pinned), "
                                     "e.g. learned from a profiling trace");
    }
    return policy_detail::MakePinnedPolicy(budget, options.pinned);
  }
  if (name == "belady") {
    if (options.next_use == nullptr) {
      return Status::InvalidArgument("policy 'belady' is the offline optimum and needs the trace's future: it runs in the cache "
                                     "lab (colibri cache sweep) and in closed-loop replays, not in the engine alone");
    }
    return policy_detail::MakeBeladyPolicy(budget, options.next_use);
  }
  return UnknownPolicy(name);
}

}  // namespace colibri::engine
