#include "colibri/engine/moe_engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>

namespace colibri::engine {
namespace {

// In-memory StorageBackend that completes reads in a seeded random order and
// can be told to fail one expert's reads.
class FakeStorage final : public StorageBackend {
 public:
  FakeStorage(const std::vector<std::byte>* file, const Clock* clock, uint64_t seed)
      : file_(file), clock_(clock), rng_(seed) {
    caps_.name = "fake";
    caps_.alignment_bytes = 4096;
    caps_.queue_depth = 4;
  }
  const StorageCaps& caps() const override { return caps_; }
  const StorageCounters& counters() const override { return counters_; }
  const std::string& warning() const override { return warning_; }
  size_t outstanding() const override { return queued_.size(); }
  Status Submit(const ReadRequest& r) override {
    if (r.offset + r.bytes > file_->size()) return Status::InvalidArgument("read past the end");
    queued_.push_back({r, clock_->Now()});
    return Status::Ok();
  }
  Status Poll(bool wait, std::vector<ReadCompletion>* out) override {
    if (queued_.empty()) return Status::Ok();
    const size_t n = wait ? 1 + rng_() % queued_.size() : rng_() % (queued_.size() + 1);
    for (size_t done = 0; done < n; ++done) {
      const size_t pick = rng_() % queued_.size();
      const auto [r, submitted] = queued_[pick];
      queued_.erase(queued_.begin() + static_cast<std::ptrdiff_t>(pick));
      ReadCompletion c{r.tag, Status::Ok(), r.bytes, submitted, clock_->Now()};
      if (r.offset == fail_offset_ && fail_times_ > 0) {
        --fail_times_;
        c.status = Status::IoError("injected read error");
        c.bytes = 0;
      } else {
        std::memcpy(r.buffer, file_->data() + r.offset, r.bytes);
        ++counters_.reads;
        counters_.read_bytes += r.bytes;
      }
      out->push_back(c);
    }
    return Status::Ok();
  }
  uint64_t fail_offset_ = UINT64_MAX;
  uint64_t fail_times_ = UINT64_MAX;  // reads at fail_offset_ that fail before they succeed

 private:
  const std::vector<std::byte>* file_;
  const Clock* clock_;
  std::mt19937_64 rng_;
  StorageCaps caps_;
  StorageCounters counters_;
  std::string warning_;
  std::vector<std::pair<ReadRequest, TimeNs>> queued_;
};

// Plain fp32 SwiGLU, one row at a time (so a row's result never depends on the batch).
class NaiveCompute final : public ComputeBackend {
 public:
  const ComputeCaps& caps() const override { return caps_; }
  Status ExpertFfn(const ExpertView& e, const float* x, size_t tokens, float* y) override {
    const ExpertLayout& l = *e.layout;
    const auto* gate = reinterpret_cast<const float*>(e.block + l.gate_offset);
    const auto* up = reinterpret_cast<const float*>(e.block + l.up_offset);
    const auto* down = reinterpret_cast<const float*>(e.block + l.down_offset);
    std::vector<float> act(l.intermediate);
    for (size_t t = 0; t < tokens; ++t) {
      const float* xt = x + t * l.hidden;
      for (uint32_t i = 0; i < l.intermediate; ++i) {
        float g = 0, u = 0;
        for (uint32_t h = 0; h < l.hidden; ++h) {
          g += gate[i * l.hidden + h] * xt[h];
          u += up[i * l.hidden + h] * xt[h];
        }
        act[i] = g / (1.0f + std::exp(-g)) * u;
      }
      for (uint32_t h = 0; h < l.hidden; ++h) {
        float sum = 0;
        for (uint32_t i = 0; i < l.intermediate; ++i) sum += down[h * l.intermediate + i] * act[i];
        y[t * l.hidden + h] = sum;
      }
    }
    return Status::Ok();
  }
  Status GateGemv(const float*, const float*, uint32_t, uint32_t, const float*, size_t, float*) override {
    return Status::Unsupported("not used");
  }

 private:
  ComputeCaps caps_{"naive", false};
};

constexpr uint32_t kLayers = 3, kExperts = 8, kTopK = 2, kHidden = 16, kInter = 32;

struct Fixture {
  EngineModel model;
  std::vector<std::byte> file;

