// The engine cache flags shared by `colibri replay` and `colibri run`, each
// with one name, one range and one parser everywhere: the tiers (--l1-bytes,
// --l2-bytes, --policy, --l1-policy, --queue-depth, --staging-slots),
// prefetch (--prefetch, --prefetch-width, --prefetch-decay) and the pinned
// policy's hot set (--pin-from, --pin-bytes), and the cache tier and prefetch
// objects of their JSON results (docs/CACHE.md, "Prefetch in the engine").
#pragma once

#include <string>
#include <vector>

#include "cli_common.h"
#include "colibri/engine/moe_engine.h"

namespace colibri::cli {

// The tiers. Sizes hold canonical bytes after SizeValidator.
struct TierFlags {
  std::string l1_bytes = "0";
  std::string l2_bytes = "0";
  std::string policy = "lru";     // L2's
  std::string l1_policy = "lru";
  uint32_t queue_depth = 32;
  uint32_t staging_slots = 4;
  uint64_t l1() const { return std::stoull(l1_bytes); }
  uint64_t l2() const { return std::stoull(l2_bytes); }
};

// Adds the tier flags to `command` (the budgets' help says what L1 and L2 are for it).
void AddTierFlags(CLI::App* command, TierFlags* flags, const std::string& l1_help, const std::string& l2_help);
// --queue-depth (1..engine::kMaxStorageQueueDepth) and --staging-slots (1..4096) alone.
void AddQueueFlags(CLI::App* command, uint32_t* queue_depth, uint32_t* staging_slots);

struct PrefetchFlags {
  std::string predictor = "none";
  uint32_t width = 0;
  double decay = 0.99;
};

// Adds the flags to `command`, --prefetch limited to `predictors`.
void AddPrefetchFlags(CLI::App* command, PrefetchFlags* flags, const std::vector<std::string>& predictors);
engine::PrefetchConfig ToPrefetchConfig(const PrefetchFlags& flags);

struct PinFlags {
  std::string from;         // a profiling trace
  std::string bytes = "0";  // the hot set's size (canonical bytes after SizeValidator)
};

// Adds --pin-from and --pin-bytes to `command`.
void AddPinFlags(CLI::App* command, PinFlags* flags);

// One engine cache tier (l1, l2): reports::TierJson of its lookups and hits.
Json TierJson(const engine::TierCounters& c);

// {predictor, issued, issued_bytes, hits, wasted_bytes, waits, failed,
// precision, recall, coverage}: precision = used predictions / predictions,
// recall = used predictions / the next batches' lookups, coverage = prefetch
// hits / (prefetch hits + L2 misses). Null without prefetch.
Json PrefetchJson(const std::string& predictor, const engine::PrefetchCounters& p, uint64_t l2_misses);

}  // namespace colibri::cli
