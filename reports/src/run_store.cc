#include "colibri/reports/run_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>

#include "run_store_integrity.h"
#include "sample_codec.h"

namespace colibri::reports {

namespace {

// ---- SQLite plumbing ----

// The database file's full path as SQLite resolved it.
std::string DbPath(sqlite3* db) {
  const char* name = sqlite3_db_filename(db, "main");
  return name != nullptr ? name : "";
}

// IoError "<db path>: <what>: <SQLite's message>".
Status SqlError(sqlite3* db, std::string_view what) {
  return Status::IoError(DbPath(db) + ": " + std::string(what) + ": " + sqlite3_errmsg(db));
}

Status NoSuchRun(sqlite3* db, int64_t run_id) {
  return Status::NotFound("run " + std::to_string(run_id) + ": no such run in " + DbPath(db));
}

template <typename T>
Result<T> Prefixed(Result<T> result, const std::string& prefix) {
  if (!result.ok()) return result.status().WithPrefix(prefix);
  return result;
}

// Calls `attempt` (a SQLite call returning a result code) again while it
// reports SQLITE_BUSY or SQLITE_LOCKED, until `timeout_ms` have passed. The
// busy timeout already waits inside most calls; this covers the cases where
// SQLite reports busy without waiting (WAL recovery, journal mode changes).
template <typename Attempt>
int RetryWhileBusy(int timeout_ms, Attempt attempt) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    const int rc = attempt();
    const int primary = rc & 0xff;
    if ((primary != SQLITE_BUSY && primary != SQLITE_LOCKED) || std::chrono::steady_clock::now() >= deadline) return rc;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

Status Exec(sqlite3* db, const std::string& sql, std::string_view what) {
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) return SqlError(db, what);
  return Status::Ok();
}

// A BLOB parameter bound without a copy: `bytes` must outlive the next Step;
// nullptr binds NULL.
struct Blob {
  const std::string* bytes;
};

// One prepared statement, finalized on destruction. A failed bind is kept
// and reported by the next Step. Errors name the database and the SQL.
class Statement {
 public:
  static Result<Statement> Prepare(sqlite3* db, std::string sql) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), static_cast<int>(sql.size()), &stmt, nullptr) != SQLITE_OK) {
      return SqlError(db, sql);
    }
    return Statement(db, stmt, std::move(sql));
  }
  Statement(Statement&& other) noexcept
      : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)), sql_(std::move(other.sql_)),
        bind_rc_(other.bind_rc_) {}
  Statement& operator=(Statement&&) = delete;
  ~Statement() { sqlite3_finalize(stmt_); }

  // Binds the arguments to parameters 1, 2, ...: integers (uint64 as their
  // int64 bits), doubles (NaN binds NULL), text (copied) and Blobs.
  template <typename... Args>
  Statement& Bind(const Args&... args) {
    int index = 0;
    (BindAt(++index, args), ...);
    return *this;
  }
  template <std::integral I>
  Statement& BindAt(int index, I value) {
    return Check(sqlite3_bind_int64(stmt_, index, static_cast<sqlite3_int64>(value)));
  }
  Statement& BindAt(int index, double value) { return Check(sqlite3_bind_double(stmt_, index, value)); }
  Statement& BindAt(int index, std::string_view text) {
    return Check(sqlite3_bind_text64(stmt_, index, text.data() != nullptr ? text.data() : "", text.size(),
                                     SQLITE_TRANSIENT, SQLITE_UTF8));
  }
  Statement& BindAt(int index, Blob blob) {
    if (blob.bytes == nullptr) return Check(sqlite3_bind_null(stmt_, index));
    return Check(sqlite3_bind_blob64(stmt_, index, blob.bytes->data(), blob.bytes->size(), SQLITE_STATIC));
  }

  // True with a row to read, false when done.
  Result<bool> Step() {
    if (bind_rc_ != SQLITE_OK) {
      return Status::IoError(DbPath(db_) + ": " + sql_ + ": binding a parameter: " + sqlite3_errstr(bind_rc_));
    }
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqlError(db_, sql_);
  }
  // Steps a statement that returns no rows, then resets it for new bindings.
  Status Run() {
    const Result<bool> stepped = Step();
    sqlite3_reset(stmt_);
    return stepped.status();
  }
  // Calls on_row(*this) for every row; stops at its first error.
  template <typename OnRow>
  Status ForEachRow(OnRow on_row) {
    while (true) {
      COLIBRI_ASSIGN_OR_RETURN(const bool row, Step());
      if (!row) return Status::Ok();
      COLIBRI_RETURN_IF_ERROR(on_row(*this));
    }
  }

  int64_t Int(int column) const { return sqlite3_column_int64(stmt_, column); }
  uint64_t UInt(int column) const { return static_cast<uint64_t>(Int(column)); }
  // NULL reads as NaN (SQLite stores a NaN as NULL).
  double Double(int column) const {
    if (sqlite3_column_type(stmt_, column) == SQLITE_NULL) return std::numeric_limits<double>::quiet_NaN();
    return sqlite3_column_double(stmt_, column);
  }
  std::string Text(int column) const {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
    return text != nullptr ? std::string(text, static_cast<size_t>(sqlite3_column_bytes(stmt_, column))) : "";
  }
  // nullopt for NULL; valid until the next Step.
  std::optional<std::string_view> Bytes(int column) const {
    if (sqlite3_column_type(stmt_, column) == SQLITE_NULL) return std::nullopt;
    const auto* bytes = static_cast<const char*>(sqlite3_column_blob(stmt_, column));
    return std::string_view(bytes, bytes != nullptr ? static_cast<size_t>(sqlite3_column_bytes(stmt_, column)) : 0);
  }

 private:
  Statement(sqlite3* db, sqlite3_stmt* stmt, std::string sql) : db_(db), stmt_(stmt), sql_(std::move(sql)) {}
  Statement& Check(int rc) {
    if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
    return *this;
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_;
  std::string sql_;
  int bind_rc_ = SQLITE_OK;
};

