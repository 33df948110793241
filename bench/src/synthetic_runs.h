// Synthetic run results for the run-store benchmark (store_bench.h): what a
// replay records, drawn from seeded log-normal step latencies (one in a
// thousand a 5-50x stall), different per run. Plain functions; no errors.
#pragma once

#include <cstdint>

#include "colibri/reports/run_store.h"

namespace colibri::bench {

// Run `run`'s results: `samples` raw step latencies over the 8 steps
// "step_latency_ns.<step>" (one layer batch per 8 of them), 1000 request
// latencies with their TTFT and TPOT, a 48 x 128 expert load matrix, cache
// tiers, a hit-rate series and a few scalars; seeded by
// sim::DeriveSeed(seed, "bench-store-run-<run>"), later runs a little slower.
reports::RunResults SyntheticRun(uint64_t samples, uint64_t seed, int run);

}  // namespace colibri::bench
