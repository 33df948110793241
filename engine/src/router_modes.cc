#include "colibri/engine/router_modes.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "colibri/engine/fp32_math.h"
#include "colibri/engine/mix.h"

namespace colibri::engine {
namespace {

constexpr uint32_t kMaxExperts = 1u << 20;
constexpr uint32_t kMaxProjectionDims = 8;
constexpr uint32_t kMaxVocabSize = 1u << 24;
constexpr uint32_t kMaxWindowTokens = 1u << 20;
constexpr uint64_t kMaxWindowSlots = 1u << 26;  // window_tokens x top_k: 256 MiB of ids
constexpr size_t kInitialTimeWindowTokens = 1024;
constexpr float kInf = std::numeric_limits<float>::infinity();

constexpr std::array<std::string_view, 4> kModeNames = {"softmax-topk", "sigmoid-grouped", "hash-projection",
                                                        "hash-token"};

uint64_t Rehash(uint32_t key, uint32_t position) {
  uint64_t state = (static_cast<uint64_t>(key) << 32) | position;
  return SplitMix64Next(&state);
}

// (uint32)(clamped int32 of q) & 0xFFFFF; q is not NaN.
uint32_t CoordinateHash(float r) {
  const float q = r * 1e6f;
  int32_t c;
  if (q >= 2147483648.0f) {
    c = std::numeric_limits<int32_t>::max();
  } else if (q <= -2147483648.0f) {
    c = std::numeric_limits<int32_t>::min();
  } else {
    c = static_cast<int32_t>(q);
  }
  return static_cast<uint32_t>(c) & 0xFFFFFu;
}

std::vector<uint32_t> BuildTokenTable(uint32_t vocab_size, uint32_t experts, uint64_t seed) {
  std::vector<uint32_t> perm(vocab_size);
  std::iota(perm.begin(), perm.end(), 0u);
  uint64_t state = seed;
  for (uint32_t i = vocab_size - 1; i >= 1; --i) {
    std::swap(perm[i], perm[SplitMix64Next(&state) % (i + 1)]);
  }
  std::vector<uint32_t> table(vocab_size);
  for (uint32_t i = 0; i < vocab_size; ++i) table[perm[i]] = i % experts;
  return table;
}

// x - y, or 0 when equal (so two equal infinities give 0, not NaN).
float Gap(float x, float y) { return x == y ? 0.0f : x - y; }

bool AllFinite(const std::vector<float>& values) {
  return std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); });
}

Status CheckSigmoidGrouped(const RouterConfig& c, uint32_t experts, uint32_t top_k) {
  if (c.groups == 0 || experts % c.groups != 0) {
    return Status::InvalidArgument("sigmoid-grouped: groups " + std::to_string(c.groups) +
                                   " does not divide experts " + std::to_string(experts));
  }
  if (c.kept_groups == 0 || c.kept_groups > c.groups) {
    return Status::InvalidArgument("sigmoid-grouped: kept_groups " + std::to_string(c.kept_groups) +
                                   " not in [1, groups = " + std::to_string(c.groups) + "]");
  }
  const uint32_t kept_experts = c.kept_groups * (experts / c.groups);
  if (top_k > kept_experts) {
    return Status::InvalidArgument("sigmoid-grouped: top_k " + std::to_string(top_k) + " > " +
                                   std::to_string(kept_experts) + " experts in the kept groups");
  }
  if (!std::isfinite(c.routed_scaling_factor)) {
    return Status::InvalidArgument("sigmoid-grouped: routed_scaling_factor is not finite");
  }
  if (!c.expert_bias.empty() && c.expert_bias.size() != experts) {
    return Status::InvalidArgument("sigmoid-grouped: expert_bias has " + std::to_string(c.expert_bias.size()) +
                                   " values, want experts = " + std::to_string(experts));
  }
  if (!AllFinite(c.expert_bias)) return Status::InvalidArgument("sigmoid-grouped: expert_bias has a non-finite value");
  return Status::Ok();
}

