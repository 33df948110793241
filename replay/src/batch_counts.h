// The counts `colibri run` (local_run.cc) and `colibri replay`
// (replay_run.cc) both keep of each layer batch: lookups and what the tiers
// served (in all, and in decode batches), experts staged, reads retried.
// Their results name these fields alike (LocalRunResult, ReplayResult), so
// one accumulator serves both. Header-only; no state; no errors.
#pragma once

#include <cstdint>

#include "colibri/engine/observer.h"

namespace colibri::replay {

template <typename RunResult>
void AddBatchCounts(const engine::LayerBatchReport& r, bool prefill, RunResult* out) {
  const uint64_t served = r.l1_hits + r.l2_hits;
  out->lookups += r.distinct_experts;
  out->served += served;
  if (!prefill) {
    out->lookups_decode += r.distinct_experts;
    out->served_decode += served;
    out->l1_hits_decode += r.l1_hits;
    out->l2_hits_decode += r.l2_hits;
  }
  out->staged += r.staged;
  out->read_retries += r.read_retries;
}

}  // namespace colibri::replay
