// The built-in cache policies (cache_policy.h) by hand-worked sequences, their
// shared contract over a seeded random workload, NextUseIndex, and
// ExpertCache's prefetch accounting.
#include "colibri/engine/cache_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <random>
#include <set>

#include "colibri/engine/expert_cache.h"

namespace colibri::engine {
namespace {

CachePolicyOptions Options(uint64_t budget_bytes, uint32_t moe_layers = 1) {
  CachePolicyOptions options;
  options.budget_bytes = budget_bytes;
  options.moe_layers = moe_layers;
  return options;
}

std::unique_ptr<CachePolicy> MakePolicy(const std::string& name, const CachePolicyOptions& options) {
  auto policy = MakeCachePolicy(name, options);
  EXPECT_TRUE(policy.ok()) << name << ": " << policy.status().message();
  return policy.ok() ? std::move(policy).value() : nullptr;
}

bool NoneTouched(ExpertKey) { return false; }

// The victims `policy` picks to make room for `bytes` more (the key matters to "arc" only).
std::vector<ExpertKey> RoomFor(CachePolicy& policy, uint64_t bytes, const TouchedFn& touched = NoneTouched) {
  std::vector<ExpertKey> victims;
  EXPECT_TRUE(policy.MakeRoom(/*key=*/999, bytes, touched, &victims));
  return victims;
}

void InsertAll(CachePolicy& policy, const std::vector<ExpertKey>& keys, uint64_t bytes) {
  for (ExpertKey key : keys) policy.OnInsert(key, bytes);
}

struct BatchOutcome {
  std::vector<bool> hits;
  std::vector<ExpertKey> evicted;
  bool refused = false;
};

// One batch as the engine runs it: every lookup, then the misses' inserts, then EndBatch.
BatchOutcome RunBatch(ExpertCache& cache, const std::vector<ExpertKey>& keys, uint64_t bytes) {
  BatchOutcome out;
  cache.BeginBatch();
  for (ExpertKey key : keys) out.hits.push_back(cache.Lookup(key));
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!out.hits[i] && !cache.Insert(keys[i], bytes, &out.evicted)) out.refused = true;
  }
  cache.EndBatch(&out.evicted);
  return out;
}

std::vector<ExpertKey> Evicted(ExpertCache& cache, const std::vector<ExpertKey>& keys, uint64_t bytes = 100) {
  const BatchOutcome out = RunBatch(cache, keys, bytes);
  EXPECT_FALSE(out.refused);
  return out.evicted;
}

using Keys = std::vector<ExpertKey>;

TEST(CachePolicyTest, NamesAndErrors) {
  EXPECT_EQ(CachePolicyNames(),
            (std::vector<std::string>{"lru", "lfu", "layer", "layerlfu", "lfru", "arc", "random", "pinned", "belady"}));
  auto unknown = MakeCachePolicy("mru", Options(100));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  const std::string known = "'mru' (known: lru, lfu, layer, layerlfu, lfru, arc, random, pinned, belady)";
  EXPECT_NE(unknown.status().message().find(known), std::string::npos);
  auto belady = MakeCachePolicy("belady", Options(100));
  ASSERT_FALSE(belady.ok());
  EXPECT_NE(belady.status().message().find("cache sweep"), std::string::npos);
  auto pinned = MakeCachePolicy("pinned", Options(100));
  ASSERT_FALSE(pinned.ok());
  EXPECT_NE(pinned.status().message().find("hot set"), std::string::npos);
  EXPECT_FALSE(MakeCachePolicy("layerlfu", Options(100, 0)).ok());

  CachePolicyOptions full = Options(100, 2);
  full.pinned = {1};
  full.next_use = std::make_shared<NextUseIndex>();
  for (const std::string& name : CachePolicyNames()) {
    std::unique_ptr<CachePolicy> policy = MakePolicy(name, full);
    ASSERT_NE(policy, nullptr);
    EXPECT_EQ(policy->name(), name);
    EXPECT_EQ(policy->budget_bytes(), 100u);
  }
}