  Fixture() {
    model.moe_layers = kLayers;
    model.experts = kExperts;
    model.top_k = kTopK;
    model.layout = ExpertLayout::Make(DType::kFp32, kHidden, kInter);
    file.resize(static_cast<size_t>(kLayers) * kExperts * model.layout.block_bytes);
    std::mt19937_64 rng(42);
    for (size_t i = 0; i + 4 <= file.size(); i += 4) {
      const float w = static_cast<float>(static_cast<int64_t>(rng() % 2001) - 1000) / 4000.0f;
      std::memcpy(file.data() + i, &w, 4);
    }
    for (uint64_t i = 0; i < static_cast<uint64_t>(kLayers) * kExperts; ++i) {
      model.expert_offsets.push_back(i * model.layout.block_bytes);
    }
  }
};

struct Pass {
  uint32_t layer;
  std::vector<float> hidden;
  std::vector<uint32_t> ids;
  std::vector<float> weights;
};

std::vector<Pass> MakePasses(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Pass> passes;
  for (int step = 0; step < 12; ++step) {
    Pass p;
    p.layer = step % kLayers;
    const size_t tokens = (step % 4 == 0) ? 5 : 1;
    for (size_t i = 0; i < tokens * kHidden; ++i) p.hidden.push_back(static_cast<float>(rng() % 1000) / 500.0f - 1.0f);
    for (size_t t = 0; t < tokens; ++t) {
      const uint32_t a = static_cast<uint32_t>(rng() % kExperts);
      const uint32_t b = (a + 1 + static_cast<uint32_t>(rng() % (kExperts - 1))) % kExperts;
      p.ids.push_back(a);
      p.ids.push_back(step == 5 ? kDroppedExpert : b);  // one pass drops a slot (capacity)
      p.weights.push_back(0.7f);
      p.weights.push_back(step == 5 ? 0.0f : 0.3f);
    }
    passes.push_back(std::move(p));
  }
  return passes;
}

// The same arithmetic without any cache: each slot's FFN row, then the weighted sum in rank order.
std::vector<float> Reference(const Fixture& f, const Pass& p) {
  NaiveCompute compute;
  const size_t tokens = p.hidden.size() / kHidden;
  std::vector<float> out(tokens * kHidden, 0.0f), y(kHidden);
  for (size_t t = 0; t < tokens; ++t) {
    for (uint32_t s = 0; s < kTopK; ++s) {
      const uint32_t id = p.ids[t * kTopK + s];
      if (id == kDroppedExpert) continue;
      const std::byte* block = f.file.data() + f.model.expert_offsets[p.layer * kExperts + id];
      EXPECT_TRUE(compute.ExpertFfn(ExpertView{&f.model.layout, block}, p.hidden.data() + t * kHidden, 1, y.data()).ok());
      for (uint32_t h = 0; h < kHidden; ++h) out[t * kHidden + h] += p.weights[t * kTopK + s] * y[h];
    }
  }
  return out;
}

struct EngineRig {
  RealEventLoop loop;
  FakeStorage storage;
  std::unique_ptr<TransferBackend> transfer;
  NaiveCompute compute;
  std::unique_ptr<MoeEngine> engine;

