#include "colibri/engine/expert_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace colibri::engine {
namespace {

ExpertCache MakeCache(const std::string& policy, uint64_t budget, CacheMode mode, uint32_t layers = 1) {
  auto p = MakeCachePolicy(policy, PolicyOptions(budget, layers));
  EXPECT_TRUE(p.ok()) << p.status().message();
  return ExpertCache(std::move(p).value(), mode);
}

// Runs one batch (a union of distinct keys): every lookup first, then the
// misses are inserted, as the engine's scheduling step does. Returns the hits.
std::vector<bool> RunBatch(ExpertCache& cache, const std::vector<ExpertKey>& keys, uint64_t bytes,
                           bool* refused = nullptr) {
  std::vector<bool> hits;
  std::vector<ExpertKey> evicted;
  cache.BeginBatch();
  for (ExpertKey key : keys) hits.push_back(cache.Lookup(key));
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!hits[i] && !cache.Insert(keys[i], bytes, &evicted) && refused != nullptr) *refused = true;
  }
  cache.EndBatch(&evicted);
  return hits;
}

TEST(ExpertCacheTest, LruByHand) {
  ExpertCache cache = MakeCache("lru", 300, CacheMode::kHardBudget);  // three 100-byte experts
  EXPECT_EQ(RunBatch(cache, {1, 2, 3}, 100), (std::vector<bool>{false, false, false}));
  EXPECT_EQ(RunBatch(cache, {1}, 100), std::vector<bool>{true});    // recency: 2 3 1
  EXPECT_EQ(RunBatch(cache, {4}, 100), std::vector<bool>{false});   // evicts 2
  EXPECT_EQ(RunBatch(cache, {2, 3}, 100), (std::vector<bool>{false, true}));  // 2 evicts 1 (3 is touched, though older)
  EXPECT_FALSE(cache.Contains(1));
  EXPECT_TRUE(cache.Contains(4));
  EXPECT_EQ(cache.resident_bytes(), 300u);
  EXPECT_EQ(cache.counters().lookups, 7u);
  EXPECT_EQ(cache.counters().hits, 2u);
  EXPECT_EQ(cache.counters().evictions, 2u);
}

TEST(ExpertCacheTest, HardBudgetRefusesWhenBatchDoesNotFit) {
  ExpertCache cache = MakeCache("lru", 200, CacheMode::kHardBudget);
  bool refused = false;
  RunBatch(cache, {1, 2, 3}, 100, &refused);
  EXPECT_TRUE(refused);
  EXPECT_LE(cache.resident_bytes(), 200u);
  EXPECT_TRUE(cache.Contains(1) && cache.Contains(2));  // touched entries were not evicted for 3
}

TEST(ExpertCacheTest, EvictAfterBatchOverflowsThenShrinksUntouchedFirst) {
  ExpertCache cache = MakeCache("lru", 200, CacheMode::kEvictAfterBatch);
  RunBatch(cache, {1, 2}, 100);
  RunBatch(cache, {3, 4, 5}, 100);  // the whole batch is touched: stays over budget
  EXPECT_EQ(cache.resident_bytes(), 300u);
  EXPECT_FALSE(cache.Contains(1));
  EXPECT_FALSE(cache.Contains(2));
  RunBatch(cache, {5}, 100);  // now 3 and 4 are untouched: the least recent goes first
  EXPECT_EQ(cache.resident_bytes(), 200u);
  EXPECT_FALSE(cache.Contains(3));
  EXPECT_TRUE(cache.Contains(4));
}

TEST(ExpertCacheTest, LayerPolicyPartitionsTheBudget) {
  ExpertCache cache = MakeCache("layer", 400, CacheMode::kHardBudget, 2);  // 200 bytes per layer
  const ExpertKey a0 = MakeExpertKey(0, 1), b0 = MakeExpertKey(0, 2), c0 = MakeExpertKey(0, 3);
  const ExpertKey a1 = MakeExpertKey(1, 1);
  RunBatch(cache, {a1}, 100);
  RunBatch(cache, {a0, b0}, 100);
  RunBatch(cache, {c0}, 100);  // layer 0 is full: evicts a0 although layer 1 has room
  EXPECT_FALSE(cache.Contains(a0));
  EXPECT_TRUE(cache.Contains(a1));
  EXPECT_EQ(LayerIndexOf(c0), 0u);
  EXPECT_EQ(ExpertOf(c0), 3u);
}

TEST(ExpertCacheTest, UnknownPolicyIsAClearError) {
  auto p = MakeCachePolicy("mru", PolicyOptions(100, 1));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("known: lru, lfu, layer"), std::string::npos);
}

// The two modes give the same hits whenever every batch's union fits the budget.
TEST(ExpertCacheTest, HardBudgetAndEvictAfterBatchAgreeWhenBatchesFit) {
  for (const char* policy : {"lru", "layer"}) {
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      std::mt19937_64 rng(seed);
      const uint32_t layers = 3, experts = 12, batch_size = 3;
      std::vector<uint64_t> layer_bytes = {100, 150, 120};
      const uint64_t budget = 3 * 6 * 150;  // each layer partition holds its biggest batch
      ExpertCache hard = MakeCache(policy, budget, CacheMode::kHardBudget, layers);
      ExpertCache offline = MakeCache(policy, budget, CacheMode::kEvictAfterBatch, layers);
      for (int step = 0; step < 300; ++step) {
        const uint32_t layer = step % layers;
        std::vector<ExpertKey> keys;
        while (keys.size() < batch_size) {
          const ExpertKey key = MakeExpertKey(layer, static_cast<uint32_t>(rng() % experts));
          if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
        }
        bool refused = false;
        const auto h = RunBatch(hard, keys, layer_bytes[layer], &refused);
        ASSERT_FALSE(refused);
        ASSERT_EQ(h, RunBatch(offline, keys, layer_bytes[layer])) << policy << " seed " << seed << " step " << step;
        ASSERT_LE(hard.resident_bytes(), budget);
      }
      EXPECT_EQ(hard.counters().hits, offline.counters().hits);
      EXPECT_GT(hard.counters().hits, 0u);
    }
  }
}

}  // namespace
}  // namespace colibri::engine
