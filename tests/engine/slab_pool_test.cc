#include "colibri/engine/slab_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

namespace colibri::engine {
namespace {

TEST(SlabPoolTest, CarvesBudgetIntoAlignedSlots) {
  auto pool = SlabPool::Create(10 * 8192 + 100, 8192);
  ASSERT_TRUE(pool.ok()) << pool.status().message();
  EXPECT_EQ((*pool)->slot_count(), 10u);
  EXPECT_EQ((*pool)->total_bytes(), 10u * 8192);
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*pool)->base()) % 4096, 0u);
  EXPECT_EQ((*pool)->SlotData(3) - (*pool)->SlotData(0), 3 * 8192);
}

TEST(SlabPoolTest, AcquiresLowestFreeSlotAndNeverMoreThanBudget) {
  auto pool = SlabPool::Create(3 * 4096, 4096);
  ASSERT_TRUE(pool.ok());
  SlabPool& p = **pool;
  EXPECT_EQ(p.Acquire(), 0u);
  EXPECT_EQ(p.Acquire(), 1u);
  EXPECT_EQ(p.Acquire(), 2u);
  EXPECT_FALSE(p.Acquire().has_value());
  p.Release(1);
  p.Release(0);
  EXPECT_EQ(p.Acquire(), 0u);
  EXPECT_EQ(p.used_bytes(), 2u * 4096);
}

// Registrable regions: runs of whole slots within the region limit, covering
// the pool in order; a slot above the limit stands alone; none for no slots.
TEST(SlabPoolTest, RegistrableRegionsAreRunsOfWholeSlots) {
  auto pool = SlabPool::Create(10 * 8192, 8192);
  ASSERT_TRUE(pool.ok());
  const std::vector<MemoryRegion> regions = RegistrableRegions(**pool, 3 * 8192 + 100);
  ASSERT_EQ(regions.size(), 4u);  // 3 + 3 + 3 + 1 slots
  EXPECT_EQ(regions[0].data, (*pool)->SlotData(0));
  EXPECT_EQ(regions[1].data, (*pool)->SlotData(3));
  EXPECT_EQ(regions[2].bytes, 3u * 8192);
  EXPECT_EQ(regions[3].data, (*pool)->SlotData(9));
  EXPECT_EQ(regions[3].bytes, 8192u);
  const std::vector<MemoryRegion> whole = RegistrableRegions(**pool);
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].bytes, (*pool)->total_bytes());
  EXPECT_EQ(RegistrableRegions(**pool, 4096).size(), 10u) << "a slot larger than the limit is its own region";
  auto empty = SlabPool::Create(0, 8192);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(RegistrableRegions(**empty).empty());
}

TEST(SlabPoolTest, ZeroBudgetDisablesBelowOneSlotIsAnError) {
  auto empty = SlabPool::Create(0, 4096);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->slot_count(), 0u);
  EXPECT_FALSE((*empty)->Acquire().has_value());
  auto small = SlabPool::Create(4000, 4096);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("below one expert"), std::string::npos);
  EXPECT_FALSE(SlabPool::Create(8192, 5000).ok());  // not a multiple of the alignment
}

TEST(SlabPoolTest, WrapCarvesForeignMemoryAndReleasesItOnce) {
  alignas(4096) static std::byte memory[5 * 4096];
  int released = 0;
  std::byte* released_base = nullptr;
  {
    auto pool = SlabPool::Wrap(memory, 4 * 4096 + 100, 4096, 4096, [&](std::byte* base) {
      ++released;
      released_base = base;
    });
    ASSERT_TRUE(pool.ok()) << pool.status().message();
    EXPECT_EQ((*pool)->slot_count(), 4u);
    EXPECT_EQ((*pool)->SlotData(0), memory);
    EXPECT_EQ((*pool)->SlotData(3), memory + 3 * 4096);
    EXPECT_EQ((*pool)->Acquire(), 0u);
    EXPECT_EQ(released, 0);
  }
  EXPECT_EQ(released, 1);
  EXPECT_EQ(released_base, memory);
}

TEST(SlabPoolTest, WrapErrorsLeaveTheMemoryToTheCaller) {
  alignas(4096) static std::byte memory[2 * 4096];
  int released = 0;
  auto count = [&](std::byte*) { ++released; };
  EXPECT_EQ(SlabPool::Wrap(memory + 8, 4096, 4096, 4096, count).status().code(), StatusCode::kInvalidArgument)
      << "misaligned base";
  EXPECT_EQ(SlabPool::Wrap(memory, 100, 4096, 4096, count).status().code(), StatusCode::kInvalidArgument)
      << "budget below one slot";
  EXPECT_EQ(SlabPool::Wrap(nullptr, 4096, 4096, 4096, count).status().code(), StatusCode::kInvalidArgument)
      << "no memory";
  EXPECT_EQ(released, 0);
  auto empty = SlabPool::Wrap(nullptr, 0, 4096, 4096, count);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->slot_count(), 0u);
  empty.value().reset();
  EXPECT_EQ(released, 0) << "no memory, nothing to release";
  EXPECT_EQ(SlabPool::SlotsFor(3 * 4096 + 1, 4096, 4096).value(), 3u);
}

