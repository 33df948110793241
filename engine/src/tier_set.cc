#include "tier_set.h"

#include <algorithm>
#include <utility>

namespace colibri::engine {
namespace {

// A tier's cache over `pool`, or null when the pool is empty (the tier is
// disabled; the policy name is still checked). Its byte budget is the pool's
// whole slots, or, with per-layer expert sizes, `budget_bytes` itself.
Result<std::unique_ptr<ExpertCache>> MakeTier(const std::string& policy, const SlabPool& pool, uint64_t budget_bytes,
                                              bool per_layer_sizes, CachePolicyOptions options) {
  options.budget_bytes = per_layer_sizes ? budget_bytes : pool.total_bytes();
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<CachePolicy> p, MakeCachePolicy(policy, options));
  if (pool.slot_count() == 0) return std::unique_ptr<ExpertCache>();
  return std::make_unique<ExpertCache>(std::move(p), CacheMode::kHardBudget);
}

// The bytes of a tier's pool: the budget, or, with per-layer expert sizes, as
// many whole blocks as experts of the smallest layer fit in the budget (the
// cache keeps the byte budget; the pool only needs a slot per entry).
uint64_t PoolBytes(uint64_t budget_bytes, uint64_t block_bytes, uint64_t smallest_bytes) {
  if (smallest_bytes == block_bytes || budget_bytes < smallest_bytes) return budget_bytes;
  return budget_bytes / smallest_bytes * block_bytes;
}

TierCounters CountersOf(const ExpertCache* cache) {
  if (cache == nullptr) return {};
  return TierCounters{cache->counters().lookups, cache->counters().hits, cache->counters().misses};
}

}  // namespace

Result<std::unique_ptr<TierSet>> TierSet::Create(const EngineModel& model, const EngineOptions& options,
                                                 const EngineBackends& backends) {
  const uint64_t block = model.layout.block_bytes;
  const bool per_layer_sizes = !model.layer_expert_bytes.empty();
  const uint64_t smallest =
      per_layer_sizes ? *std::min_element(model.layer_expert_bytes.begin(), model.layer_expert_bytes.end()) : block;
  std::unique_ptr<TierSet> tiers(new TierSet(model, backends));
  TierSet& t = *tiers;
  COLIBRI_ASSIGN_OR_RETURN(t.l1_pool_,
                           backends.transfer->CreateDevicePool(PoolBytes(options.l1_bytes, block, smallest), block));
  COLIBRI_RETURN_IF_ERROR(t.l1_pool_ ? Status::Ok() : Status::Internal("no L1 pool"));
  const bool host_data = backends.storage->caps().delivers_data;
  const auto host_pool = [&](uint64_t bytes) {
    return host_data ? backends.transfer->CreateHostPool(bytes, block) : SlabPool::CreateReserved(bytes, block);
  };
  auto l2 = host_pool(PoolBytes(options.l2_bytes, block, smallest));
  if (!l2.ok()) return l2.status().WithPrefix("L2 pool");
  t.l2_pool_ = std::move(l2).value();
  COLIBRI_ASSIGN_OR_RETURN(t.staging_pool_, host_pool(options.staging_slots * block));
  if (backends.compute->caps().device_memory) {
    COLIBRI_ASSIGN_OR_RETURN(t.device_staging_pool_, backends.transfer->CreateDevicePool(block, block));
  }
  CachePolicyOptions policy_options;
  policy_options.moe_layers = model.moe_layers;
  policy_options.next_use = options.next_use;
  policy_options.pinned = options.pinned;
  COLIBRI_ASSIGN_OR_RETURN(t.l1_cache_,
                           MakeTier(options.l1_policy, *t.l1_pool_, options.l1_bytes, per_layer_sizes, policy_options));
  COLIBRI_ASSIGN_OR_RETURN(t.l2_cache_,
                           MakeTier(options.l2_policy, *t.l2_pool_, options.l2_bytes, per_layer_sizes, policy_options));
  const size_t entries = static_cast<size_t>(model.moe_layers) * model.experts;
  t.l1_slot_of_.assign(entries, -1);
  t.l2_slot_of_.assign(entries, -1);
  t.fill_in_flight_.assign(entries, 0);
  return tiers;
}

