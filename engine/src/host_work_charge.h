// Where the engine charges modelled host work (host_work.h) to the event
// loop's clock: the engine's own work (scheduling, routing, gathers,
// aggregation, read submission) moves a simulated clock by the model's time.
// Thread-safety: the engine's thread. No errors.
#pragma once

#include <cstdint>

#include "colibri/engine/moe_engine.h"

namespace colibri::engine {

// Moves the loop's clock by `ns` of modelled host work.
inline void ChargeHostWork(EventLoop& loop, TimeNs ns) { loop.WaitUntil(loop.Now() + ns); }

// With a host work model: moves the loop's clock by the submission of a read
// of `bytes` about to be submitted, when the storage will issue it at once
// (fewer than its queue depth outstanding).
inline void ChargeReadSubmit(const EngineBackends& backends, uint64_t bytes) {
  const HostWorkModel* model = backends.host_work;
  if (model == nullptr) return;
  const size_t in_flight = backends.storage->outstanding();
  if (in_flight >= backends.storage->caps().queue_depth) return;
  ChargeHostWork(*backends.loop, model->ReadSubmitNs(bytes, in_flight));
}

}  // namespace colibri::engine
