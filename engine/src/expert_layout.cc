#include "colibri/engine/expert_layout.h"

namespace colibri::engine {
namespace {

constexpr uint64_t kMatrixAlignment = 64;

uint64_t RoundUp(uint64_t value, uint64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

}  // namespace

ExpertLayout ExpertLayout::Make(DType dtype, uint32_t hidden, uint32_t intermediate, uint64_t block_alignment) {
  ExpertLayout layout;
  layout.dtype = dtype;
  layout.hidden = hidden;
  layout.intermediate = intermediate;
  const uint64_t matrix_bytes = static_cast<uint64_t>(hidden) * intermediate * DTypeBytes(dtype);
  uint64_t at = 0;
  layout.gate_offset = at;
  at = RoundUp(at + matrix_bytes, kMatrixAlignment);
  layout.up_offset = at;
  at = RoundUp(at + matrix_bytes, kMatrixAlignment);
  layout.down_offset = at;
  at += matrix_bytes;
  if (dtype == DType::kInt8) {
    at = RoundUp(at, kMatrixAlignment);
    layout.gate_scales_offset = at;
    at = RoundUp(at + 4ull * intermediate, kMatrixAlignment);
    layout.up_scales_offset = at;
    at = RoundUp(at + 4ull * intermediate, kMatrixAlignment);
    layout.down_scales_offset = at;
    at += 4ull * hidden;
  }
  layout.payload_bytes = at;
  layout.block_bytes = RoundUp(at, block_alignment == 0 ? 1 : block_alignment);
  return layout;
}

}  // namespace colibri::engine