// Prepares `sql` and binds `args` to it.
template <typename... Args>
Result<Statement> Query(sqlite3* db, std::string sql, const Args&... args) {
  COLIBRI_ASSIGN_OR_RETURN(Statement statement, Statement::Prepare(db, std::move(sql)));
  statement.Bind(args...);
  return statement;
}

// A transaction, rolled back when destroyed uncommitted. Writers take the
// write lock up front (BEGIN IMMEDIATE); readers get one snapshot (BEGIN).
class Transaction {
 public:
  enum class Kind { kRead, kWrite };
  static Result<Transaction> Begin(sqlite3* db, Kind kind, int busy_timeout_ms) {
    const char* sql = kind == Kind::kWrite ? "BEGIN IMMEDIATE" : "BEGIN";
    const int rc = RetryWhileBusy(busy_timeout_ms, [&] { return sqlite3_exec(db, sql, nullptr, nullptr, nullptr); });
    if (rc != SQLITE_OK) return SqlError(db, sql);
    return Transaction(db);
  }
  Transaction(Transaction&& other) noexcept : db_(std::exchange(other.db_, nullptr)) {}
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction() {
    if (db_ != nullptr) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  Status Commit() {
    COLIBRI_RETURN_IF_ERROR(Exec(db_, "COMMIT", "COMMIT"));
    db_ = nullptr;
    return Status::Ok();
  }

 private:
  explicit Transaction(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

// ---- Schema ----

// kMigrations[v - 1] takes a database from user_version v - 1 to v. Append
// only: a released migration never changes.
constexpr const char* kMigrations[] = {
    // 1: runs, their scalars, texts, distributions, cache tiers and expert load.
    R"sql(
CREATE TABLE runs (
  run_id INTEGER PRIMARY KEY AUTOINCREMENT,
  kind TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL CHECK (status IN ('incomplete', 'complete', 'failed')),
  error TEXT NOT NULL DEFAULT '',
  label TEXT NOT NULL DEFAULT '',
  trace_path TEXT NOT NULL DEFAULT '',
  trace_digest TEXT NOT NULL DEFAULT '',
  routing_path TEXT NOT NULL DEFAULT '',
  routing_digest TEXT NOT NULL DEFAULT '',
  config_json TEXT NOT NULL DEFAULT '{}',
  hardware_json TEXT NOT NULL DEFAULT '{}',
  backends TEXT NOT NULL DEFAULT '',
  command_json TEXT NOT NULL DEFAULT '[]',
  seed INTEGER NOT NULL DEFAULT 0,  -- uint64 as its int64 bits
  tool_version TEXT NOT NULL DEFAULT '',
  git_commit TEXT NOT NULL DEFAULT '',
  started_at_ms INTEGER NOT NULL DEFAULT 0,
  ended_at_ms INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE run_scalars (
  run_id INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  value REAL,  -- NULL for NaN
  PRIMARY KEY (run_id, name)
);
CREATE TABLE run_texts (
  run_id INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (run_id, name)
);
CREATE TABLE run_distributions (
  run_id INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  source TEXT NOT NULL CHECK (source IN ('raw', 'histogram')),
  count INTEGER NOT NULL,
  histogram BLOB NOT NULL,  -- LatencyHistogram::Serialize
  raw BLOB,                 -- zstd zigzag-delta varints (sample_codec.h); NULL when the raw values were dropped
  PRIMARY KEY (run_id, name),
  CHECK ((source = 'raw') = (raw IS NOT NULL))
);
CREATE TABLE run_tiers (
  run_id INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  position INTEGER NOT NULL,
  tier TEXT NOT NULL,
  lookups INTEGER NOT NULL,
  hits INTEGER NOT NULL,
  decode_lookups INTEGER NOT NULL,
  decode_hits INTEGER NOT NULL,
  read_bytes INTEGER NOT NULL,
  PRIMARY KEY (run_id, position)
);
CREATE TABLE run_expert_load (
  run_id INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  layer INTEGER NOT NULL,
  loads BLOB NOT NULL,  -- selections per expert (sample_codec.h counts)
  PRIMARY KEY (run_id, layer)
);
)sql",
    // 2: the hit rate over time and the injected faults.
    R"sql(
CREATE TABLE run_hit_rate (
  run_id INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  position INTEGER NOT NULL,
  layer_batch INTEGER NOT NULL,
  elapsed_ns INTEGER NOT NULL,
  lookups INTEGER NOT NULL,
  served INTEGER NOT NULL,
  PRIMARY KEY (run_id, position)
);
CREATE TABLE run_faults (
  run_id INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  position INTEGER NOT NULL,
  at_ns INTEGER NOT NULL,
  kind TEXT NOT NULL,
  detail TEXT NOT NULL,
  PRIMARY KEY (run_id, position)
);
)sql",
    // 3: each finished run's checksum (run_store_integrity.h); '' for runs finished before it.
    R"sql(
ALTER TABLE runs ADD COLUMN results_digest TEXT NOT NULL DEFAULT '';
)sql",
};
static_assert(std::size(kMigrations) == kSchemaVersion, "one migration per schema version");

Result<int> UserVersion(sqlite3* db) {
  COLIBRI_ASSIGN_OR_RETURN(Statement statement, Statement::Prepare(db, "PRAGMA user_version"));
  COLIBRI_ASSIGN_OR_RETURN(const bool row, statement.Step());
  if (!row) return Status::IoError(DbPath(db) + ": PRAGMA user_version returned no row");
  return static_cast<int>(statement.Int(0));
}

// WAL (retried while another process holds a lock), foreign keys, busy timeout.
Status Configure(sqlite3* db, int busy_timeout_ms) {
  sqlite3_busy_timeout(db, busy_timeout_ms);
  constexpr const char* kWal = "PRAGMA journal_mode = WAL";
  std::string mode;
  const auto keep_mode = [](void* out, int, char** values, char**) {
    *static_cast<std::string*>(out) = values[0] != nullptr ? values[0] : "";
    return 0;
  };
  if (RetryWhileBusy(busy_timeout_ms, [&] { return sqlite3_exec(db, kWal, keep_mode, &mode, nullptr); }) != SQLITE_OK) {
    return SqlError(db, kWal);
  }
  if (mode != "wal") return Status::IoError(DbPath(db) + ": " + kWal + ": the journal mode stayed \"" + mode + "\"");
  return Exec(db, "PRAGMA foreign_keys = ON", "PRAGMA foreign_keys = ON");
}

// The file's schema version; kUnsupported when it is newer than this build's.
Result<int> KnownVersion(sqlite3* db) {
  COLIBRI_ASSIGN_OR_RETURN(const int version, UserVersion(db));
  if (version <= kSchemaVersion) return version;
  return Status::Unsupported(DbPath(db) + ": schema version " + std::to_string(version) +
                             " is newer than this build's " + std::to_string(kSchemaVersion) +
                             " (written by a newer colibri)");
}

// Brings the database to kSchemaVersion in one transaction. A current one
// is only read, so opening never waits for another process's writes.
Status MigrateToCurrent(sqlite3* db, int busy_timeout_ms) {
  COLIBRI_ASSIGN_OR_RETURN(const int seen, KnownVersion(db));
  if (seen == kSchemaVersion) return Status::Ok();
  COLIBRI_ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(db, Transaction::Kind::kWrite, busy_timeout_ms));
  COLIBRI_ASSIGN_OR_RETURN(const int version, KnownVersion(db));  // another process may have migrated meanwhile
  if (version < kSchemaVersion) COLIBRI_RETURN_IF_ERROR(MigrateSchema(db, version, kSchemaVersion));
  return transaction.Commit();
}

