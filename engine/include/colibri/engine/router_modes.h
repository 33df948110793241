// Router: one MoE layer's routing in one of four modes, optionally load-aware,
// with expert capacity that drops or reroutes overflow slots.
//
// Every mode defines, per token, a RANKING: an order over all experts. The
// token's top-k are the first k experts of its ranking, written in rank order;
// load-aware routing and capacity rerouting walk further down the same ranking.
//
// softmax-topk (RouterConfig::renormalize as in router.h). Without load-aware
//   routing, Route calls RouteTopK (router.h) per token. Otherwise it computes
//   the same fp32 numbers itself: m = max logit, e_i = ExpF32(logit_i - m),
//   s = sum of e_i in expert order, p_i = e_i / s. Ranking: p descending, ties
//   to the lower expert id. Logits may be -inf (p = 0); NaN, +inf or all -inf
//   is InvalidArgument.
//
// sigmoid-grouped (DeepSeek-V3; all arithmetic fp32, in the order written):
//   s_i = 1 / (1 + ExpF32(-logit_i))            the expert's score
//   b_i = s_i + expert_bias_i                     its selection score
//   experts split into `groups` groups of G = experts / groups consecutive ids;
//   group score = b_first + b_second, the group's two largest b (G = 1: b_first);
//   the `kept_groups` best groups by group score (ties to the lower group id)
//   are kept. Ranking: experts of kept groups first, then the others; within
//   each part b descending, ties to the lower expert id. Weights of the chosen
//   experts j (rank order): renormalize: w_j = (s_j / S) * routed_scaling_factor
//   with S = sum of the chosen s_j in rank order (w_j = 0 if S == 0; DeepSeek-V3
//   norm_topk_prob = true); otherwise w_j = s_j * routed_scaling_factor.
//   Any non-finite logit is InvalidArgument.
//
// hash-projection (the token's hidden state h, hidden_size floats; W =
//   RouterConfig::projection, hidden_size x P row-major, W[j][i] =
//   projection[j * P + i], P = projection_dims in [1, 8]):
//   r_i = (((0 + h_0 W[0][i]) + h_1 W[1][i]) + ...) + h_{d-1} W[d-1][i]  (fp32,
//         each product rounded, then added: the engine builds with
//         -ffp-contract=off, so no fused multiply-add)
//   q_i = r_i * 1e6f (fp32); c_i = INT32_MAX if q_i >= 2^31, INT32_MIN if
//         q_i <= -2^31, else q_i truncated toward zero (a C++ cast of an
//         out-of-range float is undefined, hence the clamp; r_i = +-inf clamps)
//   hash_i = uint32_t(c_i) & 0xFFFFF  (two's complement bits)
//   key = hash_0 ^ hash_1 ^ ... ^ hash_{P-1};  first = key % experts.
//   A non-finite h, or a NaN r_i (inf - inf), is InvalidArgument.
//
// hash-token (Hash Layers, Roller et al. 2021; the token id t < vocab_size):
//   key = t;  first = table[t]. The table is built once at Create from
//   table_seed: perm = [0, 1, ..., vocab_size - 1]; for i = vocab_size - 1
//   down to 1: j = SplitMix64Next(state) % (i + 1), swap(perm[i], perm[j]);
//   then table[perm[i]] = i % experts (a balanced assignment: every expert
//   holds floor or ceil of vocab_size / experts token ids). state starts at
//   table_seed; SplitMix64Next is splitmix64's generator step
//   (colibri/engine/mix.h: the output for state, then state += the gamma).
//
// The ranking of both hash modes, position a = 0, 1, ..., experts - 1:
//   candidate_0 = first; candidate_a = Rehash(key, a) % experts for a >= 1,
//   Rehash(key, a) = SplitMix64Next of a state set to (uint64(key) << 32) | a;
//   the expert at position a is the first of candidate_a, candidate_a + 1, ...
//   (mod experts) not already at a position below a. So the ranking is a
//   permutation of the experts, and top-k never repeats an id. Weights: 1/k
//   each (fp32 1.0f / k); renormalize is ignored.
//
// Load-aware routing (RouterConfig::load_aware.enabled; any mode): the router
// keeps a sliding window of its own past choices (after redirection, before
// capacity): per expert, count_e = slots given to e by the window's tokens;
// total = sum of count_e. Expert e is OVER the limit when
//   double(count_e) * experts > double(total) * (1 + double(threshold)),
// i.e. count_e > mean * (1 + threshold), mean = total / experts. Before each
// token, if any of its top-k is over the limit, its experts become the first
// k of its ranking that are not over the limit (if fewer than k are, the best
// over-limit experts fill the remaining slots), written in rank order; weights
// are the mode's weights of that set (softmax: p_j, divided by their sum if
// renormalize, 0 if that sum is 0). Each moved-out expert counts one redirected
// slot. Tokens are routed and added to the window one at a time, in order.
// Window in tokens: the last window_tokens tokens routed. Window in time: the
// tokens of the batches whose RouterInput::time_ns is within window_ns before
// the current batch's (now - time < window_ns); every token of a batch has the
// batch's time. Then routing depends on the timestamps (and so on timing when
// they come from a clock); a token window does not.
//
// Capacity (ApplyCapacity, for one layer batch's routing as Route wrote it):
// at most `capacity` slots per expert (0 = unlimited). kDrop is
// ApplyExpertCapacity (router.h). kReroute visits slots in token order, then
// slot order; a slot whose expert is full moves to the first expert of the
// token's ranking (without load-aware redirection) that has room and is not in
// another of the token's slots, keeping its weight; if none has room the slot
// is dropped (kDroppedExpert, weight 0; kept weights not renormalised).
//
// Margins (SelectionMargins, score modes): softmax: p at rank k minus p at
// rank k+1 (ranks 1-based; +inf if k == experts). sigmoid-grouped: the
// smaller of b at rank k minus b at rank k+1 when rank k+1 is in a kept group
// (+inf otherwise), and the group score at group rank kept_groups minus the
// one at kept_groups + 1 (+inf if kept_groups == groups). A margin of 0 is a
// tie broken by id; a small margin is a decision a tiny perturbation flips.
//
// Ownership: a Router owns a copy of its config and its scratch buffers; it
// reads the caller's inputs only during a call. One Router routes one MoE layer
// (bias, projection and load window are per layer). Thread-safety: none; use
// one Router per thread. Determinism: the same config and the same sequence of
// inputs give the same outputs and counters, bit for bit, on every machine.
// Errors are InvalidArgument values (never an abort); a call that returns an
// error changes neither the router's state nor its outputs. Allocation: Create
// allocates; Route and ApplyCapacity allocate only while a batch is larger
// than any before, or a time window holds more tokens than before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "colibri/engine/clock.h"
#include "colibri/engine/router.h"
#include "colibri/status.h"

