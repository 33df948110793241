// Clock: the engine's notion of now, in integer nanoseconds. The engine never
// reads the wall clock itself; it asks the Clock it was given (the event
// loop's). MonotonicClock reads CLOCK_MONOTONIC and is the only place in
// engine/ that does. Thread-safe: Now() may be called from any thread.
#pragma once

#include <cstdint>

namespace colibri::engine {

using TimeNs = int64_t;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimeNs Now() const = 0;
};

class MonotonicClock final : public Clock {
 public:
  TimeNs Now() const override;
};

}  // namespace colibri::engine
