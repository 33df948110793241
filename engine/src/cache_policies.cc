// Built-in cache policies: global LRU and per-layer-partitioned LRU.
#include <vector>

#include "colibri/engine/cache_policy.h"
#include "colibri/engine/key_map.h"

namespace colibri::engine {
namespace {

// One LRU order with its own byte budget: a doubly linked list threaded
// through a vector of nodes (freed nodes are reused: no allocation once warm),
// indexed by key. Iteration follows the list, never the index, so victim
// choices are deterministic.
class LruList {
 public:
  explicit LruList(uint64_t budget_bytes) : budget_bytes_(budget_bytes) {}

  void Insert(ExpertKey key, uint64_t bytes) {
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
  void Access(ExpertKey key) {
    const uint32_t* n = index_.Find(key);
    if (n == nullptr || *n == head_) return;
    Unlink(*n);
    LinkFront(*n);
  }
  void Erase(ExpertKey key) {
    const uint32_t* found = index_.Find(key);
    if (found == nullptr) return;
    const uint32_t n = *found;
    index_.Erase(key);
    used_bytes_ -= nodes_[n].bytes;
    Unlink(n);
    nodes_[n].next = free_;
    free_ = n;
  }
  // Least recent untouched entries freeing at least used + bytes - budget.
  bool MakeRoom(uint64_t bytes, const TouchedFn& touched, std::vector<ExpertKey>* victims) const {
    if (used_bytes_ + bytes <= budget_bytes_) return true;
    const uint64_t need = used_bytes_ + bytes - budget_bytes_;
    const size_t first = victims->size();
    uint64_t freed = 0;
    for (uint32_t n = tail_; n != kNone && freed < need; n = nodes_[n].prev) {
      if (touched(nodes_[n].key)) continue;
      victims->push_back(nodes_[n].key);
      freed += nodes_[n].bytes;
    }
    if (freed >= need) return true;
    victims->resize(first);
    return false;
  }
  void Shrink(const TouchedFn& touched, std::vector<ExpertKey>* victims) const {
    uint64_t used = used_bytes_;
    for (uint32_t n = tail_; n != kNone && used > budget_bytes_; n = nodes_[n].prev) {
      if (touched(nodes_[n].key)) continue;
      victims->push_back(nodes_[n].key);
      used -= nodes_[n].bytes;
    }
  }
  uint64_t budget_bytes() const { return budget_bytes_; }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  struct Node {
    ExpertKey key = 0;
    uint64_t bytes = 0;
    uint32_t prev = kNone;  // towards the most recent
    uint32_t next = kNone;  // towards the least recent; the free list's link when free
  };
  void LinkFront(uint32_t n) {
    nodes_[n].prev = kNone;
    nodes_[n].next = head_;
    if (head_ != kNone) nodes_[head_].prev = n;
    head_ = n;
    if (tail_ == kNone) tail_ = n;
  }
  void Unlink(uint32_t n) {
    const uint32_t prev = nodes_[n].prev, next = nodes_[n].next;
    (prev != kNone ? nodes_[prev].next : head_) = next;
    (next != kNone ? nodes_[next].prev : tail_) = prev;
  }

  uint64_t budget_bytes_;
  uint64_t used_bytes_ = 0;
  std::vector<Node> nodes_;
  uint32_t head_ = kNone;  // most recently used
  uint32_t tail_ = kNone;  // least recently used
  uint32_t free_ = kNone;  // freed nodes, linked through next
  KeyMap<uint32_t> index_;  // key -> node
};

class LruPolicy final : public CachePolicy {
 public:
  explicit LruPolicy(uint64_t budget_bytes) : lru_(budget_bytes) {}
  const char* name() const override { return "lru"; }
  uint64_t budget_bytes() const override { return lru_.budget_bytes(); }
  void OnInsert(ExpertKey key, uint64_t bytes) override { lru_.Insert(key, bytes); }
  void OnAccess(ExpertKey key) override { lru_.Access(key); }
  void OnErase(ExpertKey key) override { lru_.Erase(key); }
  bool MakeRoom(ExpertKey, uint64_t bytes, const TouchedFn& touched, std::vector<ExpertKey>* victims) override {
    return lru_.MakeRoom(bytes, touched, victims);
  }
  void Shrink(const TouchedFn& touched, std::vector<ExpertKey>* victims) override { lru_.Shrink(touched, victims); }

 private:
  LruList lru_;
};

// The budget split equally (in bytes) between MoE layers; LRU inside each.
class LayerPartitionedLruPolicy final : public CachePolicy {
 public:
  LayerPartitionedLruPolicy(uint64_t budget_bytes, uint32_t layers)
      : budget_bytes_(budget_bytes), layers_(layers, LruList(budget_bytes / layers)) {}
  const char* name() const override { return "layer"; }
  uint64_t budget_bytes() const override { return budget_bytes_; }
  void OnInsert(ExpertKey key, uint64_t bytes) override { Layer(key).Insert(key, bytes); }
  void OnAccess(ExpertKey key) override { Layer(key).Access(key); }
  void OnErase(ExpertKey key) override { Layer(key).Erase(key); }
  bool MakeRoom(ExpertKey key, uint64_t bytes, const TouchedFn& touched, std::vector<ExpertKey>* victims) override {
    return Layer(key).MakeRoom(bytes, touched, victims);
  }
  void Shrink(const TouchedFn& touched, std::vector<ExpertKey>* victims) override {
    for (const LruList& layer : layers_) layer.Shrink(touched, victims);
  }

 private:
  LruList& Layer(ExpertKey key) { return layers_.at(LayerIndexOf(key)); }
  uint64_t budget_bytes_;
  std::vector<LruList> layers_;
};

}  // namespace

std::vector<std::string> CachePolicyNames() { return {"lru", "layer"}; }

Result<std::unique_ptr<CachePolicy>> MakeCachePolicy(const std::string& name, const CachePolicyOptions& options) {
  if (name == "lru") return std::unique_ptr<CachePolicy>(new LruPolicy(options.budget_bytes));
  if (name == "layer") {
    if (options.moe_layers == 0) return Status::InvalidArgument("policy 'layer' needs at least one MoE layer");
    return std::unique_ptr<CachePolicy>(new LayerPartitionedLruPolicy(options.budget_bytes, options.moe_layers));
  }
  std::string known;
  for (const std::string& n : CachePolicyNames()) known += (known.empty() ? "" : ", ") + n;
  return Status::InvalidArgument("unknown cache policy '" + name + "' (known: " + known + ")");
}

}  // namespace colibri::engine