TEST(CachePolicyTest, LfuKeepsTheFrequentEntryAndBreaksTiesByRecency) {
  std::unique_ptr<CachePolicy> lfu = MakePolicy("lfu", Options(300));
  InsertAll(*lfu, {1, 2, 3}, 100);  // frequency 1 each
  lfu->OnAccess(1);
  lfu->OnAccess(1);  // 1: frequency 3
  lfu->OnAccess(2);  // 2: frequency 2
  EXPECT_EQ(RoomFor(*lfu, 100), Keys{3});  // the least frequent
  EXPECT_EQ(RoomFor(*lfu, 200), (Keys{3, 2}));
  lfu->OnErase(3);
  lfu->OnInsert(4, 100);
  lfu->OnAccess(4);                        // 4: frequency 2, used after 2
  EXPECT_EQ(RoomFor(*lfu, 100), Keys{2});  // tie at frequency 2: the least recently used
  EXPECT_EQ(RoomFor(*lfu, 100, [](ExpertKey k) { return k == 2; }), Keys{4});  // 2 is touched
}

TEST(CachePolicyTest, LfuFrequencySurvivesEviction) {
  std::unique_ptr<CachePolicy> lfu = MakePolicy("lfu", Options(200));
  lfu->OnInsert(1, 100);
  lfu->OnAccess(1);
  lfu->OnAccess(1);  // 1: frequency 3
  lfu->OnInsert(2, 100);
  lfu->OnAccess(2);  // 2: frequency 2
  lfu->OnErase(1);   // evicted
  lfu->OnInsert(1, 100);                   // resumes at frequency 4
  EXPECT_EQ(RoomFor(*lfu, 100), Keys{2});  // a reset count (1) would make 1 the victim
}

TEST(CachePolicyTest, LayerLfuPartitionsTheBudget) {
  std::unique_ptr<CachePolicy> policy = MakePolicy("layerlfu", Options(400, 2));  // 200 bytes per layer
  const ExpertKey a0 = MakeExpertKey(0, 1), b0 = MakeExpertKey(0, 2), c0 = MakeExpertKey(0, 3);
  const ExpertKey a1 = MakeExpertKey(1, 1), b1 = MakeExpertKey(1, 2);
  policy->OnInsert(a1, 100);  // frequency 1, the least frequent overall
  policy->OnInsert(a0, 100);
  policy->OnAccess(a0);
  policy->OnAccess(a0);  // a0: 3
  policy->OnInsert(b0, 100);
  policy->OnAccess(b0);  // b0: 2
  std::vector<ExpertKey> victims;
  ASSERT_TRUE(policy->MakeRoom(c0, 100, NoneTouched, &victims));
  EXPECT_EQ(victims, Keys{b0});  // layer 0's least frequent; a1 is in the other part
  victims.clear();
  ASSERT_TRUE(policy->MakeRoom(b1, 100, NoneTouched, &victims));
  EXPECT_TRUE(victims.empty());  // layer 1 has room
  policy->OnInsert(c0, 100);     // layer 0 at 300 of 200
  policy->OnInsert(b1, 100);     // layer 1 at 200 of 200
  policy->Shrink([&](ExpertKey k) { return k == c0; }, &victims);
  EXPECT_EQ(victims, Keys{b0});  // c0 (frequency 1) is touched; layer 1 is within its share
}

TEST(CachePolicyTest, LfruPromotesOnHitAndDemotesTheLeastRecent) {
  std::unique_ptr<CachePolicy> lfru = MakePolicy("lfru", Options(400));  // privileged: 200 bytes
  InsertAll(*lfru, {1, 2, 3, 4}, 100);  // all unprivileged, frequency 1
  lfru->OnAccess(1);                    // promoted: privileged [1]
  lfru->OnAccess(2);                    // privileged [2, 1]
  lfru->OnAccess(3);                    // privileged [3, 2, 1] is over 200: 1 (frequency 2) is demoted
  // Unprivileged by frequency: 4 (1), 1 (2); then privileged from its least recent end: 2, 3.
  EXPECT_EQ(RoomFor(*lfru, 100), Keys{4});
  EXPECT_EQ(RoomFor(*lfru, 300), (Keys{4, 1, 2}));
  EXPECT_EQ(RoomFor(*lfru, 100, [](ExpertKey k) { return k == 4 || k == 1; }), Keys{2});
  lfru->OnAccess(1);  // promoted again (frequency 3): privileged [1, 3, 2] demotes 2 (frequency 2)
  EXPECT_EQ(RoomFor(*lfru, 200), (Keys{4, 2}));
  EXPECT_EQ(RoomFor(*lfru, 400), (Keys{4, 2, 3, 1}));
}

