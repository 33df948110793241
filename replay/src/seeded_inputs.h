// The seeded inputs of a local run (local_run.h): token ids and the hidden
// states they drive. Deterministic given the seed: the same inputs on every
// machine and standard library (no std:: distributions).
//
// TokenStreams: each request draws its tokens from its own stream, Zipf
// distributed over the vocabulary (rank r has weight 1 / r^1.1; natural
// language token frequencies are roughly Zipfian), token id = rank - 1.
//
// HiddenStates: per (request, MoE layer) an AR(1) process
// x_t = rho x_{t-1} + sqrt(1 - rho^2) e(layer, token_t), where e is a fixed
// standard normal "embedding" of each (layer, token id), made from a stream
// seeded by both. The same token pushes routing the same way, and with a high
// rho consecutive tokens of a request route alike (realistic decode locality).
//
// Ownership: plain values. Thread-safety: one thread at a time. Errors: none
// (request and layer indexes are the caller's to keep in range).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace colibri::replay {

class TokenStreams {
 public:
  TokenStreams(uint64_t seed, uint32_t requests, uint32_t vocab);
  // The next token id of `request` (< requests).
  uint32_t Next(uint64_t request);

 private:
  static constexpr double kZipfExponent = 1.1;
  std::vector<double> cdf_;
  std::vector<std::mt19937_64> rngs_;
};

class HiddenStates {
 public:
  HiddenStates(uint64_t seed, uint32_t requests, uint32_t layers, uint32_t hidden, double rho);
  // The state of (request, layer) after `token`: `hidden` floats, valid until the next call for that pair.
  const float* Next(uint64_t request, uint32_t layer, uint32_t token);

 private:
  uint64_t seed_;
  uint32_t layers_, hidden_;
  double rho_;
  std::vector<float> state_;
  std::vector<bool> started_;
};

}  // namespace colibri::replay
