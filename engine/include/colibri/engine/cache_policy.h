// CachePolicy: the eviction order of an ExpertCache, and its budget.
//
// A policy is told about every insert, access and erase, and chooses victims
// when an entry must fit (MakeRoom) or when a batch ends over budget
// (Shrink). It never chooses an entry for which `touched(key)` is true.
// Policies are deterministic: no randomness except a seeded stream, no
// dependence on hash-container iteration order.
// Built-ins (MakeCachePolicy): "lru" (global least-recently-used) and
// "layer" (the budget split equally between MoE layers, LRU inside each).
// Thread-safety: not thread-safe; owned by one ExpertCache.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "colibri/status.h"

namespace colibri::engine {

// (MoE layer index, expert id) packed in 64 bits.
using ExpertKey = uint64_t;
inline ExpertKey MakeExpertKey(uint32_t layer_index, uint32_t expert) {
  return (static_cast<uint64_t>(layer_index) << 32) | expert;
}
inline uint32_t LayerIndexOf(ExpertKey key) { return static_cast<uint32_t>(key >> 32); }
inline uint32_t ExpertOf(ExpertKey key) { return static_cast<uint32_t>(key); }

using TouchedFn = std::function<bool(ExpertKey)>;

class CachePolicy {
 public:
  virtual ~CachePolicy() = default;
  virtual const char* name() const = 0;
  virtual uint64_t budget_bytes() const = 0;

  virtual void OnInsert(ExpertKey key, uint64_t bytes) = 0;
  virtual void OnAccess(ExpertKey key) = 0;
  virtual void OnErase(ExpertKey key) = 0;

  // Appends the victims that make room for `key` (`bytes`) within its budget
  // and returns true; returns false, appending nothing, when untouched
  // entries cannot free enough. The caller erases the victims (OnErase).
  virtual bool MakeRoom(ExpertKey key, uint64_t bytes, const TouchedFn& touched, std::vector<ExpertKey>* victims) = 0;
  // Appends the untouched victims, in eviction order, that bring every
  // budget back within its limit (as far as untouched entries allow).
  virtual void Shrink(const TouchedFn& touched, std::vector<ExpertKey>* victims) = 0;
};

struct CachePolicyOptions {
  uint64_t budget_bytes = 0;
  uint32_t moe_layers = 1;  // for partitioned policies
};

// "lru" or "layer"; an unknown name is an error listing the known ones.
Result<std::unique_ptr<CachePolicy>> MakeCachePolicy(const std::string& name, const CachePolicyOptions& options);
// The names MakeCachePolicy accepts.
std::vector<std::string> CachePolicyNames();

}  // namespace colibri::engine