Status CheckHashProjection(const RouterConfig& c, uint32_t hidden_size) {
  if (c.projection_dims == 0 || c.projection_dims > kMaxProjectionDims) {
    return Status::InvalidArgument("hash-projection: projection_dims " + std::to_string(c.projection_dims) +
                                   " not in [1, 8]");
  }
  const uint64_t want = static_cast<uint64_t>(hidden_size) * c.projection_dims;
  if (hidden_size == 0 || c.projection.size() != want) {
    return Status::InvalidArgument("hash-projection: projection has " + std::to_string(c.projection.size()) +
                                   " values, want hidden_size x projection_dims = " + std::to_string(want) +
                                   " (hidden_size >= 1)");
  }
  if (!AllFinite(c.projection)) return Status::InvalidArgument("hash-projection: projection has a non-finite value");
  return Status::Ok();
}

Status CheckLoadAware(const LoadAwareConfig& c, uint32_t top_k) {
  if (!std::isfinite(c.threshold) || c.threshold < 0.0f) {
    return Status::InvalidArgument("load-aware: threshold " + std::to_string(c.threshold) + " not finite and >= 0");
  }
  if (c.unit == LoadWindowUnit::kTokens && (c.window_tokens == 0 || c.window_tokens > kMaxWindowTokens)) {
    return Status::InvalidArgument("load-aware: window_tokens " + std::to_string(c.window_tokens) +
                                   " not in [1, 2^20]");
  }
  if (c.unit == LoadWindowUnit::kTokens && static_cast<uint64_t>(c.window_tokens) * top_k > kMaxWindowSlots) {
    return Status::InvalidArgument("load-aware: window_tokens x top_k = " +
                                   std::to_string(static_cast<uint64_t>(c.window_tokens) * top_k) + " > 2^26");
  }
  if (c.unit == LoadWindowUnit::kTime && c.window_ns <= 0) {
    return Status::InvalidArgument("load-aware: window_ns " + std::to_string(c.window_ns) + " is not > 0");
  }
  return Status::Ok();
}

Status CheckConfig(const RouterConfig& c, uint32_t experts, uint32_t top_k, uint32_t hidden_size) {
  if (experts == 0 || experts > kMaxExperts) {
    return Status::InvalidArgument("experts " + std::to_string(experts) + " not in [1, 2^20]");
  }
  if (top_k == 0 || top_k > experts) {
    return Status::InvalidArgument("top_k " + std::to_string(top_k) + " not in [1, experts = " +
                                   std::to_string(experts) + "]");
  }
  if (c.load_aware.enabled) COLIBRI_RETURN_IF_ERROR(CheckLoadAware(c.load_aware, top_k));
  switch (c.mode) {
    case RouterMode::kSoftmaxTopK:
      return Status::Ok();
    case RouterMode::kSigmoidGrouped:
      return CheckSigmoidGrouped(c, experts, top_k);
    case RouterMode::kHashProjection:
      return CheckHashProjection(c, hidden_size);
    case RouterMode::kHashToken:
      if (c.vocab_size == 0 || c.vocab_size > kMaxVocabSize) {
        return Status::InvalidArgument("hash-token: vocab_size " + std::to_string(c.vocab_size) +
                                       " not in [1, 2^24]");
      }
      return Status::Ok();
  }
  return Status::InvalidArgument("unknown router mode " + std::to_string(static_cast<int>(c.mode)));
}

std::string LogitError(size_t token, uint32_t expert, float logit) {
  return "token " + std::to_string(token) + ": router logit of expert " + std::to_string(expert) + " is " +
         std::to_string(logit);
}

// The rules of RouteTopK (router.h): NaN or +inf, or all -inf, are errors.
Status CheckSoftmaxLogits(const float* logits, uint32_t experts, size_t token) {
  bool any_above_minus_inf = false;
  for (uint32_t e = 0; e < experts; ++e) {
    if (std::isnan(logits[e]) || logits[e] == kInf) return Status::InvalidArgument(LogitError(token, e, logits[e]));
    any_above_minus_inf = any_above_minus_inf || logits[e] != -kInf;
  }
  if (!any_above_minus_inf) return Status::InvalidArgument("token " + std::to_string(token) + ": every router logit is -inf");
  return Status::Ok();
}

Status CheckFiniteLogits(const float* logits, uint32_t experts, size_t token) {
  for (uint32_t e = 0; e < experts; ++e) {
    if (!std::isfinite(logits[e])) return Status::InvalidArgument(LogitError(token, e, logits[e]));
  }
  return Status::Ok();
}

