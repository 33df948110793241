#include <time.h>

#include "colibri/engine/clock.h"

namespace colibri::engine {

TimeNs MonotonicClock::Now() const {
  struct timespec ts {};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<TimeNs>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace colibri::engine
