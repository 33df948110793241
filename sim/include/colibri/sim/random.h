// Deterministic random streams for the models (see ARCHITECTURE.md,
// "Determinism rules"): one root seed per run, and each component derives its
// own stream from (root seed, component name), so adding a component never
// perturbs the others.
//
// Everything here is written out by hand (splitmix64, FNV-1a, xoshiro256**,
// Box-Muller) instead of using <random>'s distributions, whose output differs
// between standard libraries; splitmix64 and FNV-1a are the engine's
// (colibri/engine/mix.h), the project's one definition of each. The latency sampler's log and exp come from the
// C library; a last-bit difference there is absorbed by rounding to integer
// nanoseconds except in rare ties.
//
// Plain values; thread-safety none (one Rng per component, used by one thread).
#pragma once

#include <cstdint>
#include <string_view>

#include "colibri/engine/mix.h"
#include "colibri/sim/hardware.h"
#include "colibri/status.h"

namespace colibri::sim {

// One splitmix64 output: a bijective 64-bit mixer (Steele, Lea, Flood 2014).
using engine::SplitMix64;
// FNV-1a, 64-bit, over the bytes of `text`.
using engine::Fnv1a64;
// The seed of `component`'s stream in a run seeded with `root_seed`.
using engine::DeriveSeed;

// xoshiro256** (Blackman, Vigna 2018), its state filled by splitmix64 from the seed.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t NextU64();
  // Uniform in [0, 1): the top 53 bits of NextU64() times 2^-53.
  double NextDouble();

 private:
  uint64_t state_[4];
};

// A standard normal variate by the Box-Muller transform (the cosine branch):
// two uniforms from `rng` per call.
double StandardNormal(Rng* rng);

// Draws latencies from a log-normal distribution fitted to (p50, p99):
// mu = ln p50, sigma = (ln p99 - ln p50) / z(0.99) with z(0.99) =
// 2.3263478740408408; a normal variate by Box-Muller (two uniforms per
// sample). Without jitter (p99 <= p50) every sample is exactly p50 and no
// randomness is consumed, so a jitter-free model draws nothing from its stream.
class LatencySampler {
 public:
  // Errors: InvalidArgument for a negative p50, or jitter (p99 > p50) with p50 == 0
  // (a log-normal needs a positive median). `what` names the parameter in messages.
  static Result<LatencySampler> Make(const LatencyDistribution& distribution, std::string_view what);
  // A latency in integer ns (rounded to nearest), >= 0.
  TimeNs Sample(Rng* rng) const;
  const LatencyDistribution& distribution() const { return distribution_; }

 private:
  LatencySampler(const LatencyDistribution& distribution, double mu, double sigma)
      : distribution_(distribution), mu_(mu), sigma_(sigma) {}
  LatencyDistribution distribution_;
  double mu_;
  double sigma_;
};

}  // namespace colibri::sim