// ---- Runs ----

// The runs columns that hold RunInfo's strings; then seed, started_at_ms, ended_at_ms.
constexpr std::pair<const char*, std::string RunInfo::*> kInfoTexts[] = {
    {"kind", &RunInfo::kind},
    {"status", &RunInfo::status},
    {"error", &RunInfo::error},
    {"label", &RunInfo::label},
    {"trace_path", &RunInfo::trace_path},
    {"trace_digest", &RunInfo::trace_digest},
    {"routing_path", &RunInfo::routing_path},
    {"routing_digest", &RunInfo::routing_digest},
    {"config_json", &RunInfo::config_json},
    {"hardware_json", &RunInfo::hardware_json},
    {"backends", &RunInfo::backends},
    {"command_json", &RunInfo::command_json},
    {"tool_version", &RunInfo::tool_version},
    {"git_commit", &RunInfo::git_commit},
};
constexpr int kInfoColumns = static_cast<int>(std::size(kInfoTexts)) + 3;

std::string InfoColumnList() {
  std::string columns;
  for (const auto& [name, field] : kInfoTexts) columns += std::string(name) + ", ";
  return columns + "seed, started_at_ms, ended_at_ms";
}

Result<Statement> SelectInfo(sqlite3* db, const std::string& where) {
  return Statement::Prepare(db, "SELECT run_id, " + InfoColumnList() + " FROM runs" + where);
}

