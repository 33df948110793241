#include "colibri/engine/slab_pool.h"

#include <gtest/gtest.h>

#include <cstdint>

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

}  // namespace
}  // namespace colibri::engine
