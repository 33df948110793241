// Integer-nanosecond arithmetic shared by the models (internal to sim/).
// Free functions, thread-safe.
#pragma once

#include <cstdint>

#include "colibri/engine/clock.h"

namespace colibri::sim::model_internal {

// ceil(amount * 1e9 / per_s): the ns to move `amount` bytes (or do `amount`
// flops) at `per_s` per second, exact for any 64-bit amount. `per_s` > 0.
inline engine::TimeNs DurationNs(uint64_t amount, uint64_t per_s) {
  const unsigned __int128 scaled = static_cast<unsigned __int128>(amount) * 1'000'000'000u;
  return static_cast<engine::TimeNs>((scaled + per_s - 1) / per_s);
}

}  // namespace colibri::sim::model_internal
