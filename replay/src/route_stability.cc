#include "colibri/replay/route_stability.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <utility>

#include "colibri/engine/dtype.h"
#include "colibri/replay/layer_batches.h"
#include "colibri/sim/random.h"
#include "colibri/traces/reader.h"
#include "colibri/traces/stats.h"

namespace colibri::replay {
namespace {

using engine::RouterMode;

constexpr uint32_t kSyntheticTopK = 4;
constexpr uint32_t kMaxVocab = 1u << 24;

using sim::StandardNormal;

// The input a mode routes on.
enum class Input : uint8_t { kLogits, kHidden, kTokenIds };
constexpr size_t kInputs = 3;

Input InputOf(RouterMode mode) {
  switch (mode) {
    case RouterMode::kSoftmaxTopK:
    case RouterMode::kSigmoidGrouped:
      return Input::kLogits;
    case RouterMode::kHashProjection:
      return Input::kHidden;
    case RouterMode::kHashToken:
      return Input::kTokenIds;
  }
  return Input::kLogits;
}

bool IsScoreMode(RouterMode mode) { return InputOf(mode) == Input::kLogits; }

// Which inputs the batches have, counted over all of them, and the largest token id.
struct InputPresence {
  uint64_t batches = 0;
  std::array<uint64_t, kInputs> batches_with = {};
  uint32_t max_token_id = 0;

  void Add(const RouteBatch& b) {
    ++batches;
    batches_with[static_cast<size_t>(Input::kLogits)] += b.tokens == 0 || !b.logits.empty();
    batches_with[static_cast<size_t>(Input::kHidden)] += b.tokens == 0 || !b.hidden.empty();
    batches_with[static_cast<size_t>(Input::kTokenIds)] += b.tokens == 0 || !b.token_ids.empty();
    for (const uint32_t id : b.token_ids) max_token_id = std::max(max_token_id, id);
  }
};

// Why a mode reading `input` cannot be measured; empty when it can.
std::string MissingReason(Input input, const InputPresence& presence, bool from_trace) {
  static constexpr std::array<const char*, kInputs> kNames = {"router logits", "hidden states", "token ids"};
  static constexpr std::array<const char*, kInputs> kRecordFlags = {"--record-logits", "--record-hidden",
                                                                    "--record-tokens"};
  const size_t i = static_cast<size_t>(input);
  const uint64_t with = presence.batches_with[i];
  if (presence.batches > 0 && with == presence.batches) return "";
  const std::string source_has = from_trace ? "trace has " : "the inputs have ";
  if (with == 0) {
    return source_has + "no " + kNames[i] +
           (from_trace ? std::string(" (record with colibri run ") + kRecordFlags[i] + ")" : "");
  }
  return source_has + kNames[i] + " in only " + std::to_string(with) + " of " + std::to_string(presence.batches) +
         " layer batches";
}

engine::RouterConfig ConfigFor(RouterMode mode, uint32_t layer, const RouteShape& shape, uint32_t vocab_size,
                               const StabilityOptions& o) {
  engine::RouterConfig c;
  c.mode = mode;
  c.load_aware = o.load_aware;
  switch (mode) {
    case RouterMode::kSoftmaxTopK:
      break;
    case RouterMode::kSigmoidGrouped:
      c.groups = o.groups != 0 ? o.groups : (shape.experts % 8 == 0 ? 8 : 1);
      c.kept_groups = o.kept_groups != 0 ? o.kept_groups : std::min(4u, c.groups);
      c.routed_scaling_factor = o.routed_scaling_factor;
      break;
    case RouterMode::kHashProjection:
      c.projection_dims = o.projection_dims;
      // The engine's W_r for MoE layer `layer` (MoeEngine's MakeRouters): the
      // same as colibri run / replay --router hash-projection with this seed.
      c.projection = engine::SeededRouterProjection(shape.hidden_size, o.projection_dims, o.seed + layer);
      break;
    case RouterMode::kHashToken:
      c.vocab_size = vocab_size;
      // The engine's table for MoE layer `layer` (MoeEngine's MakeRouters seeds
      // it table_seed + layer): the same as colibri run / replay --router
      // hash-token --hash-table-seed with this seed.
      c.table_seed = o.seed + layer;
      break;
  }
  return c;
}

Result<std::vector<std::unique_ptr<engine::Router>>> LayerRouters(RouterMode mode, const RouteShape& shape,
                                                                  uint32_t vocab_size, const StabilityOptions& o) {
  std::vector<std::unique_ptr<engine::Router>> routers;
  for (uint32_t l = 0; l < shape.layers; ++l) {
    auto router = engine::Router::Create(ConfigFor(mode, l, shape, vocab_size, o), shape.experts, shape.top_k,
                                         shape.hidden_size);
    if (!router.ok()) {
      return Status::InvalidArgument(std::string(engine::RouterModeName(mode)) + ": " + router.status().message());
    }
    routers.push_back(std::move(router).value());
  }
  return routers;
}

// One noise and its seeded streams (one per perturbed input).
class Perturber {
 public:
  Perturber(const RouteNoise& noise, uint64_t seed)
      : noise_(noise),
        logits_rng_(sim::DeriveSeed(seed, "route.noise." + noise.spec + ".logits")),
        hidden_rng_(sim::DeriveSeed(seed, "route.noise." + noise.spec + ".hidden")) {}

