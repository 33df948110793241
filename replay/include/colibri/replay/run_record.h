// A replay or a local run (local_run.h) as the run store keeps it: the
// RunInfo that identifies and re-runs a replay and the RunResults either
// measured (docs/RUNS.md lists every name).
//
// Thread-safety: free functions over plain values. Errors: a trace's digest
// cannot be computed (kNotFound / kIoError with the path).
#pragma once

#include "colibri/replay/local_run.h"
#include "colibri/replay/replay_run.h"
#include "colibri/reports/run_store.h"

namespace colibri::replay {

// Kind "replay", label = the machine, the trace's path and SHA-256, the
// configuration and the machine profile as JSON, the backend set and seed.
// The routing decisions are the input trace (recorded routing) or
// config.routing_out (recompute). The caller fills command_json, tool
// version, commit and times.
Result<reports::RunInfo> ReplayRunInfo(const ReplayConfig& config);

// Every distribution (request_latency_ns, ttft_ns, tpot_ns, queue_ns when
// open loop, step_latency_ns.<step>), the scalars, tiers (all, l1, l2),
// the expert load matrix and the hit-rate series; `summary_json` (the
// command's JSON entry of this run) is kept as a text.
reports::RunResults ReplayRunResults(const ReplayResult& result, const std::string& summary_json);

// A local run's: the distributions (request_latency_ns, ttft_ns, tpot_ns,
// step_latency_ns.<step>), the scalars, tiers, expert load and hit-rate
// series; the output digest, clock "real" and `summary_json` as texts; its
// recording (path and SHA-256), when it made one, as the run's routing.
Result<reports::RunResults> LocalRunStoredResults(const LocalRunResult& result, const std::string& summary_json);

}  // namespace colibri::replay