namespace colibri::engine {

enum class RouterMode : uint8_t { kSoftmaxTopK, kSigmoidGrouped, kHashProjection, kHashToken };

// Names: "softmax-topk", "sigmoid-grouped", "hash-projection", "hash-token".
Result<RouterMode> ParseRouterMode(std::string_view name);
std::string_view RouterModeName(RouterMode mode);

// A seeded W_r for hash-projection: hidden_size x dims row-major, each value
// u / sqrt(hidden_size) with u uniform in [-1, 1) from SplitMix64 of `seed`
// (u = (z >> 40) / 2^23 - 1, in order). The same seed gives the same matrix.
std::vector<float> SeededRouterProjection(uint32_t hidden_size, uint32_t dims, uint64_t seed);

enum class LoadWindowUnit : uint8_t { kTokens, kTime };

struct LoadAwareConfig {
  bool enabled = false;
  LoadWindowUnit unit = LoadWindowUnit::kTokens;
  uint32_t window_tokens = 4096;          // kTokens: in [1, 2^20], x top_k <= 2^26
  TimeNs window_ns = 5'000'000'000;       // kTime: > 0 (load_window_ms 5000)
  float threshold = 0.35f;                // finite, >= 0
};

// Fields a mode does not use are ignored.
struct RouterConfig {
  RouterMode mode = RouterMode::kSoftmaxTopK;
  bool renormalize = true;                // softmax-topk, sigmoid-grouped
  // sigmoid-grouped (DeepSeek-V3 n_group, topk_group, routed_scaling_factor,
  // e_score_correction_bias):
  uint32_t groups = 1;                    // divides experts
  uint32_t kept_groups = 1;               // in [1, groups]; top_k <= kept_groups * experts / groups
  float routed_scaling_factor = 1.0f;     // finite
  std::vector<float> expert_bias;         // experts finite values, or empty (all 0)
  // hash-projection:
  uint32_t projection_dims = 0;           // P in [1, 8]
  std::vector<float> projection;          // hidden_size x P finite values, row-major
  // hash-token:
  uint32_t vocab_size = 0;                // in [1, 2^24]
  uint64_t table_seed = 0;
  LoadAwareConfig load_aware;
};

// One layer batch. Only the pointer the mode reads is required.
struct RouterInput {
  size_t tokens = 0;
  const float* logits = nullptr;          // tokens x experts: softmax-topk, sigmoid-grouped
  const float* hidden = nullptr;          // tokens x hidden_size: hash-projection
  const uint32_t* token_ids = nullptr;    // tokens: hash-token
  TimeNs time_ns = 0;                     // load-aware time window: >= 0, non-decreasing across calls
};

struct RouterCounters {
  uint64_t tokens_routed = 0;
  uint64_t tokens_redirected = 0;         // load-aware: tokens with at least one slot moved
  uint64_t slots_redirected = 0;
  uint64_t capacity_dropped_slots = 0;
  uint64_t capacity_rerouted_slots = 0;
};

enum class CapacityOverflow : uint8_t { kDrop, kReroute };

// Names: "drop", "reroute".
Result<CapacityOverflow> ParseCapacityOverflow(std::string_view name);

struct CapacityCounts {
  CapacityStats dropped;                  // as ApplyExpertCapacity counts them
  uint64_t rerouted_slots = 0;            // kReroute: slots moved to another expert
};

class Router {
 public:
  // hidden_size: the length of a token's hidden state (hash-projection reads
  // it; other modes ignore it). Errors: experts not in [1, 2^20], top_k not in
  // [1, experts], or a field of `config.mode` (or of load_aware when enabled)
  // out of its range.
  static Result<std::unique_ptr<Router>> Create(RouterConfig config, uint32_t experts, uint32_t top_k,
                                                uint32_t hidden_size);