  EngineRig(const Fixture& f, const EngineOptions& options, uint64_t seed)
      : storage(&f.file, &loop, seed), transfer(MakeCpuTransfer(&loop)) {
    auto e = MoeEngine::Create(f.model, options, EngineBackends{&loop, &storage, transfer.get(), &compute, nullptr});
    EXPECT_TRUE(e.ok()) << e.status().message();
    if (e.ok()) engine = std::move(e).value();
  }
};

// Backends for engines that are only created (configuration checks).
struct BareBackends {
  explicit BareBackends(const Fixture& f) : storage(&f.file, &loop, 1), transfer(MakeCpuTransfer(&loop)) {}
  RealEventLoop loop;
  FakeStorage storage;
  std::unique_ptr<TransferBackend> transfer;
  NaiveCompute compute;
  const EngineBackends backends{&loop, &storage, transfer.get(), &compute, nullptr};
};

Status RunPass(MoeEngine& engine, const Pass& p, std::vector<float>* out, LayerBatchReport* report) {
  const size_t tokens = p.hidden.size() / kHidden;
  out->assign(tokens * kHidden, -1.0f);
  return engine.Execute(p.layer, p.hidden.data(), LayerRouting{tokens, p.ids.data(), p.weights.data()}, out->data(),
                        report);
}

TEST(MoeEngineTest, OutputIsBitIdenticalWhateverThePlacement) {
  Fixture f;
  const uint64_t block = f.model.layout.block_bytes;
  const auto passes = MakePasses(7);
  std::vector<std::vector<float>> expected;
  for (const Pass& p : passes) expected.push_back(Reference(f, p));
  int configurations = 0;
  for (uint64_t l1 : {uint64_t{0}, block, 4 * block, 24 * block}) {
    for (uint64_t l2 : {uint64_t{0}, 2 * block, 24 * block}) {
      for (const char* policy : {"lru", "layer"}) {
        for (uint32_t staging : {1u, 3u}) {
          for (uint64_t order_seed : {1u, 2u}) {
            EngineOptions options{l1, l2, policy, policy, staging};
            EngineRig s(f, options, order_seed);
            ASSERT_NE(s.engine, nullptr);
            for (size_t i = 0; i < passes.size(); ++i) {
              std::vector<float> out;
              LayerBatchReport r;
              ASSERT_TRUE(RunPass(*s.engine, passes[i], &out, &r).ok());
              ASSERT_EQ(std::memcmp(out.data(), expected[i].data(), out.size() * 4), 0)
                  << "pass " << i << " l1 " << l1 << " l2 " << l2 << " " << policy << " staging " << staging;
              EXPECT_EQ(r.l1_hits + r.l2_hits + r.nvme_reads, r.distinct_experts);
              EXPECT_EQ(r.read_bytes, uint64_t{r.nvme_reads} * block);
            }
            EXPECT_LE(s.engine->pool_bytes(), (l1 / block + l2 / block + staging) * block);
            ++configurations;
          }
        }
      }
    }
  }
  EXPECT_EQ(configurations, 96);
}

// isolate_expert_failures: an expert whose reads always fail fails only the
// tokens routed to it, in every placement; every other token's output is the
// fault-free one, bit for bit, and the tiers stay sound for later batches.
TEST(MoeEngineTest, AnIsolatedExpertFailureFailsOnlyItsTokensWhateverThePlacement) {
  Fixture f;
  const uint64_t block = f.model.layout.block_bytes;
  const auto passes = MakePasses(7);
  constexpr uint32_t kBroken = 3;  // expert 3 of MoE layer 0
  int configurations = 0, failed_batches = 0;
  for (uint64_t l1 : {uint64_t{0}, block, 24 * block}) {
    for (uint64_t l2 : {uint64_t{0}, 2 * block, 24 * block}) {
      for (uint32_t staging : {1u, 3u}) {
        for (uint64_t order_seed : {1u, 2u}) {
          EngineOptions options{l1, l2, "lru", "lru", staging};
          options.isolate_expert_failures = true;
          options.read_retries = 1;
          EngineRig s(f, options, order_seed);
          ASSERT_NE(s.engine, nullptr);
          s.storage.fail_offset_ = f.model.expert_offsets[kBroken];
          for (size_t i = 0; i < passes.size(); ++i) {
            const Pass& p = passes[i];
            std::vector<float> out;
            LayerBatchReport r;
            ASSERT_TRUE(RunPass(*s.engine, p, &out, &r).ok()) << "pass " << i;
            std::vector<uint32_t> expected_failed;
            const size_t tokens = p.hidden.size() / kHidden;
            for (uint32_t t = 0; t < tokens; ++t) {
              if (p.layer == 0 && (p.ids[t * kTopK] == kBroken || p.ids[t * kTopK + 1] == kBroken)) {
                expected_failed.push_back(t);
              }
            }
            const BatchFailures& failures = s.engine->last_failures();
            EXPECT_EQ(failures.tokens, expected_failed) << "pass " << i;
            ASSERT_EQ(failures.experts.size(), expected_failed.empty() ? 0u : 1u) << "pass " << i;
            EXPECT_EQ(r.failed_experts, failures.experts.size());
            EXPECT_EQ(r.failed_tokens, expected_failed.size());
            if (!failures.empty()) {
              ++failed_batches;
              EXPECT_EQ(failures.experts[0].layer_index, 0u);
              EXPECT_EQ(failures.experts[0].expert, kBroken);
              EXPECT_NE(failures.experts[0].status.message().find("reading expert 3 of MoE layer 0 (after 1 retries)"),
                        std::string::npos)
                  << failures.experts[0].status.message();
            }
            const std::vector<float> expected = Reference(f, p);
            for (uint32_t t = 0; t < tokens; ++t) {
              const bool failed = std::find(expected_failed.begin(), expected_failed.end(), t) != expected_failed.end();
              const std::vector<float> zeros(kHidden, 0.0f);
              const float* want = failed ? zeros.data() : expected.data() + t * kHidden;
              ASSERT_EQ(std::memcmp(out.data() + t * kHidden, want, kHidden * 4), 0)
                  << "pass " << i << " token " << t << " l1 " << l1 << " l2 " << l2 << " staging " << staging;
            }
            EXPECT_EQ(r.l1_hits + r.l2_hits + r.nvme_reads, r.distinct_experts);
            EXPECT_EQ(r.read_bytes, uint64_t{r.nvme_reads - r.failed_experts} * block);
          }
          ++configurations;
        }
      }
    }
  }
  EXPECT_EQ(configurations, 36);
  int routed_to_broken = 0;  // layer-0 passes that route a token to the broken expert
  for (const Pass& p : passes) {
    routed_to_broken += p.layer == 0 && std::find(p.ids.begin(), p.ids.end(), kBroken) != p.ids.end();
  }
  EXPECT_GT(routed_to_broken, 0);
  EXPECT_EQ(failed_batches, 36 * routed_to_broken);
}

// Without isolation the same failure fails the batch, as before.
TEST(MoeEngineTest, WithoutIsolationAnExpertFailureFailsTheBatch) {
  Fixture f;
  EngineOptions options{0, 24 * f.model.layout.block_bytes, "lru", "lru", 2};
  EngineRig s(f, options, 1);
  ASSERT_NE(s.engine, nullptr);
  s.storage.fail_offset_ = f.model.expert_offsets[0 * kExperts + 1];
  std::vector<float> out;
  const Status st = RunPass(*s.engine, Pass{0, std::vector<float>(kHidden, 0.5f), {1, 2}, {0.5f, 0.5f}}, &out, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(s.engine->last_failures().empty());
}

TEST(MoeEngineTest, TiersServeRepeatsWithoutNvmeReads) {
  Fixture f;
  const uint64_t block = f.model.layout.block_bytes;
  EngineRig s(f, EngineOptions{2 * block, 24 * block, "lru", "lru", 2}, 1);
  ASSERT_NE(s.engine, nullptr);
  Pass p{0, std::vector<float>(kHidden, 0.5f), {1, 2}, {0.5f, 0.5f}};
  std::vector<float> out;
  LayerBatchReport r;
  ASSERT_TRUE(RunPass(*s.engine, p, &out, &r).ok());
  EXPECT_EQ(r.nvme_reads, 2u);
  ASSERT_TRUE(RunPass(*s.engine, p, &out, &r).ok());
  EXPECT_EQ(r.l1_hits, 2u);
  EXPECT_EQ(r.nvme_reads, 0u);
  p.ids = {3, 4};  // evicts 1 and 2 from L1 (two slots); L2 keeps them
  ASSERT_TRUE(RunPass(*s.engine, p, &out, &r).ok());
  p.ids = {1, 2};
  ASSERT_TRUE(RunPass(*s.engine, p, &out, &r).ok());
  EXPECT_EQ(r.l1_hits, 0u);
  EXPECT_EQ(r.l2_hits, 2u);
  EXPECT_EQ(r.nvme_reads, 0u);
  EXPECT_EQ(s.engine->l2_counters().hits, 2u);
  EXPECT_EQ(s.transfer->counters().copies, 6u);  // each time an expert entered L1: 1,2 then 3,4 then 1,2 again
}

TEST(MoeEngineTest, ReadErrorFailsTheBatchWithoutPoisoningTheCache) {
  Fixture f;
  const uint64_t block = f.model.layout.block_bytes;
  EngineRig s(f, EngineOptions{0, 24 * block, "lru", "lru", 2}, 3);
  ASSERT_NE(s.engine, nullptr);
  Pass p{1, std::vector<float>(kHidden, 0.25f), {6, 7}, {0.5f, 0.5f}};
  s.storage.fail_offset_ = f.model.expert_offsets[1 * kExperts + 7];
  std::vector<float> out;
  Status st = RunPass(*s.engine, p, &out, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("reading expert 7 of MoE layer 1"), std::string::npos) << st.message();
  s.storage.fail_offset_ = UINT64_MAX;
  LayerBatchReport r;
  ASSERT_TRUE(RunPass(*s.engine, p, &out, &r).ok());
  EXPECT_EQ(r.nvme_reads, 1u);  // expert 7 is read again; expert 6 arrived the first time
  EXPECT_EQ(std::memcmp(out.data(), Reference(f, p).data(), out.size() * 4), 0);
}

// A transient read error is read again, into the same slot, up to
// EngineOptions::read_retries times; the output is the fault-free one.
TEST(MoeEngineTest, TransientReadErrorsAreRetriedWithinTheBudget) {
  Fixture f;
  const uint64_t block = f.model.layout.block_bytes;
  const Pass p{1, std::vector<float>(kHidden, 0.25f), {6, 7}, {0.5f, 0.5f}};
  for (const uint32_t budget : {0u, 1u, 2u, 3u}) {
    EngineOptions options{0, 24 * block, "lru", "lru", 2};
    options.read_retries = budget;
    EngineRig s(f, options, 3);
    ASSERT_NE(s.engine, nullptr);
    s.storage.fail_offset_ = f.model.expert_offsets[1 * kExperts + 7];
    s.storage.fail_times_ = 2;
    std::vector<float> out;
    LayerBatchReport r;
    const Status st = RunPass(*s.engine, p, &out, &r);
    if (budget < 2) {
      ASSERT_FALSE(st.ok()) << budget;
      EXPECT_EQ(st.code(), StatusCode::kIoError);
      const std::string after = budget == 0 ? "of MoE layer 1: injected" : "of MoE layer 1 (after 1 retries): injected";
      EXPECT_NE(st.message().find("reading expert 7 " + after), std::string::npos) << st.message();
      continue;
    }
    ASSERT_TRUE(st.ok()) << budget << ": " << st.message();
    EXPECT_EQ(r.read_retries, 2u);
    EXPECT_EQ(r.nvme_reads, 2u);  // lookups that missed, not attempts
    EXPECT_EQ(std::memcmp(out.data(), Reference(f, p).data(), out.size() * 4), 0);
  }
}

TEST(MoeEngineTest, BadConfigurationsAreClearErrors) {
  Fixture f;
  BareBackends bare(f);
  const EngineBackends& backends = bare.backends;
  auto small = MoeEngine::Create(f.model, EngineOptions{0, 100, "lru", "lru", 1}, backends);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("below one expert"), std::string::npos) << small.status().message();
  auto policy = MoeEngine::Create(f.model, EngineOptions{0, 0, "lru", "fifo", 1}, backends);
  ASSERT_FALSE(policy.ok());
  EXPECT_NE(policy.status().message().find("unknown cache policy 'fifo'"), std::string::npos);
  auto staging = MoeEngine::Create(f.model, EngineOptions{0, 0, "lru", "lru", 0}, backends);
  EXPECT_FALSE(staging.ok());
  EngineModel bad = f.model;
  bad.expert_offsets[3] += 512;
  EXPECT_FALSE(MoeEngine::Create(bad, EngineOptions{}, backends).ok());
}

// Predicts the experts of a scripted sequence of batches: exactly the next
// pass's (`oracle`), or experts it will not use (`wrong`).
class ScriptedPredictor final : public ExpertPredictor {
 public:
  ScriptedPredictor(std::vector<Pass> passes, bool wrong) : passes_(std::move(passes)), wrong_(wrong) {}
  Status Predict(const PredictorInput& input, uint32_t, std::vector<uint32_t>* out) override {
    out->clear();
    const size_t next = ++calls_;
    if (next >= passes_.size() || passes_[next].layer != input.next_layer) return Status::Ok();
    std::vector<bool> used(kExperts, false);
    for (uint32_t id : passes_[next].ids) {
      if (id != kDroppedExpert) used[id] = true;
    }
    for (uint32_t e = 0; e < kExperts; ++e) {
      if (used[e] != wrong_) out->push_back(e);
    }
    return Status::Ok();
  }