// A row of SelectInfo.
RunInfo ReadInfo(const Statement& row) {
  RunInfo info;
  info.run_id = row.Int(0);
  int column = 1;
  for (const auto& [name, field] : kInfoTexts) info.*field = row.Text(column++);
  info.seed = row.UInt(column++);
  info.started_at_ms = row.Int(column++);
  info.ended_at_ms = row.Int(column);
  return info;
}

Result<std::string> RunStatus(sqlite3* db, int64_t run_id) {
  COLIBRI_ASSIGN_OR_RETURN(Statement select, Query(db, "SELECT status FROM runs WHERE run_id = ?", run_id));
  COLIBRI_ASSIGN_OR_RETURN(const bool row, select.Step());
  if (!row) return NoSuchRun(db, run_id);
  return select.Text(0);
}

// kNotFound without the run, kInvalidArgument when it is not "incomplete".
Status RequireIncomplete(sqlite3* db, int64_t run_id, std::string_view action) {
  COLIBRI_ASSIGN_OR_RETURN(const std::string status, RunStatus(db, run_id));
  if (status == "incomplete") return Status::Ok();
  return Status::InvalidArgument("run " + std::to_string(run_id) + ": cannot " + std::string(action) + " a " + status +
                                 " run (only an incomplete one) in " + DbPath(db));
}

Status SetStatus(sqlite3* db, int64_t run_id, std::string_view status, std::string_view error, int64_t ended_at_ms) {
  COLIBRI_ASSIGN_OR_RETURN(Statement update,
                           Query(db, "UPDATE runs SET status = ?, error = ?, ended_at_ms = ? WHERE run_id = ?", status,
                                 error, ended_at_ms, run_id));
  return update.Run();
}

// ---- Results: writing ----

// Runs `sql` once per item: write(statement, position, item) binds and runs it.
template <typename Items, typename Write>
Status InsertEach(sqlite3* db, std::string sql, const Items& items, Write write) {
  COLIBRI_ASSIGN_OR_RETURN(Statement insert, Statement::Prepare(db, std::move(sql)));
  int64_t position = 0;
  for (const auto& item : items) COLIBRI_RETURN_IF_ERROR(write(insert, position++, item));
  return Status::Ok();
}

Status WriteScalars(sqlite3* db, int64_t run_id, const RunResults& results) {
  const auto write = [run_id](Statement& insert, int64_t, const auto& entry) {
    return insert.Bind(run_id, entry.first, entry.second).Run();
  };
  COLIBRI_RETURN_IF_ERROR(
      InsertEach(db, "INSERT INTO run_scalars (run_id, name, value) VALUES (?, ?, ?)", results.scalars, write));
  return InsertEach(db, "INSERT INTO run_texts (run_id, name, value) VALUES (?, ?, ?)", results.texts, write);
}

Status WriteDistributions(sqlite3* db, int64_t run_id, const RunResults& results) {
  return InsertEach(
      db, "INSERT INTO run_distributions (run_id, name, source, count, histogram, raw) VALUES (?, ?, ?, ?, ?, ?)",
      results.distributions, [run_id](Statement& insert, int64_t, const auto& entry) -> Status {
        const Samples& samples = entry.second;
        const std::string histogram = samples.histogram().Serialize();
        std::optional<std::string> raw;
        if (samples.has_raw()) {
          COLIBRI_ASSIGN_OR_RETURN(raw, EncodeSamples(samples.raw()));
        }
        return insert
            .Bind(run_id, entry.first, samples.has_raw() ? "raw" : "histogram", samples.count(), Blob{&histogram},
                  Blob{raw ? &*raw : nullptr})
            .Run();
      });
}

