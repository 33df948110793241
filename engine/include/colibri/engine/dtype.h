// Weight dtypes of expert matrices and their element conversions.
//
// Activations are fp32 everywhere; expert weights are stored as fp32, bf16,
// fp16 or int8 (symmetric, one fp32 scale per output row per matrix).
// Conversions are exact where the format allows it (bf16/fp16 -> fp32) and
// round-to-nearest-even the other way. Free functions, thread-safe.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "colibri/status.h"

namespace colibri::engine {

enum class DType : uint8_t { kFp32 = 0, kBf16 = 1, kFp16 = 2, kInt8 = 3 };

// "fp32", "bf16", "fp16", "int8".
const char* DTypeName(DType dtype);
Result<DType> ParseDType(const std::string& name);
// Bytes of one stored weight element (int8: 1; its scales are extra).
uint32_t DTypeBytes(DType dtype);

inline float Bf16ToFloat(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even; NaN stays NaN.
inline uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7FFFu + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

// IEEE 754 half precision, round to nearest even, with subnormals.
float Fp16ToFloat(uint16_t v);
uint16_t FloatToFp16(float f);

}  // namespace colibri::engine
