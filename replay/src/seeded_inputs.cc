#include "seeded_inputs.h"

#include <algorithm>
#include <cmath>

namespace colibri::replay {
namespace {

// Box-Muller from a raw 64-bit stream (the standard distributions differ across libraries).
double Normal(std::mt19937_64& rng) {
  const double u1 = (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53;
  const double u2 = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

}  // namespace

TokenStreams::TokenStreams(uint64_t seed, uint32_t requests, uint32_t vocab) : cdf_(vocab) {
  double sum = 0;
  for (uint32_t r = 0; r < vocab; ++r) cdf_[r] = sum += std::pow(static_cast<double>(r + 1), -kZipfExponent);
  for (double& c : cdf_) c /= sum;
  for (uint64_t i = 0; i < requests; ++i) rngs_.emplace_back(seed ^ (0xD1B54A32D192ED03ull * (i + 1)) ^ 0x746f6b656eull);
}

uint32_t TokenStreams::Next(uint64_t request) {
  const double u = static_cast<double>(rngs_[request]() >> 11) * 0x1.0p-53;
  const auto it = std::upper_bound(cdf_.begin(), cdf_.end(), u);
  return static_cast<uint32_t>(std::min<size_t>(it - cdf_.begin(), cdf_.size() - 1));
}

HiddenStates::HiddenStates(uint64_t seed, uint32_t requests, uint32_t layers, uint32_t hidden, double rho)
    : seed_(seed), layers_(layers), hidden_(hidden), rho_(rho), state_(static_cast<size_t>(requests) * layers * hidden),
      started_(static_cast<size_t>(requests) * layers, false) {}

const float* HiddenStates::Next(uint64_t request, uint32_t layer, uint32_t token) {
  const size_t i = static_cast<size_t>(request) * layers_ + layer;
  float* x = &state_[i * hidden_];
  const double rho = started_[i] ? rho_ : 0.0;  // the first token is its embedding alone
  const double fresh = std::sqrt(1.0 - rho * rho);
  std::mt19937_64 embedding(seed_ ^ (0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(layer) << 32 | token)) ^
                            0x68696464656eull);  // "hidden"
  for (uint32_t h = 0; h < hidden_; ++h) x[h] = static_cast<float>(rho * x[h] + fresh * Normal(embedding));
  started_[i] = true;
  return x;
}

}  // namespace colibri::replay