Status WriteTiers(sqlite3* db, int64_t run_id, const RunResults& results) {
  return InsertEach(db,
                    "INSERT INTO run_tiers (run_id, position, tier, lookups, hits, decode_lookups, decode_hits, "
                    "read_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    results.tiers, [run_id](Statement& insert, int64_t position, const TierCounters& t) {
                      return insert
                          .Bind(run_id, position, t.tier, t.lookups, t.hits, t.decode_lookups, t.decode_hits,
                                t.read_bytes)
                          .Run();
                    });
}

Status WriteExpertLoad(sqlite3* db, int64_t run_id, const RunResults& results) {
  return InsertEach(db, "INSERT INTO run_expert_load (run_id, layer, loads) VALUES (?, ?, ?)", results.expert_load,
                    [run_id](Statement& insert, int64_t layer, const std::vector<uint64_t>& loads) -> Status {
                      COLIBRI_ASSIGN_OR_RETURN(const std::string blob, EncodeCounts(loads));
                      return insert.Bind(run_id, layer, Blob{&blob}).Run();
                    });
}

Status WriteHitRate(sqlite3* db, int64_t run_id, const RunResults& results) {
  return InsertEach(
      db,
      "INSERT INTO run_hit_rate (run_id, position, layer_batch, elapsed_ns, lookups, served) VALUES (?, ?, ?, ?, ?, ?)",
      results.hit_rate, [run_id](Statement& insert, int64_t position, const HitRatePoint& p) {
        return insert.Bind(run_id, position, p.layer_batch, p.elapsed_ns, p.lookups, p.served).Run();
      });
}

Status WriteFaults(sqlite3* db, int64_t run_id, const RunResults& results) {
  return InsertEach(db, "INSERT INTO run_faults (run_id, position, at_ns, kind, detail) VALUES (?, ?, ?, ?, ?)",
                    results.faults, [run_id](Statement& insert, int64_t position, const FaultRecord& f) {
                      return insert.Bind(run_id, position, f.at_ns, f.kind, f.detail).Run();
                    });
}

// FinishRun's stages in order, before the status flip (WriteStage::kStatus).
constexpr std::pair<WriteStage, Status (*)(sqlite3*, int64_t, const RunResults&)> kResultStages[] = {
    {WriteStage::kScalars, WriteScalars},     {WriteStage::kDistributions, WriteDistributions},
    {WriteStage::kTiers, WriteTiers},         {WriteStage::kExpertLoad, WriteExpertLoad},
    {WriteStage::kSeries, WriteHitRate},      {WriteStage::kFaults, WriteFaults},
};

// ---- Results: reading ----

// Calls on_row(row) for every row of `sql` (one parameter: the run id).
template <typename OnRow>
Status ForEachRunRow(sqlite3* db, std::string sql, int64_t run_id, OnRow on_row) {
  COLIBRI_ASSIGN_OR_RETURN(Statement select, Query(db, std::move(sql), run_id));
  return select.ForEachRow(on_row);
}

Status ReadScalars(sqlite3* db, int64_t run_id, RunResults* out) {
  COLIBRI_RETURN_IF_ERROR(
      ForEachRunRow(db, "SELECT name, value FROM run_scalars WHERE run_id = ?", run_id, [out](const Statement& row) {
        out->scalars.emplace(row.Text(0), row.Double(1));
        return Status::Ok();
      }));
  return ForEachRunRow(db, "SELECT name, value FROM run_texts WHERE run_id = ?", run_id, [out](const Statement& row) {
    out->texts.emplace(row.Text(0), row.Text(1));
    return Status::Ok();
  });
}

// A row of run_distributions: name, source, count, histogram, raw (NULL unless `with_samples`).
Result<Samples> ReadSamples(const Statement& row, int64_t run_id, bool with_samples) {
  const std::string where = "run " + std::to_string(run_id) + ", distribution " + row.Text(0);
  const std::string source = row.Text(1);
  const uint64_t count = row.UInt(2);
  const std::optional<std::string_view> histogram_bytes = row.Bytes(3);
  const std::optional<std::string_view> raw_bytes = row.Bytes(4);
  if (source != "raw" && source != "histogram") {
    return Status::Corruption(where + ": unknown source \"" + source + "\"");
  }
  if (!histogram_bytes) return Status::Corruption(where + ": no histogram");
  COLIBRI_ASSIGN_OR_RETURN(LatencyHistogram histogram,
                           Prefixed(LatencyHistogram::Deserialize(*histogram_bytes), where));
  if (histogram.count() != count) {
    return Status::Corruption(where + ": histogram of " + std::to_string(histogram.count()) + " samples, count " +
                              std::to_string(count));
  }
  if (source == "histogram" || !with_samples) return Samples::FromHistogram(std::move(histogram));
  if (!raw_bytes) return Status::Corruption(where + ": source raw without raw samples");
  COLIBRI_ASSIGN_OR_RETURN(std::vector<int64_t> values, Prefixed(DecodeSamples(*raw_bytes), where));
  if (values.size() != count) {
    return Status::Corruption(where + ": " + std::to_string(values.size()) + " raw samples, count " +
                              std::to_string(count));
  }
  return Samples::FromRaw(std::move(values));
}

