#include "colibri/engine/dtype.h"

#include <cmath>

namespace colibri::engine {

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFp32:
      return "fp32";
    case DType::kBf16:
      return "bf16";
    case DType::kFp16:
      return "fp16";
    case DType::kInt8:
      return "int8";
  }
  return "unknown";
}

Result<DType> ParseDType(const std::string& name) {
  for (DType dtype : {DType::kFp32, DType::kBf16, DType::kFp16, DType::kInt8}) {
    if (name == DTypeName(dtype)) return dtype;
  }
  return Status::InvalidArgument("unknown dtype '" + name + "' (expected fp32, bf16, fp16 or int8)");
}

uint32_t DTypeBytes(DType dtype) {
  switch (dtype) {
    case DType::kFp32:
      return 4;
    case DType::kBf16:
    case DType::kFp16:
      return 2;
    case DType::kInt8:
      return 1;
  }
  return 0;
}

float Fp16ToFloat(uint16_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x8000) << 16;
  const uint32_t exponent = (v >> 10) & 0x1F;
  const uint32_t mantissa = v & 0x3FF;
  uint32_t bits;
  if (exponent == 0x1F) {
    bits = sign | 0x7F800000u | (mantissa << 13);  // inf / NaN
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;  // +-0
  } else {
    // Subnormal: value = mantissa x 2^-24, exact in fp32.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    std::memcpy(&bits, &magnitude, 4);
    bits |= sign;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToFp16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return sign | 0x7E00;           // NaN
  if (abs >= 0x477FF000u) return sign | 0x7C00;          // rounds to >= 65520: inf
  if (abs >= 0x38800000u) {                              // normal half (>= 2^-14)
    const uint32_t rounded = abs + 0xFFFu + ((abs >> 13) & 1);  // round to nearest even at bit 13
    return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
  }
  // Subnormal half or zero: value / 2^-24, rounded to nearest even.
  float magnitude;
  std::memcpy(&magnitude, &abs, 4);
  const float scaled = magnitude * 16777216.0f;  // exact: power of two
  return sign | static_cast<uint16_t>(std::nearbyint(scaled));
}

}  // namespace colibri::engine
