// Synthetic traces: requests in waves of `concurrency`; each request of a wave
// gets a prefill pass (one record per MoE layer with all prompt tokens), then
// every decode step is one pass with a record per (request, layer).
//
// Determinism across standard libraries: only std::mt19937_64 (fully
// specified by the standard) is used, with our own uniform, Fisher-Yates and
// inverse-CDF sampling; no std::*_distribution and no std::shuffle. Each
// 64-bit output gives two 32-bit draws, the resolution the sampling needs.
#include "colibri/traces/synth.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string_view>

#include "colibri/engine/mix.h"

namespace colibri::traces {
namespace {

constexpr uint32_t kNoExpert = UINT32_MAX;
constexpr int kMaxRejections = 32;  // then sample the conditional distribution directly
constexpr int kMinGuideShift = 12;  // at most 2^20 guide buckets (about 4 per expert)

// 32-bit uniform draws, two from each std::mt19937_64 output (low half
// first), seeded per component so adding draws to one never shifts another.
class Uniform32 {
 public:
  Uniform32(uint64_t seed, std::string_view component) : rng_(seed ^ engine::Fnv1a64(component)) {}

  uint32_t Next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const uint64_t draw = rng_();
    spare_ = static_cast<uint32_t>(draw >> 32);
    has_spare_ = true;
    return static_cast<uint32_t>(draw);
  }
  // Uniform in (0, 1).
  double Unit() { return (static_cast<double>(Next()) + 0.5) * 0x1.0p-32; }
  // Uniform in [0, n) by multiply-shift (bias below n / 2^32).
  uint32_t Below(uint32_t n) { return static_cast<uint32_t>((static_cast<uint64_t>(Next()) * n) >> 32); }

 private:
  std::mt19937_64 rng_;
  uint32_t spare_ = 0;
  bool has_spare_ = false;
};

// Zipf(s) popularity over expert ranks; each layer maps ranks to expert ids
// through its own seeded random permutation. Ranks are drawn by inverse CDF:
// a 32-bit draw u picks the first rank whose cumulative threshold exceeds u,
// found from a guide table (Chen-Asau) instead of a binary search.
class ExpertSampler {
 public:
  explicit ExpertSampler(const SynthOptions& options) : experts_(options.shape.experts_per_layer) {
    BuildRankTables(options.zipf_s);
    BuildPermutations(options.seed, options.shape.num_moe_layers());
  }

  // An expert of `layer` not among `chosen[0..count)`.
  uint32_t DrawDistinct(size_t layer, const uint32_t* chosen, size_t count, Uniform32& rng) const {
    for (int attempt = 0; attempt < kMaxRejections; ++attempt) {
      const uint32_t expert = ExpertOfRank(layer, RankAt(rng.Next()));
      if (!Contains(chosen, count, expert)) return expert;
    }
    return DrawConditional(layer, chosen, count, rng);
  }

 private:
  void BuildRankTables(double zipf_s) {
    weights_.resize(experts_);
    double total = 0;
    for (uint32_t r = 0; r < experts_; ++r) {
      weights_[r] = std::pow(static_cast<double>(r + 1), -zipf_s);
      total += weights_[r];
    }
    thresholds_.resize(experts_);
    double cumulative = 0;
    for (uint32_t r = 0; r < experts_; ++r) {
      cumulative += weights_[r];
      const double scaled = cumulative / total * 0x1.0p32;
      thresholds_[r] = scaled >= 0x1.0p32 ? UINT32_MAX : static_cast<uint32_t>(scaled);
    }
    thresholds_.back() = UINT32_MAX;
    guide_shift_ = 32;
    while (guide_shift_ > kMinGuideShift && (uint64_t{1} << (32 - guide_shift_)) < 4ull * experts_) --guide_shift_;
    guide_.resize(size_t{1} << (32 - guide_shift_));
    uint32_t rank = 0;
    for (size_t bucket = 0; bucket < guide_.size(); ++bucket) {
      while (rank + 1 < experts_ && thresholds_[rank] <= (static_cast<uint32_t>(bucket) << guide_shift_)) ++rank;
      guide_[bucket] = rank;
    }
  }

  void BuildPermutations(uint64_t seed, size_t layers) {
    Uniform32 rng(seed, "synth.permutation");
    expert_of_rank_.resize(layers * experts_);
    for (size_t layer = 0; layer < layers; ++layer) {
      uint32_t* perm = &expert_of_rank_[layer * experts_];
      for (uint32_t r = 0; r < experts_; ++r) perm[r] = r;
      for (uint32_t r = experts_ - 1; r > 0; --r) std::swap(perm[r], perm[rng.Below(r + 1)]);
    }
  }

