#include "colibri/replay/cache_lab.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cache_lab_predictor.h"
#include "colibri/engine/expert_cache.h"
#include "colibri/replay/layer_batches.h"
#include "colibri/traces/reader.h"
#include "colibri/no_throw.h"

namespace colibri::replay {
namespace {

using engine::ExpertKey;
using engine::ExpertOf;
using engine::LayerIndexOf;
using engine::MakeExpertKey;

double Ratio(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

// Appends `batch` to the trace: its distinct keys in order of first appearance,
// each with the recorded outcome of its first row. `seen_in` holds, per
// expert, 1 + the number of the last batch that named it.
void AppendLabBatch(const LayerBatch& batch, std::vector<uint64_t>* seen_in, LabTrace* trace) {
  const uint64_t stamp = trace->batches.size() + 1;
  LabBatch& lab = trace->batches.emplace_back();
  lab.layer_index = batch.layer_index;
  lab.prefill = batch.prefill;
  lab.pass_id = batch.pass_id;
  lab.tokens = static_cast<uint32_t>(batch.tokens());
  const bool recorded = !batch.cache_outcomes.empty();
  for (size_t i = 0; i < batch.expert_ids.size(); ++i) {
    const uint32_t expert = batch.expert_ids[i];
    if ((*seen_in)[expert] == stamp) continue;
    (*seen_in)[expert] = stamp;
    lab.keys.push_back(MakeExpertKey(batch.layer_index, expert));
    if (recorded) lab.recorded.push_back(batch.cache_outcomes[i]);
  }
}

// Sets has_recorded and the recorded_* counts (or drops partial outcomes).
void CountRecorded(LabTrace* trace) {
  trace->has_recorded =
      !trace->batches.empty() && std::all_of(trace->batches.begin(), trace->batches.end(),
                                             [](const LabBatch& b) { return b.recorded.size() == b.keys.size(); });
  for (LabBatch& b : trace->batches) {
    if (!trace->has_recorded) {
      b.recorded.clear();
      continue;
    }
    const auto hits =
        static_cast<uint64_t>(std::count_if(b.recorded.begin(), b.recorded.end(), [](uint8_t o) { return o != 0; }));
    trace->recorded_lookups += b.keys.size();
    trace->recorded_hits += hits;
    if (!b.prefill) {
      trace->recorded_lookups_decode += b.keys.size();
      trace->recorded_hits_decode += hits;
    }
  }
}

// The pinned set's bytes, or an error when a key is outside the trace's shape or repeated.
Result<uint64_t> PinnedBytes(const LabTrace& trace, const std::vector<ExpertKey>& pinned) {
  std::vector<ExpertKey> sorted = pinned;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    return Status::InvalidArgument("pinned: the hot set repeats a key");
  }
  uint64_t bytes = 0;
  for (ExpertKey key : pinned) {
    if (LayerIndexOf(key) >= trace.moe_layers || ExpertOf(key) >= trace.experts) {
      return Status::InvalidArgument("pinned: key (layer index " + std::to_string(LayerIndexOf(key)) + ", expert " +
                                     std::to_string(ExpertOf(key)) + ") is outside the trace's " +
                                     std::to_string(trace.moe_layers) + " MoE layers x " +
                                     std::to_string(trace.experts) + " experts");
    }
    bytes += trace.layer_expert_bytes[LayerIndexOf(key)];
  }
  return bytes;
}

// One run of the lab over a trace. Allocation-free per batch once warm
// (beyond the cache's own growth to the trace's key count).
class Simulation {
 public:
  Simulation(const LabTrace& trace, const LabRun& run, std::unique_ptr<engine::CachePolicy> policy,
             std::unique_ptr<NextBatchPredictor> predictor)
      : trace_(trace),
        cache_(std::move(policy), engine::CacheMode::kEvictAfterBatch),
        predictor_(std::move(predictor)),
        width_(run.prefetch.width),
        next_mark_(trace.experts, 0) {
    result_.policy = run.policy;
    result_.budget_bytes = run.budget_bytes;
    result_.predictor = run.prefetch.predictor;
    result_.layer_lookups.assign(trace.moe_layers, 0);
    result_.layer_hits.assign(trace.moe_layers, 0);
  }