 private:
  std::vector<Pass> passes_;
  bool wrong_;
  size_t calls_ = 0;
};

EngineOptions PrefetchOptions(uint64_t l1, uint64_t l2, std::shared_ptr<ExpertPredictor> predictor) {
  EngineOptions options{l1, l2, "lru", "lru", 2};
  options.prefetch.custom = std::move(predictor);
  return options;
}

TEST(MoeEnginePrefetchTest, OutputsStayBitIdenticalAndEveryReadIsCounted) {
  Fixture f;
  const uint64_t block = f.model.layout.block_bytes;
  const auto passes = MakePasses(11);
  uint64_t waits = 0;  // lookups that found their prefetch still in flight (the completion order is random)
  for (bool wrong : {false, true}) {
    for (uint64_t l1 : {uint64_t{0}, 3 * block}) {
      for (uint64_t l2 : {2 * block, 5 * block, 24 * block}) {
        for (uint64_t order_seed : {1u, 2u, 3u}) {
          EngineRig s(f, PrefetchOptions(l1, l2, std::make_shared<ScriptedPredictor>(passes, wrong)), order_seed);
          ASSERT_NE(s.engine, nullptr);
          uint64_t demand_bytes = 0;
          for (const Pass& p : passes) {
            std::vector<float> out;
            LayerBatchReport r;
            ASSERT_TRUE(RunPass(*s.engine, p, &out, &r).ok()) << "l2 " << l2 << " wrong " << wrong;
            ASSERT_EQ(std::memcmp(out.data(), Reference(f, p).data(), out.size() * 4), 0);
            EXPECT_EQ(r.l1_hits + r.l2_hits + r.nvme_reads, r.distinct_experts);
            demand_bytes += r.read_bytes;
          }
          ASSERT_TRUE(s.engine->FinishPrefetches().ok());
          const PrefetchCounters p = s.engine->prefetch_counters();
          EXPECT_EQ(s.storage.counters().read_bytes, demand_bytes + p.issued_bytes);
          EXPECT_EQ(p.issued_bytes, p.issued * block);
          EXPECT_LE(p.hits, p.issued);
          waits += p.waits;
          if (wrong) {
            EXPECT_EQ(p.predicted_used, 0u);  // (later batches may still use them)
          } else if (l2 == 24 * block) {
            EXPECT_GT(p.hits, 0u);
            EXPECT_EQ(p.predicted_used, p.predicted);  // the oracle is always right
          }
        }
      }
    }
  }
  EXPECT_GT(waits, 0u);
}

TEST(MoeEnginePrefetchTest, AnOraclePrefetchTurnsDemandReadsIntoHits) {
  Fixture f;
  const uint64_t block = f.model.layout.block_bytes;
  const auto passes = MakePasses(5);
  uint64_t reads[2] = {0, 0};
  for (int with_prefetch = 0; with_prefetch < 2; ++with_prefetch) {
    EngineOptions options = with_prefetch ? PrefetchOptions(0, 24 * block, std::make_shared<ScriptedPredictor>(passes, false))
                                          : EngineOptions{0, 24 * block, "lru", "lru", 2};
    EngineRig s(f, options, 1);
    ASSERT_NE(s.engine, nullptr);
    for (const Pass& p : passes) {
      std::vector<float> out;
      LayerBatchReport r;
      ASSERT_TRUE(RunPass(*s.engine, p, &out, &r).ok());
      reads[with_prefetch] += r.nvme_reads;
    }
  }
  // Only the first pass misses with an oracle and room for everything.
  EXPECT_EQ(reads[1], std::set<uint32_t>(passes[0].ids.begin(), passes[0].ids.end()).size() -
                          (std::count(passes[0].ids.begin(), passes[0].ids.end(), kDroppedExpert) > 0));
  EXPECT_LT(reads[1], reads[0]);
}

TEST(MoeEnginePrefetchTest, CoactLearnsARepeatingSequence) {
  Fixture f;
  const uint64_t block = f.model.layout.block_bytes;
  EngineOptions options{0, 24 * block, "lru", "lru", 2};
  options.prefetch.predictor = "coact";
  EngineRig s(f, options, 1);
  ASSERT_NE(s.engine, nullptr);
  // Layer l always routes to experts {l, l + 4}; L2 keeps 24 blocks, so only
  // new (layer, expert) pairs miss: the second cycle has no reads at all, and
  // after one cycle of learning every prediction is used.
  for (int cycle = 0; cycle < 3; ++cycle) {
    for (uint32_t layer = 0; layer < kLayers; ++layer) {
      Pass p{layer, std::vector<float>(kHidden, 0.1f), {layer, layer + 4}, {0.5f, 0.5f}};
      std::vector<float> out;
      ASSERT_TRUE(RunPass(*s.engine, p, &out, nullptr).ok());
    }
  }
  ASSERT_TRUE(s.engine->FinishPrefetches().ok());
  const PrefetchCounters p = s.engine->prefetch_counters();
  EXPECT_GT(p.predicted, 0u);
  EXPECT_EQ(p.predicted_used, p.predicted);
  EXPECT_EQ(p.next_lookups, 8u * 2);  // every batch after the first
  EXPECT_EQ(p.issued, 0u);            // what coact learned was already resident
}

TEST(MoeEnginePrefetchTest, AFailedPrefetchFailsOnlyTheBatchThatWaitsForIt) {
  Fixture f;
  const uint64_t block = f.model.layout.block_bytes;
  const std::vector<Pass> passes = {Pass{0, std::vector<float>(kHidden, 0.2f), {1, 2}, {0.5f, 0.5f}},
                                    Pass{1, std::vector<float>(kHidden, 0.3f), {3, 5}, {0.5f, 0.5f}}};
  EngineRig s(f, PrefetchOptions(0, 24 * block, std::make_shared<ScriptedPredictor>(passes, false)), 4);
  ASSERT_NE(s.engine, nullptr);
  s.storage.fail_offset_ = f.model.expert_offsets[1 * kExperts + 5];
  std::vector<float> out;
  ASSERT_TRUE(RunPass(*s.engine, passes[0], &out, nullptr).ok());
  Status st = RunPass(*s.engine, passes[1], &out, nullptr);
  if (st.ok()) {  // the prefetch failed before the batch looked it up: a plain demand read, which fails too
    GTEST_FAIL() << "the failed read must surface";
  }
  EXPECT_NE(st.message().find("expert 5 of MoE layer 1"), std::string::npos) << st.message();
  s.storage.fail_offset_ = UINT64_MAX;
  LayerBatchReport r;
  ASSERT_TRUE(RunPass(*s.engine, passes[1], &out, &r).ok());
  EXPECT_EQ(std::memcmp(out.data(), Reference(f, passes[1]).data(), out.size() * 4), 0);
  EXPECT_EQ(s.engine->prefetch_counters().failed, 1u);
}

// A prefetch read that fails once is read again (PrefetchCounters::retries)
// and the batch that waits for it never sees the error.
TEST(MoeEnginePrefetchTest, AFailedPrefetchIsRetriedWithinTheBudget) {
  Fixture f;
  const uint64_t block = f.model.layout.block_bytes;
  const std::vector<Pass> passes = {Pass{0, std::vector<float>(kHidden, 0.2f), {1, 2}, {0.5f, 0.5f}},
                                    Pass{1, std::vector<float>(kHidden, 0.3f), {3, 5}, {0.5f, 0.5f}}};
  EngineRig s(f, PrefetchOptions(0, 24 * block, std::make_shared<ScriptedPredictor>(passes, false)), 4);
  ASSERT_NE(s.engine, nullptr);
  s.storage.fail_offset_ = f.model.expert_offsets[1 * kExperts + 5];
  s.storage.fail_times_ = 1;
  std::vector<float> out;
  ASSERT_TRUE(RunPass(*s.engine, passes[0], &out, nullptr).ok());
  LayerBatchReport r;
  ASSERT_TRUE(RunPass(*s.engine, passes[1], &out, &r).ok());
  EXPECT_EQ(std::memcmp(out.data(), Reference(f, passes[1]).data(), out.size() * 4), 0);
  const PrefetchCounters c = s.engine->prefetch_counters();
  EXPECT_EQ(c.retries, 1u);
  EXPECT_EQ(c.failed, 0u);
  EXPECT_EQ(r.read_retries, 0u);  // the demand side never saw it
}

TEST(MoeEnginePrefetchTest, BadPrefetchConfigurationsAreClearErrors) {
  Fixture f;
  BareBackends bare(f);
  const EngineBackends& backends = bare.backends;
  const uint64_t block = f.model.layout.block_bytes;
  const auto error_of = [&](uint64_t l2, const std::string& predictor, double decay) {
    EngineOptions options{0, l2, "lru", "lru", 1};
    options.prefetch.predictor = predictor;
    options.prefetch.decay = decay;
    auto e = MoeEngine::Create(f.model, options, backends);
    return e.ok() ? std::string() : e.status().message();
  };
  EXPECT_NE(error_of(0, "coact", 0.9).find("needs an L2 budget"), std::string::npos);
  EXPECT_NE(error_of(4 * block, "markov", 0.9).find("unknown prefetch predictor 'markov'"), std::string::npos);
  EXPECT_NE(error_of(4 * block, "coact", 0.0).find("outside (0, 1]"), std::string::npos);
  EXPECT_NE(error_of(4 * block, "lookahead", 0.9).find("gate weights"), std::string::npos);
  EXPECT_EQ(error_of(4 * block, "coact", 1.0), "");
}

TEST(MoeEnginePinnedTest, PreloadsTheHotSetWhichNeverLeaves) {
  Fixture f;
  const uint64_t block = f.model.layout.block_bytes;
  EngineOptions options{0, 3 * block, "lru", "pinned", 2};
  options.pinned = {MakeExpertKey(0, 5), MakeExpertKey(2, 7)};
  EngineRig s(f, options, 1);
  ASSERT_NE(s.engine, nullptr);
  ASSERT_TRUE(s.engine->PreloadPinned().ok());
  EXPECT_EQ(s.engine->preloaded_bytes(), 2 * block);
  EXPECT_EQ(s.storage.counters().read_bytes, 2 * block);
  for (const Pass& p : MakePasses(3)) {  // one unpinned slot left: every other expert churns through it
    std::vector<float> out;
    ASSERT_TRUE(RunPass(*s.engine, p, &out, nullptr).ok());
    ASSERT_EQ(std::memcmp(out.data(), Reference(f, p).data(), out.size() * 4), 0);
  }
  Pass p{0, std::vector<float>(kHidden, 0.1f), {5, 1}, {0.5f, 0.5f}};
  std::vector<float> out;
  LayerBatchReport r;
  ASSERT_TRUE(RunPass(*s.engine, p, &out, &r).ok());
  EXPECT_EQ(r.l2_hits, 1u);  // expert 5 of layer 0 is still there
}

TEST(MoeEnginePinnedTest, BadHotSetsAreClearErrors) {
  Fixture f;
  BareBackends bare(f);
  const uint64_t block = f.model.layout.block_bytes;
  const auto error_of = [&](EngineOptions options, std::vector<ExpertKey> pinned) {
    options.pinned = std::move(pinned);
    auto e = MoeEngine::Create(f.model, options, bare.backends);
    return e.ok() ? std::string() : e.status().message();
  };
  const EngineOptions l2{0, 2 * block, "lru", "pinned", 1};
  EXPECT_NE(error_of(l2, {}).find("needs a hot set"), std::string::npos);
  EXPECT_NE(error_of(l2, {MakeExpertKey(0, 1), MakeExpertKey(0, 1)}).find("repeats a key"), std::string::npos);
  EXPECT_NE(error_of(l2, {MakeExpertKey(3, 1)}).find("outside the model"), std::string::npos);
  EXPECT_NE(error_of(l2, {MakeExpertKey(0, 1), MakeExpertKey(0, 2), MakeExpertKey(1, 1)}).find("larger than the L2 budget"),
            std::string::npos);
  EXPECT_NE(error_of(EngineOptions{2 * block, 2 * block, "pinned", "lru", 1}, {MakeExpertKey(0, 1)}).find("runs on L2"),
            std::string::npos);
}

// A "device" on the host, for engines whose compute reads device memory: a
// transfer whose device pools are registered as the device's memory
// (device_is_host = false) and a compute that refuses any block outside it.
struct FakeDevice {
  bool Contains(const std::byte* p, uint64_t bytes) const {
    for (const auto& [base, size] : ranges) {
      if (p >= base && p + bytes <= base + size) return true;
    }
    return false;
  }
  std::vector<std::pair<const std::byte*, uint64_t>> ranges;
};

class DeviceTransfer final : public TransferBackend {
 public:
  DeviceTransfer(const Clock* clock, FakeDevice* device) : inner_(MakeCpuTransfer(clock)), device_(device) {}
  const TransferCaps& caps() const override { return caps_; }
  const TransferCounters& counters() const override { return inner_->counters(); }
  Result<std::unique_ptr<SlabPool>> CreateDevicePool(uint64_t budget_bytes, uint64_t slot_bytes) override {
    COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<SlabPool> pool, inner_->CreateDevicePool(budget_bytes, slot_bytes));
    device_->ranges.emplace_back(pool->base(), pool->total_bytes());
    return pool;
  }
  Result<std::unique_ptr<SlabPool>> CreateHostPool(uint64_t budget_bytes, uint64_t slot_bytes) override {
    ++host_pools;
    return inner_->CreateHostPool(budget_bytes, slot_bytes);
  }
  Status Copy(std::byte* dst, const std::byte* src, uint64_t bytes, uint64_t tag) override {
    if (!device_->Contains(dst, bytes)) return Status::InvalidArgument("copy into host memory");
    if (device_->Contains(src, bytes)) return Status::InvalidArgument("copy from device memory");
    return inner_->Copy(dst, src, bytes, tag);
  }
  Status Poll(bool wait, std::vector<TransferCompletion>* out) override { return inner_->Poll(wait, out); }
  size_t outstanding() const override { return inner_->outstanding(); }
  int host_pools = 0;

