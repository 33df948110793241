// The `colibri bench store` suite (docs/RUNS.md, docs/BENCHMARKS.md): the
// SQLite run store against the targets "storing a run of 10 million step
// latencies takes < 10 s and a compare of 10 such runs < 5 s" (other sizes
// report the same targets for reference). Each run's results resemble a
// replay's (seeded synthetic latencies, one run in memory at a time;
// generating them is not timed). Timed: storing each run (BeginRun +
// FinishRun into one fresh database in `dir`, removed unless `keep`), then
// BuildComparison over all runs plus RenderTable.
//
// Reference, in the same process: each run's raw samples written to a flat
// file (fwrite of the int64 arrays + fsync), and a compare that reads those
// files back and ranks each distribution by a full std::sort on one thread.
// Its P50/P90/P99/P99.9 must equal the compare's for every run and
// distribution. The reference files are always removed.
//
// Ownership: the call owns the database (unless kept) and the reference
// files. Thread-safety: one call at a time per directory. Errors: kNotFound
// for a missing directory; the store's and the files' errors (kIoError);
// kCorruption when the compare's percentiles differ from the reference's (a
// failed check).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "colibri/bench/harness.h"
#include "colibri/reports/run_store.h"
#include "colibri/status.h"

namespace colibri::bench {

// The targets.
inline constexpr double kStoreTargetS = 10;
inline constexpr double kCompareTargetS = 5;

struct StoreBenchOptions {
  int runs = 10;                  // runs to store and compare
  uint64_t samples = 10'000'000;  // raw step latencies per run
  std::string dir;                // for the database and the reference files
  uint64_t seed = 1;              // of the synthetic latencies
  bool keep = false;              // keep the database
  // Fills in a run's provenance (tool version, commit, start time, command)
  // before it is stored; empty: the start time only.
  std::function<void(reports::RunInfo*)> stamp_run;
};

// The suite's figures: runs, samples_per_run, store_s {min, median, max,
// per_run}, compare_s, compare_table_bytes, db_path, kept, db_bytes,
// stored_samples, bytes_per_sample, reference, ratios, targets,
// percentiles_match, first_run_percentiles, seed, peak_rss_bytes.
// Progress: one step per run, then the compare.
Result<Json> RunStoreBench(const StoreBenchOptions& options, const Observer& observer = {});

}  // namespace colibri::bench