  // Makes `keys` resident before the first batch: inserts outside any batch
  // (neither lookups nor prefetches), so batch numbers stay the trace's.
  void Preload(const std::vector<ExpertKey>& keys) {
    for (ExpertKey key : keys) {
      cache_.Insert(key, Bytes(key), &evicted_);
      result_.preload_bytes += Bytes(key);
    }
  }

  LabResult Run() && {
    for (size_t b = 0; b < trace_.batches.size(); ++b) {
      cache_.BeginBatch();
      if (predictor_ != nullptr && b > 0) PrefetchFor(b);
      LookUp(trace_.batches[b]);
      cache_.EndBatch(&evicted_);
      evicted_.clear();
      if (predictor_ != nullptr && b > 0) predictor_->Observe(trace_.batches[b - 1], trace_.batches[b]);
    }
    const engine::CacheCounters& c = cache_.counters();
    result_.prefetch_read_bytes = c.prefetched_bytes;
    result_.prefetch_wasted_bytes = c.prefetch_wasted_bytes;
    result_.read_bytes = result_.demand_read_bytes + result_.prefetch_read_bytes + result_.preload_bytes;
    return std::move(result_);
  }

 private:
  uint64_t Bytes(ExpertKey key) const { return trace_.layer_expert_bytes[LayerIndexOf(key)]; }

  // Batch b's prefetch from batch b - 1, and the proposal's accuracy against b's keys.
  void PrefetchFor(size_t b) {
    const LabBatch& next = trace_.batches[b];
    const uint32_t width = width_ != 0 ? width_ : trace_.top_k * next.tokens;
    predictor_->Predict(trace_.batches[b - 1], next, width, &proposed_);
    for (ExpertKey key : next.keys) next_mark_[ExpertOf(key)] = b;
    result_.predicted += proposed_.size();
    result_.next_lookups += next.keys.size();
    for (ExpertKey key : proposed_) {
      result_.predicted_used += next_mark_[ExpertOf(key)] == b;
      cache_.Prefetch(key, Bytes(key), &evicted_);
    }
    evicted_.clear();
  }

  // Every key's lookup, then the misses' inserts.
  void LookUp(const LabBatch& batch) {
    misses_.clear();
    for (ExpertKey key : batch.keys) {
      const uint64_t prefetch_hits_before = cache_.counters().prefetch_hits;
      const bool hit = cache_.Lookup(key);
      const bool prefetch_hit = cache_.counters().prefetch_hits != prefetch_hits_before;
      ++result_.lookups;
      result_.hits += hit;
      result_.prefetch_hits += prefetch_hit;
      ++result_.layer_lookups[LayerIndexOf(key)];
      result_.layer_hits[LayerIndexOf(key)] += hit;
      if (!batch.prefill) {
        ++result_.lookups_decode;
        result_.hits_decode += hit;
        result_.prefetch_hits_decode += prefetch_hit;
      }
      if (!hit) misses_.push_back(key);
    }
    for (ExpertKey key : misses_) {
      cache_.Insert(key, Bytes(key), &evicted_);
      result_.demand_read_bytes += Bytes(key);
    }
  }

