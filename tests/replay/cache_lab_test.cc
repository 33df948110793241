// The cache lab (cache_lab.h): batch forming and accounting by hand on a tiny
// trace; Belady as the ceiling of every policy and equal to a brute-force
// optimum; LRU at the capture's budget against the real traces' recorded
// residency; sweeps deterministic whatever the thread count; prefetch
// accuracy.
#include "colibri/replay/cache_lab.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <tuple>

#include "colibri/traces/importers.h"
#include "replay_test_util.h"

namespace colibri::replay {
namespace {

using engine::ExpertKey;
using engine::MakeExpertKey;

constexpr uint64_t kMiB = uint64_t{1} << 20;
const std::string kQwen3Sample = std::string(COLIBRI_SOURCE_DIR) + "/traces/samples/qwen3-bigmoe.ctrace";

// One hand-written trace record: a (pass, layer) with its tokens' choices.
struct Rec {
  uint64_t pass = 0;
  uint32_t layer = 0;
  bool prefill = false;
  std::vector<uint32_t> experts;  // tokens x top_k
  std::vector<uint8_t> outcomes;  // tokens x top_k, or empty
};

// 2 MoE layers (ids 0 and 1) x 4 experts, top-2; layer 0's experts are 100 bytes, layer 1's 300.
void WriteTinyTrace(const std::string& path, const std::vector<Rec>& recs) {
  traces::TraceHeader header;
  header.shape.moe_layer_ids = {0, 1};
  header.shape.experts_per_layer = 4;
  header.shape.top_k = 2;
  header.shape.dtype = "bf16";
  header.shape.hidden_size = 256;
  header.shape.expert_bytes = {100, 300};
  auto writer = traces::TraceWriter::Create(path, header, {});
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  uint64_t position = 0;
  for (const Rec& rec : recs) {
    traces::TraceRecord r;
    r.pass_id = rec.pass;
    r.layer = rec.layer;
    r.prefill = rec.prefill;
    for (size_t t = 0; t < rec.experts.size() / 2; ++t) r.positions.push_back(position + t);
    if (rec.layer == 1) position += r.positions.size();
    r.expert_ids = rec.experts;
    r.cache_outcomes = rec.outcomes;
    ASSERT_TRUE(writer.value()->Append(r).ok());
  }
  ASSERT_TRUE(writer.value()->Close().ok());
}

// A prefill of two tokens, then two decode passes.
std::vector<Rec> TinyRecs() {
  return {
      {0, 0, true, {0, 1, 1, 0}, {1, 0, 1, 0}},
      {0, 1, true, {2, 3, 3, 2}, {0, 0, 0, 0}},
      {1, 0, false, {0, 1}, {0, 1}},
      {1, 1, false, {3, 2}, {1, 0}},
  };
}

class CacheLabTest : public testing::ReplayTest {
 protected:
  CacheLabTest() : ReplayTest("cache-lab") {}