  const RouteNoise& noise() const { return noise_; }
  void PerturbLogits(const std::vector<float>& in, std::vector<float>* out) { Apply(in, &logits_rng_, out); }
  void PerturbHidden(const std::vector<float>& in, std::vector<float>* out) { Apply(in, &hidden_rng_, out); }

 private:
  void Apply(const std::vector<float>& in, sim::Rng* rng, std::vector<float>* out) const {
    out->resize(in.size());
    for (size_t i = 0; i < in.size(); ++i) (*out)[i] = Perturbed(in[i], rng);
  }
  float Perturbed(float x, sim::Rng* rng) const {
    switch (noise_.kind) {
      case RouteNoise::Kind::kFp16:
        return engine::Fp16ToFloat(engine::FloatToFp16(x));
      case RouteNoise::Kind::kBf16:
        return engine::Bf16ToFloat(engine::FloatToBf16(x));
      case RouteNoise::Kind::kGauss:
        return static_cast<float>(static_cast<double>(x) + noise_.sigma * StandardNormal(rng));
    }
    return x;
  }

  RouteNoise noise_;
  sim::Rng logits_rng_;
  sim::Rng hidden_rng_;
};

// The counts of one requested mode.
struct ModeMeter {
  RouterMode mode = RouterMode::kSoftmaxTopK;
  std::string skipped;
  std::vector<std::unique_ptr<engine::Router>> baseline;                // per layer
  std::vector<std::vector<std::unique_ptr<engine::Router>>> perturbed;  // per noise, per layer
  std::vector<std::vector<uint64_t>> loads;                             // per layer, per expert
  uint64_t decisions = 0;
  uint64_t near_ties = 0;
  std::vector<uint64_t> changed_set;     // per noise
  std::vector<uint64_t> changed_ranked;  // per noise
  std::vector<uint32_t> baseline_ids;    // scratch: the current batch's baseline, tokens x top_k
};

// Routes batches through every measured mode, baseline and perturbed, and counts.
class StabilityMeter {
 public:
  // Errors: every mode skipped (the reasons), a token id the vocabulary does
  // not cover, the routers' config errors.
  static Result<StabilityMeter> Create(const RouteShape& shape, const InputPresence& presence, bool from_trace,
                                       const StabilityOptions& options);
  Status Add(const RouteBatch& batch);
  std::vector<StabilityRow> Rows() const;

 private:
  StabilityMeter(const RouteShape& shape, const StabilityOptions& options) : shape_(shape), options_(options) {}
  Status AddMode(RouterMode mode, const std::string& skipped, uint32_t vocab_size);
  Status CheckBatch(const RouteBatch& b) const;
  bool Reads(Input input) const;
  Status RouteBaseline(ModeMeter* m, uint32_t layer, const engine::RouterInput& in);
  Status RoutePerturbed(ModeMeter* m, size_t noise, uint32_t layer, const engine::RouterInput& in);
  LoadSummary MeanLoad(const ModeMeter& m) const;