// The hash-projection key of one hidden state (the header's formula).
Result<uint32_t> ProjectionKey(const float* hidden, uint32_t hidden_size, const float* projection, uint32_t dims,
                               size_t token) {
  std::array<float, kMaxProjectionDims> r{};
  for (uint32_t j = 0; j < hidden_size; ++j) {
    if (!std::isfinite(hidden[j])) {
      return Status::InvalidArgument("token " + std::to_string(token) + ": hidden value " + std::to_string(j) +
                                     " is " + std::to_string(hidden[j]));
    }
    for (uint32_t i = 0; i < dims; ++i) r[i] = r[i] + hidden[j] * projection[static_cast<size_t>(j) * dims + i];
  }
  uint32_t key = 0;
  for (uint32_t i = 0; i < dims; ++i) {
    if (std::isnan(r[i])) {
      return Status::InvalidArgument("token " + std::to_string(token) + ": projected coordinate " +
                                     std::to_string(i) + " is NaN (inf - inf)");
    }
    key ^= CoordinateHash(r[i]);
  }
  return key;
}

}  // namespace

std::vector<float> SeededRouterProjection(uint32_t hidden_size, uint32_t dims, uint64_t seed) {
  std::vector<float> projection(static_cast<size_t>(hidden_size) * dims);
  const float scale = 1.0f / std::sqrt(static_cast<float>(std::max<uint32_t>(hidden_size, 1)));
  uint64_t state = seed;
  for (float& w : projection) {
    const float u = static_cast<float>(SplitMix64Next(&state) >> 40) * 0x1.0p-23f - 1.0f;
    w = u * scale;
  }
  return projection;
}

// The last tokens' choices, as a ring of tokens (each top_k expert ids and a
// time), with per-expert counts.
class Router::LoadWindow {
 public:
  LoadWindow(const LoadAwareConfig& config, uint32_t experts, uint32_t top_k)
      : config_(config),
        experts_(experts),
        top_k_(top_k),
        limit_scale_(1.0 + static_cast<double>(config.threshold)),
        counts_(experts, 0) {
    const size_t capacity =
        config.unit == LoadWindowUnit::kTokens ? config.window_tokens : kInitialTimeWindowTokens;
    times_.resize(capacity);
    ids_.resize(capacity * top_k);
  }

  // Time windows: checks `now`, then drops the tokens at least window_ns old.
  Status Advance(TimeNs now) {
    if (config_.unit != LoadWindowUnit::kTime) return Status::Ok();
    if (now < 0 || now < last_time_ns_) {
      return Status::InvalidArgument("load-aware time window: time_ns " + std::to_string(now) +
                                     " is negative or below the previous batch's " + std::to_string(last_time_ns_));
    }
    last_time_ns_ = now;
    while (size_ > 0 && now - times_[head_] >= config_.window_ns) EvictOldest();
    return Status::Ok();
  }

  bool OverLimit(uint32_t expert) const {
    return static_cast<double>(counts_[expert]) * experts_ > static_cast<double>(total_) * limit_scale_;
  }

  void Push(const uint32_t* ids, TimeNs now) {
    if (size_ == times_.size()) {
      if (config_.unit == LoadWindowUnit::kTokens) {
        EvictOldest();
      } else {
        Grow();
      }
    }
    const size_t slot = (head_ + size_) % times_.size();
    times_[slot] = now;
    std::copy(ids, ids + top_k_, ids_.begin() + slot * top_k_);
    for (uint32_t j = 0; j < top_k_; ++j) ++counts_[ids[j]];
    total_ += top_k_;
    ++size_;
  }

 private:
  void EvictOldest() {
    for (uint32_t j = 0; j < top_k_; ++j) --counts_[ids_[head_ * top_k_ + j]];
    total_ -= top_k_;
    head_ = (head_ + 1) % times_.size();
    --size_;
  }

  void Grow() {
    std::vector<TimeNs> times(times_.size() * 2);
    std::vector<uint32_t> ids(ids_.size() * 2);
    for (size_t n = 0; n < size_; ++n) {
      const size_t from = (head_ + n) % times_.size();
      times[n] = times_[from];
      std::copy_n(ids_.begin() + from * top_k_, top_k_, ids.begin() + n * top_k_);
    }
    times_ = std::move(times);
    ids_ = std::move(ids);
    head_ = 0;
  }