  // ids and weights receive in.tokens x top_k entries, each token's in rank
  // order. Errors: null pointers the mode needs, the invalid inputs above, a
  // token id >= vocab_size, a time window's time_ns < 0 or below the last one.
  Status Route(const RouterInput& in, uint32_t* ids, float* weights);

  // ids and weights: in.tokens x top_k as Route wrote them, updated in place.
  // kReroute reads `in` (the batch Route was given) to rank each token again.
  // Errors: as ApplyExpertCapacity, and for kReroute as Route.
  Result<CapacityCounts> ApplyCapacity(const RouterInput& in, uint32_t capacity, CapacityOverflow overflow,
                                       uint32_t* ids, float* weights);

  // margins receives in.tokens values (see the header comment). Does not touch
  // the load window or the counters. Errors: a hash mode, or as Route.
  Status SelectionMargins(const RouterInput& in, float* margins);

  const RouterCounters& counters() const { return counters_; }
  const RouterConfig& config() const { return config_; }
  uint32_t experts() const { return experts_; }
  uint32_t top_k() const { return top_k_; }
  // hash-token: table[token id] = its first expert; empty for other modes.
  std::span<const uint32_t> token_table() const { return token_table_; }

  ~Router();

 private:
  class LoadWindow;

  Router(RouterConfig config, uint32_t experts, uint32_t top_k, uint32_t hidden_size);
  bool IsHashMode() const;
  Status ValidateBatch(const RouterInput& in);
  Status ValidateToken(const RouterInput& in, size_t token);
  Status RouteToken(const RouterInput& in, size_t token, uint32_t* ids, float* weights);
  // The token's ranking, built lazily: PrepareRanking starts it, RankedAt
  // extends it up to `position` (< experts) and returns that expert.
  void PrepareRanking(const RouterInput& in, size_t token);
  void PrepareSoftmax(const float* logits);
  void PrepareSigmoidGrouped(const float* logits);
  uint32_t RankedAt(uint32_t position);
  uint32_t NextBestScore() const;
  uint32_t NextHashCandidate() const;
  bool RanksBefore(uint32_t a, uint32_t b) const;
  uint32_t RedirectFromOverloaded(uint32_t* ids);
  void ModeWeights(const uint32_t* ids, float* weights) const;
  float Margin();
  uint32_t ExpertWithRoom(const uint32_t* token_ids, uint32_t capacity);
  CapacityCounts RerouteCapacity(const RouterInput& in, uint32_t capacity, uint32_t* ids, float* weights);

  RouterConfig config_;  // expert_bias filled with zeros when given empty (sigmoid-grouped)
  uint32_t experts_;
  uint32_t top_k_;
  uint32_t hidden_size_;
  RouterCounters counters_;
  std::unique_ptr<LoadWindow> window_;        // null unless load-aware
  std::vector<uint32_t> token_table_;         // hash-token
  std::vector<uint32_t> token_keys_;          // per batch token: its hash key (hash modes)
  // The current token's ranking (per-token scratch, sized at Create).
  std::vector<float> scores_;                 // per expert: softmax p or sigmoid s (weights come from these)
  std::vector<float> selection_scores_;       // per expert: softmax p or sigmoid b (ranking comes from these)
  std::vector<uint8_t> outside_kept_groups_;  // per expert: 1 if its group is not kept (sigmoid-grouped)
  std::vector<float> group_scores_;
  std::vector<uint32_t> group_ranking_;       // group ids, best first
  std::vector<uint32_t> ranking_;             // positions [0, ranked_count_) built so far
  std::vector<uint8_t> ranked_;               // per expert: already in ranking_
  std::vector<uint8_t> chosen_;               // per expert: picked by RedirectFromOverloaded
  std::vector<uint32_t> capacity_load_;       // per expert: slots placed, during ApplyCapacity
  uint32_t ranked_count_ = 0;
  uint32_t hash_key_ = 0;
  uint32_t hash_first_ = 0;
};

}  // namespace colibri::engine