  RouteShape shape_;
  StabilityOptions options_;
  std::vector<ModeMeter> modes_;
  std::vector<Perturber> perturbers_;
  // Per-batch scratch.
  std::vector<uint32_t> ids_;
  std::vector<float> weights_;
  std::vector<float> margins_;
  std::vector<float> noisy_logits_;
  std::vector<float> noisy_hidden_;
  std::vector<uint32_t> sorted_a_;
  std::vector<uint32_t> sorted_b_;
};

Result<StabilityMeter> StabilityMeter::Create(const RouteShape& shape, const InputPresence& presence, bool from_trace,
                                              const StabilityOptions& options) {
  StabilityMeter meter(shape, options);
  const uint32_t vocab_size = options.vocab_size != 0 ? options.vocab_size : presence.max_token_id + 1;
  std::string reasons;
  for (const RouterMode mode : options.modes) {
    const std::string skipped = MissingReason(InputOf(mode), presence, from_trace);
    if (skipped.empty() && mode == RouterMode::kHashToken && presence.max_token_id >= vocab_size) {
      return Status::InvalidArgument("hash-token: vocab size " + std::to_string(vocab_size) +
                                     " does not cover token id " + std::to_string(presence.max_token_id));
    }
    if (!skipped.empty()) {
      reasons += (reasons.empty() ? "" : "; ") + std::string(engine::RouterModeName(mode)) + ": " + skipped;
    }
    COLIBRI_RETURN_IF_ERROR(meter.AddMode(mode, skipped, vocab_size));
  }
  const bool all_skipped = std::all_of(meter.modes_.begin(), meter.modes_.end(),
                                       [](const ModeMeter& m) { return !m.skipped.empty(); });
  if (all_skipped) return Status::InvalidArgument("no requested routing mode can run: " + reasons);
  for (const RouteNoise& noise : options.noises) meter.perturbers_.emplace_back(noise, options.seed);
  return meter;
}

Status StabilityMeter::AddMode(RouterMode mode, const std::string& skipped, uint32_t vocab_size) {
  ModeMeter m;
  m.mode = mode;
  m.skipped = skipped;
  if (skipped.empty()) {
    COLIBRI_ASSIGN_OR_RETURN(m.baseline, LayerRouters(mode, shape_, vocab_size, options_));
    for (size_t n = 0; n < options_.noises.size(); ++n) {
      COLIBRI_ASSIGN_OR_RETURN(auto routers, LayerRouters(mode, shape_, vocab_size, options_));
      m.perturbed.push_back(std::move(routers));
    }
    m.loads.assign(shape_.layers, std::vector<uint64_t>(shape_.experts, 0));
    m.changed_set.assign(options_.noises.size(), 0);
    m.changed_ranked.assign(options_.noises.size(), 0);
  }
  modes_.push_back(std::move(m));
  return Status::Ok();
}

bool StabilityMeter::Reads(Input input) const {
  return std::any_of(modes_.begin(), modes_.end(),
                     [input](const ModeMeter& m) { return m.skipped.empty() && InputOf(m.mode) == input; });
}

Status StabilityMeter::CheckBatch(const RouteBatch& b) const {
  const std::string where = "layer batch at layer index " + std::to_string(b.layer_index);
  if (b.layer_index >= shape_.layers) return Status::InvalidArgument(where + ": layer index out of range");
  if (Reads(Input::kLogits) && b.logits.size() != b.tokens * shape_.experts) {
    return Status::InvalidArgument(where + ": router logits are not tokens x experts values");
  }
  if (Reads(Input::kHidden) && b.hidden.size() != b.tokens * shape_.hidden_size) {
    return Status::InvalidArgument(where + ": hidden states are not tokens x hidden_size values");
  }
  if (Reads(Input::kTokenIds) && b.token_ids.size() != b.tokens) {
    return Status::InvalidArgument(where + ": token ids are not one per token");
  }
  return Status::Ok();
}

Status StabilityMeter::Add(const RouteBatch& batch) {
  COLIBRI_RETURN_IF_ERROR(CheckBatch(batch));
  if (batch.tokens == 0) return Status::Ok();
  const size_t slots = batch.tokens * shape_.top_k;
  ids_.resize(slots);
  weights_.resize(slots);
  engine::RouterInput in;
  in.tokens = batch.tokens;
  in.logits = batch.logits.data();
  in.hidden = batch.hidden.data();
  in.token_ids = batch.token_ids.data();
  for (ModeMeter& m : modes_) {
    if (m.skipped.empty()) COLIBRI_RETURN_IF_ERROR(RouteBaseline(&m, batch.layer_index, in));
  }
  for (size_t n = 0; n < perturbers_.size(); ++n) {
    engine::RouterInput noisy = in;
    if (Reads(Input::kLogits)) {
      perturbers_[n].PerturbLogits(batch.logits, &noisy_logits_);
      noisy.logits = noisy_logits_.data();
    }
    if (Reads(Input::kHidden)) {
      perturbers_[n].PerturbHidden(batch.hidden, &noisy_hidden_);
      noisy.hidden = noisy_hidden_.data();
    }
    for (ModeMeter& m : modes_) {
      if (m.skipped.empty()) COLIBRI_RETURN_IF_ERROR(RoutePerturbed(&m, n, batch.layer_index, noisy));
    }
  }
  return Status::Ok();
}

Status StabilityMeter::RouteBaseline(ModeMeter* m, uint32_t layer, const engine::RouterInput& in) {
  std::vector<uint32_t>& ids = m->baseline_ids;
  ids.resize(in.tokens * shape_.top_k);
  COLIBRI_RETURN_IF_ERROR(m->baseline[layer]->Route(in, ids.data(), weights_.data()));
  for (const uint32_t e : ids) ++m->loads[layer][e];
  m->decisions += in.tokens;
  if (!IsScoreMode(m->mode)) return Status::Ok();
  margins_.resize(in.tokens);
  COLIBRI_RETURN_IF_ERROR(m->baseline[layer]->SelectionMargins(in, margins_.data()));
  m->near_ties += static_cast<uint64_t>(
      std::count_if(margins_.begin(), margins_.end(), [this](float margin) { return margin < options_.tau; }));
  return Status::Ok();
}

Status StabilityMeter::RoutePerturbed(ModeMeter* m, size_t noise, uint32_t layer, const engine::RouterInput& in) {
  const std::vector<uint32_t>& baseline = m->baseline_ids;
  COLIBRI_RETURN_IF_ERROR(m->perturbed[noise][layer]->Route(in, ids_.data(), weights_.data()));
  const size_t k = shape_.top_k;
  for (size_t t = 0; t < in.tokens; ++t) {
    const auto a = baseline.begin() + static_cast<ptrdiff_t>(t * k);
    const auto b = ids_.begin() + static_cast<ptrdiff_t>(t * k);
    if (std::equal(a, a + static_cast<ptrdiff_t>(k), b)) continue;
    ++m->changed_ranked[noise];
    sorted_a_.assign(a, a + static_cast<ptrdiff_t>(k));
    sorted_b_.assign(b, b + static_cast<ptrdiff_t>(k));
    std::sort(sorted_a_.begin(), sorted_a_.end());
    std::sort(sorted_b_.begin(), sorted_b_.end());
    if (sorted_a_ != sorted_b_) ++m->changed_set[noise];
  }
  return Status::Ok();
}

LoadSummary StabilityMeter::MeanLoad(const ModeMeter& m) const {
  LoadSummary sum;
  uint32_t layers = 0;
  for (const std::vector<uint64_t>& loads : m.loads) {
    if (std::all_of(loads.begin(), loads.end(), [](uint64_t v) { return v == 0; })) continue;
    const traces::LoadDeviation d = traces::ComputeLoadDeviation(loads);
    sum.cv += d.cv;
    sum.max_over_mean += d.max_over_mean;
    sum.gini += d.gini;
    ++layers;
  }
  if (layers == 0) return sum;
  return {sum.cv / layers, sum.max_over_mean / layers, sum.gini / layers};
}

std::vector<StabilityRow> StabilityMeter::Rows() const {
  std::vector<StabilityRow> rows;
  for (const ModeMeter& m : modes_) {
    StabilityRow base;
    base.mode = m.mode;
    base.experts = shape_.experts;
    if (!m.skipped.empty()) {
      base.skipped = m.skipped;
      rows.push_back(base);
      continue;
    }
    base.decisions = m.decisions;
    if (IsScoreMode(m.mode)) base.near_ties = m.near_ties;
    base.load = MeanLoad(m);
    if (options_.load_aware.enabled) {
      uint64_t redirected = 0;
      for (const auto& router : m.baseline) redirected += router->counters().tokens_redirected;
      base.redirected_fraction = m.decisions == 0 ? 0.0 : static_cast<double>(redirected) / m.decisions;
    }
    for (size_t n = 0; n < options_.noises.size(); ++n) {
      StabilityRow row = base;
      row.noise = options_.noises[n].spec;
      if (m.decisions > 0) {
        row.changed_set_fraction = static_cast<double>(m.changed_set[n]) / m.decisions;
        row.changed_ranked_fraction = static_cast<double>(m.changed_ranked[n]) / m.decisions;
      }
      rows.push_back(row);
    }
  }
  return rows;
}

Status CheckOptions(const StabilityOptions& o) {
  if (o.modes.empty()) return Status::InvalidArgument("no routing mode requested");
  if (o.noises.empty()) return Status::InvalidArgument("no noise requested");
  if (!std::isfinite(o.tau) || o.tau < 0) return Status::InvalidArgument("tau must be a finite number >= 0");
  if (o.load_aware.enabled && o.load_aware.unit != engine::LoadWindowUnit::kTokens) {
    return Status::InvalidArgument("load-aware routing here needs a token window");
  }
  return Status::Ok();
}

Status CheckShape(const RouteShape& s) {
  if (s.layers == 0 || s.experts == 0 || s.top_k == 0) {
    return Status::InvalidArgument("route shape: layers, experts and top_k must be > 0");
  }
  return Status::Ok();
}

// A trace layer batch's router inputs; token ids only when every row has one.
void ToRouteBatch(const LayerBatch& in, RouteBatch* out) {
  out->layer_index = in.layer_index;
  out->tokens = in.tokens();
  out->logits = in.router_logits;
  out->hidden = in.hidden;
  out->token_ids.clear();
  const bool all_ids =
      std::all_of(in.rows.begin(), in.rows.end(), [](const BatchRow& r) { return r.token_id.has_value(); });
  if (!all_ids) return;
  for (const BatchRow& r : in.rows) out->token_ids.push_back(*r.token_id);
}

// Calls `visit` on each of the trace's layer batches, in order; returns whether the trace has a torn tail.
template <typename Visit>
Result<bool> ForEachTraceBatch(const std::string& path, bool allow_torn, Visit visit) {
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<traces::TraceReader> reader,
                           traces::TraceReader::Open(path, traces::ReadOptions{.allow_torn = allow_torn}));
  LayerBatchReader batches(reader.get());
  LayerBatch layer_batch;
  RouteBatch route_batch;
  while (true) {
    COLIBRI_ASSIGN_OR_RETURN(const bool more, batches.Next(&layer_batch));
    if (!more) break;
    ToRouteBatch(layer_batch, &route_batch);
    COLIBRI_RETURN_IF_ERROR(visit(route_batch));
  }
  return reader->truncated();
}

Status CheckSynthetic(const SyntheticRouteOptions& s) {
  if (s.experts.empty()) return Status::InvalidArgument("synthetic: no expert count");
  if (s.layers == 0 || s.layers > 1024) return Status::InvalidArgument("synthetic: layers must be in [1, 1024]");
  if (s.tokens == 0 || s.tokens > (1u << 20)) return Status::InvalidArgument("synthetic: tokens must be in [1, 2^20]");
  if (s.hidden_size == 0 || s.hidden_size > (1u << 16)) {
    return Status::InvalidArgument("synthetic: hidden size must be in [1, 65536]");
  }
  if (uint64_t{s.tokens} * s.hidden_size > (uint64_t{1} << 28)) {
    return Status::InvalidArgument("synthetic: tokens x hidden size must be at most 2^28");
  }
  if (s.vocab_size == 0 || s.vocab_size > kMaxVocab) {
    return Status::InvalidArgument("synthetic: vocab must be in [1, 2^24]");
  }
  if (!std::isfinite(s.zipf_exponent) || s.zipf_exponent < 0) {
    return Status::InvalidArgument("synthetic: the Zipf exponent must be a finite number >= 0");
  }
  if (!std::isfinite(s.state_noise) || s.state_noise < 0) {
    return Status::InvalidArgument("synthetic: the state noise must be a finite number >= 0");
  }
  return Status::Ok();
}

// s.tokens token ids drawn Zipf(s.zipf_exponent) over [0, s.vocab_size) by inverse CDF.
std::vector<uint32_t> ZipfTokens(const SyntheticRouteOptions& s, uint64_t seed) {
  std::vector<double> cdf(s.vocab_size);
  double total = 0;
  for (uint32_t r = 0; r < s.vocab_size; ++r) {
    total += std::pow(static_cast<double>(r) + 1.0, -s.zipf_exponent);
    cdf[r] = total;
  }
  sim::Rng rng(sim::DeriveSeed(seed, "route.synthetic.tokens"));
  std::vector<uint32_t> ids(s.tokens);
  for (uint32_t& id : ids) {
    const double u = rng.NextDouble() * total;
    const auto it = std::upper_bound(cdf.begin(), cdf.end(), u);
    id = static_cast<uint32_t>(std::min<ptrdiff_t>(it - cdf.begin(), s.vocab_size - 1));
  }
  return ids;
}

// Per token: its id's embedding plus state noise; tokens x hidden_size.
std::vector<float> HiddenStates(const SyntheticRouteOptions& s, const std::vector<uint32_t>& ids, uint64_t seed) {
  sim::Rng noise(sim::DeriveSeed(seed, "route.synthetic.state-noise"));
  std::vector<float> hidden(static_cast<size_t>(s.tokens) * s.hidden_size);
  for (size_t t = 0; t < ids.size(); ++t) {
    sim::Rng embedding(sim::DeriveSeed(seed, "route.synthetic.embedding." + std::to_string(ids[t])));
    float* h = hidden.data() + t * s.hidden_size;
    for (uint32_t d = 0; d < s.hidden_size; ++d) {
      h[d] = static_cast<float>(StandardNormal(&embedding) + s.state_noise * StandardNormal(&noise));
    }
  }
  return hidden;
}

// logits = W^T h for one layer, W hidden_size x experts ~ N(0, 1 / hidden_size).
std::vector<float> SyntheticLogits(const SyntheticRouteOptions& s, const std::vector<float>& hidden, uint32_t experts,
                                   uint32_t layer, uint64_t seed) {
  sim::Rng rng(sim::DeriveSeed(seed, "route.synthetic.gate." + std::to_string(experts) + "." + std::to_string(layer)));
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.hidden_size));
  std::vector<float> w(static_cast<size_t>(s.hidden_size) * experts);
  for (float& v : w) v = static_cast<float>(StandardNormal(&rng) * scale);
  std::vector<float> logits(static_cast<size_t>(s.tokens) * experts, 0.0f);
  for (size_t t = 0; t < s.tokens; ++t) {
    float* out = logits.data() + t * experts;
    const float* h = hidden.data() + t * s.hidden_size;
    for (uint32_t d = 0; d < s.hidden_size; ++d) {
      const float* row = w.data() + static_cast<size_t>(d) * experts;
      for (uint32_t e = 0; e < experts; ++e) out[e] += h[d] * row[e];
    }
  }
  return logits;
}

}  // namespace