int64_t TierSet::AdmitL1(ExpertKey key) {
  if (!l1_cache_) return -1;
  evicted_.clear();
  if (!l1_cache_->Insert(key, ExpertBytes(LayerIndexOf(key)), &evicted_)) return -1;
  for (ExpertKey victim : evicted_) {
    int64_t& slot = l1_slot_of_[EntryIndex(victim)];
    l1_pool_->Release(static_cast<uint32_t>(slot));
    slot = -1;
  }
  const uint32_t slot = *l1_pool_->Acquire();  // the cache's budget equals the pool's slots
  l1_slot_of_[EntryIndex(key)] = slot;
  return slot;
}

Result<int64_t> TierSet::AdmitL2(ExpertKey key, bool prefetch) {
  if (!l2_cache_) return int64_t{-1};
  evicted_.clear();
  const uint64_t bytes = ExpertBytes(LayerIndexOf(key));
  if (!(prefetch ? l2_cache_->Prefetch(key, bytes, &evicted_) : l2_cache_->Insert(key, bytes, &evicted_))) {
    return int64_t{-1};
  }
  for (ExpertKey victim : evicted_) COLIBRI_RETURN_IF_ERROR(ReleaseL2Slot(victim));
  const uint32_t slot = *l2_pool_->Acquire();  // the cache's budget equals the pool's slots
  l2_slot_of_[EntryIndex(key)] = slot;
  return int64_t{slot};
}

Result<uint32_t> TierSet::AdmitPinned(ExpertKey key) {
  evicted_.clear();
  if (!l2_cache_->Insert(key, ExpertBytes(LayerIndexOf(key)), &evicted_) || !evicted_.empty()) {
    return Status::Internal("pinned: the hot set does not fit L2's slots");
  }
  const uint32_t slot = *l2_pool_->Acquire();
  l2_slot_of_[EntryIndex(key)] = slot;
  return slot;
}

void TierSet::DropL1(ExpertKey key, int64_t slot) {
  l1_cache_->Erase(key);
  l1_pool_->Release(static_cast<uint32_t>(slot));
  l1_slot_of_[EntryIndex(key)] = -1;
}

void TierSet::DropL2(ExpertKey key) {
  l2_cache_->Erase(key);
  int64_t& slot = l2_slot_of_[EntryIndex(key)];
  l2_pool_->Release(static_cast<uint32_t>(slot));
  slot = -1;
}

Status TierSet::ReleaseL2Slot(ExpertKey victim) {
  const size_t index = EntryIndex(victim);
  if (fill_in_flight_[index]) {
    COLIBRI_RETURN_IF_ERROR(backends_.loop->RunUntil([&] { return !fill_in_flight_[index]; }));
    if (fill_in_flight_[index]) return Status::Internal("prefetch read of an evicted expert never completed");
  }
  int64_t& slot = l2_slot_of_[index];
  if (slot >= 0) l2_pool_->Release(static_cast<uint32_t>(slot));  // < 0: a failed prefetch already freed it
  slot = -1;
  return Status::Ok();
}

TierCounters TierSet::l1_counters() const { return CountersOf(l1_cache_.get()); }
TierCounters TierSet::l2_counters() const { return CountersOf(l2_cache_.get()); }

uint64_t TierSet::pool_bytes() const {
  return l1_pool_->total_bytes() + l2_pool_->total_bytes() + staging_pool_->total_bytes() +
         (device_staging_pool_ ? device_staging_pool_->total_bytes() : 0);
}

std::vector<MemoryRegion> TierSet::read_buffer_regions() const {
  std::vector<MemoryRegion> regions;
  if (!backends_.storage->caps().delivers_data) return regions;
  regions = RegistrableRegions(*l2_pool_);
  const std::vector<MemoryRegion> staging = RegistrableRegions(*staging_pool_);
  regions.insert(regions.end(), staging.begin(), staging.end());
  return regions;
}

}  // namespace colibri::engine
