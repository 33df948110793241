// The routing flags of `colibri run` and `colibri replay --routing recompute`
// (docs/ROUTING.md): --router MODE with its parameters, load-aware
// rebalancing, expert capacity; and the router object of their JSON results.
#pragma once

#include <string>

#include "cli_common.h"
#include "colibri/engine/moe_engine.h"

namespace colibri::cli {

struct RouterFlags {
  std::string mode = "softmax-topk";
  uint32_t n_group = 1, topk_group = 1;     // sigmoid-grouped
  float routed_scaling_factor = 1.0f;
  uint32_t projection_dims = 4;             // hash-projection
  uint64_t table_seed = 1;                  // hash-token
  bool load_aware = false;
  float rebalance_threshold = 0.35f;
  uint32_t load_window_tokens = 4096;
  double load_window_ms = 0;                // > 0: a time window instead of tokens
  double capacity_factor = 0;               // 0: the model's expert capacity
  std::string capacity_overflow = "drop";   // drop, reroute
};

void AddRouterFlags(CLI::App* command, RouterFlags* flags);

// The engine's routing options from the flags; `vocab`
// is hash-token's vocabulary. Errors: an unknown mode or overflow policy.
Status ApplyRouterFlags(const RouterFlags& flags, uint32_t vocab, uint64_t seed, engine::RoutingOptions* options);

// {mode, load_aware, tokens_routed, redirected_token_fraction, slots_redirected, capacity_dropped_slots, capacity_rerouted_slots}.
Json RouterJson(const engine::RoutingOptions& options, const engine::RouterCounters& counters);
// The flags as configuration (for the run store).
Json RouterConfigJson(const RouterFlags& flags);

}  // namespace colibri::cli
