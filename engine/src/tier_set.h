// TierSet: the memory tiers of one MoeEngine (moe_engine.h has the design).
//
// Holds the pools (L1 and the device staging slot from the transfer backend's
// CreateDevicePool; L2 and the staging slots NVMe reads land in from its
// CreateHostPool, or reserved address space when storage only models time),
// the L1 and L2 caches over them, and the slot maps ([layer x experts +
// expert] -> slot, -1 when not resident). Admission frees the slots of what a
// cache evicts; an L2 slot that a read is still filling (a prefetch, marked
// with set_fill_in_flight) is waited for on the event loop before it is
// reused. A tier's cache has the pool's whole slots as its byte budget (or,
// with per-layer expert sizes, the budget itself), so "fits" means "a slot is
// free" and budgets are never exceeded.
//
// Ownership: owns pools and caches; borrows the model and the backends (the
// engine's, which outlive it). Thread-safety: none; the engine's thread.
// Errors: Create's, as Status (a pool the transfer cannot allocate, an unknown
// or misconfigured policy); AdmitL2's, a fill that never completed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "colibri/engine/expert_cache.h"
#include "colibri/engine/moe_engine.h"
#include "colibri/engine/slab_pool.h"

namespace colibri::engine {

class TierSet {
 public:
  // Carves the pools for `options`' budgets and makes the tiers' caches.
  static Result<std::unique_ptr<TierSet>> Create(const EngineModel& model, const EngineOptions& options,
                                                 const EngineBackends& backends);

  size_t EntryIndex(ExpertKey key) const {
    return static_cast<size_t>(LayerIndexOf(key)) * model_.experts + ExpertOf(key);
  }
  // The bytes of one expert of MoE layer `layer_index` (MoeEngine::ExpertBytes).
  uint64_t ExpertBytes(uint32_t layer_index) const {
    return model_.layer_expert_bytes.empty() ? model_.layout.block_bytes : model_.layer_expert_bytes[layer_index];
  }

  ExpertCache* l1() const { return l1_cache_.get(); }  // null when L1 is disabled
  ExpertCache* l2() const { return l2_cache_.get(); }  // null when L2 is disabled

  // The block of a resident entry.
  std::byte* L1Block(size_t index) const { return l1_pool_->SlotData(static_cast<uint32_t>(l1_slot_of_[index])); }
  std::byte* L2Block(size_t index) const { return l2_pool_->SlotData(static_cast<uint32_t>(l2_slot_of_[index])); }
  std::byte* L1SlotData(int64_t slot) const { return l1_pool_->SlotData(static_cast<uint32_t>(slot)); }
  std::byte* L2SlotData(int64_t slot) const { return l2_pool_->SlotData(static_cast<uint32_t>(slot)); }

  // Admits `key` to L1, freeing the slots of what it evicts. The slot, or -1
  // (no L1, or the cache declined).
  int64_t AdmitL1(ExpertKey key);
  // Makes `key` resident in L2 (a demand miss, or with `prefetch` a prefetch:
  // ExpertCache::Prefetch), freeing the slots of what it evicts once their
  // fills are done. The slot, or -1 when L2 cannot admit it.
  Result<int64_t> AdmitL2(ExpertKey key, bool prefetch);
  // Makes a pinned key resident in L2 without evicting anything (PreloadPinned). The slot.
  Result<uint32_t> AdmitPinned(ExpertKey key);
  // Forgets an entry whose data never arrived: erases it from the cache and frees its slot.
  void DropL1(ExpertKey key, int64_t slot);
  void DropL2(ExpertKey key);

  // Transient slots for experts no tier admits (host memory reads land in).
  std::optional<uint32_t> AcquireStaging() { return staging_pool_->Acquire(); }
  std::byte* StagingData(uint32_t slot) const { return staging_pool_->SlotData(slot); }
  void ReleaseStaging(uint32_t slot) { staging_pool_->Release(slot); }
  // The one device slot blocks L1 lacks are copied to before a device
  // kernel; null unless the compute backend reads device memory.
  SlabPool* device_staging() const { return device_staging_pool_.get(); }

  // Whether a read into entry `index`'s L2 slot is in flight (a prefetch).
  bool fill_in_flight(size_t index) const { return fill_in_flight_[index] != 0; }
  void set_fill_in_flight(size_t index, bool in_flight) { fill_in_flight_[index] = in_flight ? 1 : 0; }

  TierCounters l1_counters() const;
  TierCounters l2_counters() const;
  // Bytes of every pool (L1 + L2 + staging, host and device).
  uint64_t pool_bytes() const;
  // The L2 pool and the staging slots in registrable regions (MoeEngine::read_buffer_regions).
  std::vector<MemoryRegion> read_buffer_regions() const;

 private:
  TierSet(const EngineModel& model, const EngineBackends& backends) : model_(model), backends_(backends) {}
  // Frees the L2 slot of an evicted entry, once a fill into it (if any) is done.
  Status ReleaseL2Slot(ExpertKey victim);

  const EngineModel& model_;
  const EngineBackends& backends_;
  std::unique_ptr<SlabPool> l1_pool_;
  std::unique_ptr<SlabPool> l2_pool_;
  std::unique_ptr<SlabPool> staging_pool_;
  std::unique_ptr<SlabPool> device_staging_pool_;  // one slot; only for a compute backend on a device
  std::unique_ptr<ExpertCache> l1_cache_;
  std::unique_ptr<ExpertCache> l2_cache_;
  std::vector<int64_t> l1_slot_of_;  // [layer x experts + expert] -> slot, -1 when not resident
  std::vector<int64_t> l2_slot_of_;
  std::vector<uint8_t> fill_in_flight_;  // [layer x experts + expert]
  std::vector<ExpertKey> evicted_;       // scratch of one admission
};

}  // namespace colibri::engine
