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

// Before opening for writing: kIoError naming the cause when the store
// cannot be written -- its file system is mounted read-only, its directory
// is not writable (SQLite creates <path>-wal and <path>-shm there), or the
// file is read-only.
Status CheckStoreWritable(const std::string& path);

// How a reading command must open `path` (which exists): plainly, or -- when
// its directory cannot be written (a read-only file system, no write
// permission), so SQLite cannot create the WAL index beside it -- as an
// immutable file. An error when the directory cannot be written and a
// non-empty <path>-wal holds changes an immutable open would not see.
Result<bool> NeedsImmutableOpen(const std::string& path);
// The "file:...?immutable=1" URI of `path` (percent-escaped) for SQLITE_OPEN_URI.
std::string ImmutableUri(const std::string& path);

// PRAGMA quick_check (files up to kQuickCheckMaxBytes): kCorruption with
// SQLite's first complaint when the database is malformed; kIoError when
// SQLite cannot run it for another reason (the cause, not "damaged").
Status QuickCheck(sqlite3* db, const std::string& path);

}  // namespace colibri::reports::store_integrity
