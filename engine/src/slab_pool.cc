#include "colibri/engine/slab_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

namespace colibri::engine {

Result<uint64_t> SlabPool::SlotsFor(uint64_t budget_bytes, uint64_t slot_bytes, uint64_t alignment_bytes) {
  if (slot_bytes == 0 || alignment_bytes == 0 || slot_bytes % alignment_bytes != 0) {
    return Status::InvalidArgument("slot size " + std::to_string(slot_bytes) + " is not a positive multiple of " +
                                   std::to_string(alignment_bytes) + " bytes");
  }
  if (budget_bytes > 0 && budget_bytes < slot_bytes) {
    return Status::InvalidArgument("budget " + std::to_string(budget_bytes) + " bytes is below one expert (" +
                                   std::to_string(slot_bytes) + " bytes); use 0 to disable the tier");
  }
  const uint64_t slots = budget_bytes / slot_bytes;
  if (slots > UINT32_MAX) return Status::InvalidArgument("budget holds more than 2^32 slots");
  return slots;
}

Result<std::unique_ptr<SlabPool>> SlabPool::Create(uint64_t budget_bytes, uint64_t slot_bytes, uint64_t alignment_bytes,
                                                   bool lock_memory) {
  COLIBRI_ASSIGN_OR_RETURN(const uint64_t slots, SlotsFor(budget_bytes, slot_bytes, alignment_bytes));
  std::byte* base = nullptr;
  if (slots > 0) {
    void* memory = std::aligned_alloc(alignment_bytes, slots * slot_bytes);
    if (memory == nullptr) {
      return Status::InvalidArgument("cannot allocate " + std::to_string(slots * slot_bytes) + " bytes for the pool");
    }
    if (lock_memory && ::mlock(memory, slots * slot_bytes) != 0) {
      const int error = errno;
      std::free(memory);
      return Status::InvalidArgument(std::string("mlock of the pool failed: ") + std::strerror(error) +
                                     " (raise RLIMIT_MEMLOCK or run without locking)");
    }
    base = static_cast<std::byte*>(memory);
  }
  const Backing backing = lock_memory ? Backing::kLockedHeap : Backing::kHeap;
  return std::unique_ptr<SlabPool>(new SlabPool(base, static_cast<uint32_t>(slots), slot_bytes, backing));
}

Result<std::unique_ptr<SlabPool>> SlabPool::CreateReserved(uint64_t budget_bytes, uint64_t slot_bytes,
                                                           uint64_t alignment_bytes) {
  COLIBRI_ASSIGN_OR_RETURN(const uint64_t slots, SlotsFor(budget_bytes, slot_bytes, alignment_bytes));
  std::byte* base = nullptr;
  if (slots > 0) {
    // mmap returns page-aligned memory; alignments above a page are not needed for a pool nobody reads.
    void* memory = ::mmap(nullptr, slots * slot_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED) {
      return Status::InvalidArgument("cannot reserve " + std::to_string(slots * slot_bytes) +
                                     " bytes of address space for the pool: " + std::strerror(errno));
    }
    base = static_cast<std::byte*>(memory);
  }
  return std::unique_ptr<SlabPool>(new SlabPool(base, static_cast<uint32_t>(slots), slot_bytes, Backing::kReserved));
}

Result<std::unique_ptr<SlabPool>> SlabPool::Wrap(std::byte* base, uint64_t budget_bytes, uint64_t slot_bytes,
                                                 uint64_t alignment_bytes, std::function<void(std::byte*)> release) {
  COLIBRI_ASSIGN_OR_RETURN(const uint64_t slots, SlotsFor(budget_bytes, slot_bytes, alignment_bytes));
  if (slots > 0 && base == nullptr) return Status::InvalidArgument("no memory to carve into slots");
  if (reinterpret_cast<uintptr_t>(base) % alignment_bytes != 0) {
    return Status::InvalidArgument("pool memory is not aligned to " + std::to_string(alignment_bytes) + " bytes");
  }
  std::unique_ptr<SlabPool> pool(new SlabPool(base, static_cast<uint32_t>(slots), slot_bytes, Backing::kWrapped));
  pool->release_ = std::move(release);
  return pool;
}

Result<std::unique_ptr<SlabPool>> SlabPool::AllocateAligned(uint64_t budget_bytes, uint64_t slot_bytes,
                                                            uint64_t alignment_bytes, const RawAllocator& allocate,
                                                            std::function<void(std::byte*)> release) {
  COLIBRI_ASSIGN_OR_RETURN(const uint64_t slots, SlotsFor(budget_bytes, slot_bytes, alignment_bytes));
  if (slots == 0) return Wrap(nullptr, 0, slot_bytes, alignment_bytes, {});
  const uint64_t bytes = slots * slot_bytes;  // <= budget_bytes: no overflow
  if (bytes > UINT64_MAX - (alignment_bytes - 1)) {
    return Status::InvalidArgument("pool of " + std::to_string(bytes) + " bytes plus its alignment overflows");
  }
  if (!allocate) return Status::InvalidArgument("no allocator for the pool");
  COLIBRI_ASSIGN_OR_RETURN(std::byte* const allocation, allocate(bytes + alignment_bytes - 1));
  if (allocation == nullptr) return Status::InvalidArgument("the pool's allocator returned no memory");
  const auto address = reinterpret_cast<uintptr_t>(allocation);
  std::byte* const base = allocation + (alignment_bytes - address % alignment_bytes) % alignment_bytes;
  auto free_allocation = [allocation, release = std::move(release)](std::byte*) {
    if (release) release(allocation);
  };
  Result<std::unique_ptr<SlabPool>> pool = Wrap(base, bytes, slot_bytes, alignment_bytes, free_allocation);
  if (!pool.ok()) free_allocation(base);
  return pool;
}

SlabPool::SlabPool(std::byte* base, uint32_t slot_count, uint64_t slot_bytes, Backing backing)
    : base_(base), slot_count_(slot_count), slot_bytes_(slot_bytes), backing_(backing) {
  free_.resize(slot_count);
  for (uint32_t i = 0; i < slot_count; ++i) free_[i] = i;  // ascending: already a min-heap
}

SlabPool::~SlabPool() {
  if (base_ == nullptr) return;
  switch (backing_) {
    case Backing::kWrapped:
      if (release_) release_(base_);
      return;
    case Backing::kReserved:
      ::munmap(base_, total_bytes());
      return;
    case Backing::kLockedHeap:
      ::munlock(base_, total_bytes());
      [[fallthrough]];
    case Backing::kHeap:
      std::free(base_);
  }
}

std::optional<uint32_t> SlabPool::Acquire() {
  if (free_.empty()) return std::nullopt;
  std::pop_heap(free_.begin(), free_.end(), std::greater<>());
  const uint32_t slot = free_.back();
  free_.pop_back();
  return slot;
}

void SlabPool::Release(uint32_t slot) {
  free_.push_back(slot);
  std::push_heap(free_.begin(), free_.end(), std::greater<>());
}

std::vector<MemoryRegion> RegistrableRegions(const SlabPool& pool, uint64_t max_region_bytes) {
  std::vector<MemoryRegion> regions;
  if (pool.slot_count() == 0) return regions;
  const uint64_t slots_per_region = std::max<uint64_t>(1, max_region_bytes / pool.slot_bytes());
  for (uint64_t first = 0; first < pool.slot_count(); first += slots_per_region) {
    const uint64_t slots = std::min<uint64_t>(slots_per_region, pool.slot_count() - first);
    regions.push_back(MemoryRegion{pool.SlotData(static_cast<uint32_t>(first)), slots * pool.slot_bytes()});
  }
  return regions;
}

}  // namespace colibri::engine