  static bool Contains(const uint32_t* ids, size_t count, uint32_t id) {
    return std::find(ids, ids + count, id) != ids + count;
  }

  uint32_t ExpertOfRank(size_t layer, uint32_t rank) const { return expert_of_rank_[layer * experts_ + rank]; }

  uint32_t RankAt(uint32_t u) const {
    uint32_t rank = guide_[u >> guide_shift_];
    while (rank + 1 < experts_ && thresholds_[rank] <= u) ++rank;
    return rank;
  }

  // Exact draw from the popularity restricted to the experts not chosen yet
  // (what rejection converges to), for very skewed layers. Falls back to the
  // most popular free rank when the free weights underflow to zero.
  uint32_t DrawConditional(size_t layer, const uint32_t* chosen, size_t count, Uniform32& rng) const {
    double remaining = 0;
    for (uint32_t r = 0; r < experts_; ++r) {
      if (!Contains(chosen, count, ExpertOfRank(layer, r))) remaining += weights_[r];
    }
    double u = rng.Unit() * remaining;
    uint32_t first_free = kNoExpert;
    for (uint32_t r = 0; r < experts_; ++r) {
      const uint32_t expert = ExpertOfRank(layer, r);
      if (Contains(chosen, count, expert)) continue;
      if (first_free == kNoExpert) first_free = expert;
      u -= weights_[r];
      if (u < 0) return expert;
    }
    return first_free;
  }

  uint32_t experts_;
  std::vector<double> weights_;           // per rank: (rank + 1)^-s
  std::vector<uint32_t> thresholds_;      // per rank: cumulative probability x 2^32; last = UINT32_MAX
  std::vector<uint32_t> guide_;           // per bucket of u's top bits: the first candidate rank
  int guide_shift_ = 32;                  // bucket = u >> guide_shift_
  std::vector<uint32_t> expert_of_rank_;  // layers x experts
};

Status ValidateOptions(const SynthOptions& options) {
  COLIBRI_RETURN_IF_ERROR(options.shape.Validate().WithPrefix("synth"));
  if (options.requests == 0) return Status::InvalidArgument("synth: requests must be at least 1");
  if (options.concurrency == 0) return Status::InvalidArgument("synth: concurrency must be at least 1");
  if (options.prompt_tokens == 0) return Status::InvalidArgument("synth: prompt_tokens must be at least 1");
  if (!(options.zipf_s >= 0) || !std::isfinite(options.zipf_s)) {
    return Status::InvalidArgument("synth: zipf_s must be a finite number >= 0");
  }
  if (!(options.decode_reuse >= 0 && options.decode_reuse <= 1)) {
    return Status::InvalidArgument("synth: decode_reuse must be in [0, 1]");
  }
  return Status::Ok();
}

TraceHeader SynthHeader(const SynthOptions& options) {
  char notes[512];
  std::snprintf(notes, sizeof(notes),
                "synthetic: seed=%llu requests=%u concurrency=%u prompt_tokens=%u output_tokens=%u zipf_s=%g "
                "decode_reuse=%g gate_weights=%s",
                static_cast<unsigned long long>(options.seed), options.requests, options.concurrency,
                options.prompt_tokens, options.output_tokens, options.zipf_s, options.decode_reuse,
                options.gate_weights ? "true" : "false");
  TraceHeader header;
  header.shape = options.shape;
  header.provenance.source_engine = "colibri trace synth";
  header.provenance.importer = "synth";
  header.provenance.importer_version = "1";
  header.provenance.notes = notes;
  return header;
}

// Generates the records of one trace into a writer.
class Synthesizer {
 public:
  Synthesizer(const SynthOptions& options, TraceWriter* writer)
      : options_(options),
        k_(options.shape.top_k),
        layers_(options.shape.num_moe_layers()),
        sampler_(options),
        rng_(options.seed, "synth"),
        previous_(static_cast<size_t>(options.concurrency) * layers_ * k_, kNoExpert),
        reuse_always_(options.decode_reuse >= 1),
        reuse_threshold_(reuse_always_ ? 0 : static_cast<uint32_t>(options.decode_reuse * 0x1.0p32)),
        writer_(writer) {}

  Result<SynthReport> Run() {
    for (uint32_t first = 0; first < options_.requests; first += options_.concurrency) {
      const uint32_t wave = std::min(options_.concurrency, options_.requests - first);
      for (uint32_t i = 0; i < wave; ++i) COLIBRI_RETURN_IF_ERROR(PrefillPass(first, i));
      for (uint32_t step = 0; step < options_.output_tokens; ++step) {
        COLIBRI_RETURN_IF_ERROR(DecodePass(first, wave, options_.prompt_tokens + step));
      }
      report_.tokens += static_cast<uint64_t>(wave) * (options_.prompt_tokens + options_.output_tokens);
    }
    return report_;
  }