  LoadAwareConfig config_;
  uint32_t experts_;
  uint32_t top_k_;
  double limit_scale_;             // 1 + threshold
  std::vector<uint64_t> counts_;   // per expert
  uint64_t total_ = 0;             // sum of counts_
  std::vector<TimeNs> times_;      // ring of tokens: capacity = times_.size()
  std::vector<uint32_t> ids_;      // ring of tokens: top_k ids each
  size_t head_ = 0;                // the oldest token
  size_t size_ = 0;
  TimeNs last_time_ns_ = 0;
};

Result<RouterMode> ParseRouterMode(std::string_view name) {
  for (size_t m = 0; m < kModeNames.size(); ++m) {
    if (name == kModeNames[m]) return static_cast<RouterMode>(m);
  }
  return Status::InvalidArgument("unknown router mode '" + std::string(name) +
                                 "' (softmax-topk, sigmoid-grouped, hash-projection, hash-token)");
}

std::string_view RouterModeName(RouterMode mode) { return kModeNames[static_cast<size_t>(mode)]; }

Result<CapacityOverflow> ParseCapacityOverflow(std::string_view name) {
  if (name == "drop") return CapacityOverflow::kDrop;
  if (name == "reroute") return CapacityOverflow::kReroute;
  return Status::InvalidArgument("unknown capacity overflow '" + std::string(name) + "' (drop, reroute)");
}

Result<std::unique_ptr<Router>> Router::Create(RouterConfig config, uint32_t experts, uint32_t top_k,
                                               uint32_t hidden_size) {
  COLIBRI_RETURN_IF_ERROR(CheckConfig(config, experts, top_k, hidden_size));
  return std::unique_ptr<Router>(new Router(std::move(config), experts, top_k, hidden_size));
}

Router::Router(RouterConfig config, uint32_t experts, uint32_t top_k, uint32_t hidden_size)
    : config_(std::move(config)),
      experts_(experts),
      top_k_(top_k),
      hidden_size_(hidden_size),
      scores_(experts),
      selection_scores_(experts),
      outside_kept_groups_(experts, 0),
      ranking_(experts),
      ranked_(experts, 0),
      chosen_(experts, 0),
      capacity_load_(experts, 0) {
  if (config_.load_aware.enabled) window_ = std::make_unique<LoadWindow>(config_.load_aware, experts, top_k);
  if (config_.mode == RouterMode::kSigmoidGrouped) {
    if (config_.expert_bias.empty()) config_.expert_bias.assign(experts, 0.0f);
    group_scores_.resize(config_.groups);
    group_ranking_.resize(config_.groups);
  }
  if (config_.mode == RouterMode::kHashToken) token_table_ = BuildTokenTable(config_.vocab_size, experts, config_.table_seed);
}

Router::~Router() = default;

bool Router::IsHashMode() const {
  return config_.mode == RouterMode::kHashProjection || config_.mode == RouterMode::kHashToken;
}

Status Router::ValidateBatch(const RouterInput& in) {
  if (in.tokens == 0) return Status::Ok();
  const bool score_mode = !IsHashMode();
  if ((score_mode && in.logits == nullptr) || (config_.mode == RouterMode::kHashProjection && in.hidden == nullptr) ||
      (config_.mode == RouterMode::kHashToken && in.token_ids == nullptr)) {
    const char* field = score_mode ? "logits" : config_.mode == RouterMode::kHashProjection ? "hidden" : "token_ids";
    return Status::InvalidArgument(std::string("router mode ") + std::string(RouterModeName(config_.mode)) +
                                   ": null " + field);
  }
  if (IsHashMode()) token_keys_.resize(in.tokens);
  for (size_t t = 0; t < in.tokens; ++t) COLIBRI_RETURN_IF_ERROR(ValidateToken(in, t));
  return Status::Ok();
}

