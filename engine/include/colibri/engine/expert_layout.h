// Layout of one expert's weights in an expert block (a slot of experts.bin,
// of the L2 host cache and of the L1 device pool; the same bytes everywhere).
//
// A SwiGLU expert has three row-major matrices: gate [I x H], up [I x H] and
// down [H x I] (H = hidden size, I = expert intermediate size), adjacent in
// this order, each starting at a 64-byte-aligned offset. int8 blocks add the
// fp32 scales after the matrices: gate [I], up [I], down [H] (one per output
// row; weight = int8 x scale). The block is padded to `block_alignment`
// (4 KiB by default) so blocks can be read with O_DIRECT.
// Plain value type, thread-safe to share.
#pragma once

#include <cstddef>
#include <cstdint>

#include "colibri/engine/dtype.h"

namespace colibri::engine {

struct ExpertLayout {
  DType dtype = DType::kFp32;
  uint32_t hidden = 0;        // H
  uint32_t intermediate = 0;  // I
  uint64_t gate_offset = 0;
  uint64_t up_offset = 0;
  uint64_t down_offset = 0;
  uint64_t gate_scales_offset = 0;  // int8 only
  uint64_t up_scales_offset = 0;    // int8 only
  uint64_t down_scales_offset = 0;  // int8 only
  uint64_t payload_bytes = 0;       // bytes used by matrices (+ scales)
  uint64_t block_bytes = 0;         // payload rounded up to block_alignment

  static ExpertLayout Make(DType dtype, uint32_t hidden, uint32_t intermediate, uint64_t block_alignment = 4096);
  // Multiply-accumulates of one token through the expert: 3 x H x I.
  uint64_t MacsPerToken() const { return 3ull * hidden * intermediate; }
};

// A read-only view of one expert block in memory (a pool slot).
struct ExpertView {
  const ExpertLayout* layout = nullptr;
  const std::byte* block = nullptr;
};

}  // namespace colibri::engine
