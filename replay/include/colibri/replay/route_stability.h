// Routing stability: how often a routing mode's decision changes when its
// input is perturbed by a tiny amount, how many decisions sit on a near-tie,
// and how evenly the mode spreads load over the experts (docs/ROUTING.md).
//
// For each requested mode (engine::Router, router_modes.h) and each noise,
// every (token, layer) is routed twice with the same config: once on the
// input as given (the baseline) and once on the perturbed input. A decision
// is the token's top-k at one layer. Reported per (mode, noise):
//  - changed_set_fraction: decisions whose top-k SET differs from the baseline;
//  - changed_ranked_fraction: decisions whose top-k in rank order differs
//    (a superset of the above: a reordered but equal set counts here only);
//  - near_ties: baseline decisions with SelectionMargins < tau (score modes
//    only; hash modes have no margin);
//  - load: per layer, ComputeLoadDeviation (traces/stats.h) over the
//    baseline's slots, then the mean over the layers that routed a token;
//  - redirected_fraction (load-aware only): baseline decisions of which
//    load-aware routing moved at least one slot.
// The baseline numbers (near_ties, load, redirected) do not depend on the noise.
//
// Inputs: softmax-topk and sigmoid-grouped read router logits, hash-projection
// the fp32 hidden state, hash-token the token id. A mode whose input is
// missing is reported as skipped with the reason; if every requested mode is
// skipped, the measurement is an InvalidArgument error carrying the reasons.
//
// Noise (the baseline is never perturbed):
//  - fp16 / bf16: each input value rounded to that format (round to nearest
//    even, engine/dtype.h) and widened back to fp32;
//  - gauss:SIGMA: each input value x becomes float(double(x) + SIGMA * z),
//    z a standard normal (Box-Muller, cosine branch, from sim::Rng). SIGMA is
//    absolute, not relative to x. The logits and the hidden states draw from
//    separate streams seeded with sim::DeriveSeed(seed, "route.noise.<spec>.
//    logits" / ".hidden"), consumed in batch order, token order, value order.
// Token ids are never perturbed, so hash-token is stable by construction.
//
// Router configs, per layer index l: sigmoid-grouped: groups (0: 8 when it
// divides the expert count, else 1), kept_groups (0: min(4, groups)), the
// routed scaling factor, zero bias. hash-projection: W_r =
// engine::SeededRouterProjection(hidden_size, P, seed + l), the engine's W_r
// for MoE layer l (MoeEngine, colibri run / replay --router hash-projection
// with the same seed). hash-token: table_seed = seed + l, the engine's table
// for MoE layer l (MoeEngine, colibri run / replay --router hash-token
// --hash-table-seed with the same seed). Load-aware routing
// (when enabled) uses a token window; the perturbed routers keep their own
// windows, so a flipped decision can move later ones too.
//
// Synthetic inputs (MeasureSyntheticStability), for each expert count E:
//  - token ids: tokens draws from Zipf(zipf_exponent) over [0, vocab_size)
//    (id r has probability proportional to 1 / (r + 1)^s), by inverse CDF on
//    sim::Rng(DeriveSeed(seed, "route.synthetic.tokens")), shared by all E;
//  - hidden state of a token (shared by every layer and E): its embedding, hidden_size
//    standard normals from sim::Rng(DeriveSeed(seed, "route.synthetic.embedding.<id>")),
//    plus state_noise * z per value from one stream DeriveSeed(seed,
//    "route.synthetic.state-noise"), so repeated tokens get similar states;
//  - gate weights of layer l: hidden_size x E normals / sqrt(hidden_size) from
//    DeriveSeed(seed, "route.synthetic.gate.<E>.<l>"); logits = W^T h in fp32,
//    summed over the hidden dimension in order. All tokens form one batch per layer.
//
// Free functions; thread-safe (they share no state). Deterministic: the same
// inputs and options give the same report, bit for bit, on one build. Errors
// are Status values: bad options, router errors (router_modes.h), the trace
// reader's errors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "colibri/engine/router_modes.h"
#include "colibri/status.h"

