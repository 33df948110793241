#include "colibri/bench/stream_copy.h"

#include <cstddef>

#include "colibri/bench/call_timing.h"
#include "colibri/bench/expert_set.h"

namespace colibri::bench {
namespace {

// Kept a plain loop: the compiler would otherwise call memcpy (non-temporal stores).
#if defined(__clang__)
#define COLIBRI_PLAIN_LOOP __attribute__((noinline, no_builtin("memcpy")))
#else
#define COLIBRI_PLAIN_LOOP __attribute__((noinline, optimize("no-tree-loop-distribute-patterns")))
#endif
COLIBRI_PLAIN_LOOP void StreamCopy(float* __restrict a, const float* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] = b[i];
}

}  // namespace

StreamCopyTiming MeasureStreamCopy(uint64_t working_set_bytes, double seconds, int repeats) {
  const size_t n = working_set_bytes / 2 / sizeof(float);
  AlignedBytes a = AllocateAlignedBytes(n * sizeof(float));
  AlignedBytes b = AllocateAlignedBytes(n * sizeof(float));
  float* dst = reinterpret_cast<float*>(a.get());
  const float* src = reinterpret_cast<const float*>(b.get());
  auto best = TimeBestWindow(seconds, repeats, [&](uint64_t) {
    StreamCopy(dst, src, n);
    return Status::Ok();
  });
  // The call never fails, so neither does the timing.
  return StreamCopyTiming{n * sizeof(float), best.value().calls, best.value().seconds};
}

}  // namespace colibri::bench