Status Router::ValidateToken(const RouterInput& in, size_t token) {
  switch (config_.mode) {
    case RouterMode::kSoftmaxTopK:
      return CheckSoftmaxLogits(in.logits + token * experts_, experts_, token);
    case RouterMode::kSigmoidGrouped:
      return CheckFiniteLogits(in.logits + token * experts_, experts_, token);
    case RouterMode::kHashProjection: {
      COLIBRI_ASSIGN_OR_RETURN(token_keys_[token],
                               ProjectionKey(in.hidden + token * hidden_size_, hidden_size_, config_.projection.data(),
                                             config_.projection_dims, token));
      return Status::Ok();
    }
    case RouterMode::kHashToken:
      if (in.token_ids[token] >= config_.vocab_size) {
        return Status::InvalidArgument("token " + std::to_string(token) + ": token id " +
                                       std::to_string(in.token_ids[token]) + " >= vocab_size " +
                                       std::to_string(config_.vocab_size));
      }
      token_keys_[token] = in.token_ids[token];
      return Status::Ok();
  }
  return Status::Internal("unknown router mode");
}

Status Router::Route(const RouterInput& in, uint32_t* ids, float* weights) {
  if (in.tokens > 0 && (ids == nullptr || weights == nullptr)) {
    return Status::InvalidArgument("Router::Route: null ids or weights");
  }
  COLIBRI_RETURN_IF_ERROR(ValidateBatch(in));
  if (window_ != nullptr) COLIBRI_RETURN_IF_ERROR(window_->Advance(in.time_ns));
  for (size_t t = 0; t < in.tokens; ++t) {
    COLIBRI_RETURN_IF_ERROR(RouteToken(in, t, ids + t * top_k_, weights + t * top_k_));
  }
  counters_.tokens_routed += in.tokens;
  return Status::Ok();
}

Status Router::RouteToken(const RouterInput& in, size_t token, uint32_t* ids, float* weights) {
  if (config_.mode == RouterMode::kSoftmaxTopK && window_ == nullptr) {
    return RouteTopK(in.logits + token * experts_, experts_, top_k_, config_.renormalize, ids, weights);
  }
  PrepareRanking(in, token);
  bool any_over_limit = false;
  for (uint32_t j = 0; j < top_k_; ++j) {
    ids[j] = RankedAt(j);
    any_over_limit = any_over_limit || (window_ != nullptr && window_->OverLimit(ids[j]));
  }
  if (any_over_limit) {
    const uint32_t moved = RedirectFromOverloaded(ids);
    counters_.slots_redirected += moved;
    counters_.tokens_redirected += moved > 0 ? 1 : 0;
  }
  if (window_ != nullptr) window_->Push(ids, in.time_ns);
  ModeWeights(ids, weights);
  return Status::Ok();
}

void Router::PrepareRanking(const RouterInput& in, size_t token) {
  for (uint32_t p = 0; p < ranked_count_; ++p) ranked_[ranking_[p]] = 0;
  ranked_count_ = 0;
  switch (config_.mode) {
    case RouterMode::kSoftmaxTopK:
      PrepareSoftmax(in.logits + token * experts_);
      break;
    case RouterMode::kSigmoidGrouped:
      PrepareSigmoidGrouped(in.logits + token * experts_);
      break;
    case RouterMode::kHashProjection:
      hash_key_ = token_keys_[token];
      hash_first_ = hash_key_ % experts_;
      break;
    case RouterMode::kHashToken:
      hash_key_ = token_keys_[token];
      hash_first_ = token_table_[hash_key_];
      break;
  }
}

// The same operations as RouteTopK, so p is bit-identical to its weights.
void Router::PrepareSoftmax(const float* logits) {
  float max = -kInf;
  for (uint32_t e = 0; e < experts_; ++e) {
    if (logits[e] > max) max = logits[e];
  }
  float sum = 0.0f;
  for (uint32_t e = 0; e < experts_; ++e) sum += ExpF32(logits[e] - max);
  for (uint32_t e = 0; e < experts_; ++e) {
    scores_[e] = ExpF32(logits[e] - max) / sum;
    selection_scores_[e] = scores_[e];
  }
}