  const LabTrace& trace_;
  engine::ExpertCache cache_;
  std::unique_ptr<NextBatchPredictor> predictor_;
  uint32_t width_;
  LabResult result_;
  std::vector<ExpertKey> evicted_, misses_, proposed_;
  std::vector<uint64_t> next_mark_;  // per expert of the predicted batch's layer: the last batch number naming it
};

// SimulateCache with the coact profile already loaded (null: none).
Result<LabResult> Simulate(const LabTrace& trace, const LabRun& run,
                           const std::shared_ptr<const engine::NextUseIndex>& next_use, const LabTrace* profile) {
  if (run.budget_bytes == 0) return Status::InvalidArgument("budget_bytes: a budget of 0 bytes");
  const bool pinned = run.policy == "pinned";
  engine::CachePolicyOptions options{run.budget_bytes, trace.moe_layers, run.seed, {}, next_use};
  if (pinned) {
    COLIBRI_ASSIGN_OR_RETURN(const uint64_t pinned_bytes, PinnedBytes(trace, run.pinned));
    if (pinned_bytes > run.budget_bytes) {
      return Status::InvalidArgument("pinned: the hot set (" + std::to_string(pinned_bytes) +
                                     " bytes) is larger than the budget (" + std::to_string(run.budget_bytes) +
                                     " bytes)");
    }
    options.pinned = run.pinned;
  }
  COLIBRI_ASSIGN_OR_RETURN(auto policy, engine::MakeCachePolicy(run.policy, options));
  COLIBRI_ASSIGN_OR_RETURN(auto predictor, MakeNextBatchPredictor(run.prefetch, trace, profile));
  Simulation simulation(trace, run, std::move(policy), std::move(predictor));
  if (pinned) simulation.Preload(run.pinned);
  return std::move(simulation).Run();
}

// Whether `prefetch` trains on a profiling trace.
bool HasProfile(const PrefetchOptions& prefetch) {
  return prefetch.predictor == "coact" && !prefetch.profile_trace.empty();
}

// The sweep's runs in its nesting order: policy, prefetcher, budget ("belady" without prefetch only).
std::vector<LabRun> SweepRuns(const SweepOptions& options) {
  std::vector<LabRun> runs;
  for (const std::string& policy : options.policies) {
    const std::vector<PrefetchOptions> none{PrefetchOptions{}};
    for (const PrefetchOptions& prefetch : policy == "belady" ? none : options.prefetchers) {
      for (uint64_t budget : options.budgets_bytes) {
        runs.push_back(LabRun{policy, budget, options.seed, options.pinned, prefetch});
      }
    }
  }
  return runs;
}

// Runs `count` jobs on `threads` threads (the caller's among them); job i
// writes only slot i. After a failure, unclaimed jobs are skipped: every job
// before the failed one was claimed, so the first error is deterministic.
template <typename Job>
void RunJobs(size_t count, uint32_t threads, const Job& job) {
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  const auto worker = [&] {
    while (!failed.load()) {
      const size_t i = next.fetch_add(1);
      if (i >= count) break;
      if (!job(i)) failed.store(true);
    }
  };
  std::vector<std::thread> pool;
  for (uint32_t t = 1; t < std::min<size_t>(std::max(threads, 1u), count); ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

}  // namespace

double LabResult::hit_pct_decode() const { return 100.0 * Ratio(hits_decode, lookups_decode); }
double LabResult::hit_pct_cum() const { return 100.0 * Ratio(hits, lookups); }
double LabResult::precision() const { return Ratio(predicted_used, predicted); }
double LabResult::recall() const { return Ratio(predicted_used, next_lookups); }
double LabResult::coverage() const { return Ratio(prefetch_hits, prefetch_hits + (lookups - hits)); }

Result<LabTrace> LoadLabTrace(const std::string& path, bool allow_torn) {
  COLIBRI_ASSIGN_OR_RETURN(auto reader, traces::TraceReader::Open(path, traces::ReadOptions{.allow_torn = allow_torn}));
  const traces::ModelShape& shape = reader->header().shape;
  LabTrace trace;
  trace.path = path;
  trace.layer_expert_bytes = shape.expert_bytes;
  trace.moe_layers = static_cast<uint32_t>(shape.num_moe_layers());
  trace.experts = shape.experts_per_layer;
  trace.top_k = shape.top_k;
  trace.token_cycle_bytes = shape.TokenCycleBytes();
  LayerBatchReader batches(reader.get());
  LayerBatch batch;
  std::vector<uint64_t> seen_in(trace.experts, 0);
  for (;;) {
    COLIBRI_ASSIGN_OR_RETURN(const bool more, batches.Next(&batch));
    if (!more) break;
    AppendLabBatch(batch, &seen_in, &trace);
  }
  CountRecorded(&trace);
  trace.records = reader->records_read();
  trace.torn = reader->truncated();
  trace.torn_at_byte = trace.torn ? reader->tail_offset() : 0;
  return trace;
}

Result<LabResult> SimulateCache(const LabTrace& trace, const LabRun& run,
                                const std::shared_ptr<const engine::NextUseIndex>& next_use) {
  if (!HasProfile(run.prefetch)) return Simulate(trace, run, next_use, nullptr);
  COLIBRI_ASSIGN_OR_RETURN(const LabTrace profile, LoadLabTrace(run.prefetch.profile_trace));
  return Simulate(trace, run, next_use, &profile);
}

std::shared_ptr<const engine::NextUseIndex> BuildNextUse(const LabTrace& trace) {
  auto index = std::make_shared<engine::NextUseIndex>();
  for (size_t b = 0; b < trace.batches.size(); ++b) {
    for (ExpertKey key : trace.batches[b].keys) index->Add(key, b);
  }
  return index;
}

std::vector<ExpertKey> PinnedHotSet(const LabTrace& profile, uint64_t pin_bytes) {
  std::vector<uint64_t> lookups(static_cast<size_t>(profile.moe_layers) * profile.experts, 0);
  const auto count = [&](ExpertKey key) -> uint64_t& {
    return lookups[static_cast<size_t>(LayerIndexOf(key)) * profile.experts + ExpertOf(key)];
  };
  std::vector<ExpertKey> ranked;  // every key looked up
  for (const LabBatch& batch : profile.batches) {
    for (ExpertKey key : batch.keys) {
      if (count(key)++ == 0) ranked.push_back(key);
    }
  }
  std::sort(ranked.begin(), ranked.end(),
            [&](ExpertKey a, ExpertKey b) { return count(a) != count(b) ? count(a) > count(b) : a < b; });
  std::vector<ExpertKey> hot;
  uint64_t used_bytes = 0;
  for (ExpertKey key : ranked) {
    const uint64_t bytes = profile.layer_expert_bytes[LayerIndexOf(key)];
    if (used_bytes + bytes > pin_bytes) break;
    used_bytes += bytes;
    hot.push_back(key);
  }
  return hot;
}

Result<std::vector<LabResult>> Sweep(const LabTrace& trace, const SweepOptions& options) {
  if (options.budgets_bytes.empty() || options.policies.empty() || options.prefetchers.empty()) {
    return Status::InvalidArgument("sweep: needs at least one budget, one policy and one prefetcher");
  }
  const std::vector<LabRun> runs = SweepRuns(options);
  std::map<std::string, LabTrace> profiles;  // by path, loaded once
  for (const PrefetchOptions& prefetch : options.prefetchers) {
    if (!HasProfile(prefetch) || profiles.count(prefetch.profile_trace) != 0) continue;
    COLIBRI_ASSIGN_OR_RETURN(LabTrace profile, LoadLabTrace(prefetch.profile_trace));
    profiles.emplace(prefetch.profile_trace, std::move(profile));
  }
  const bool belady = std::find(options.policies.begin(), options.policies.end(), "belady") != options.policies.end();
  const std::shared_ptr<const engine::NextUseIndex> next_use = belady ? BuildNextUse(trace) : nullptr;
  std::vector<LabResult> results(runs.size());
  std::vector<Status> errors(runs.size());
  RunJobs(runs.size(), options.threads, [&](size_t i) {
    const LabTrace* profile = HasProfile(runs[i].prefetch) ? &profiles.at(runs[i].prefetch.profile_trace) : nullptr;
    Result<LabResult> result = NoThrow([&] { return Simulate(trace, runs[i], next_use, profile); });
    if (!result.ok()) {
      errors[i] = result.status();
      return false;
    }
    results[i] = std::move(result).value();
    return true;
  });
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!errors[i].ok()) {
      return errors[i].WithPrefix("sweep: policy '" + runs[i].policy + "', predictor '" + runs[i].prefetch.predictor +
                                  "', budget " + std::to_string(runs[i].budget_bytes) + " bytes");
    }
  }
  return results;
}

Result<std::vector<ExpertKey>> LearnHotSet(bool policy_pinned, const std::string& pin_from, uint64_t pin_bytes,
                                           uint32_t moe_layers, uint32_t experts) {
  if (policy_pinned != (!pin_from.empty() && pin_bytes > 0)) {
    return Status::InvalidArgument("policy 'pinned' and --pin-from TRACE --pin-bytes B go together");
  }
  if (!policy_pinned) return std::vector<ExpertKey>();
  COLIBRI_ASSIGN_OR_RETURN(const LabTrace profile, LoadLabTrace(pin_from));
  if (profile.moe_layers != moe_layers || profile.experts != experts) {
    return Status::InvalidArgument("--pin-from " + pin_from + " has " + std::to_string(profile.moe_layers) +
                                   " MoE layers x " + std::to_string(profile.experts) + " experts; the trace has " +
                                   std::to_string(moe_layers) + " x " + std::to_string(experts));
  }
  return PinnedHotSet(profile, pin_bytes);
}

}  // namespace colibri::replay
