// How the CLI stores runs (docs/RUNS.md): the --db / --no-store flags, the
// invocation's argv (what re-runs a run), and provenance (tool version,
// commit, wall-clock start and end -- provenance only, never in decisions).
// Thread-safety: SetInvocation before commands run; the rest is free functions.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "colibri/reports/run_store.h"

namespace colibri::cli {

struct StoreFlags {
  std::string db;         // empty: reports::DefaultDbPath()
  bool no_store = false;  // commands that run: do not store
};

// --db on a command that reads or writes the store.
void AddDbFlag(CLI::App* command, StoreFlags* flags);
// --db and --no-store on a command that runs and stores by default.
void AddStoreFlags(CLI::App* command, StoreFlags* flags);
std::string DbPath(const StoreFlags& flags);
Result<std::unique_ptr<reports::RunStore>> OpenStore(const StoreFlags& flags);
// The store opened read-only, for commands that only read it (list, show,
// export, compare, gate, stored reports): an existing file, nothing written.
Result<std::unique_ptr<reports::RunStore>> OpenStoreForReading(const StoreFlags& flags);

// The argv (without the program name) of this process's command.
void SetInvocation(std::vector<std::string> args);
const std::vector<std::string>& Invocation();

// The invocation without the store flags and outputs (--db, --no-store,
// --json, -o/--output) and without each option in `options_to_drop` (with its
// value), then `extra` appended: the argv that re-runs one run.
std::vector<std::string> RerunArgs(const std::vector<std::string>& options_to_drop,
                                   const std::vector<std::string>& extra);

// Tool version, commit, started_at_ms (now) and command_json of a new run.
void StampRun(const std::vector<std::string>& rerun_args, reports::RunInfo* info);
using reports::NowUnixMs;

// The ids of the runs this process stored, in order (runs rerun reads them).
std::vector<int64_t>& StoredRunIds();

}  // namespace colibri::cli