void Router::PrepareSigmoidGrouped(const float* logits) {
  for (uint32_t e = 0; e < experts_; ++e) {
    scores_[e] = 1.0f / (1.0f + ExpF32(-logits[e]));
    selection_scores_[e] = scores_[e] + config_.expert_bias[e];
  }
  const uint32_t group_size = experts_ / config_.groups;
  for (uint32_t g = 0; g < config_.groups; ++g) {
    float first = -kInf, second = -kInf;
    for (uint32_t e = g * group_size; e < (g + 1) * group_size; ++e) {
      const float b = selection_scores_[e];
      if (b > first) {
        second = first;
        first = b;
      } else if (b > second) {
        second = b;
      }
    }
    group_scores_[g] = group_size == 1 ? first : first + second;
  }
  std::iota(group_ranking_.begin(), group_ranking_.end(), 0u);
  std::sort(group_ranking_.begin(), group_ranking_.end(), [this](uint32_t a, uint32_t b) {
    return group_scores_[a] != group_scores_[b] ? group_scores_[a] > group_scores_[b] : a < b;
  });
  std::fill(outside_kept_groups_.begin(), outside_kept_groups_.end(), 1);
  for (uint32_t r = 0; r < config_.kept_groups; ++r) {
    const uint32_t g = group_ranking_[r];
    std::fill_n(outside_kept_groups_.begin() + g * group_size, group_size, 0);
  }
}

uint32_t Router::RankedAt(uint32_t position) {
  while (ranked_count_ <= position) {
    const uint32_t e = IsHashMode() ? NextHashCandidate() : NextBestScore();
    ranked_[e] = 1;
    ranking_[ranked_count_++] = e;
  }
  return ranking_[position];
}

// Precondition: some expert is not ranked yet.
uint32_t Router::NextBestScore() const {
  uint32_t best = experts_;
  for (uint32_t e = 0; e < experts_; ++e) {
    if (!ranked_[e] && (best == experts_ || RanksBefore(e, best))) best = e;
  }
  return best;
}

// Precondition: some expert is not ranked yet, so the probing ends.
uint32_t Router::NextHashCandidate() const {
  const uint32_t position = ranked_count_;
  uint32_t e = position == 0 ? hash_first_ : static_cast<uint32_t>(Rehash(hash_key_, position) % experts_);
  while (ranked_[e]) e = e + 1 == experts_ ? 0 : e + 1;
  return e;
}

bool Router::RanksBefore(uint32_t a, uint32_t b) const {
  if (outside_kept_groups_[a] != outside_kept_groups_[b]) return outside_kept_groups_[a] < outside_kept_groups_[b];
  if (selection_scores_[a] != selection_scores_[b]) return selection_scores_[a] > selection_scores_[b];
  return a < b;
}

// Replaces ids (the first top_k of the ranking) by the first top_k experts of
// the ranking not over the limit, filled with the best over-limit ones if
// short, in rank order. Returns how many of the original experts left.
uint32_t Router::RedirectFromOverloaded(uint32_t* ids) {
  uint32_t accepted = 0;
  for (uint32_t p = 0; p < experts_ && accepted < top_k_; ++p) {
    const uint32_t e = RankedAt(p);
    if (!window_->OverLimit(e)) {
      chosen_[e] = 1;
      ++accepted;
    }
  }
  for (uint32_t p = 0; accepted < top_k_; ++p) {
    if (!chosen_[ranking_[p]]) {
      chosen_[ranking_[p]] = 1;
      ++accepted;
    }
  }
  uint32_t moved = 0;
  for (uint32_t j = 0; j < top_k_; ++j) moved += chosen_[ranking_[j]] ? 0 : 1;
  uint32_t written = 0;
  for (uint32_t p = 0; written < top_k_; ++p) {
    const uint32_t e = ranking_[p];
    if (chosen_[e]) {
      ids[written++] = e;
      chosen_[e] = 0;
    }
  }
  return moved;
}

void Router::ModeWeights(const uint32_t* ids, float* weights) const {
  if (IsHashMode()) {
    std::fill_n(weights, top_k_, 1.0f / static_cast<float>(top_k_));
    return;
  }
  const float scale = config_.mode == RouterMode::kSigmoidGrouped ? config_.routed_scaling_factor : 1.0f;
  float sum = 0.0f;
  for (uint32_t j = 0; j < top_k_; ++j) sum += scores_[ids[j]];
  for (uint32_t j = 0; j < top_k_; ++j) {
    const float w = !config_.renormalize ? scores_[ids[j]] : sum > 0.0f ? scores_[ids[j]] / sum : 0.0f;
    weights[j] = config_.mode == RouterMode::kSigmoidGrouped ? w * scale : w;
  }
}