  LabTrace LoadTiny() {
    WriteTinyTrace(Path("tiny.ctrace"), TinyRecs());
    auto trace = LoadLabTrace(Path("tiny.ctrace"));
    EXPECT_TRUE(trace.ok()) << trace.status().message();
    return trace.ok() ? std::move(trace).value() : LabTrace{};
  }
};

LabResult Simulate(const LabTrace& trace, const LabRun& run,
                   const std::shared_ptr<const engine::NextUseIndex>& next_use = nullptr) {
  auto result = SimulateCache(trace, run, next_use);
  EXPECT_TRUE(result.ok()) << run.policy << ": " << result.status().message();
  return result.ok() ? std::move(result).value() : LabResult{};
}

LabRun LabRunOf(const std::string& policy, uint64_t budget_bytes) {
  LabRun run;
  run.policy = policy;
  run.budget_bytes = budget_bytes;
  return run;
}

TEST_F(CacheLabTest, LoadFormsBatchUnionsWithTheFirstRowsRecordedOutcome) {
  const LabTrace trace = LoadTiny();
  ASSERT_EQ(trace.batches.size(), 4u);
  const LabBatch& prefill = trace.batches[0];
  EXPECT_TRUE(prefill.prefill);
  EXPECT_EQ(prefill.tokens, 2u);
  EXPECT_EQ(prefill.keys, (std::vector<ExpertKey>{MakeExpertKey(0, 0), MakeExpertKey(0, 1)}));
  // Expert 1's first row (token 0, slot 1) missed; its repeat at token 1 hit and is not counted.
  EXPECT_EQ(prefill.recorded, (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(trace.batches[3].keys, (std::vector<ExpertKey>{MakeExpertKey(1, 3), MakeExpertKey(1, 2)}));
  EXPECT_EQ(trace.batches[3].layer_index, 1u);
  EXPECT_EQ(trace.batches[3].pass_id, 1u);
  EXPECT_EQ(trace.layer_expert_bytes, (std::vector<uint64_t>{100, 300}));
  EXPECT_EQ(trace.token_cycle_bytes, 2u * 100 + 2u * 300);
  EXPECT_TRUE(trace.has_recorded);
  EXPECT_EQ(trace.recorded_lookups, 8u);
  EXPECT_EQ(trace.recorded_hits, 3u);
  EXPECT_EQ(trace.recorded_lookups_decode, 4u);
  EXPECT_EQ(trace.recorded_hits_decode, 2u);
}

TEST_F(CacheLabTest, TraceWithoutOutcomesHasNoRecordedFigures) {
  std::vector<Rec> recs = TinyRecs();
  recs[2].outcomes.clear();
  WriteTinyTrace(Path("partial.ctrace"), recs);
  auto trace = LoadLabTrace(Path("partial.ctrace"));
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_FALSE(trace->has_recorded);
  EXPECT_EQ(trace->recorded_lookups, 0u);
  for (const LabBatch& b : trace->batches) EXPECT_TRUE(b.recorded.empty());
}

// Budget 500 bytes, LRU, by hand:
//   prefill L0 {0,1}: 2 misses (200 B);
//   prefill L1 {2,3}: 2 misses (800 B): evicts L0 e0, L0 e1; 600 B stay over budget (both touched);
//   decode  L0 {0,1}: 2 misses (800 B): evicts L1 e2 (least recent) -> 500 B;
//   decode  L1 {3,2}: e3 hits (it outlived the over-budget batch), e2 misses.
TEST_F(CacheLabTest, AccountingByHand) {
  const LabTrace trace = LoadTiny();
  const LabResult r = Simulate(trace, LabRunOf("lru", 500));
  EXPECT_EQ(r.lookups, 8u);
  EXPECT_EQ(r.hits, 1u);
  EXPECT_EQ(r.lookups_decode, 4u);
  EXPECT_EQ(r.hits_decode, 1u);
  EXPECT_DOUBLE_EQ(r.hit_pct_decode(), 25.0);
  EXPECT_DOUBLE_EQ(r.hit_pct_cum(), 12.5);
  EXPECT_EQ(r.demand_read_bytes, 200u + 600 + 200 + 300);
  EXPECT_EQ(r.read_bytes, r.demand_read_bytes);
  EXPECT_EQ(r.layer_lookups, (std::vector<uint64_t>{4, 4}));
  EXPECT_EQ(r.layer_hits, (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(r.prefetch_hits + r.prefetch_read_bytes + r.preload_bytes + r.predicted + r.next_lookups, 0u);

  // Everything fits: the whole decode hits.
  const LabResult all = Simulate(trace, LabRunOf("lru", 10000));
  EXPECT_EQ(all.hits_decode, 4u);
  EXPECT_DOUBLE_EQ(all.hit_pct_decode(), 100.0);
  EXPECT_DOUBLE_EQ(all.hit_pct_cum(), 50.0);
  EXPECT_EQ(all.demand_read_bytes, 800u);
}

TEST_F(CacheLabTest, PinnedPreloadsItsHotSet) {
  const LabTrace trace = LoadTiny();
  const std::vector<ExpertKey> hot = PinnedHotSet(trace, 450);
  // Every key is looked up twice: ties to the lower key, as many as fit in 450 bytes (100 + 100 + 300 > 450).
  EXPECT_EQ(hot, (std::vector<ExpertKey>{MakeExpertKey(0, 0), MakeExpertKey(0, 1)}));
  LabRun run = LabRunOf("pinned", 500);
  run.pinned = hot;
  const LabResult r = Simulate(trace, run);
  EXPECT_EQ(r.preload_bytes, 200u);
  EXPECT_EQ(r.read_bytes, r.demand_read_bytes + 200);
  EXPECT_EQ(r.layer_hits[0], 4u);  // the pinned layer-0 experts hit in prefill and decode
  EXPECT_EQ(r.prefetch_hits, 0u);  // a preload is not a prefetch
}

TEST_F(CacheLabTest, BadOptionsAreErrorsNamingThem) {
  const LabTrace trace = LoadTiny();
  const auto message = [&](const LabRun& run) {
    auto r = SimulateCache(trace, run, nullptr);
    EXPECT_FALSE(r.ok());
    return r.status().message();
  };
  EXPECT_NE(message(LabRunOf("lru", 0)).find("budget"), std::string::npos);
  EXPECT_NE(message(LabRunOf("nope", 500)).find("nope"), std::string::npos);
  EXPECT_NE(message(LabRunOf("belady", 500)).find("belady"), std::string::npos);
  LabRun pinned = LabRunOf("pinned", 150);
  pinned.pinned = {MakeExpertKey(0, 0), MakeExpertKey(0, 1)};
  EXPECT_NE(message(pinned).find("pinned"), std::string::npos);
  LabRun predictor = LabRunOf("lru", 500);
  predictor.prefetch.predictor = "psychic";
  EXPECT_NE(message(predictor).find("psychic"), std::string::npos);
  LabRun missing = LabRunOf("lru", 500);
  missing.prefetch.predictor = "coact";
  missing.prefetch.profile_trace = Path("absent.ctrace");
  EXPECT_NE(message(missing).find("absent.ctrace"), std::string::npos);
}

// --- Belady: the ceiling, and the optimum ---

constexpr uint64_t kEntryBytes = 1000;

// A seeded trace of `passes` x `layers` batches (the first pass a prefill of
// `prefill_tokens` when > 0, else decode of one token), expert choices skewed
// towards low ids; every expert the same size.
LabTrace RandomTrace(uint64_t seed, uint32_t layers, uint32_t experts, uint32_t top_k, uint32_t passes,
                     uint32_t prefill_tokens) {
  std::mt19937_64 rng(seed);
  LabTrace trace;
  trace.moe_layers = layers;
  trace.experts = experts;
  trace.top_k = top_k;
  trace.layer_expert_bytes.assign(layers, kEntryBytes);
  trace.token_cycle_bytes = layers * top_k * kEntryBytes;
  for (uint32_t pass = 0; pass < passes; ++pass) {
    for (uint32_t layer = 0; layer < layers; ++layer) {
      LabBatch& b = trace.batches.emplace_back();
      b.layer_index = layer;
      b.pass_id = pass;
      b.prefill = pass == 0 && prefill_tokens > 0;
      b.tokens = b.prefill ? prefill_tokens : 1;
      for (uint32_t t = 0; t < b.tokens; ++t) {
        std::vector<uint32_t> chosen;
        while (chosen.size() < top_k) {
          const auto e = static_cast<uint32_t>(std::min(rng() % experts, rng() % experts));
          if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
        }
        for (uint32_t e : chosen) {
          const ExpertKey key = MakeExpertKey(layer, e);
          if (std::find(b.keys.begin(), b.keys.end(), key) == b.keys.end()) b.keys.push_back(key);
        }
      }
    }
  }
  return trace;
}

// The most hits of any schedule under the lab's rules, by exhaustive search
// (memoised over (batch, resident set)): after each batch, untouched entries
// are evicted until at most `capacity` remain resident (or none untouched is
// left), the schedule choosing which. Up to 32 distinct keys.
uint64_t OptimalHits(const LabTrace& trace, int capacity) {
  std::map<ExpertKey, int> bits;
  std::vector<uint32_t> batches;
  for (const LabBatch& b : trace.batches) {
    uint32_t mask = 0;
    for (ExpertKey key : b.keys) mask |= 1u << bits.try_emplace(key, static_cast<int>(bits.size())).first->second;
    batches.push_back(mask);
  }
  std::map<std::pair<size_t, uint32_t>, uint64_t> memo;
  const auto best = [&](const auto& self, size_t b, uint32_t resident) -> uint64_t {
    if (b == batches.size()) return 0;
    if (auto found = memo.find({b, resident}); found != memo.end()) return found->second;
    const uint32_t touched = batches[b];
    const uint32_t others = resident & ~touched;
    const int keep = std::min(std::popcount(others), std::max(0, capacity - std::popcount(touched)));
    uint64_t rest = 0;
    for (uint32_t kept = others;; kept = (kept - 1) & others) {
      if (std::popcount(kept) == keep) rest = std::max(rest, self(self, b + 1, touched | kept));
      if (kept == 0) break;
    }
    const uint64_t total = static_cast<uint64_t>(std::popcount(resident & touched)) + rest;
    memo[{b, resident}] = total;
    return total;
  };
  return best(best, 0, 0);
}

TEST(CacheLabBeladyTest, EqualsTheBruteForceOptimumOnTinyTraces) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    const uint32_t top_k = 1 + seed % 2;
    const LabTrace trace = RandomTrace(seed, 2, 3, top_k, 6, seed % 3 == 0 ? 2 : 0);
    const int capacity = 2 + static_cast<int>(seed % 2);
    const LabResult r = Simulate(trace, LabRunOf("belady", capacity * kEntryBytes), BuildNextUse(trace));
    ASSERT_EQ(r.hits, OptimalHits(trace, capacity)) << "seed " << seed << ", capacity " << capacity;
  }
}

// Two kinds of policy may leave the cache over its budget after a batch with
// untouched entries resident: the partitioned ones hold each layer to its
// share, so when a batch's union overflows its layer's share (all of it
// touched) the other layers keep theirs; "pinned" never evicts its hot set,
// so the hot set plus a batch's union may exceed the budget. Either then has
// more room than the budget, so they are compared only where neither happens.
bool HoldsTheBudget(const std::string& policy, const LabTrace& trace, uint64_t budget_bytes, size_t pinned) {
  size_t largest_union = 0;
  for (const LabBatch& b : trace.batches) largest_union = std::max(largest_union, b.keys.size());
  if (policy == "layer" || policy == "layerlfu") return budget_bytes / trace.moe_layers >= largest_union * kEntryBytes;
  if (policy == "pinned") return (pinned + largest_union) * kEntryBytes <= budget_bytes;
  return true;
}

// "pinned" reads its hot set before the first batch (preload_bytes), so each
// pinned key may hit once where a cold cache misses.
TEST(CacheLabBeladyTest, NoPolicyBeatsBelady) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    const uint32_t layers = 2 + seed % 3, experts = 4 + seed % 5, top_k = 1 + seed % 2;
    const LabTrace trace = RandomTrace(seed, layers, experts, top_k, 40, seed % 2 == 0 ? 3 : 0);
    const auto next_use = BuildNextUse(trace);
    const std::vector<ExpertKey> hot = PinnedHotSet(trace, 2 * kEntryBytes);
    for (uint64_t capacity = 2; capacity < layers * experts; ++capacity) {
      const uint64_t budget = capacity * kEntryBytes;
      const uint64_t optimum = Simulate(trace, LabRunOf("belady", budget), next_use).hits;
      for (const std::string& policy : engine::CachePolicyNames()) {
        if (!HoldsTheBudget(policy, trace, budget, hot.size())) continue;
        LabRun run = LabRunOf(policy, budget);
        run.seed = seed;
        run.pinned = hot;
        const uint64_t preloaded = policy == "pinned" ? hot.size() : 0;
        EXPECT_LE(Simulate(trace, run, next_use).hits, optimum + preloaded)
            << policy << ", seed " << seed << ", capacity " << capacity;
      }
    }
  }
}

// --- The real traces: LRU at the capture's budget against its recorded residency ---

class CacheLabRealTraceTest : public testing::ReplayTest, public ::testing::WithParamInterface<const char*> {
 protected:
  CacheLabRealTraceTest() : ReplayTest("cache-lab-real") {}

