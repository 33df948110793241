// Element and row codecs between fp32 and the stored weight dtypes, on the
// matrices of an ExpertLayout block. Rows are output channels (gate/up: I rows
// of H; down: H rows of I); an int8 row carries one fp32 scale. Bytes are
// little-endian. Free functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "colibri/engine/expert_layout.h"
#include "colibri/status.h"

namespace colibri::engine::model_detail {

enum class MatrixKind : uint8_t { kGate = 0, kUp = 1, kDown = 2 };
inline constexpr MatrixKind kMatrixKinds[] = {MatrixKind::kGate, MatrixKind::kUp, MatrixKind::kDown};
const char* MatrixKindName(MatrixKind kind);  // "gate", "up", "down"

struct MatrixShape {
  uint32_t rows = 0;
  uint32_t cols = 0;
};
MatrixShape ShapeOf(const ExpertLayout& layout, MatrixKind kind);

// fp32 <-> fp32/bf16/fp16 element arrays (round to nearest even); not int8.
void EncodeElements(DType dtype, const float* values, uint64_t count, std::byte* out);
void DecodeElements(DType dtype, const std::byte* in, uint64_t count, float* values);

// Symmetric int8: scale = max|v| / 127 (0 for an all-zero row), q =
// round-half-even(v / scale) clamped to [-127, 127]. Returns the scale.
float QuantizeInt8Row(const float* values, uint32_t cols, int8_t* q);

// Stores row `row` of matrix `kind` (ShapeOf(...).cols values) into `block`
// (and its scale for int8). int8 refuses non-finite values.
Status EncodeRow(const ExpertLayout& layout, MatrixKind kind, uint32_t row, const float* values, std::byte* block);
// Reads row `row` of matrix `kind` back as fp32 (int8: q x scale).
void DecodeRow(const ExpertLayout& layout, MatrixKind kind, uint32_t row, const std::byte* block, float* values);

}  // namespace colibri::engine::model_detail