// Keys of 100 bytes in a 400-byte ARC, one per batch unless listed.
TEST(CachePolicyTest, ArcResistsAScanAndAdaptsItsTarget) {
  ExpertCache cache(MakePolicy("arc", Options(400)), CacheMode::kHardBudget);
  EXPECT_EQ(Evicted(cache, {1, 2}), Keys{});  // T1 [2, 1]
  EXPECT_EQ(Evicted(cache, {1}), Keys{});     // hits move to T2
  EXPECT_EQ(Evicted(cache, {2}), Keys{});     // T2 [2, 1]; p = 0
  // A scan: with T1 over p = 0 every victim is T1's least recent, so the
  // frequent 1 and 2 stay (LRU would have evicted them at 12 and 13).
  EXPECT_EQ(Evicted(cache, {10}), Keys{});
  EXPECT_EQ(Evicted(cache, {11}), Keys{});
  EXPECT_EQ(Evicted(cache, {12}), Keys{10});
  EXPECT_EQ(Evicted(cache, {13}), Keys{11});
  EXPECT_EQ(Evicted(cache, {14}), Keys{12});  // B1 trimmed to T1 + B1 <= 400: B1 [12, 11]
  EXPECT_EQ(Evicted(cache, {15}), Keys{13});  // T1 [15, 14], B1 [13, 12]
  EXPECT_TRUE(cache.Contains(1) && cache.Contains(2));
  // 12 is a B1 ghost: p grows by max(100, 100 x bytes(B2) 0 / bytes(B1)) = 100 before REPLACE;
  // T1 (200) > p: its least recent (14) goes; 12 enters T2 [12, 2, 1].
  EXPECT_EQ(Evicted(cache, {12}), Keys{14});
  EXPECT_EQ(Evicted(cache, {20}), Keys{1});  // T1 [15] = p: now T2's least recent goes
  // 1 is a B2 ghost: p falls by max(100, 100 x bytes(B1) 200 / bytes(B2) 100) = 200, to 0; T1 [20, 15] > 0.
  EXPECT_EQ(Evicted(cache, {1}), Keys{15});
  EXPECT_EQ(Evicted(cache, {21}), Keys{20});  // T1 [20] > p = 0 (at p = 100 the victim would be T2's 2)
  EXPECT_TRUE(cache.Contains(1) && cache.Contains(2) && cache.Contains(12) && cache.Contains(21));
}

std::vector<ExpertKey> RandomVictims(uint64_t seed) {
  CachePolicyOptions options = Options(300);
  options.seed = seed;
  ExpertCache cache(MakePolicy("random", options), CacheMode::kHardBudget);
  std::mt19937_64 workload(7);
  std::vector<ExpertKey> victims;
  for (int batch = 0; batch < 200; ++batch) {
    const std::vector<ExpertKey> evicted = Evicted(cache, {workload() % 10});
    victims.insert(victims.end(), evicted.begin(), evicted.end());
  }
  return victims;
}

