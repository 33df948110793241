#include "colibri/engine/expert_cache.h"

namespace colibri::engine {

ExpertCache::ExpertCache(std::unique_ptr<CachePolicy> policy, CacheMode mode) : policy_(std::move(policy)), mode_(mode) {}

void ExpertCache::BeginBatch() { ++batch_; }

bool ExpertCache::Touched(ExpertKey key) const {
  auto it = touched_in_.find(key);
  return it != touched_in_.end() && it->second == batch_;
}

bool ExpertCache::Lookup(ExpertKey key) {
  touched_in_[key] = batch_;
  ++counters_.lookups;
  if (entries_.count(key) == 0) {
    ++counters_.misses;
    return false;
  }
  ++counters_.hits;
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
  entries_[key] = Entry{bytes};
  resident_bytes_ += bytes;
  counters_.inserted_bytes += bytes;
  policy_->OnInsert(key, bytes);
  return true;
}

void ExpertCache::EndBatch(std::vector<ExpertKey>* evicted) {
  if (mode_ != CacheMode::kEvictAfterBatch) return;
  scratch_.clear();
  policy_->Shrink([this](ExpertKey k) { return Touched(k); }, &scratch_);
  EvictAll(scratch_, evicted);
}

void ExpertCache::Erase(ExpertKey key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  resident_bytes_ -= it->second.bytes;
  entries_.erase(it);
  policy_->OnErase(key);
}

}  // namespace colibri::engine
