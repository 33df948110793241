// Timing repeated calls: the steady clock in seconds, and the best of several
// fixed-length windows of back-to-back calls with every call's duration --
// how the compute benchmarks time an expert FFN, a GEMM or a copy.
//
// Ownership: `call` is borrowed for the timing. Thread-safety: the template
// runs `call` on the calling thread only.
// Errors: the first error `call` returns ends the timing and is returned.
#pragma once

#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "colibri/status.h"

namespace colibri::bench {

// std::chrono::steady_clock now, in seconds from its epoch.
inline double SteadyNowS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One window of back-to-back calls.
struct CallWindow {
  uint64_t calls = 0;
  double seconds = 0;            // from before the first call to after the last
  std::vector<int64_t> call_ns;  // each call's duration, in order (their sum is `seconds`)
  double calls_per_s() const { return seconds > 0 ? static_cast<double>(calls) / seconds : 0; }
};

// `repeats` windows, each calling `call(i)` until `seconds` have passed (at
// least once), with i counting on across windows (so a caller cycling
// through a working set keeps cycling); returns the window with the most
// calls per second (the least disturbed on a shared machine). `call` returns
// a Status. The clock is read once per call.
template <typename Call>
Result<CallWindow> TimeBestWindow(double seconds, int repeats, Call call) {
  CallWindow best;
  uint64_t i = 0;
  for (int r = 0; r < repeats; ++r) {
    CallWindow window;
    const double start = SteadyNowS();
    double last = start;
    do {
      COLIBRI_RETURN_IF_ERROR(call(i++));
      const double now = SteadyNowS();
      window.call_ns.push_back(static_cast<int64_t>((now - last) * 1e9));
      last = now;
      ++window.calls;
      window.seconds = now - start;
    } while (window.seconds < seconds);
    if (best.calls == 0 || window.calls_per_s() > best.calls_per_s()) best = std::move(window);
  }
  return best;
}

}  // namespace colibri::bench
