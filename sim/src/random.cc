#include "colibri/sim/random.h"

#include <cmath>
#include <limits>
#include <string>

namespace colibri::sim {
namespace {

constexpr double kZ99 = 2.3263478740408408;  // the standard normal's 0.99 quantile
constexpr double kTwoPi = 6.283185307179586476925286766559;

uint64_t RotateLeft(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

double StandardNormal(Rng* rng) {
  const double u1 = 1.0 - rng->NextDouble();  // (0, 1]: the log is finite
  const double u2 = rng->NextDouble();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

Rng::Rng(uint64_t seed) {
  uint64_t x = seed;
  for (uint64_t& word : state_) word = engine::SplitMix64Next(&x);
}

uint64_t Rng::NextU64() {
  const uint64_t result = RotateLeft(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = RotateLeft(state_[3], 45);
  return result;
}

double Rng::NextDouble() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }

Result<LatencySampler> LatencySampler::Make(const LatencyDistribution& distribution, std::string_view what) {
  const std::string name(what);
  if (distribution.p50_ns < 0) return Status::InvalidArgument(name + ": p50_ns must be >= 0");
  if (!distribution.has_jitter()) return LatencySampler(distribution, 0.0, 0.0);
  if (distribution.p50_ns == 0) {
    return Status::InvalidArgument(name + ": p50_ns must be > 0 when p99_ns > p50_ns (log-normal jitter)");
  }
  const double mu = std::log(static_cast<double>(distribution.p50_ns));
  const double sigma = (std::log(static_cast<double>(distribution.p99_ns)) - mu) / kZ99;
  return LatencySampler(distribution, mu, sigma);
}

TimeNs LatencySampler::Sample(Rng* rng) const {
  if (!distribution_.has_jitter()) return distribution_.p50_ns;
  const double ns = std::exp(mu_ + sigma_ * StandardNormal(rng));
  constexpr double kMaxNs = static_cast<double>(std::numeric_limits<TimeNs>::max() / 2);
  return static_cast<TimeNs>(std::llround(std::fmin(ns, kMaxNs)));
}

}  // namespace colibri::sim
