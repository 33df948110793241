#include "model_codec.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace colibri::engine::model_detail {
namespace {

static_assert(std::endian::native == std::endian::little, "model files are little-endian; add byte swaps here");

uint64_t MatrixOffset(const ExpertLayout& layout, MatrixKind kind) {
  switch (kind) {
    case MatrixKind::kGate:
      return layout.gate_offset;
    case MatrixKind::kUp:
      return layout.up_offset;
    case MatrixKind::kDown:
      return layout.down_offset;
  }
  return 0;
}

uint64_t ScalesOffset(const ExpertLayout& layout, MatrixKind kind) {
  switch (kind) {
    case MatrixKind::kGate:
      return layout.gate_scales_offset;
    case MatrixKind::kUp:
      return layout.up_scales_offset;
    case MatrixKind::kDown:
      return layout.down_scales_offset;
  }
  return 0;
}

// Byte offset of a row's first element in the block.
uint64_t RowOffset(const ExpertLayout& layout, MatrixKind kind, uint32_t row) {
  return MatrixOffset(layout, kind) + uint64_t{row} * ShapeOf(layout, kind).cols * DTypeBytes(layout.dtype);
}

template <uint16_t (*kEncode)(float)>
void EncodeHalves(const float* values, uint64_t count, std::byte* out) {
  for (uint64_t i = 0; i < count; ++i) {
    const uint16_t bits = kEncode(values[i]);
    std::memcpy(out + 2 * i, &bits, 2);
  }
}

template <float (*kDecode)(uint16_t)>
void DecodeHalves(const std::byte* in, uint64_t count, float* values) {
  for (uint64_t i = 0; i < count; ++i) {
    uint16_t bits;
    std::memcpy(&bits, in + 2 * i, 2);
    values[i] = kDecode(bits);
  }
}

}  // namespace

const char* MatrixKindName(MatrixKind kind) {
  switch (kind) {
    case MatrixKind::kGate:
      return "gate";
    case MatrixKind::kUp:
      return "up";
    case MatrixKind::kDown:
      return "down";
  }
  return "unknown";
}

MatrixShape ShapeOf(const ExpertLayout& layout, MatrixKind kind) {
  if (kind == MatrixKind::kDown) return {layout.hidden, layout.intermediate};
  return {layout.intermediate, layout.hidden};
}

void EncodeElements(DType dtype, const float* values, uint64_t count, std::byte* out) {
  switch (dtype) {
    case DType::kFp32:
      std::memcpy(out, values, count * 4);
      return;
    case DType::kBf16:
      return EncodeHalves<FloatToBf16>(values, count, out);
    case DType::kFp16:
      return EncodeHalves<FloatToFp16>(values, count, out);
    case DType::kInt8:
      return;  // rows only: needs a scale (EncodeRow)
  }
}

void DecodeElements(DType dtype, const std::byte* in, uint64_t count, float* values) {
  switch (dtype) {
    case DType::kFp32:
      std::memcpy(values, in, count * 4);
      return;
    case DType::kBf16:
      return DecodeHalves<Bf16ToFloat>(in, count, values);
    case DType::kFp16:
      return DecodeHalves<Fp16ToFloat>(in, count, values);
    case DType::kInt8:
      return;  // rows only: needs a scale (DecodeRow)
  }
}

float QuantizeInt8Row(const float* values, uint32_t cols, int8_t* q) {
  float max_abs = 0;
  for (uint32_t i = 0; i < cols; ++i) max_abs = std::fmax(max_abs, std::fabs(values[i]));
  const float scale = max_abs / 127.0f;
  if (!(scale > 0)) {  // an all-zero row (or one too small for a normal scale)
    std::memset(q, 0, cols);
    return 0.0f;
  }
  // Adding and subtracting 1.5 x 2^23 rounds |x| < 2^22 to an integer, half
  // to even (the default rounding mode), without a libm call.
  constexpr float kRoundMagic = 12582912.0f;
  for (uint32_t i = 0; i < cols; ++i) {
    const float clamped = std::fmin(std::fmax(values[i] / scale, -127.0f), 127.0f);
    q[i] = static_cast<int8_t>((clamped + kRoundMagic) - kRoundMagic);
  }
  return scale;
}

Status EncodeRow(const ExpertLayout& layout, MatrixKind kind, uint32_t row, const float* values, std::byte* block) {
  const MatrixShape shape = ShapeOf(layout, kind);
  std::byte* out = block + RowOffset(layout, kind, row);
  if (layout.dtype != DType::kInt8) {
    EncodeElements(layout.dtype, values, shape.cols, out);
    return Status::Ok();
  }
  for (uint32_t i = 0; i < shape.cols; ++i) {
    if (!std::isfinite(values[i])) {
      return Status::InvalidArgument("row " + std::to_string(row) + " of " + MatrixKindName(kind) +
                                     " holds a non-finite weight, which int8 cannot represent");
    }
  }
  const float scale = QuantizeInt8Row(values, shape.cols, reinterpret_cast<int8_t*>(out));
  std::memcpy(block + ScalesOffset(layout, kind) + 4ull * row, &scale, 4);
  return Status::Ok();
}

void DecodeRow(const ExpertLayout& layout, MatrixKind kind, uint32_t row, const std::byte* block, float* values) {
  const MatrixShape shape = ShapeOf(layout, kind);
  const std::byte* in = block + RowOffset(layout, kind, row);
  if (layout.dtype != DType::kInt8) return DecodeElements(layout.dtype, in, shape.cols, values);
  float scale;
  std::memcpy(&scale, block + ScalesOffset(layout, kind) + 4ull * row, 4);
  for (uint32_t i = 0; i < shape.cols; ++i) values[i] = static_cast<float>(static_cast<int8_t>(in[i])) * scale;
}

}  // namespace colibri::engine::model_detail
