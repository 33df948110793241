// The memory-bandwidth reference of the compute benchmarks: STREAM's "copy"
// kernel (a[i] = b[i], McCalpin's STREAM), one thread, over two arrays that
// together are the working set, counted as bytes read plus bytes written.
// A plain loop the compiler may vectorise but not turn into memcpy (whose
// non-temporal stores would measure something else).
//
// Ownership: the call allocates and frees its arrays. Thread-safety: none
// needed (one thread). Errors: none.
#pragma once

#include <cstdint>

namespace colibri::bench {

struct StreamCopyTiming {
  uint64_t array_bytes = 0;  // each of the two arrays
  uint64_t copies = 0;       // whole-array copies in the best window
  double seconds = 0;        // of the best window
  double bytes_per_s() const { return seconds > 0 ? 2.0 * array_bytes * copies / seconds : 0; }
};

// Two arrays of working_set_bytes / 2 (whole floats); the best of `repeats`
// windows of `seconds`.
StreamCopyTiming MeasureStreamCopy(uint64_t working_set_bytes, double seconds, int repeats);

}  // namespace colibri::bench
