// KeyMap against std::unordered_map: seeded random inserts, erases and
// lookups over a small key range (long probe runs, wrap-around, backward-shift
// erase), and the key UINT64_MAX that the table reserves for empty slots.
#include "colibri/engine/key_map.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <unordered_map>

namespace colibri::engine {
namespace {

TEST(KeyMapTest, AgreesWithUnorderedMapUnderRandomOperations) {
  for (const uint64_t range : {40u, 200u, 5000u}) {
    std::mt19937_64 rng(range);
    KeyMap<uint64_t> map;
    std::unordered_map<uint64_t, uint64_t> reference;
    for (int op = 0; op < 200000; ++op) {
      uint64_t key = rng() % range;
      if (key == 7) key = UINT64_MAX;
      if (key == 8) key = (uint64_t{3} << 32) | 5;  // an ExpertKey-like value
      switch (rng() % 3) {
        case 0: {
          const uint64_t value = rng();
          map[key] = value;
          reference[key] = value;
          break;
        }
        case 1:
          ASSERT_EQ(map.Erase(key), reference.erase(key) == 1) << "key " << key;
          break;
        default: {
          const uint64_t* found = map.Find(key);
          const auto it = reference.find(key);
          ASSERT_EQ(found != nullptr, it != reference.end()) << "key " << key;
          if (found != nullptr) {
            ASSERT_EQ(*found, it->second);
          }
        }
      }
      ASSERT_EQ(map.size(), reference.size());
    }
    for (const auto& [key, value] : reference) {
      ASSERT_TRUE(map.Contains(key));
      EXPECT_EQ(*map.Find(key), value);
    }
  }
}

TEST(KeyMapTest, OperatorBracketInsertsAValueInitialisedEntry) {
  KeyMap<uint32_t> map;
  EXPECT_EQ(map.Find(42), nullptr);
  EXPECT_EQ(map[42], 0u);
  map[42] = 7;
  EXPECT_EQ(map[42], 7u);
  EXPECT_EQ(map.size(), 1u);
  EXPECT_TRUE(map.Erase(42));
  EXPECT_FALSE(map.Erase(42));
  EXPECT_EQ(map.Find(42), nullptr);
  EXPECT_EQ(map.size(), 0u);
}

}  // namespace
}  // namespace colibri::engine