Result<RouteNoise> ParseRouteNoise(std::string_view text) {
  if (text == "fp16") return RouteNoise{RouteNoise::Kind::kFp16, 0, "fp16"};
  if (text == "bf16") return RouteNoise{RouteNoise::Kind::kBf16, 0, "bf16"};
  const std::string_view prefix = "gauss:";
  const std::string bad = "noise '" + std::string(text) + "': expected fp16, bf16 or gauss:SIGMA (SIGMA >= 0)";
  if (text.substr(0, prefix.size()) != prefix) return Status::InvalidArgument(bad);
  const std::string number(text.substr(prefix.size()));
  char* end = nullptr;
  const double sigma = std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size() || !std::isfinite(sigma) || sigma < 0) {
    return Status::InvalidArgument(bad);
  }
  return RouteNoise{RouteNoise::Kind::kGauss, sigma, std::string(text)};
}

Result<StabilityReport> MeasureStability(const RouteShape& shape, const std::vector<RouteBatch>& batches,
                                         const StabilityOptions& options) {
  COLIBRI_RETURN_IF_ERROR(CheckOptions(options));
  COLIBRI_RETURN_IF_ERROR(CheckShape(shape));
  InputPresence presence;
  for (const RouteBatch& b : batches) presence.Add(b);
  COLIBRI_ASSIGN_OR_RETURN(StabilityMeter meter, StabilityMeter::Create(shape, presence, false, options));
  for (const RouteBatch& b : batches) COLIBRI_RETURN_IF_ERROR(meter.Add(b));
  return StabilityReport{meter.Rows(), shape.top_k, false};
}