namespace colibri::replay {

struct RouteNoise {
  enum class Kind : uint8_t { kFp16, kBf16, kGauss };
  Kind kind = Kind::kBf16;
  double sigma = 0;  // kGauss: the standard deviation, absolute
  std::string spec;  // as given: "fp16", "bf16", "gauss:1e-6"
};

// "fp16", "bf16" or "gauss:SIGMA" (SIGMA a finite number >= 0).
Result<RouteNoise> ParseRouteNoise(std::string_view text);

struct StabilityOptions {
  std::vector<engine::RouterMode> modes;
  std::vector<RouteNoise> noises;
  float tau = 1e-4f;                  // near-tie threshold on SelectionMargins
  uint64_t seed = 1;
  uint32_t top_k = 0;                 // 0: the trace's top-k (MeasureTraceStability)
  uint32_t projection_dims = 4;       // hash-projection P
  uint32_t vocab_size = 0;            // hash-token; 0: the largest token id + 1
  uint32_t groups = 0;                // sigmoid-grouped; 0: 8 when it divides experts, else 1
  uint32_t kept_groups = 0;           // sigmoid-grouped; 0: min(4, groups)
  float routed_scaling_factor = 1.0f;
  engine::LoadAwareConfig load_aware;  // enabled: route load-aware; unit must be kTokens
  bool allow_torn = false;            // MeasureTraceStability: measure a torn trace's whole records
};

struct LoadSummary {
  double cv = 0;
  double max_over_mean = 0;
  double gini = 0;
};

struct StabilityRow {
  engine::RouterMode mode = engine::RouterMode::kSoftmaxTopK;
  uint32_t experts = 0;
  std::string noise;                          // the noise spec; empty when skipped
  uint64_t decisions = 0;                     // (token, layer) pairs routed
  double changed_set_fraction = 0;
  double changed_ranked_fraction = 0;
  std::optional<uint64_t> near_ties;          // score modes only
  LoadSummary load;
  std::optional<double> redirected_fraction;  // load-aware only
  std::string skipped;                        // non-empty: not measured, and why
};

struct StabilityReport {
  std::vector<StabilityRow> rows;  // per expert count, per mode (in the options' order), per noise
  uint32_t top_k = 0;              // the top-k routed
  bool truncated = false;          // a trace with a torn tail: its complete records were measured
};

// One layer batch of router inputs; a missing input is an empty vector.
struct RouteBatch {
  uint32_t layer_index = 0;         // < RouteShape::layers
  size_t tokens = 0;
  std::vector<float> logits;        // tokens x experts
  std::vector<float> hidden;        // tokens x hidden_size, fp32
  std::vector<uint32_t> token_ids;  // tokens
};

struct RouteShape {
  uint32_t layers = 0;
  uint32_t experts = 0;
  uint32_t top_k = 0;               // > 0
  uint32_t hidden_size = 0;
};

// Measures in-memory batches, routed in order (a layer's router sees its batches in order).
// A mode is measured when every batch has its input.
Result<StabilityReport> MeasureStability(const RouteShape& shape, const std::vector<RouteBatch>& batches,
                                         const StabilityOptions& options);

// Streams the trace's layer batches (LayerBatchReader) twice: once to find
// which inputs it has and its largest token id, once to measure.
Result<StabilityReport> MeasureTraceStability(const std::string& trace_path, const StabilityOptions& options);

struct SyntheticRouteOptions {
  std::vector<uint32_t> experts = {16, 64, 256};
  uint32_t layers = 4;
  uint32_t tokens = 4096;
  uint32_t hidden_size = 256;
  uint32_t vocab_size = 32000;
  double zipf_exponent = 1.1;
  double state_noise = 0.05;        // standard deviation of the per-occurrence noise on a hidden state
};

// Measures the seeded synthetic layer sets, one per expert count (header
// comment). options.top_k 0 means 4; options.vocab_size is ignored (the
// synthetic vocab_size is used).
Result<StabilityReport> MeasureSyntheticStability(const SyntheticRouteOptions& synthetic,
                                                  const StabilityOptions& options);

}  // namespace colibri::replay
