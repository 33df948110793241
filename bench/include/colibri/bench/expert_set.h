// Synthetic experts for the compute benchmarks: `count` copies of one expert
// block (weights ~ U(-1, 1) / sqrt(cols) in the block's dtype, int8 with
// per-row scales), back to back in one 64-byte-aligned allocation, so that a
// benchmark cycling through them reads its weights from DRAM rather than a
// cache; and the deterministic values behind them (splitmix64, seed 1).
//
// Ownership: an ExpertSet owns its blocks; its views point into them.
// Thread-safety: an ExpertSet is read-only after MakeExpertSet (views may be
// used from many threads); SyntheticValues is a plain value. Errors: none
// (allocation failure is std::bad_alloc, as for any container).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "colibri/engine/dtype.h"
#include "colibri/engine/expert_layout.h"

namespace colibri::bench {

// Uniform values in [-1, 1): the splitmix64 generator (engine::SplitMix64Next) from state 1.
class SyntheticValues {
 public:
  float Next();

 private:
  uint64_t state_ = 1;
};

// `count` values of a fresh SyntheticValues (activations for a benchmark call).
std::vector<float> SyntheticActivations(size_t count);

// 64-byte-aligned bytes.
struct AlignedDelete {
  void operator()(std::byte* p) const;
};
using AlignedBytes = std::unique_ptr<std::byte[], AlignedDelete>;
// `bytes` zeroed (every page committed, so no page fault lands in a timing).
AlignedBytes AllocateAlignedBytes(uint64_t bytes);

struct ExpertSet {
  engine::ExpertLayout layout;
  uint64_t count = 0;  // distinct copies
  AlignedBytes blocks;

  // The i-th expert, cycling: copy i % count.
  engine::ExpertView View(uint64_t i) const {
    return engine::ExpertView{&layout, blocks.get() + (i % count) * layout.block_bytes};
  }
};

// working_set_bytes / block_bytes + 1 copies of one expert of `dtype` with
// hidden size `hidden` and intermediate size `intermediate` (4 KiB-aligned
// blocks, ExpertLayout::Make); working_set_bytes 0 gives one block.
ExpertSet MakeExpertSet(engine::DType dtype, uint32_t hidden, uint32_t intermediate, uint64_t working_set_bytes);

// The FLOPs of one SwiGLU expert FFN call over `tokens` tokens: 2 x 3 x H x I
// per token (gate, up and down; SiLU and the product not counted).
inline double FfnFlopsPerCall(uint32_t hidden, uint32_t intermediate, uint32_t tokens) {
  return 2.0 * 3.0 * hidden * intermediate * tokens;
}

}  // namespace colibri::bench
