// The engine cache flags shared by `colibri replay` and `colibri run`:
// prefetch (--prefetch, --prefetch-width, --prefetch-decay) and the pinned
// policy's hot set (--pin-from, --pin-bytes), and the cache tier and prefetch
// objects of their JSON results (docs/CACHE.md, "Prefetch in the engine").
#pragma once

#include <string>
#include <vector>

#include "cli_common.h"
#include "colibri/engine/moe_engine.h"

namespace colibri::cli {

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
