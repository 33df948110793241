// The project's one splitmix64 and one FNV-1a (64-bit), and its seeding
// scheme built on them (DeriveSeed: root seed + component name). Written out by hand, so every standard library and
// every folder gets the same bits: seeds, synthetic values and digests that
// tests and recorded runs pin depend on them. Header-only, constexpr,
// stateless except for the state a caller passes; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace colibri::engine {

// splitmix64's increment: the golden gamma, 2^64 / phi rounded to odd.
inline constexpr uint64_t kSplitMix64Gamma = 0x9E3779B97F4A7C15ull;

// One splitmix64 output (Steele, Lea, Flood 2014; Vigna's splitmix64.c) for
// the generator state `x`: x + gamma, then the finaliser. A bijective 64-bit
// mixer; SplitMix64(0) = 0xE220A8397B1DCDAF, the published first output.
constexpr uint64_t SplitMix64(uint64_t x) {
  x += kSplitMix64Gamma;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The splitmix64 generator: returns SplitMix64(*state) and advances *state by
// the gamma (Vigna's next(): state += gamma, then the finaliser of state).
constexpr uint64_t SplitMix64Next(uint64_t* state) {
  const uint64_t z = SplitMix64(*state);
  *state += kSplitMix64Gamma;
  return z;
}

// FNV-1a, 64-bit: the offset basis (the hash of no bytes) and the prime.
inline constexpr uint64_t kFnv1a64Basis = 0xCBF29CE484222325ull;
inline constexpr uint64_t kFnv1a64Prime = 0x100000001B3ull;

// Folds one byte into the running FNV-1a hash `hash`.
constexpr uint64_t Fnv1a64Byte(uint64_t hash, uint8_t byte) { return (hash ^ byte) * kFnv1a64Prime; }

// FNV-1a 64 over the bytes of `text`, continuing from `hash`.
constexpr uint64_t Fnv1a64(std::string_view text, uint64_t hash = kFnv1a64Basis) {
  for (const char c : text) hash = Fnv1a64Byte(hash, static_cast<uint8_t>(c));
  return hash;
}

// FNV-1a 64 over `n` bytes at `data`, continuing from `hash`.
inline uint64_t Fnv1a64Bytes(const void* data, size_t n, uint64_t hash = kFnv1a64Basis) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) hash = Fnv1a64Byte(hash, p[i]);
  return hash;
}

// The seed of `component`'s stream in a run seeded with `root_seed`:
// SplitMix64(SplitMix64(root_seed) ^ Fnv1a64(component)). One root seed per
// run, and each component (a model, a probe, a round: "io_bench_reads.2")
// derives its own stream from its name, so adding a component never perturbs
// the others (ARCHITECTURE.md, "Determinism rules").
constexpr uint64_t DeriveSeed(uint64_t root_seed, std::string_view component) {
  return SplitMix64(SplitMix64(root_seed) ^ Fnv1a64(component));
}

}  // namespace colibri::engine
