#include "router_flags.h"

namespace colibri::cli {

void AddRouterFlags(CLI::App* command, RouterFlags* flags) {
  command->add_option("--router", flags->mode, "Routing mode: softmax-topk, sigmoid-grouped, hash-projection, hash-token")
      ->check(CLI::IsMember({"softmax-topk", "sigmoid-grouped", "hash-projection", "hash-token"}))
      ->capture_default_str();
  command->add_option("--n-group", flags->n_group, "sigmoid-grouped: expert groups")->capture_default_str();
  command->add_option("--topk-group", flags->topk_group, "sigmoid-grouped: groups kept")->capture_default_str();
  command->add_option("--routed-scaling-factor", flags->routed_scaling_factor, "sigmoid-grouped: weight scale")
      ->capture_default_str();
  command->add_option("--projection-dims", flags->projection_dims, "hash-projection: columns of the seeded W_r (1-8)")
      ->capture_default_str();
  command->add_option("--hash-table-seed", flags->table_seed, "hash-token: seed of the token -> expert table")
      ->capture_default_str();
  command->add_flag("--load-aware", flags->load_aware, "Redirect tokens of overloaded experts to their next best");
  command->add_option("--rebalance-threshold", flags->rebalance_threshold, "load-aware: over mean x (1 + this)")
      ->capture_default_str();
  command->add_option("--load-window-tokens", flags->load_window_tokens, "load-aware: window in tokens")
      ->capture_default_str();
  command->add_option("--load-window-ms", flags->load_window_ms,
                      "load-aware: window in ms of the run's clock instead (routing then depends on timing)");
  command->add_option("--capacity-factor", flags->capacity_factor,
                      "Expert capacity per batch: ceil(factor x tokens x top_k / experts); 0 = the model's")
      ->capture_default_str();
  command->add_option("--capacity-overflow", flags->capacity_overflow, "Overflow slots: drop or reroute")
      ->check(CLI::IsMember({"drop", "reroute"}))
      ->capture_default_str();
}

Status ApplyRouterFlags(const RouterFlags& f, uint32_t vocab, uint64_t seed, engine::RoutingOptions* options) {
  engine::RouterConfig& r = options->router;
  COLIBRI_ASSIGN_OR_RETURN(r.mode, engine::ParseRouterMode(f.mode));
  r.groups = f.n_group;
  r.kept_groups = f.topk_group;
  r.routed_scaling_factor = f.routed_scaling_factor;
  r.projection_dims = f.projection_dims;
  r.vocab_size = vocab;
  r.table_seed = f.table_seed;
  r.load_aware.enabled = f.load_aware;
  r.load_aware.threshold = f.rebalance_threshold;
  r.load_aware.window_tokens = f.load_window_tokens;
  if (f.load_window_ms < 0) return Status::InvalidArgument("--load-window-ms must be positive");
  if (f.load_window_ms > 0) {
    r.load_aware.unit = engine::LoadWindowUnit::kTime;
    r.load_aware.window_ns = static_cast<engine::TimeNs>(f.load_window_ms * 1e6);
  }
  options->seed = seed;
  options->capacity_factor = f.capacity_factor;
  COLIBRI_ASSIGN_OR_RETURN(options->capacity_overflow, engine::ParseCapacityOverflow(f.capacity_overflow));
  return Status::Ok();
}

Json RouterJson(const engine::RoutingOptions& options, const engine::RouterCounters& c) {
  const double routed = static_cast<double>(c.tokens_routed);
  return Json{{"mode", engine::RouterModeName(options.router.mode)},
              {"load_aware", options.router.load_aware.enabled},
              {"tokens_routed", c.tokens_routed},
              {"redirected_token_fraction", routed > 0 ? static_cast<double>(c.tokens_redirected) / routed : 0.0},
              {"slots_redirected", c.slots_redirected},
              {"capacity_dropped_slots", c.capacity_dropped_slots},
              {"capacity_rerouted_slots", c.capacity_rerouted_slots}};
}

Json RouterConfigJson(const RouterFlags& f) {
  return Json{{"mode", f.mode},
              {"n_group", f.n_group},
              {"topk_group", f.topk_group},
              {"routed_scaling_factor", f.routed_scaling_factor},
              {"projection_dims", f.projection_dims},
              {"hash_table_seed", f.table_seed},
              {"load_aware", f.load_aware},
              {"rebalance_threshold", f.rebalance_threshold},
              {"load_window_tokens", f.load_window_tokens},
              {"load_window_ms", f.load_window_ms},
              {"capacity_factor", f.capacity_factor},
              {"capacity_overflow", f.capacity_overflow}};
}

}  // namespace colibri::cli