Status ReadDistributions(sqlite3* db, int64_t run_id, bool with_samples, RunResults* out) {
  const std::string sql = std::string("SELECT name, source, count, histogram, ") + (with_samples ? "raw" : "NULL") +
                          " FROM run_distributions WHERE run_id = ?";
  return ForEachRunRow(db, sql, run_id, [&](const Statement& row) -> Status {
    COLIBRI_ASSIGN_OR_RETURN(Samples samples, ReadSamples(row, run_id, with_samples));
    out->distributions.emplace(row.Text(0), std::move(samples));
    return Status::Ok();
  });
}

Status ReadTiers(sqlite3* db, int64_t run_id, RunResults* out) {
  return ForEachRunRow(db,
                       "SELECT tier, lookups, hits, decode_lookups, decode_hits, read_bytes FROM run_tiers "
                       "WHERE run_id = ? ORDER BY position",
                       run_id, [out](const Statement& row) {
                         out->tiers.push_back(TierCounters{.tier = row.Text(0),
                                                           .lookups = row.UInt(1),
                                                           .hits = row.UInt(2),
                                                           .decode_lookups = row.UInt(3),
                                                           .decode_hits = row.UInt(4),
                                                           .read_bytes = row.UInt(5)});
                         return Status::Ok();
                       });
}

Status ReadExpertLoad(sqlite3* db, int64_t run_id, RunResults* out) {
  return ForEachRunRow(
      db, "SELECT layer, loads FROM run_expert_load WHERE run_id = ? ORDER BY layer", run_id,
      [&](const Statement& row) -> Status {
        const std::string where =
            "run " + std::to_string(run_id) + ", expert load of layer " + std::to_string(row.Int(0));
        if (row.UInt(0) != out->expert_load.size()) return Status::Corruption(where + ": layers before it are missing");
        const std::optional<std::string_view> blob = row.Bytes(1);
        if (!blob) return Status::Corruption(where + ": no loads");
        COLIBRI_ASSIGN_OR_RETURN(std::vector<uint64_t> loads, Prefixed(DecodeCounts(*blob), where));
        out->expert_load.push_back(std::move(loads));
        return Status::Ok();
      });
}

Status ReadSeries(sqlite3* db, int64_t run_id, RunResults* out) {
  COLIBRI_RETURN_IF_ERROR(ForEachRunRow(
      db, "SELECT layer_batch, elapsed_ns, lookups, served FROM run_hit_rate WHERE run_id = ? ORDER BY position",
      run_id, [out](const Statement& row) {
        out->hit_rate.push_back(HitRatePoint{
            .layer_batch = row.UInt(0), .elapsed_ns = row.Int(1), .lookups = row.UInt(2), .served = row.UInt(3)});
        return Status::Ok();
      }));
  return ForEachRunRow(db, "SELECT at_ns, kind, detail FROM run_faults WHERE run_id = ? ORDER BY position", run_id,
                       [out](const Statement& row) {
                         out->faults.push_back(
                             FaultRecord{.at_ns = row.Int(0), .kind = row.Text(1), .detail = row.Text(2)});
                         return Status::Ok();
                       });
}

}  // namespace

