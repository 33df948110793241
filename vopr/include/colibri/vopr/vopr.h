// colibri vopr: seeded simulation testing of the engine under faults (in the
// manner of TigerBeetle's VOPR and FoundationDB's simulation).
//
// From one root seed, run i derives its own seed (DeriveSeed(seed,
// "vopr.run.<i>")) and from it a random configuration (DeriveRunConfig): a
// synthetic model's shape and dtype, the routing mode and expert capacity,
// the tier budgets and policies, prefetch,
// staging slots, queue depth, threads, the workload (requests, prompt and
// decode tokens), the read-retry budget and non-zero fault rates (storage
// eio, short, spike, stuck, corrupt; transfer and compute failures). It writes
// that model, then runs the workload twice on the modelled drive with the
// model's real bytes (SimStorage on a SimEventLoop, the real CPU compute:
// replay::LocalRunOptions::modelled_storage, so everything is deterministic):
// the oracle without faults, and the faulty run with them and the engine's
// expert isolation. CheckRun then holds the invariants:
//  - the oracle fails nothing and injects nothing;
//  - every request the faulty run completes has the oracle's output digest,
//    bit for bit (with expert capacity, which couples a batch's tokens, only
//    when no request failed); every failed request names the MoE layer and expert;
//  - per tier, hits + misses = lookups; all served <= all lookups;
//  - the pools hold no more than the budgets plus the staging slots;
//  - reads retried <= the storage faults that fail a read;
//  - with no request failed: the oracle's output digest; and with no read
//    failed for good either (a failed prefetch drops its entry), the same
//    cache decisions and bytes read as the oracle (faults move time only);
//  - both runs are stored complete and intact (read back: status complete,
//    the checksum verified, every fault row there).
// Each run and its faults go to the run store. A run that breaks an
// invariant is reported with the one command that reproduces it.
//
// Thread-safety: RunVopr runs on the calling thread. Ownership: writes models
// under VoprOptions::work_dir (removed after each run). Errors: bad options,
// a store that cannot be opened, a model that cannot be written, as Status;
// a run that fails outright (not an invariant) is reported as a violation.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "colibri/replay/local_run.h"
#include "colibri/sim/fault_spec.h"
#include "colibri/status.h"

namespace colibri::vopr {

struct VoprOptions {
  uint64_t seed = 0;
  uint32_t runs = 20;
  // Soak: > 0 keeps starting runs until this many minutes have passed (wall
  // clock, the harness's only use of it), `runs` then being ignored.
  double minutes = 0;
  int64_t only_run = -1;     // >= 0: run this index alone (what a repro command does)
  std::string db_path;       // the run store; empty: runs are not stored
  std::string work_dir;      // where models are written; required
  std::function<void(uint32_t index)> on_run_start;  // progress, optional
};

// One run's configuration, all derived from its seed.
struct VoprRunConfig {
  uint32_t index = 0;
  uint64_t run_seed = 0;
  engine::ModelConfig shape;  // dtype, layers, experts, top_k, hidden, intermediate
  uint32_t l1_blocks = 0, l2_blocks = 0;  // budgets in expert blocks
  std::string l1_policy, l2_policy, prefetch;
  uint32_t staging_slots = 1, queue_depth = 1, threads = 1, read_retries = 0;
  uint32_t requests = 1, prefill_tokens = 1, decode_passes = 0;
  engine::RoutingOptions routing;  // mode (softmax-topk, sigmoid-grouped, hash-projection, hash-token), capacity
  sim::FaultSpec faults;
  std::string Describe() const;  // one line
};

struct VoprRunReport {
  VoprRunConfig config;
  uint64_t faults_injected = 0;
  std::vector<uint64_t> faults_by_kind;  // sim::FaultKind order
  uint64_t read_retries = 0;
  uint32_t failed_requests = 0;
  int64_t oracle_run_id = 0, faulty_run_id = 0;  // 0: not stored
  std::vector<std::string> violations;           // empty: the run held every invariant
  std::string repro;                             // the command that reproduces this run
};

struct VoprResult {
  std::vector<VoprRunReport> runs;
  std::vector<uint64_t> faults_by_kind;  // sim::FaultKind order
  uint32_t failed_runs() const;
};

VoprRunConfig DeriveRunConfig(uint64_t seed, uint32_t index);
// The invariants over a run's two results; `block_bytes` is the model's.
std::vector<std::string> CheckRun(const VoprRunConfig& config, uint64_t block_bytes,
                                  const replay::LocalRunResult& oracle, const replay::LocalRunResult& faulty);
Result<VoprResult> RunVopr(const VoprOptions& options);
// One run of an explicit configuration (its index and run_seed as given):
// how a regression keeps a run that found a bug after the derivation changes.
Result<VoprRunReport> RunConfig(const VoprOptions& options, const VoprRunConfig& config);

}  // namespace colibri::vopr