TEST(CachePolicyTest, RandomIsDeterministicPerSeedAndUniform) {
  EXPECT_EQ(RandomVictims(1), RandomVictims(1));
  EXPECT_NE(RandomVictims(1), RandomVictims(2));
  EXPECT_GT(RandomVictims(1).size(), 50u);
  // Three untouched entries, one victim: each about a third of the time over 3000 seeds.
  std::map<ExpertKey, int> chosen;
  for (uint64_t seed = 1; seed <= 3000; ++seed) {
    CachePolicyOptions options = Options(300);
    options.seed = seed;
    std::unique_ptr<CachePolicy> policy = MakePolicy("random", options);
    InsertAll(*policy, {1, 2, 3}, 100);
    const std::vector<ExpertKey> victims = RoomFor(*policy, 100);
    ASSERT_EQ(victims.size(), 1u);
    ++chosen[victims[0]];
  }
  ASSERT_EQ(chosen.size(), 3u);
  for (const auto& [key, count] : chosen) EXPECT_TRUE(count > 900 && count < 1100) << key << ": " << count;
  // Only untouched entries are drawn; MakeRoom refuses when they cannot free enough.
  std::unique_ptr<CachePolicy> policy = MakePolicy("random", Options(300));
  InsertAll(*policy, {1, 2, 3}, 100);
  EXPECT_EQ(RoomFor(*policy, 100, [](ExpertKey k) { return k != 2; }), Keys{2});
  std::vector<ExpertKey> victims;
  EXPECT_FALSE(policy->MakeRoom(4, 200, [](ExpertKey k) { return k != 2; }, &victims));
  EXPECT_TRUE(victims.empty());
}

TEST(CachePolicyTest, PinnedKeysNeverLeave) {
  CachePolicyOptions options = Options(300);
  options.pinned = {1, 2};
  ExpertCache cache(MakePolicy("pinned", options), CacheMode::kHardBudget);
  EXPECT_EQ(Evicted(cache, {1, 2}), Keys{});
  EXPECT_EQ(Evicted(cache, {3}), Keys{});
  EXPECT_EQ(Evicted(cache, {1}), Keys{});   // 1 is the least recent lookup, but pinned
  EXPECT_EQ(Evicted(cache, {4}), Keys{3});  // the only unpinned entry
  EXPECT_EQ(Evicted(cache, {5}), Keys{4});
  EXPECT_TRUE(RunBatch(cache, {5, 6}, 100).refused);  // 5 is touched, 1 and 2 pinned: 6 cannot fit
  EXPECT_TRUE(cache.Contains(1) && cache.Contains(2) && cache.Contains(5));
  EXPECT_EQ(cache.resident_bytes(), 300u);
}

TEST(CachePolicyTest, PinnedSetOverTheBudgetIsRefused) {
  CachePolicyOptions options = Options(200);
  options.pinned = {1, 2, 3};  // 300 bytes of pins in 200: the caller's error, caught at the third insert
  ExpertCache cache(MakePolicy("pinned", options), CacheMode::kHardBudget);
  EXPECT_FALSE(RunBatch(cache, {1}, 100).refused);
  EXPECT_FALSE(RunBatch(cache, {2}, 100).refused);
  EXPECT_TRUE(RunBatch(cache, {3}, 100).refused);
  EXPECT_TRUE(cache.Contains(1) && cache.Contains(2) && !cache.Contains(3));
}

TEST(CachePolicyTest, NextUseIndex) {
  NextUseIndex index;
  index.Add(7, 1);
  index.Add(7, 1);  // a repeat in the same batch
  index.Add(7, 4);
  index.Add(UINT64_MAX, 2);
  EXPECT_EQ(index.NextUseAfter(7, 0), 1u);
  EXPECT_EQ(index.NextUseAfter(7, 1), 4u);
  EXPECT_EQ(index.NextUseAfter(7, 3), 4u);
  EXPECT_EQ(index.NextUseAfter(7, 4), UINT64_MAX);
  EXPECT_EQ(index.NextUseAfter(8, 0), UINT64_MAX);  // never looked up
  EXPECT_EQ(index.NextUseAfter(UINT64_MAX, 0), 2u);
}

std::shared_ptr<const NextUseIndex> BuildNextUse(const std::vector<std::vector<ExpertKey>>& batches) {
  auto index = std::make_shared<NextUseIndex>();
  for (uint64_t b = 0; b < batches.size(); ++b) {
    for (ExpertKey key : batches[b]) index->Add(key, b);
  }
  return index;
}

