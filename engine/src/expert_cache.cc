#include "colibri/engine/expert_cache.h"

namespace colibri::engine {

ExpertCache::ExpertCache(std::unique_ptr<CachePolicy> policy, CacheMode mode) : policy_(std::move(policy)), mode_(mode) {}

void ExpertCache::BeginBatch() {
  ++batch_;
  policy_->OnBatchBegin(batch_ - 1);  // the policy counts batches from 0
}

bool ExpertCache::Touched(ExpertKey key) const {
  const Entry* e = entries_.Find(key);
  return e != nullptr && e->touched_in == batch_;
}

bool ExpertCache::Lookup(ExpertKey key) {
  Entry& e = entries_[key];
  e.touched_in = batch_;
  ++counters_.lookups;
  if (!e.resident) {
    ++counters_.misses;
    return false;
  }
  ++counters_.hits;
  if (e.prefetched_unused) {
    e.prefetched_unused = false;
    ++counters_.prefetch_hits;
  }
  policy_->OnAccess(key);
  return true;
}

void ExpertCache::EvictAll(const std::vector<ExpertKey>& victims, std::vector<ExpertKey>* evicted) {
  for (ExpertKey victim : victims) {
    Erase(victim);
    ++counters_.evictions;
    evicted->push_back(victim);
  }
}

bool ExpertCache::Insert(ExpertKey key, uint64_t bytes, std::vector<ExpertKey>* evicted) {
  if (mode_ == CacheMode::kHardBudget) {
    scratch_.clear();
    const TouchedFn touched = [this](ExpertKey k) { return Touched(k); };
    if (!policy_->MakeRoom(key, bytes, touched, &scratch_)) return false;
    EvictAll(scratch_, evicted);
  }
  Entry& e = entries_[key];
  if (e.resident) resident_bytes_ -= e.bytes;  // re-inserted: the new size replaces the old
  resident_entries_ += !e.resident;
  e.bytes = bytes;
  e.resident = true;
  resident_bytes_ += bytes;
  counters_.inserted_bytes += bytes;
  policy_->OnInsert(key, bytes);
  return true;
}

bool ExpertCache::Prefetch(ExpertKey key, uint64_t bytes, std::vector<ExpertKey>* evicted) {
  if (Contains(key) || !Insert(key, bytes, evicted)) return false;
  counters_.inserted_bytes -= bytes;  // Insert counts a miss's bytes; a prefetch is no miss
  entries_.Find(key)->prefetched_unused = true;
  ++counters_.prefetches;
  counters_.prefetched_bytes += bytes;
  return true;
}

void ExpertCache::Protect(ExpertKey key) {
  Entry* e = entries_.Find(key);
  if (e != nullptr && e->resident) e->touched_in = batch_;
}

void ExpertCache::EndBatch(std::vector<ExpertKey>* evicted) {
  if (mode_ != CacheMode::kEvictAfterBatch) return;
  scratch_.clear();
  policy_->Shrink([this](ExpertKey k) { return Touched(k); }, &scratch_);
  EvictAll(scratch_, evicted);
}

void ExpertCache::Erase(ExpertKey key) {
  Entry* e = entries_.Find(key);
  if (e == nullptr || !e->resident) return;
  if (e->prefetched_unused) counters_.prefetch_wasted_bytes += e->bytes;
  resident_bytes_ -= e->bytes;
  --resident_entries_;
  e->prefetched_unused = false;
  e->resident = false;
  e->bytes = 0;
  policy_->OnErase(key);
}

}  // namespace colibri::engine