 private:
  std::unique_ptr<TransferBackend> inner_;
  FakeDevice* device_;
  TransferCaps caps_{"fake-device", /*device_is_host=*/false, /*delivers_data=*/true};
};

class DeviceCompute final : public ComputeBackend {
 public:
  explicit DeviceCompute(const FakeDevice* device) : device_(device) {}
  const ComputeCaps& caps() const override { return caps_; }
  Status ExpertFfn(const ExpertView& e, const float* x, size_t tokens, float* y) override {
    if (!device_->Contains(e.block, e.layout->block_bytes)) return Status::InvalidArgument("block in host memory");
    ++ffns;
    return naive_.ExpertFfn(e, x, tokens, y);
  }
  Status GateGemv(const float*, const float*, uint32_t, uint32_t, const float*, size_t, float*) override {
    return Status::Unsupported("not used");
  }
  uint64_t ffns = 0;

 private:
  const FakeDevice* device_;
  NaiveCompute naive_;
  ComputeCaps caps_{"fake-device", /*device_memory=*/true, /*reads_data=*/true};
};

struct DeviceRig {
  DeviceRig(const Fixture& f, const EngineOptions& options, uint64_t seed)
      : storage(&f.file, &loop, seed), transfer(&loop, &device), compute(&device) {
    auto e = MoeEngine::Create(f.model, options, EngineBackends{&loop, &storage, &transfer, &compute, nullptr});
    EXPECT_TRUE(e.ok()) << e.status().message();
    if (e.ok()) engine = std::move(e).value();
  }
  RealEventLoop loop;
  FakeStorage storage;
  FakeDevice device;
  DeviceTransfer transfer;
  DeviceCompute compute;
  std::unique_ptr<MoeEngine> engine;
};

// A compute backend that reads device memory gets every block from device
// memory (L1, or the device staging slot), and the outputs stay the oracle's.
TEST(MoeEngineDeviceMemoryTest, EveryBlockComesFromDeviceMemoryAndOutputsStayBitIdentical) {
  Fixture f;
  const uint64_t block = f.model.layout.block_bytes;
  const auto passes = MakePasses(11);
  for (uint64_t l1 : {uint64_t{0}, block, 4 * block, 24 * block}) {
    for (uint64_t l2 : {uint64_t{0}, 2 * block, 24 * block}) {
      SCOPED_TRACE("l1 " + std::to_string(l1 / block) + " l2 " + std::to_string(l2 / block) + " blocks");
      DeviceRig rig(f, EngineOptions{l1, l2, "lru", "lru", 2}, l1 + l2);
      ASSERT_NE(rig.engine, nullptr);
      EXPECT_EQ(rig.transfer.host_pools, 2) << "L2 and the staging slots come from the transfer's host pools";
      EXPECT_EQ(rig.engine->pool_bytes(), (l1 / block + l2 / block + 2 + 1) * block) << "+ one device staging slot";
      uint64_t distinct = 0, staged_on_device = 0, l1_hits = 0;
      for (const Pass& p : passes) {
        std::vector<float> out;
        LayerBatchReport r;
        ASSERT_TRUE(RunPass(*rig.engine, p, &out, &r).ok());
        const std::vector<float> expected = Reference(f, p);
        ASSERT_EQ(std::memcmp(out.data(), expected.data(), out.size() * 4), 0);
        distinct += r.distinct_experts;
        staged_on_device += r.device_staged;
        l1_hits += r.l1_hits;
      }
      EXPECT_EQ(rig.compute.ffns, distinct);
      if (l1 == 0) {
        EXPECT_EQ(staged_on_device, distinct) << "without L1 every block is staged on the device";
      }
      if (l1 == 24 * block) {
        EXPECT_EQ(staged_on_device, 0u) << "L1 admits every block";
      }
      // Every block reached the device once per use outside L1: as an L1 admission or a staging copy.
      EXPECT_EQ(rig.transfer.counters().copies, distinct - l1_hits);
    }
  }
}

TEST(MoeEngineDeviceMemoryTest, HostAndDeviceBackendsThatDoNotMatchAreClearErrors) {
  Fixture f;
  const uint64_t block = f.model.layout.block_bytes;
  RealEventLoop loop;
  FakeStorage storage(&f.file, &loop, 1);
  FakeDevice device;
  DeviceTransfer device_transfer(&loop, &device);
  DeviceCompute device_compute(&device);
  NaiveCompute host_compute;
  const std::unique_ptr<TransferBackend> host_transfer = MakeCpuTransfer(&loop);
  auto host_on_device = MoeEngine::Create(f.model, EngineOptions{block, block, "lru", "lru", 1},
                                          EngineBackends{&loop, &storage, &device_transfer, &host_compute, nullptr});
  ASSERT_FALSE(host_on_device.ok());
  EXPECT_NE(host_on_device.status().message().find("puts the L1 pool in device memory"), std::string::npos)
      << host_on_device.status().message();
  EXPECT_TRUE(MoeEngine::Create(f.model, EngineOptions{0, block, "lru", "lru", 1},
                                EngineBackends{&loop, &storage, &device_transfer, &host_compute, nullptr})
                  .ok())
      << "without L1 the host compute reads L2";
  auto device_on_host = MoeEngine::Create(f.model, EngineOptions{0, block, "lru", "lru", 1},
                                          EngineBackends{&loop, &storage, host_transfer.get(), &device_compute, nullptr});
  ASSERT_FALSE(device_on_host.ok());
  EXPECT_NE(device_on_host.status().message().find("keeps its pool in host memory"), std::string::npos)
      << device_on_host.status().message();
}

}  // namespace
}  // namespace colibri::engine
