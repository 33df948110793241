// "random": each victim is drawn uniformly among the untouched resident
// entries not drawn yet, until the victims free enough (MakeRoom: room for
// the incoming entry within the budget; Shrink: the budget).
//
// Deterministic: the stream is a std::mt19937_64 seeded with
// CachePolicyOptions::seed ^ FNV-1a-64("random") (the policy name), and a
// draw below n is our own unbiased rejection sampling of its 64-bit outputs
// (no std::*_distribution, whose output differs between standard libraries).
// The candidates are the residents in a vector kept in insertion order up to
// swap-removal (an erase moves the last resident into the hole), never a hash
// container's layout. MakeRoom draws nothing when the untouched entries
// cannot free enough. Cost: O(resident entries) per MakeRoom or Shrink.
// Ownership: owned by its ExpertCache. Thread-safety: none.
#include <random>

#include "cache_policy_util.h"
#include "model_random.h"

namespace colibri::engine::policy_detail {
namespace {

// Uniform in [0, n) for n > 0: rejects the outputs below 2^64 mod n.
uint64_t UniformBelow(std::mt19937_64& rng, uint64_t n) {
  const uint64_t threshold = (0 - n) % n;
  for (;;) {
    const uint64_t r = rng();
    if (r >= threshold) return r % n;
  }
}

class RandomPolicy final : public CachePolicy {
 public:
  RandomPolicy(uint64_t budget_bytes, uint64_t seed)
      : budget_bytes_(budget_bytes), rng_(seed ^ Fnv1a64("random")) {}
  const char* name() const override { return "random"; }
  uint64_t budget_bytes() const override { return budget_bytes_; }

  void OnInsert(ExpertKey key, uint64_t bytes) override {
    OnErase(key);
    index_[key] = static_cast<uint32_t>(residents_.size());
    residents_.push_back(KeyBytes{key, bytes});
    used_bytes_ += bytes;
  }
  void OnAccess(ExpertKey) override {}
  void OnErase(ExpertKey key) override {
    const uint32_t* found = index_.Find(key);
    if (found == nullptr) return;
    const uint32_t slot = *found;
    used_bytes_ -= residents_[slot].bytes;
    index_.Erase(key);
    if (slot + 1 != residents_.size()) {
      residents_[slot] = residents_.back();
      index_[residents_[slot].key] = slot;
    }
    residents_.pop_back();
  }
  bool MakeRoom(ExpertKey, uint64_t bytes, const TouchedFn& touched, std::vector<ExpertKey>* victims) override {
    const uint64_t excess = ExcessBytes(used_bytes_, bytes, budget_bytes_);
    if (excess == 0) return true;
    if (GatherCandidates(touched) < excess) return false;
    Draw(excess, victims);
    return true;
  }
  void Shrink(const TouchedFn& touched, std::vector<ExpertKey>* victims) override {
    const uint64_t excess = ExcessBytes(used_bytes_, 0, budget_bytes_);
    if (excess == 0) return;
    GatherCandidates(touched);
    Draw(excess, victims);
  }

 private:
  // Fills candidates_ with the untouched residents' slots; returns their bytes.
  uint64_t GatherCandidates(const TouchedFn& touched) {
    candidates_.clear();
    uint64_t bytes = 0;
    for (uint32_t slot = 0; slot < residents_.size(); ++slot) {
      if (touched(residents_[slot].key)) continue;
      candidates_.push_back(slot);
      bytes += residents_[slot].bytes;
    }
    return bytes;
  }
  // Draws candidates without replacement until they free `excess` bytes or run out.
  void Draw(uint64_t excess, std::vector<ExpertKey>* victims) {
    for (uint64_t freed = 0; freed < excess && !candidates_.empty();) {
      const uint64_t pick = UniformBelow(rng_, candidates_.size());
      const KeyBytes& victim = residents_[candidates_[pick]];
      victims->push_back(victim.key);
      freed += victim.bytes;
      candidates_[pick] = candidates_.back();
      candidates_.pop_back();
    }
  }

  uint64_t budget_bytes_;
  uint64_t used_bytes_ = 0;
  std::mt19937_64 rng_;
  std::vector<KeyBytes> residents_;  // insertion order up to swap-removal
  KeyMap<uint32_t> index_;           // key -> its slot in residents_
  std::vector<uint32_t> candidates_;  // scratch: untouched slots
};

}  // namespace

std::unique_ptr<CachePolicy> MakeRandomPolicy(uint64_t budget_bytes, uint64_t seed) {
  return std::make_unique<RandomPolicy>(budget_bytes, seed);
}

}  // namespace colibri::engine::policy_detail