Result<StabilityReport> MeasureTraceStability(const std::string& trace_path, const StabilityOptions& options) {
  COLIBRI_RETURN_IF_ERROR(CheckOptions(options));
  COLIBRI_ASSIGN_OR_RETURN(const traces::TraceHeader header, traces::ReadTraceHeader(trace_path));
  const traces::ModelShape& s = header.shape;
  const RouteShape shape{static_cast<uint32_t>(s.num_moe_layers()), s.experts_per_layer,
                         options.top_k != 0 ? options.top_k : s.top_k, s.hidden_size};
  COLIBRI_RETURN_IF_ERROR(CheckShape(shape));
  InputPresence presence;
  COLIBRI_RETURN_IF_ERROR(ForEachTraceBatch(trace_path, options.allow_torn, [&](const RouteBatch& b) {
                            presence.Add(b);
                            return Status::Ok();
                          }).status());
  COLIBRI_ASSIGN_OR_RETURN(StabilityMeter meter, StabilityMeter::Create(shape, presence, true, options));
  COLIBRI_ASSIGN_OR_RETURN(const bool truncated,
                           ForEachTraceBatch(trace_path, options.allow_torn, [&](const RouteBatch& b) { return meter.Add(b); }));
  return StabilityReport{meter.Rows(), shape.top_k, truncated};
}