TEST(CachePolicyTest, BeladyEvictsTheFurthestNextUse) {
  const std::vector<std::vector<ExpertKey>> batches = {{1, 2, 3}, {4}, {3}, {1}, {6}, {2, 4}};
  const std::vector<Keys> expected = {
      {},   // fits
      {2},  // next uses: 1 at 3, 2 at 5, 3 at 2: the furthest
      {},   // hit
      {},   // hit
      {1},  // 1 and 3 are never used again (4 is, at 5): ties to the lower key
      {3},  // 4 is touched; 3 and 6 never used again: the lower key
  };
  CachePolicyOptions options = Options(300);
  options.next_use = BuildNextUse(batches);
  for (CacheMode mode : {CacheMode::kHardBudget, CacheMode::kEvictAfterBatch}) {
    ExpertCache cache(MakePolicy("belady", options), mode);
    for (size_t b = 0; b < batches.size(); ++b) EXPECT_EQ(Evicted(cache, batches[b]), expected[b]) << "batch " << b;
    EXPECT_EQ(cache.counters().hits, 3u);
  }
}

TEST(ExpertCachePrefetchTest, HitOnAPrefetchedEntryCountsOnce) {
  ExpertCache cache(MakePolicy("lru", Options(300)), CacheMode::kHardBudget);
  std::vector<ExpertKey> evicted;
  ASSERT_TRUE(cache.Prefetch(1, 100, &evicted));
  EXPECT_EQ(cache.counters().prefetches, 1u);
  EXPECT_EQ(cache.counters().prefetched_bytes, 100u);
  EXPECT_EQ(cache.counters().lookups, 0u);  // a prefetch is not a lookup
  EXPECT_EQ(cache.counters().inserted_bytes, 0u);
  EXPECT_FALSE(cache.Prefetch(1, 100, &evicted));  // resident: nothing changes
  EXPECT_EQ(cache.counters().prefetches, 1u);
  EXPECT_EQ(cache.counters().prefetched_bytes, 100u);
  EXPECT_EQ(RunBatch(cache, {1}, 100).hits, std::vector<bool>{true});
  EXPECT_EQ(RunBatch(cache, {1}, 100).hits, std::vector<bool>{true});
  EXPECT_EQ(cache.counters().hits, 2u);
  EXPECT_EQ(cache.counters().prefetch_hits, 1u);  // only the first lookup
  EXPECT_EQ(cache.counters().prefetch_wasted_bytes, 0u);
  EXPECT_TRUE(evicted.empty());
}

TEST(ExpertCachePrefetchTest, AnUnusedPrefetchEvictedIsWasted) {
  ExpertCache cache(MakePolicy("lru", Options(200)), CacheMode::kHardBudget);
  std::vector<ExpertKey> evicted;
  ASSERT_TRUE(cache.Prefetch(1, 100, &evicted));
  EXPECT_EQ(Evicted(cache, {2}), Keys{});
  EXPECT_EQ(Evicted(cache, {3}), Keys{1});  // the least recent, never looked up
  EXPECT_EQ(cache.counters().prefetch_wasted_bytes, 100u);
  EXPECT_EQ(cache.counters().prefetch_hits, 0u);
  ASSERT_TRUE(cache.Prefetch(4, 50, &evicted));  // evicts 2 (3 is touched until the next batch)
  cache.Erase(4);                                // released unused: wasted too
  EXPECT_EQ(cache.counters().prefetch_wasted_bytes, 150u);
}

TEST(ExpertCachePrefetchTest, HardBudgetRefusesWhatCannotFitAndPrefetchesStayUntouched) {
  ExpertCache cache(MakePolicy("lru", Options(200)), CacheMode::kHardBudget);
  std::vector<ExpertKey> evicted;
  cache.BeginBatch();
  EXPECT_FALSE(cache.Lookup(1));
  EXPECT_FALSE(cache.Lookup(2));
  ASSERT_TRUE(cache.Insert(1, 100, &evicted) && cache.Insert(2, 100, &evicted));
  EXPECT_FALSE(cache.Prefetch(3, 100, &evicted));  // 1 and 2 are touched
  EXPECT_FALSE(cache.Contains(3));
  EXPECT_EQ(cache.counters().prefetches, 0u);
  cache.EndBatch(&evicted);
  cache.BeginBatch();
  EXPECT_TRUE(cache.Lookup(1));
  ASSERT_TRUE(cache.Prefetch(3, 100, &evicted));  // evicts 2, untouched in this batch
  ASSERT_TRUE(cache.Prefetch(4, 100, &evicted));  // evicts 3: a prefetch does not touch
  cache.EndBatch(&evicted);
  EXPECT_EQ(evicted, (Keys{2, 3}));
  EXPECT_EQ(cache.counters().prefetch_wasted_bytes, 100u);
  EXPECT_EQ(cache.resident_bytes(), 200u);
}

