// The run store's defences against damage (docs/RELIABILITY.md): a checksum
// of every finished run, a look at a database file before SQLite opens it,
// and PRAGMA quick_check before anything is written. Internal to reports/.
//
// Stateless functions over a borrowed sqlite3 connection; thread-safety as
// the connection's. Errors name the database path and the cause.
#pragma once

#include <cstdint>
#include <string>

#include "colibri/status.h"

struct sqlite3;

namespace colibri::reports::store_integrity {

// Files at most this large are quick_checked when opened for writing (about
// a second of reading on a slow disk; larger stores skip the check).
inline constexpr uint64_t kQuickCheckMaxBytes = 256ull << 20;

// SHA-256 of what the store holds for `run_id`: its runs row (every column
// but run_id and results_digest) and every row of its results tables, in key
// order, each value with its SQLite type. FinishRun stores it in
// runs.results_digest; Results() recomputes and compares.
Result<std::string> RunDigest(sqlite3* db, int64_t run_id);

// Before sqlite3_open: kNotFound when the directory (or, with `must_exist`,
// the file) is missing; kInvalidArgument when `path` is empty, a directory,
// a special file, or a file that is not an SQLite database.
Status CheckStorePath(const std::string& path, bool must_exist);

// PRAGMA quick_check (files up to kQuickCheckMaxBytes): kCorruption with
// SQLite's first complaint when the database is malformed.
Status QuickCheck(sqlite3* db, const std::string& path);

}  // namespace colibri::reports::store_integrity