Result<StabilityReport> MeasureSyntheticStability(const SyntheticRouteOptions& synthetic,
                                                  const StabilityOptions& options) {
  COLIBRI_RETURN_IF_ERROR(CheckSynthetic(synthetic));
  StabilityOptions o = options;
  o.vocab_size = synthetic.vocab_size;
  if (o.top_k == 0) o.top_k = kSyntheticTopK;
  const std::vector<uint32_t> ids = ZipfTokens(synthetic, o.seed);
  const std::vector<float> hidden = HiddenStates(synthetic, ids, o.seed);
  StabilityReport report;
  report.top_k = o.top_k;
  for (const uint32_t experts : synthetic.experts) {
    const RouteShape shape{synthetic.layers, experts, o.top_k, synthetic.hidden_size};
    std::vector<RouteBatch> batches;
    for (uint32_t l = 0; l < synthetic.layers; ++l) {
      std::vector<float> logits = SyntheticLogits(synthetic, hidden, experts, l, o.seed);
      batches.push_back(RouteBatch{l, synthetic.tokens, std::move(logits), hidden, ids});
    }
    COLIBRI_ASSIGN_OR_RETURN(StabilityReport one, MeasureStability(shape, batches, o));
    report.rows.insert(report.rows.end(), one.rows.begin(), one.rows.end());
  }
  return report;
}

}  // namespace colibri::replay