  // The Qwen3 sample, or the Gemma capture imported here; empty when the source is absent.
  std::string TracePath() const {
    if (std::string(GetParam()) == "qwen3") return kQwen3Sample;
    const std::string csv = std::string(COLIBRI_SHARED_DATA) + "/bigmoe-route-traces/gemma.route.csv";
    if (!std::filesystem::exists(csv)) return "";
    traces::ImportOptions options;
    options.format = "bmoe-csv";
    options.inputs = {csv};
    auto report = traces::ImportToFile(options, Path("gemma.ctrace"), traces::WriterOptions{});
    EXPECT_TRUE(report.ok()) << report.status().message();
    return Path("gemma.ctrace");
  }
};

double Pct(uint64_t part, uint64_t whole) { return 100.0 * static_cast<double>(part) / static_cast<double>(whole); }

TEST_P(CacheLabRealTraceTest, LruAt4000MiBReproducesTheRecordedResidency) {
  const std::string path = TracePath();
  if (path.empty()) GTEST_SKIP() << "the Gemma capture is not in " << COLIBRI_SHARED_DATA;
  auto trace = LoadLabTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  ASSERT_TRUE(trace->has_recorded);
  const LabResult r = Simulate(trace.value(), LabRunOf("lru", 4000 * kMiB));
  EXPECT_EQ(r.lookups, trace->recorded_lookups);
  EXPECT_EQ(r.lookups_decode, trace->recorded_lookups_decode);
  const double recorded_decode = Pct(trace->recorded_hits_decode, trace->recorded_lookups_decode);
  const double recorded_cum = Pct(trace->recorded_hits, trace->recorded_lookups);
  std::cout << GetParam() << ": LRU 4000 MiB hit % decode " << r.hit_pct_decode() << " (recorded " << recorded_decode
            << "), cumulative " << r.hit_pct_cum() << " (recorded " << recorded_cum << "); lookups " << r.lookups
            << ", hits " << r.hits << " (recorded " << trace->recorded_hits << ")\n";
  RecordProperty("lab_hit_pct_decode", std::to_string(r.hit_pct_decode()));
  RecordProperty("recorded_hit_pct_decode", std::to_string(recorded_decode));
  RecordProperty("lab_hit_pct_cum", std::to_string(r.hit_pct_cum()));
  RecordProperty("recorded_hit_pct_cum", std::to_string(recorded_cum));
  EXPECT_NEAR(r.hit_pct_decode(), recorded_decode, 0.1);
  EXPECT_NEAR(r.hit_pct_cum(), recorded_cum, 0.1);
}

INSTANTIATE_TEST_SUITE_P(CacheLab, CacheLabRealTraceTest, ::testing::Values("qwen3", "gemma"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

// --- Sweeps and prefetch ---

auto Fields(const LabResult& r) {
  return std::tie(r.policy, r.budget_bytes, r.predictor, r.lookups, r.hits, r.lookups_decode, r.hits_decode,
                  r.prefetch_hits, r.prefetch_hits_decode, r.demand_read_bytes, r.prefetch_read_bytes, r.preload_bytes,
                  r.prefetch_wasted_bytes, r.read_bytes, r.predicted, r.predicted_used, r.next_lookups, r.layer_lookups,
                  r.layer_hits);
}

PrefetchOptions Prefetcher(const std::string& predictor) {
  PrefetchOptions p;
  p.predictor = predictor;
  return p;
}

TEST(CacheLabSweepTest, SameResultsWhateverTheThreadsAndOracleIsTheCeiling) {
  auto trace = LoadLabTrace(kQwen3Sample);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  SweepOptions options;
  options.budgets_bytes = {1000 * kMiB, 4000 * kMiB};
  options.policies = engine::CachePolicyNames();
  options.prefetchers = {Prefetcher("none"), Prefetcher("oracle"), Prefetcher("coact")};
  options.pinned = PinnedHotSet(trace.value(), 500 * kMiB);
  options.threads = 1;
  auto serial = Sweep(trace.value(), options);
  ASSERT_TRUE(serial.ok()) << serial.status().message();
  options.threads = 2;
  auto parallel = Sweep(trace.value(), options);
  ASSERT_TRUE(parallel.ok()) << parallel.status().message();
  ASSERT_EQ(serial->size(), parallel->size());
  for (size_t i = 0; i < serial->size(); ++i) EXPECT_TRUE(Fields((*serial)[i]) == Fields((*parallel)[i])) << i;

  // Nesting: policy, prefetcher, budget; "belady" once, without prefetch.
  const size_t per_policy = options.prefetchers.size() * options.budgets_bytes.size();
  const bool belady = std::find(options.policies.begin(), options.policies.end(), "belady") != options.policies.end();
  ASSERT_EQ(serial->size(),
            options.policies.size() * per_policy - (belady ? per_policy - options.budgets_bytes.size() : 0));
  std::map<std::tuple<std::string, std::string, uint64_t>, const LabResult*> rows;
  for (const LabResult& r : serial.value()) rows[{r.policy, r.predictor, r.budget_bytes}] = &r;
  EXPECT_EQ((*serial)[0].policy, options.policies[0]);
  EXPECT_EQ((*serial)[1].budget_bytes, options.budgets_bytes[1]);
  EXPECT_EQ((*serial)[2].predictor, "oracle");

  for (const std::string& policy : options.policies) {
    for (uint64_t budget : options.budgets_bytes) {
      const LabResult& none = *rows.at({policy, "none", budget});
      if (policy == "belady") {
        EXPECT_EQ(rows.count({policy, "oracle", budget}), 0u);
        continue;
      }
      const LabResult& oracle = *rows.at({policy, "oracle", budget});
      const LabResult& coact = *rows.at({policy, "coact", budget});
      EXPECT_DOUBLE_EQ(oracle.precision(), 1.0) << policy;
      EXPECT_DOUBLE_EQ(oracle.recall(), 1.0) << policy;
      EXPECT_GE(oracle.hits, none.hits) << policy << " " << budget;
      // Every lookup after the first batch hits (prefetched right before it).
      EXPECT_LE(oracle.lookups - oracle.hits, trace->batches[0].keys.size()) << policy;
      EXPECT_EQ(oracle.read_bytes, oracle.demand_read_bytes + oracle.prefetch_read_bytes + oracle.preload_bytes);
      for (double v : {coact.precision(), coact.recall(), coact.coverage()}) {
        EXPECT_GE(v, 0.0) << policy;
        EXPECT_LE(v, 1.0) << policy;
      }
      EXPECT_GT(coact.predicted_used, 0u) << policy;
      EXPECT_EQ(coact.next_lookups, oracle.next_lookups);
      EXPECT_EQ(none.predicted + none.next_lookups + none.prefetch_read_bytes, 0u);
    }
  }
}

TEST_F(CacheLabTest, CoactTrainsOnAProfileOfTheSameShape) {
  auto trace = LoadLabTrace(kQwen3Sample);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  LabRun run = LabRunOf("lru", 2000 * kMiB);
  run.prefetch = Prefetcher("coact");
  const LabResult online = Simulate(trace.value(), run);
  run.prefetch.profile_trace = kQwen3Sample;
  const LabResult trained = Simulate(trace.value(), run);
  std::cout << "coact on qwen3, lru 2000 MiB: online precision " << online.precision() << " recall " << online.recall()
            << "; trained on itself: precision " << trained.precision() << " recall " << trained.recall() << "\n";
  // Trained, every score online had is positive still, and more: more proposals.
  EXPECT_GT(trained.predicted, online.predicted);

  WriteTinyTrace(Path("tiny.ctrace"), TinyRecs());
  run.prefetch.profile_trace = Path("tiny.ctrace");  // 2 layers x 4 experts
  auto mismatch = SimulateCache(trace.value(), run, nullptr);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("prefetch profile trace"), std::string::npos);
}

TEST(CacheLabSweepTest, TenBudgetsTimesEveryPolicyOnTheQwen3Sample) {
  auto trace = LoadLabTrace(kQwen3Sample);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  SweepOptions options;
  for (uint64_t mib = 500; mib <= 5000; mib += 500) options.budgets_bytes.push_back(mib * kMiB);
  options.policies = engine::CachePolicyNames();
  options.pinned = PinnedHotSet(trace.value(), 250 * kMiB);
  const auto start = std::chrono::steady_clock::now();
  auto results = Sweep(trace.value(), options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(results.ok()) << results.status().message();
  EXPECT_EQ(results->size(), options.budgets_bytes.size() * options.policies.size());
  std::cout << "sweep of " << options.budgets_bytes.size() << " budgets x " << options.policies.size()
            << " policies on the Qwen3 sample, 2 threads: " << seconds << " s\n";
  RecordProperty("sweep_seconds", std::to_string(seconds));
}

}  // namespace
}  // namespace colibri::replay
