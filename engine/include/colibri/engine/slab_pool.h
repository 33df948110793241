// SlabPool: one allocation made at start-up, carved into equal slots and
// addressed by slot index (offset = index x slot_bytes). No allocation on the
// hot path; the byte budget is a hard limit (slots = budget / slot_bytes).
// Used for the L2 host cache and, with CpuTransfer, the L1 "device" pool.
//
// Ownership: owns its memory (for Wrap: calls the given release function on
// destruction). Thread-safety: not thread-safe; the engine
// thread acquires and releases slots (readers of slot memory may be other
// threads as long as the slot is held).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "colibri/engine/storage.h"
#include "colibri/status.h"

namespace colibri::engine {

// The alignment of every pool's base and slot size (O_DIRECT reads need a page).
inline constexpr uint64_t kPoolAlignmentBytes = 4096;

class SlabPool {
 public:
  // A budget of 0 makes an empty pool (the tier is disabled). Any other budget
  // below one slot is an error, as is a slot size that is not a multiple of
  // `alignment_bytes`. `lock_memory` mlocks the pool (failure is an error).
  static Result<std::unique_ptr<SlabPool>> Create(uint64_t budget_bytes, uint64_t slot_bytes,
                                                  uint64_t alignment_bytes = kPoolAlignmentBytes, bool lock_memory = false);
  // The same slots over address space that is reserved but never backed
  // (PROT_NONE): for modelled runs, whose backends keep time without moving
  // bytes, so a what-if budget of hundreds of GiB costs no memory. Touching
  // a slot's memory faults.
  static Result<std::unique_ptr<SlabPool>> CreateReserved(uint64_t budget_bytes, uint64_t slot_bytes,
                                                          uint64_t alignment_bytes = kPoolAlignmentBytes);
  // The same slots over memory allocated by someone else (e.g. a cudaMalloc of
  // device memory, a cudaHostAlloc of pinned host memory): `base` must hold
  // slots x slot_bytes bytes (slots = budget / slot_bytes, checked as Create's)
  // and be aligned to `alignment_bytes`. `release` (may be empty) is called
  // with `base` once, on destruction; on error it is not called and the
  // caller keeps the memory. A budget of 0 makes an empty pool.
  static Result<std::unique_ptr<SlabPool>> Wrap(std::byte* base, uint64_t budget_bytes, uint64_t slot_bytes,
                                                uint64_t alignment_bytes, std::function<void(std::byte*)> release);
  // Memory from `allocate`, which may return any alignment (cudaMalloc
  // promises 256 bytes, cudaHostAlloc no page): it is asked for
  // slots x slot_bytes + alignment_bytes - 1 bytes and the base is aligned up
  // within that. `release` gets the pointer `allocate` returned, once: on
  // destruction, or at once when carving the slots fails. Errors: SlotsFor's
  // (nothing allocated), an overflowing size, allocate's own (returned as
  // they are), a null allocation. A budget of 0 calls neither.
  using RawAllocator = std::function<Result<std::byte*>(uint64_t bytes)>;
  static Result<std::unique_ptr<SlabPool>> AllocateAligned(uint64_t budget_bytes, uint64_t slot_bytes,
                                                           uint64_t alignment_bytes, const RawAllocator& allocate,
                                                           std::function<void(std::byte*)> release);
  // The number of slots Create, CreateReserved and Wrap make for a budget
  // (errors as theirs), for callers that allocate the memory to Wrap.
  static Result<uint64_t> SlotsFor(uint64_t budget_bytes, uint64_t slot_bytes, uint64_t alignment_bytes);
  ~SlabPool();
  SlabPool(const SlabPool&) = delete;
  SlabPool& operator=(const SlabPool&) = delete;

  uint32_t slot_count() const { return slot_count_; }
  uint64_t slot_bytes() const { return slot_bytes_; }
  uint32_t free_slots() const { return static_cast<uint32_t>(free_.size()); }
  uint64_t used_bytes() const { return static_cast<uint64_t>(slot_count_ - free_slots()) * slot_bytes_; }

  // A free slot (the lowest-numbered one, so runs are reproducible), or none.
  std::optional<uint32_t> Acquire();
  void Release(uint32_t slot);
  std::byte* SlotData(uint32_t slot) const { return base_ + static_cast<uint64_t>(slot) * slot_bytes_; }
  std::byte* base() const { return base_; }
  uint64_t total_bytes() const { return static_cast<uint64_t>(slot_count_) * slot_bytes_; }

 private:
  enum class Backing { kHeap, kLockedHeap, kReserved, kWrapped };
  SlabPool(std::byte* base, uint32_t slot_count, uint64_t slot_bytes, Backing backing);
  std::byte* base_;
  uint32_t slot_count_;
  uint64_t slot_bytes_;
  Backing backing_;
  std::function<void(std::byte*)> release_;  // kWrapped
  std::vector<uint32_t> free_;  // a min-heap of free slot indices
};

// The kernel's limit on one io_uring fixed buffer.
inline constexpr uint64_t kMaxRegisteredRegionBytes = 1ull << 30;

// The pool's slots as regions for StorageBackend::RegisterBuffers: runs of
// whole slots, at most `max_region_bytes` each (a single slot when a slot is
// larger). Empty for an empty pool.
std::vector<MemoryRegion> RegistrableRegions(const SlabPool& pool, uint64_t max_region_bytes = kMaxRegisteredRegionBytes);

}  // namespace colibri::engine
