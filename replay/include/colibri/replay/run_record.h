// A replay as the run store keeps it: the RunInfo that identifies and re-runs
// it and the RunResults it measured (docs/RUNS.md lists every name).
//
// Thread-safety: free functions over plain values. Errors: the trace's digest
// cannot be computed (kNotFound / kIoError with the path).
#pragma once

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

}  // namespace colibri::replay