// An allocator that, as cudaMalloc may for small sizes, promises only 256
// bytes: it hands out memory 256 bytes past a page boundary.
class Only256Aligned {
 public:
  Result<std::byte*> Allocate(uint64_t bytes) {
    requested.push_back(bytes);
    auto* page = static_cast<std::byte*>(std::aligned_alloc(4096, (bytes + 256 + 4095) / 4096 * 4096));
    if (page == nullptr) return Status::Internal("out of memory");
    pages_.push_back(page);
    return page + 256;
  }
  void Release(std::byte* allocation) {
    released.push_back(allocation);
    for (std::byte*& page : pages_) {
      if (page + 256 == allocation) {
        std::free(page);
        page = nullptr;
      }
    }
  }
  ~Only256Aligned() {
    for (std::byte* page : pages_) std::free(page);
  }
  std::vector<uint64_t> requested;
  std::vector<std::byte*> released;

 private:
  std::vector<std::byte*> pages_;
};

TEST(SlabPoolTest, AllocateAlignedAlignsUpMemoryOfAnyAlignment) {
  // The one-slot staging pool, a 4 KiB pool (bench pcie's), a 64 KiB pool (the tests').
  for (const uint64_t budget : {uint64_t{3 * 4096}, uint64_t{4096}, uint64_t{64 * 1024}}) {
    const uint64_t slot_bytes = budget == 3 * 4096 ? 3 * 4096 : 4096;
    Only256Aligned allocator;
    std::byte* allocation = nullptr;
    {
      auto pool = SlabPool::AllocateAligned(
          budget, slot_bytes, kPoolAlignmentBytes,
          [&](uint64_t bytes) {
            Result<std::byte*> memory = allocator.Allocate(bytes);
            if (memory.ok()) allocation = memory.value();
            return memory;
          },
          [&](std::byte* p) { allocator.Release(p); });
      ASSERT_TRUE(pool.ok()) << pool.status().message();
      ASSERT_EQ(allocator.requested.size(), 1u);
      EXPECT_EQ(allocator.requested[0], budget + kPoolAlignmentBytes - 1);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(allocation) % 4096, 256u) << "the fake allocator's promise";
      SlabPool& p = **pool;
      EXPECT_EQ(p.slot_count(), budget / slot_bytes);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p.base()) % 4096, 0u);
      EXPECT_GE(p.base(), allocation);
      EXPECT_LE(p.base() + p.total_bytes(), allocation + allocator.requested[0]) << "slots inside the allocation";
      for (uint32_t i = 0; i < p.slot_count(); ++i) {
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p.SlotData(i)) % 4096, 0u);
      }
      EXPECT_TRUE(allocator.released.empty());
    }
    ASSERT_EQ(allocator.released.size(), 1u) << "released once, on destruction";
    EXPECT_EQ(allocator.released[0], allocation) << "with the allocator's own pointer, not the aligned base";
  }
}

TEST(SlabPoolTest, AllocateAlignedErrors) {
  int allocations = 0;
  int releases = 0;
  auto count_release = [&](std::byte*) { ++releases; };
  auto failing = [&](uint64_t) -> Result<std::byte*> {
    ++allocations;
    return Status::InvalidArgument("device full");
  };
  Result<std::unique_ptr<SlabPool>> failed = SlabPool::AllocateAligned(8192, 4096, 4096, failing, count_release);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(), "device full") << "the allocator's error as it is";
  EXPECT_EQ(releases, 0);
  // Bad slot sizes and budgets are refused before anything is allocated.
  EXPECT_FALSE(SlabPool::AllocateAligned(8192, 5000, 4096, failing, count_release).ok());
  EXPECT_FALSE(SlabPool::AllocateAligned(100, 4096, 4096, failing, count_release).ok());
  EXPECT_EQ(allocations, 1);
  auto null_memory = [](uint64_t) -> Result<std::byte*> { return static_cast<std::byte*>(nullptr); };
  EXPECT_EQ(SlabPool::AllocateAligned(4096, 4096, 4096, null_memory, count_release).status().code(),
            StatusCode::kInvalidArgument);
  auto empty = SlabPool::AllocateAligned(0, 4096, 4096, failing, count_release);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->slot_count(), 0u);
  empty.value().reset();
  EXPECT_EQ(allocations, 1) << "a budget of 0 allocates nothing";
  EXPECT_EQ(releases, 0);
}

}  // namespace
}  // namespace colibri::engine
