#include "colibri/bench/expert_set.h"

#include <cmath>
#include <cstring>
#include <new>

#include "colibri/engine/mix.h"

namespace colibri::bench {
namespace {

using engine::DType;
using engine::ExpertLayout;

// One rows x cols matrix of weights ~ U(-1, 1) / sqrt(cols) in the block's dtype.
void FillMatrix(const ExpertLayout& layout, std::byte* matrix, std::byte* scales, uint32_t rows, uint32_t cols,
                SyntheticValues* values) {
  const float range = 1.0f / std::sqrt(static_cast<float>(cols));
  const uint64_t count = uint64_t{rows} * cols;
  for (uint64_t i = 0; i < count; ++i) {
    const float w = values->Next();
    uint16_t half = 0;
    switch (layout.dtype) {
      case DType::kFp32: {
        const float scaled = w * range;
        std::memcpy(matrix + 4 * i, &scaled, 4);
        break;
      }
      case DType::kBf16:
        half = engine::FloatToBf16(w * range);
        std::memcpy(matrix + 2 * i, &half, 2);
        break;
      case DType::kFp16:
        half = engine::FloatToFp16(w * range);
        std::memcpy(matrix + 2 * i, &half, 2);
        break;
      case DType::kInt8:
        matrix[i] = static_cast<std::byte>(static_cast<int8_t>(std::lround(w * 127)));
        break;
    }
  }
  if (layout.dtype != DType::kInt8) return;
  const float scale = range / 127;
  for (uint32_t r = 0; r < rows; ++r) std::memcpy(scales + 4 * uint64_t{r}, &scale, 4);
}

}  // namespace

float SyntheticValues::Next() {
  const uint64_t z = engine::SplitMix64Next(&state_);
  return static_cast<float>(static_cast<double>(z >> 11) * 0x1p-52 - 1.0);
}

std::vector<float> SyntheticActivations(size_t count) {
  SyntheticValues values;
  std::vector<float> x(count);
  for (float& v : x) v = values.Next();
  return x;
}

void AlignedDelete::operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }

AlignedBytes AllocateAlignedBytes(uint64_t bytes) {
  AlignedBytes buffer(new (std::align_val_t{64}) std::byte[bytes]);
  std::memset(buffer.get(), 0, bytes);  // commit the pages before timing
  return buffer;
}

ExpertSet MakeExpertSet(DType dtype, uint32_t hidden, uint32_t intermediate, uint64_t working_set_bytes) {
  ExpertSet set;
  set.layout = ExpertLayout::Make(dtype, hidden, intermediate);
  set.count = working_set_bytes / set.layout.block_bytes + 1;
  set.blocks = AllocateAlignedBytes(set.count * set.layout.block_bytes);
  const ExpertLayout& l = set.layout;
  std::byte* first = set.blocks.get();
  SyntheticValues values;
  FillMatrix(l, first + l.gate_offset, first + l.gate_scales_offset, intermediate, hidden, &values);
  FillMatrix(l, first + l.up_offset, first + l.up_scales_offset, intermediate, hidden, &values);
  FillMatrix(l, first + l.down_offset, first + l.down_scales_offset, hidden, intermediate, &values);
  for (uint64_t i = 1; i < set.count; ++i) std::memcpy(first + i * l.block_bytes, first, l.block_bytes);
  return set;
}

}  // namespace colibri::bench
