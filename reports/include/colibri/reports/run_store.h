// RunStore: the SQLite run store (docs/RUNS.md). Every replay and engine run
// lands here as one row of `runs` plus its results, so runs can be listed,
// compared, gated and re-run later.
//
// Database: one file (default ./colibri-runs.db; DefaultDbPath), WAL mode,
// foreign keys on, a busy timeout plus retries so several processes can write
// runs at once. The schema is versioned with PRAGMA user_version; Open()
// applies every forward migration from the file's version to kSchemaVersion
// in one transaction, and refuses a file newer than this build.
//
// Crash consistency: BeginRun() commits the run's row with status
// "incomplete"; FinishRun() writes every result and flips the status to
// "complete" in ONE transaction. A process killed at any point leaves either
// no row, or an "incomplete" row with no results -- never partial results
// marked complete. FailRun() marks a run that ended in an error "failed".
//
// Integrity: FinishRun stores a SHA-256 of everything the run holds (its
// row and every results row) in runs.results_digest; Results() recomputes it
// and refuses a run whose stored results no longer match (kCorruption: the
// file was changed or damaged). Runs finished before schema version 3 have
// no checksum and are read unchecked. Before anything is written, a store of
// at most 256 MiB passes PRAGMA quick_check (kCorruption otherwise); reading
// commands open the file read-only (Options::read_only).
//
// Raw samples are stored as zstd-compressed zigzag-delta varints in arrival
// order; a distribution whose raw values were dropped is stored as its
// serialized histogram (Distribution.source says which).
//
// Ownership: the store owns its sqlite3 connection. Thread-safety: one
// RunStore per thread (SQLite serialises writers across processes).
// Errors: kIoError for SQLite failures (with the database path and SQLite's
// message), kNotFound for an unknown run id, kCorruption for a malformed blob,
// kUnsupported for a database written by a newer schema; kNotFound and
// kInvalidArgument name the path and the cause (no such directory, a
// directory, not an SQLite database) before SQLite opens anything.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "colibri/reports/samples.h"
#include "colibri/status.h"

struct sqlite3;

namespace colibri::reports {

inline constexpr int kSchemaVersion = 3;

// ./colibri-runs.db, or $COLIBRI_DB when set and non-empty.
std::string DefaultDbPath();

// The wall clock in Unix milliseconds, for a run's started_at_ms and
// finished_at_ms (provenance only, never in decisions).
int64_t NowUnixMs();

// What identifies a run and is needed to re-run it.
struct RunInfo {
  int64_t run_id = 0;             // assigned by BeginRun
  std::string kind;               // "replay" or "run"
  std::string status;             // "incomplete", "complete", "failed" (set by the store)
  std::string error;              // failed runs: the error message
  std::string label;              // the machine (replay) or model (run)
  std::string trace_path;         // the input trace (replay); empty for `run`
  std::string trace_digest;       // its SHA-256
  // The run's routing decisions, for stability: the input trace when routing
  // was followed as recorded, else the trace file the run wrote.
  std::string routing_path;
  std::string routing_digest;
  std::string config_json;        // engine and replay configuration (JSON object)
  std::string hardware_json;      // the machine profile's contents (JSON object), "{}" for real hardware
  std::string backends;           // e.g. "storage=sim transfer=sim compute=sim"
  std::string command_json;       // the argv (JSON array of strings) that re-runs exactly this run
  uint64_t seed = 0;
  std::string tool_version;
  std::string git_commit;
  int64_t started_at_ms = 0;      // Unix epoch ms (provenance only; never in engine decisions)
  int64_t ended_at_ms = 0;
};

// One cache tier's counters, per lookup.
struct TierCounters {
  std::string tier;               // "l1", "l2", or "all" (served by any tier)
  uint64_t lookups = 0, hits = 0;
  uint64_t decode_lookups = 0, decode_hits = 0;
  uint64_t read_bytes = 0;        // bytes read into this tier from below
};

// Cumulative cache outcome at a point of the run (hit rate over time).
struct HitRatePoint {
  uint64_t layer_batch = 0;       // batches run so far
  int64_t elapsed_ns = 0;         // on the run's clock
  uint64_t lookups = 0, served = 0;
};

// One injected fault (fault-injection wrappers log every one).
struct FaultRecord {
  int64_t at_ns = 0;
  std::string kind;               // e.g. "read_error", "slow_read"
  std::string detail;
};

struct RunResults {
  std::map<std::string, double> scalars;            // e.g. "elapsed_ns", "tokens_per_s", "read_bytes_per_token"
  std::map<std::string, std::string> texts;         // e.g. "event_digest", "clock", "summary_json"
  std::map<std::string, Samples> distributions;     // "request_latency_ns", "step_latency_ns.nvme_read", ...
  std::vector<TierCounters> tiers;
  std::vector<std::vector<uint64_t>> expert_load;   // [MoE layer index][expert] selections
  std::vector<HitRatePoint> hit_rate;               // in run order
  std::vector<FaultRecord> faults;
  // A routing trace the run wrote (computed routing): when set, FinishRun
  // records its path and SHA-256 as the run's routing_path / routing_digest.
  std::string routing_path, routing_digest;
};

// What FinishRun has written so far; a test hook (see Options) sees each stage.
enum class WriteStage { kScalars, kDistributions, kTiers, kExpertLoad, kSeries, kFaults, kStatus };

class RunStore {
 public:
  struct Options {
    int busy_timeout_ms = 30000;
    // Open an existing store for reading only (SQLITE_OPEN_READONLY): no
    // migration, no journal change, nothing written; a missing file is kNotFound.
    bool read_only = false;
    // Called inside FinishRun's transaction after each stage; a crash test
    // kills the process here. Empty in production.
    std::function<void(WriteStage)> on_write_stage;
  };
  // Opens (creating when missing) and migrates the database at `path`.
  static Result<std::unique_ptr<RunStore>> Open(const std::string& path, Options options);
  static Result<std::unique_ptr<RunStore>> Open(const std::string& path) { return Open(path, Options{}); }
  ~RunStore();
  RunStore(const RunStore&) = delete;
  RunStore& operator=(const RunStore&) = delete;

  const std::string& path() const { return path_; }
  const Options& options() const { return options_; }
  int schema_version() const;  // PRAGMA user_version

  // Inserts the run's row as "incomplete" and returns its run_id.
  Result<int64_t> BeginRun(const RunInfo& info);
  // Writes the results and marks the run "complete", all in one transaction.
  Status FinishRun(int64_t run_id, const RunResults& results, int64_t ended_at_ms);
  // Marks the run "failed" with the error message (no results).
  Status FailRun(int64_t run_id, const std::string& error, int64_t ended_at_ms);

  // Every run, newest first (no results loaded).
  Result<std::vector<RunInfo>> List() const;
  Result<RunInfo> Info(int64_t run_id) const;
  // The stored results. `with_samples` false loads each distribution's
  // histogram only (cheap; percentiles then come from it).
  Result<RunResults> Results(int64_t run_id, bool with_samples = true) const;
  // Deletes the run and its results; kNotFound when there is none.
  Status Delete(int64_t run_id);

 private:
  RunStore(std::string path, sqlite3* db, Options options);
  // kCorruption when a finished run's stored results do not match its checksum.
  Status VerifyRun(int64_t run_id) const;
  std::string path_;
  sqlite3* db_;
  Options options_;
};

// Applies the migrations that take a database from user_version `from` to
// `to` (tests build every older version with it). Errors as above.
Status MigrateSchema(sqlite3* db, int from, int to);

}  // namespace colibri::reports
