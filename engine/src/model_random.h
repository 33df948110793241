// Seeded uniform draws for the model tools (synthetic weights, test inputs).
// One std::mt19937_64 per named stream, seeded with seed ^ FNV-1a-64(name):
// streams are independent of each other and of the order they are used in,
// and the sampling is our own code (no std::*_distribution, whose output
// differs between standard libraries). Each 64-bit output gives two 32-bit
// draws, low half first. Not thread-safe: one stream per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string_view>

#include "colibri/engine/mix.h"

namespace colibri::engine::model_detail {

class SeededUniform {
 public:
  SeededUniform(uint64_t seed, std::string_view stream) : rng_(seed ^ Fnv1a64(stream)) {}

  // `count` draws uniform in [-bound, bound] with 32-bit resolution.
  void Fill(float bound, float* out, size_t count) {
    const float step = bound * kTwoToMinus31;
    size_t i = 0;
    if (have_high_ && count > 0) out[i++] = ToUniform(Next32(), step);
    for (; i + 2 <= count; i += 2) {
      const uint64_t bits = rng_();
      out[i] = ToUniform(static_cast<uint32_t>(bits), step);
      out[i + 1] = ToUniform(static_cast<uint32_t>(bits >> 32), step);
    }
    if (i < count) out[i] = ToUniform(Next32(), step);
  }

 private:
  static constexpr float kTwoToMinus31 = 1.0f / 2147483648.0f;
  static float ToUniform(uint32_t bits, float step) { return static_cast<float>(static_cast<int32_t>(bits)) * step; }

  uint32_t Next32() {
    if (have_high_) {
      have_high_ = false;
      return static_cast<uint32_t>(bits_ >> 32);
    }
    bits_ = rng_();
    have_high_ = true;
    return static_cast<uint32_t>(bits_);
  }

  std::mt19937_64 rng_;
  uint64_t bits_ = 0;
  bool have_high_ = false;
};

}  // namespace colibri::engine::model_detail