std::string DefaultDbPath() {
  const char* path = std::getenv("COLIBRI_DB");
  return path != nullptr && *path != '\0' ? path : "./colibri-runs.db";
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status MigrateSchema(sqlite3* db, int from, int to) {
  if (from < 0 || from > to || to > kSchemaVersion) {
    return Status::InvalidArgument(DbPath(db) + ": cannot migrate from schema version " + std::to_string(from) +
                                   " to " + std::to_string(to) + " (this build knows 0 to " +
                                   std::to_string(kSchemaVersion) + ")");
  }
  // Inside the caller's transaction when there is one, else in its own.
  std::optional<Transaction> own;
  if (sqlite3_get_autocommit(db) != 0) {
    COLIBRI_ASSIGN_OR_RETURN(Transaction transaction,
                             Transaction::Begin(db, Transaction::Kind::kWrite, RunStore::Options{}.busy_timeout_ms));
    own.emplace(std::move(transaction));
  }
  for (int version = from + 1; version <= to; ++version) {
    COLIBRI_RETURN_IF_ERROR(
        Exec(db, kMigrations[version - 1], "migrating to schema version " + std::to_string(version)));
  }
  COLIBRI_RETURN_IF_ERROR(Exec(db, "PRAGMA user_version = " + std::to_string(to), "setting the schema version"));
  return own ? own->Commit() : Status::Ok();
}

RunStore::RunStore(std::string path, sqlite3* db, Options options)
    : path_(std::move(path)), db_(db), options_(std::move(options)) {}

RunStore::~RunStore() { sqlite3_close_v2(db_); }

Result<std::unique_ptr<RunStore>> RunStore::Open(const std::string& path, Options options) {
  COLIBRI_RETURN_IF_ERROR(store_integrity::CheckStorePath(path, options.read_only));
  bool immutable = false;
  if (options.read_only) {
    COLIBRI_ASSIGN_OR_RETURN(immutable, store_integrity::NeedsImmutableOpen(path));
  } else {
    COLIBRI_RETURN_IF_ERROR(store_integrity::CheckStoreWritable(path));
  }
  sqlite3* handle = nullptr;
  int flags = options.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  if (immutable) flags |= SQLITE_OPEN_URI;  // nothing can write where the directory cannot be written
  const std::string name = immutable ? store_integrity::ImmutableUri(path) : path;
  const int rc = sqlite3_open_v2(name.c_str(), &handle, flags, nullptr);
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> db(handle, sqlite3_close_v2);
  if (rc != SQLITE_OK) {
    return Status::IoError(path + ": opening the run database: " +
                           (handle != nullptr ? sqlite3_errmsg(handle) : sqlite3_errstr(rc)));
  }
  if (options.read_only) {
    sqlite3_busy_timeout(db.get(), options.busy_timeout_ms);
    COLIBRI_ASSIGN_OR_RETURN(const int version, KnownVersion(db.get()));
    if (version == 0) return Status::NotFound(path + ": no runs stored (an empty database, not a run store yet)");
  } else {
    sqlite3_busy_timeout(db.get(), options.busy_timeout_ms);
    COLIBRI_RETURN_IF_ERROR(store_integrity::QuickCheck(db.get(), path));  // before anything is written
    COLIBRI_RETURN_IF_ERROR(Configure(db.get(), options.busy_timeout_ms));
    COLIBRI_RETURN_IF_ERROR(MigrateToCurrent(db.get(), options.busy_timeout_ms));
  }
  return std::unique_ptr<RunStore>(new RunStore(path, db.release(), std::move(options)));
}

// -1 when SQLite cannot read it.
int RunStore::schema_version() const {
  const Result<int> version = UserVersion(db_);
  return version.ok() ? version.value() : -1;
}

Result<int64_t> RunStore::BeginRun(const RunInfo& info) {
  COLIBRI_ASSIGN_OR_RETURN(Transaction transaction,
                           Transaction::Begin(db_, Transaction::Kind::kWrite, options_.busy_timeout_ms));
  std::string placeholders = "?";
  for (int i = 1; i < kInfoColumns; ++i) placeholders += ", ?";
  COLIBRI_ASSIGN_OR_RETURN(
      Statement insert,
      Statement::Prepare(db_, "INSERT INTO runs (" + InfoColumnList() + ") VALUES (" + placeholders + ")"));
  int column = 1;
  for (const auto& [name, field] : kInfoTexts) {
    insert.BindAt(column++, field == &RunInfo::status ? std::string_view("incomplete") : info.*field);
  }
  insert.BindAt(column, info.seed).BindAt(column + 1, info.started_at_ms).BindAt(column + 2, info.ended_at_ms);
  COLIBRI_RETURN_IF_ERROR(insert.Run());
  const int64_t run_id = sqlite3_last_insert_rowid(db_);
  COLIBRI_RETURN_IF_ERROR(transaction.Commit());
  return run_id;
}

Status RunStore::FinishRun(int64_t run_id, const RunResults& results, int64_t ended_at_ms) {
  COLIBRI_ASSIGN_OR_RETURN(Transaction transaction,
                           Transaction::Begin(db_, Transaction::Kind::kWrite, options_.busy_timeout_ms));
  COLIBRI_RETURN_IF_ERROR(RequireIncomplete(db_, run_id, "finish"));
  const auto reached = [this](WriteStage stage) {
    if (options_.on_write_stage) options_.on_write_stage(stage);
  };
  for (const auto& [stage, write] : kResultStages) {
    COLIBRI_RETURN_IF_ERROR(write(db_, run_id, results));
    reached(stage);
  }
  if (!results.routing_path.empty()) {
    COLIBRI_ASSIGN_OR_RETURN(Statement update,
                             Query(db_, "UPDATE runs SET routing_path = ?, routing_digest = ? WHERE run_id = ?",
                                   results.routing_path, results.routing_digest, run_id));
    COLIBRI_RETURN_IF_ERROR(update.Run());
  }
  COLIBRI_RETURN_IF_ERROR(SetStatus(db_, run_id, "complete", "", ended_at_ms));
  COLIBRI_ASSIGN_OR_RETURN(const std::string digest, store_integrity::RunDigest(db_, run_id));
  COLIBRI_ASSIGN_OR_RETURN(Statement seal,
                           Query(db_, "UPDATE runs SET results_digest = ? WHERE run_id = ?", digest, run_id));
  COLIBRI_RETURN_IF_ERROR(seal.Run());
  reached(WriteStage::kStatus);
  return transaction.Commit();
}

Status RunStore::FailRun(int64_t run_id, const std::string& error, int64_t ended_at_ms) {
  COLIBRI_ASSIGN_OR_RETURN(Transaction transaction,
                           Transaction::Begin(db_, Transaction::Kind::kWrite, options_.busy_timeout_ms));
  COLIBRI_RETURN_IF_ERROR(RequireIncomplete(db_, run_id, "fail"));
  COLIBRI_RETURN_IF_ERROR(SetStatus(db_, run_id, "failed", error, ended_at_ms));
  return transaction.Commit();
}

Result<std::vector<RunInfo>> RunStore::List() const {
  COLIBRI_ASSIGN_OR_RETURN(Statement select, SelectInfo(db_, " ORDER BY run_id DESC"));
  std::vector<RunInfo> runs;
  COLIBRI_RETURN_IF_ERROR(select.ForEachRow([&runs](const Statement& row) {
    runs.push_back(ReadInfo(row));
    return Status::Ok();
  }));
  return runs;
}

Result<RunInfo> RunStore::Info(int64_t run_id) const {
  COLIBRI_ASSIGN_OR_RETURN(Statement select, SelectInfo(db_, " WHERE run_id = ?"));
  COLIBRI_ASSIGN_OR_RETURN(const bool row, select.Bind(run_id).Step());
  if (!row) return NoSuchRun(db_, run_id);
  return ReadInfo(select);
}

Result<RunResults> RunStore::Results(int64_t run_id, bool with_samples) const {
  // One snapshot: a run finishing meanwhile is seen entirely or not at all.
  COLIBRI_ASSIGN_OR_RETURN(Transaction snapshot,
                           Transaction::Begin(db_, Transaction::Kind::kRead, options_.busy_timeout_ms));
  COLIBRI_RETURN_IF_ERROR(RunStatus(db_, run_id).status());
  COLIBRI_RETURN_IF_ERROR(VerifyRun(run_id));
  RunResults results;
  COLIBRI_RETURN_IF_ERROR(ReadScalars(db_, run_id, &results));
  COLIBRI_RETURN_IF_ERROR(ReadDistributions(db_, run_id, with_samples, &results));
  COLIBRI_RETURN_IF_ERROR(ReadTiers(db_, run_id, &results));
  COLIBRI_RETURN_IF_ERROR(ReadExpertLoad(db_, run_id, &results));
  COLIBRI_RETURN_IF_ERROR(ReadSeries(db_, run_id, &results));
  return results;
}

Status RunStore::VerifyRun(int64_t run_id) const {
  if (schema_version() < 3) return Status::Ok();  // a read-only store from before checksums
  COLIBRI_ASSIGN_OR_RETURN(Statement select, Query(db_, "SELECT results_digest FROM runs WHERE run_id = ?", run_id));
  COLIBRI_ASSIGN_OR_RETURN(const bool row, select.Step());
  if (!row) return NoSuchRun(db_, run_id);
  const std::string stored = select.Text(0);
  if (stored.empty()) return Status::Ok();  // finished before schema version 3, or not finished
  COLIBRI_ASSIGN_OR_RETURN(const std::string actual, store_integrity::RunDigest(db_, run_id));
  if (actual == stored) return Status::Ok();
  return Status::Corruption("run " + std::to_string(run_id) + " in " + path_ +
                            ": its stored results do not match the checksum written with them (the database was "
                            "changed or damaged since); its figures are not shown. Delete it (colibri runs delete " +
                            std::to_string(run_id) + ") or restore the file");
}

Status RunStore::Delete(int64_t run_id) {
  COLIBRI_ASSIGN_OR_RETURN(Transaction transaction,
                           Transaction::Begin(db_, Transaction::Kind::kWrite, options_.busy_timeout_ms));
  COLIBRI_ASSIGN_OR_RETURN(Statement erase, Query(db_, "DELETE FROM runs WHERE run_id = ?", run_id));
  COLIBRI_RETURN_IF_ERROR(erase.Run());
  if (sqlite3_changes(db_) == 0) return NoSuchRun(db_, run_id);
  return transaction.Commit();
}

}  // namespace colibri::reports
