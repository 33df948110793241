// Deterministic reproduction of routing bugs (docs/REPRO.md): a repro spec
// (JSON, beside its trace) names a trace, a machine, the engine's caches and
// routing, a seed, an injected fault if any, what to expect, and invariants;
// RunRepro replays it closed loop and checks the invariants at every layer
// batch (and the run's figures at the end); MinimizeRepro delta-debugs the
// trace over requests, layers and token positions down to a slice that still
// violates the same invariant.
//
// Spec (every key but "trace", "expect" and "invariants" optional):
//   {"trace": "trace.ctrace",              relative to the spec's folder
//    "machine": "h100-p5800x-gen5", "seed": 1, "hidden": 0,
//    "engine": {"l1_bytes": 0, "l2_bytes": 1073741824, "policy": "lru", "queue_depth": 32},
//    "routing": "recorded" | "recompute",
//    "fault": {"kind": "expert-offset", "layer": 2, "expert": 8, "offset": 1},
//    "expect": "violation" | "pass",
//    "invariants": ["routing_identical_to_recorded", "load_max_over_mean <= 2.0", ...]}
// Faults (recorded routing only; they change the routing between the trace
// and the engine, as a routing bug would):
//   expert-offset  at MoE layer index `layer`, every slot routed to `expert`
//                  goes to (expert + offset) mod experts (off by one or sign);
//   rank-flip      at `layer`, each token's first two slots trade places,
//                  experts with their weights (an ordering / tie-break flip:
//                  the lower-weighted expert ranks first);
//   duplicate-slot at `layer`, a token whose first slot is `expert` gets it in
//                  its second slot too (a re-hash that forgot to skip repeats).
// Invariants, checked per layer batch on the routing the engine executes
// (recorded: the batch after the fault; recompute: the engine's decision):
//   routing_identical_to_recorded   every token's ranked experts equal the trace's
//   distinct_experts_per_token      no expert twice in one token's slots
//   rank_order                      each token's gate weights non-increasing in rank order
//   max_tokens_per_expert <= N      tokens one expert takes in one layer batch
// and at the end of the run, with the JSON keys of `colibri replay`:
//   load_max_over_mean, load_cv (per MoE layer, over the run), queue_full_events,
//   hit_pct_cum, hit_pct_decode, read_bytes, step_latency_ns.<step>.<p50|p90|p99|p999|max>
// with one of <=, <, ==, >=, >.
//
// Ownership: plain values. Thread-safety: one call at a time per spec.
// Errors: a spec that does not parse or names an unknown key, fault or
// invariant (InvalidArgument naming the file and field); the replay's errors.
// A violation is not an error: it is the outcome.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "colibri/replay/replay_run.h"
#include "colibri/sim/profiles.h"
#include "colibri/status.h"

namespace colibri::replay {

struct ReproInvariant {
  enum class Op { kHolds, kLe, kLt, kEq, kGe, kGt };
  std::string key;
  Op op = Op::kHolds;
  double bound = 0;
  std::string text;  // as written in the spec
};

struct ReproFault {
  std::string kind = "none";  // none, expert-offset, rank-flip, duplicate-slot
  uint32_t layer = 0;         // MoE layer index
  uint32_t expert = 0;
  int32_t offset = 1;
};

struct ReproSpec {
  std::string path;           // the spec file
  std::string trace;          // resolved against the spec's folder
  std::string trace_as_written;
  std::string machine = "h100-p5800x-gen5";
  uint64_t seed = 1;
  uint32_t hidden = 0;
  uint64_t l1_bytes = 0, l2_bytes = 1ull << 30;
  std::string policy = "lru";
  uint32_t queue_depth = 32;
  RoutingMode routing = RoutingMode::kRecorded;
  ReproFault fault;
  bool expect_violation = false;
  std::vector<ReproInvariant> invariants;
  bool allow_torn = false;    // not part of the spec file: `repro --allow-torn` replays a torn trace's prefix
};

Result<ReproSpec> LoadReproSpec(const std::string& path);
// The spec in `text`, as if read from `path` (errors name it; the trace resolves against its folder).
Result<ReproSpec> ParseReproSpec(std::string_view text, const std::string& path);

// The spec as JSON text, every default filled in (what `colibri repro` prints
// first, so the same spec reruns it); `trace` as `trace_field` says.
std::string ReproSpecJson(const ReproSpec& spec, const std::string& trace_field);

// The replay configuration a spec derives (machine resolved in `catalog`).
Result<ReplayConfig> ReproReplayConfig(const ReproSpec& spec, const sim::HardwareCatalog& catalog);

struct ReproOutcome {
  bool violated = false;
  std::string invariant;       // the violated invariant's text
  std::string violation;       // its context: request, token, layer, the values
  uint64_t layer_batches = 0;  // batches checked
  std::shared_ptr<const ReplayResult> result;  // when the replay ran to its end (on the heap: it is large)
};

// Replays `spec` (over `trace`, or the spec's own trace when empty).
Result<ReproOutcome> RunRepro(const ReproSpec& spec, const sim::HardwareCatalog& catalog, const std::string& trace = "");

struct MinimizeReport {
  uint64_t records_before = 0, records_after = 0;
  uint64_t replays = 0;
  std::string invariant;
  std::string violation;       // the minimized trace's
};

// Delta debugging (ddmin over requests, then layers, then the token range):
// the smallest slice found that still violates the invariant the full trace
// violates first, written to `output_trace`, with its spec (the same but
// "trace": its file name, "expect": "violation") at `output_spec`. Errors:
// the spec does not violate anything, or the files cannot be written.
Result<MinimizeReport> MinimizeRepro(const ReproSpec& spec, const sim::HardwareCatalog& catalog,
                                     const std::string& output_trace, const std::string& output_spec);

}  // namespace colibri::replay