 private:
  Status PrefillPass(uint32_t first_request, uint32_t slot) {
    for (size_t layer = 0; layer < layers_; ++layer) {
      StartRecord(first_request + slot, layer, true, 0, options_.prompt_tokens);
      for (uint32_t t = 0; t < options_.prompt_tokens; ++t) ChooseToken(layer, nullptr, t);
      const uint32_t* last = &record_.expert_ids[(options_.prompt_tokens - 1) * k_];
      std::copy(last, last + k_, Previous(slot, layer));
      COLIBRI_RETURN_IF_ERROR(Write());
    }
    ++pass_;
    return Status::Ok();
  }

  Status DecodePass(uint32_t first_request, uint32_t wave, uint64_t position) {
    for (size_t layer = 0; layer < layers_; ++layer) {
      for (uint32_t slot = 0; slot < wave; ++slot) {
        StartRecord(first_request + slot, layer, false, position, 1);
        uint32_t* previous = Previous(slot, layer);
        ChooseToken(layer, previous, 0);
        std::copy(record_.expert_ids.begin(), record_.expert_ids.end(), previous);
        COLIBRI_RETURN_IF_ERROR(Write());
      }
    }
    ++pass_;
    return Status::Ok();
  }

  uint32_t* Previous(uint32_t slot, size_t layer) { return &previous_[(slot * layers_ + layer) * k_]; }

  // Sizes the reused record for `tokens` tokens at positions [first_position, +tokens).
  void StartRecord(uint64_t request, size_t layer, bool prefill, uint64_t first_position, uint32_t tokens) {
    record_.request_id = request;
    record_.pass_id = pass_;
    record_.layer = options_.shape.moe_layer_ids[layer];
    record_.prefill = prefill;
    record_.positions.resize(tokens);
    for (uint32_t t = 0; t < tokens; ++t) record_.positions[t] = first_position + t;
    record_.expert_ids.resize(static_cast<size_t>(tokens) * k_);
    record_.gate_weights.resize(options_.gate_weights ? static_cast<size_t>(tokens) * k_ : 0);
  }

  // Fills token `t` of the record: each slot keeps the previous token's expert
  // with probability decode_reuse (when there is a previous token), the other
  // slots draw distinct experts from the layer's popularity.
  void ChooseToken(size_t layer, const uint32_t* previous, uint32_t t) {
    uint32_t* ids = &record_.expert_ids[static_cast<size_t>(t) * k_];
    for (size_t s = 0; s < k_; ++s) {
      const bool reuse = previous != nullptr && (reuse_always_ || rng_.Next() < reuse_threshold_);
      ids[s] = reuse ? previous[s] : kNoExpert;
    }
    for (size_t s = 0; s < k_; ++s) {
      if (ids[s] == kNoExpert) ids[s] = sampler_.DrawDistinct(layer, ids, k_, rng_);
    }
    if (options_.gate_weights) ChooseGateWeights(&record_.gate_weights[static_cast<size_t>(t) * k_]);
  }

  // Descending positive weights summing to 1 (rank order).
  void ChooseGateWeights(float* weights) {
    double total = 0;
    for (size_t s = 0; s < k_; ++s) {
      weights[s] = static_cast<float>(rng_.Unit() + 1e-3);
      total += weights[s];
    }
    std::sort(weights, weights + k_, [](float a, float b) { return a > b; });
    for (size_t s = 0; s < k_; ++s) weights[s] = static_cast<float>(weights[s] / total);
  }

  Status Write() {
    ++report_.records;
    report_.selections += record_.expert_ids.size();
    return writer_->Append(record_);
  }

  const SynthOptions& options_;
  const size_t k_;
  const size_t layers_;
  const ExpertSampler sampler_;
  Uniform32 rng_;
  std::vector<uint32_t> previous_;  // per wave slot and layer: the last token's ids
  const bool reuse_always_;
  const uint32_t reuse_threshold_;  // a slot reuses when a draw is below it (decode_reuse x 2^32)
  TraceWriter* writer_;
  TraceRecord record_;
  uint64_t pass_ = 0;
  SynthReport report_;
};

}  // namespace

Result<SynthReport> SynthesizeTrace(const SynthOptions& options, const std::string& path,
                                    const WriterOptions& writer_options) {
  COLIBRI_RETURN_IF_ERROR(ValidateOptions(options));
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<TraceWriter> writer,
                           TraceWriter::Create(path, SynthHeader(options), writer_options));
  COLIBRI_ASSIGN_OR_RETURN(SynthReport report, Synthesizer(options, writer.get()).Run());
  COLIBRI_RETURN_IF_ERROR(writer->Close());
  return report;
}

}  // namespace colibri::traces
