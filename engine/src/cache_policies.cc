// Built-in cache policies: global LRU and per-layer-partitioned LRU.
#include <list>
#include <unordered_map>

#include "colibri/engine/cache_policy.h"

namespace colibri::engine {
namespace {

// One LRU order with its own byte budget. Iteration follows the list, never
// the hash map, so victim choices are deterministic.
class LruList {
 public:
  explicit LruList(uint64_t budget_bytes) : budget_bytes_(budget_bytes) {}

  void Insert(ExpertKey key, uint64_t bytes) {
    order_.push_front(key);
    index_[key] = {order_.begin(), bytes};
    used_bytes_ += bytes;
  }
  void Access(ExpertKey key) {
    auto it = index_.find(key);
    if (it != index_.end()) order_.splice(order_.begin(), order_, it->second.position);
  }
  void Erase(ExpertKey key) {
    auto it = index_.find(key);
    if (it == index_.end()) return;
    used_bytes_ -= it->second.bytes;
    order_.erase(it->second.position);
    index_.erase(it);
  }
  // Least recent untouched entries freeing at least used + bytes - budget.
  bool MakeRoom(uint64_t bytes, const TouchedFn& touched, std::vector<ExpertKey>* victims) const {
    if (used_bytes_ + bytes <= budget_bytes_) return true;
    const uint64_t need = used_bytes_ + bytes - budget_bytes_;
    const size_t first = victims->size();
    uint64_t freed = 0;
    for (auto it = order_.rbegin(); it != order_.rend() && freed < need; ++it) {
      if (touched(*it)) continue;
      victims->push_back(*it);
      freed += index_.at(*it).bytes;
    }
    if (freed >= need) return true;
    victims->resize(first);
    return false;
  }
  void Shrink(const TouchedFn& touched, std::vector<ExpertKey>* victims) const {
    uint64_t used = used_bytes_;
    for (auto it = order_.rbegin(); it != order_.rend() && used > budget_bytes_; ++it) {
      if (touched(*it)) continue;
      victims->push_back(*it);
      used -= index_.at(*it).bytes;
    }
  }
  uint64_t budget_bytes() const { return budget_bytes_; }

 private:
  struct Position {
    std::list<ExpertKey>::iterator position;
    uint64_t bytes;
  };
  uint64_t budget_bytes_;
  uint64_t used_bytes_ = 0;
  std::list<ExpertKey> order_;  // front: most recently used
  std::unordered_map<ExpertKey, Position> index_;
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