Result<CapacityCounts> Router::ApplyCapacity(const RouterInput& in, uint32_t capacity, CapacityOverflow overflow,
                                             uint32_t* ids, float* weights) {
  CapacityCounts counts;
  if (overflow == CapacityOverflow::kDrop) {
    COLIBRI_ASSIGN_OR_RETURN(counts.dropped,
                             ApplyExpertCapacity(ids, weights, in.tokens, top_k_, experts_, capacity));
  } else {
    // Capacity 0 makes ApplyExpertCapacity check the ids and change nothing.
    COLIBRI_RETURN_IF_ERROR(ApplyExpertCapacity(ids, weights, in.tokens, top_k_, experts_, 0).status());
    COLIBRI_RETURN_IF_ERROR(ValidateBatch(in));
    if (capacity > 0) counts = RerouteCapacity(in, capacity, ids, weights);
  }
  counters_.capacity_dropped_slots += counts.dropped.dropped_slots;
  counters_.capacity_rerouted_slots += counts.rerouted_slots;
  return counts;
}

CapacityCounts Router::RerouteCapacity(const RouterInput& in, uint32_t capacity, uint32_t* ids, float* weights) {
  std::fill(capacity_load_.begin(), capacity_load_.end(), 0u);
  CapacityCounts counts;
  for (size_t t = 0; t < in.tokens; ++t) {
    uint32_t* token_ids = ids + t * top_k_;
    bool lost = false, any_kept = false, ranked = false;
    for (uint32_t j = 0; j < top_k_; ++j) {
      if (token_ids[j] == kDroppedExpert) continue;
      if (capacity_load_[token_ids[j]] < capacity) {
        ++capacity_load_[token_ids[j]];
        any_kept = true;
        continue;
      }
      if (!ranked) {
        PrepareRanking(in, t);
        ranked = true;
      }
      const uint32_t substitute = ExpertWithRoom(token_ids, capacity);
      if (substitute < experts_) {
        token_ids[j] = substitute;
        ++capacity_load_[substitute];
        ++counts.rerouted_slots;
        any_kept = true;
      } else {
        token_ids[j] = kDroppedExpert;
        weights[t * top_k_ + j] = 0.0f;
        ++counts.dropped.dropped_slots;
        lost = true;
      }
    }
    counts.dropped.tokens_with_drops += lost ? 1 : 0;
    counts.dropped.tokens_fully_dropped += lost && !any_kept ? 1 : 0;
  }
  return counts;
}

// The first expert of the prepared ranking with room and not in token_ids;
// experts_ if none.
uint32_t Router::ExpertWithRoom(const uint32_t* token_ids, uint32_t capacity) {
  for (uint32_t p = 0; p < experts_; ++p) {
    const uint32_t e = RankedAt(p);
    if (capacity_load_[e] < capacity && std::find(token_ids, token_ids + top_k_, e) == token_ids + top_k_) return e;
  }
  return experts_;
}

Status Router::SelectionMargins(const RouterInput& in, float* margins) {
  if (IsHashMode()) {
    return Status::InvalidArgument(std::string("router mode ") + std::string(RouterModeName(config_.mode)) +
                                   " has no scores, so no selection margin");
  }
  if (in.tokens > 0 && margins == nullptr) return Status::InvalidArgument("SelectionMargins: null margins");
  COLIBRI_RETURN_IF_ERROR(ValidateBatch(in));
  for (size_t t = 0; t < in.tokens; ++t) {
    PrepareRanking(in, t);
    margins[t] = Margin();
  }
  return Status::Ok();
}

float Router::Margin() {
  float expert_margin = kInf;
  if (top_k_ < experts_) {
    const uint32_t last = RankedAt(top_k_ - 1), next = RankedAt(top_k_);
    if (!outside_kept_groups_[next]) expert_margin = Gap(selection_scores_[last], selection_scores_[next]);
  }
  if (config_.mode != RouterMode::kSigmoidGrouped || config_.kept_groups == config_.groups) return expert_margin;
  const float group_margin = Gap(group_scores_[group_ranking_[config_.kept_groups - 1]],
                                 group_scores_[group_ranking_[config_.kept_groups]]);
  return std::min(expert_margin, group_margin);
}

}  // namespace colibri::engine