TEST(ExpertCachePrefetchTest, EvictAfterBatchOverflowsThenEvictsTheUnusedPrefetch) {
  ExpertCache cache(MakePolicy("lru", Options(200)), CacheMode::kEvictAfterBatch);
  EXPECT_EQ(Evicted(cache, {1, 2}), Keys{});
  std::vector<ExpertKey> evicted;
  ASSERT_TRUE(cache.Prefetch(3, 100, &evicted));  // always fits until the batch ends
  EXPECT_EQ(cache.resident_bytes(), 300u);
  EXPECT_EQ(Evicted(cache, {1, 2}), Keys{3});
  EXPECT_EQ(cache.counters().prefetch_wasted_bytes, 100u);
}

// The contract every policy keeps, over a seeded workload of 3 MoE layers with
// different expert sizes, skewed expert choice, and prefetches between batches.
constexpr uint32_t kLayers = 3, kExperts = 12, kBatchKeys = 3;
constexpr std::array<uint64_t, kLayers> kLayerBytes = {100, 150, 120};

struct Workload {
  std::vector<std::vector<ExpertKey>> batches;     // layer = batch % kLayers
  std::vector<std::vector<ExpertKey>> prefetches;  // after batch b, for the next layer
};

Workload MakeWorkload(uint64_t seed, int batches) {
  std::mt19937_64 rng(seed);
  const auto pick = [&](uint32_t layer) {
    return MakeExpertKey(layer, static_cast<uint32_t>(std::min(rng() % kExperts, rng() % kExperts)));
  };
  Workload w;
  for (int b = 0; b < batches; ++b) {
    std::vector<ExpertKey> keys;
    while (keys.size() < kBatchKeys) {
      const ExpertKey key = pick(b % kLayers);
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    }
    w.batches.push_back(keys);
    w.prefetches.push_back({pick((b + 1) % kLayers), pick((b + 1) % kLayers)});
  }
  return w;
}

CachePolicyOptions WorkloadOptions(const Workload& w, uint64_t budget_bytes) {
  CachePolicyOptions options = Options(budget_bytes, kLayers);
  options.seed = 5;
  options.pinned = {MakeExpertKey(0, 0), MakeExpertKey(1, 0)};
  options.next_use = BuildNextUse(w.batches);
  return options;
}

class CachePolicyContractTest : public ::testing::TestWithParam<std::string> {};

// Checks `evicted` (the victims since the last check) against the model of
// resident keys: each was resident and is not protected; then forgets them.
void CheckVictims(const std::vector<ExpertKey>& evicted, const std::vector<ExpertKey>& protect,
                  std::set<ExpertKey>* resident) {
  for (ExpertKey key : evicted) {
    ASSERT_EQ(resident->erase(key), 1u) << "victim " << key << " was not resident";
    ASSERT_EQ(std::find(protect.begin(), protect.end(), key), protect.end()) << "touched key " << key << " evicted";
  }
}

