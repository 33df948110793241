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

}  // namespace
}  // namespace colibri::engine