TEST_P(CachePolicyContractTest, NeverEvictsTouchedAndHoldsTheBudget) {
  const Workload w = MakeWorkload(11, 600);
  for (uint64_t budget : {1400u, 2700u}) {  // every layer's share (budget / 3) holds a batch union (<= 450)
    for (CacheMode mode : {CacheMode::kHardBudget, CacheMode::kEvictAfterBatch}) {
      SCOPED_TRACE(GetParam() + " budget " + std::to_string(budget) +
                   (mode == CacheMode::kHardBudget ? " hard" : " after-batch"));
      ExpertCache cache(MakePolicy(GetParam(), WorkloadOptions(w, budget)), mode);
      std::set<ExpertKey> resident;
      std::vector<ExpertKey> evicted;
      for (size_t b = 0; b < w.batches.size(); ++b) {
        const std::vector<ExpertKey>& keys = w.batches[b];
        const uint64_t bytes = kLayerBytes[b % kLayers];
        cache.BeginBatch();
        for (ExpertKey key : keys) ASSERT_EQ(cache.Lookup(key), resident.count(key) == 1);
        for (ExpertKey key : keys) {
          if (resident.count(key) != 0) continue;
          ASSERT_TRUE(cache.Insert(key, bytes, &evicted));  // never refused: the union fits
          ASSERT_NO_FATAL_FAILURE(CheckVictims(evicted, keys, &resident));
          evicted.clear();
          resident.insert(key);
        }
        cache.EndBatch(&evicted);
        ASSERT_NO_FATAL_FAILURE(CheckVictims(evicted, keys, &resident));
        evicted.clear();
        ASSERT_LE(cache.resident_bytes(), budget) << "batch " << b;
        for (ExpertKey key : w.prefetches[b]) {  // still batch b: its keys stay protected
          if (cache.Prefetch(key, kLayerBytes[(b + 1) % kLayers], &evicted)) resident.insert(key);
          ASSERT_NO_FATAL_FAILURE(CheckVictims(evicted, keys, &resident));
          evicted.clear();
          if (mode == CacheMode::kHardBudget) {
            ASSERT_LE(cache.resident_bytes(), budget);
          }
        }
        for (uint32_t l = 0; l < kLayers; ++l) {
          for (uint32_t e = 0; e < kExperts; ++e) {
            ASSERT_EQ(cache.Contains(MakeExpertKey(l, e)), resident.count(MakeExpertKey(l, e)) == 1);
          }
        }
      }
      EXPECT_GT(cache.counters().evictions, 0u);
      EXPECT_GT(cache.counters().hits, 0u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, CachePolicyContractTest, ::testing::ValuesIn(CachePolicyNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// Policies whose untouched entries keep their order through a batch evict the
// same entries in both modes whenever every batch's union fits ("arc" adapts
// p between a batch's inserts and "random" draws per call, so they may not).
TEST(CachePolicyTest, ModesAgreeWhenBatchesFit) {
  const Workload w = MakeWorkload(3, 600);
  for (const char* name : {"lru", "lfu", "layer", "layerlfu", "lfru", "pinned", "belady"}) {
    const CachePolicyOptions options = WorkloadOptions(w, 1400);
    ExpertCache hard(MakePolicy(name, options), CacheMode::kHardBudget);
    ExpertCache offline(MakePolicy(name, options), CacheMode::kEvictAfterBatch);
    for (size_t b = 0; b < w.batches.size(); ++b) {
      const uint64_t bytes = kLayerBytes[b % kLayers];
      const BatchOutcome h = RunBatch(hard, w.batches[b], bytes);
      ASSERT_FALSE(h.refused);
      ASSERT_EQ(h.hits, RunBatch(offline, w.batches[b], bytes).hits) << name << " batch " << b;
    }
    EXPECT_EQ(hard.counters().hits, offline.counters().hits) << name;
  }
}

// With equal sizes, Belady's choice is optimal: no policy gets more hits.
TEST(CachePolicyTest, BeladyHitsAtLeastEveryPolicyWithEqualSizes) {
  const Workload w = MakeWorkload(9, 900);
  std::map<std::string, uint64_t> hits;
  for (const std::string& name : CachePolicyNames()) {
    ExpertCache cache(MakePolicy(name, WorkloadOptions(w, 1500)), CacheMode::kEvictAfterBatch);
    for (const std::vector<ExpertKey>& keys : w.batches) RunBatch(cache, keys, 100);
    hits[name] = cache.counters().hits;
  }
  for (const auto& [name, count] : hits) EXPECT_LE(count, hits["belady"]) << name;
  EXPECT_GT(hits["belady"], hits["lru"]);
}

}  // namespace
}  // namespace colibri::engine
