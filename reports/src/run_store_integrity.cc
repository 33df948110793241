#include "run_store_integrity.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "colibri/engine/sha256.h"

namespace colibri::reports::store_integrity {
namespace {

namespace fs = std::filesystem;

// Each results table and the key its rows are hashed in.
constexpr std::pair<const char*, const char*> kResultTables[] = {
    {"run_scalars", "name"},   {"run_texts", "name"},     {"run_distributions", "name"}, {"run_tiers", "position"},
    {"run_expert_load", "layer"}, {"run_hit_rate", "position"}, {"run_faults", "position"},
};

void HashU64(engine::Sha256* sha, uint64_t value) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(value >> (8 * i));
  sha->Update(bytes, sizeof(bytes));
}

// Hashes every row of `sql` (one ? for the run id): per value its type, then
// its bytes (integers and reals as 8 bytes, text and blobs with their length).
Status HashRows(sqlite3* db, const std::string& sql, int64_t run_id, engine::Sha256* sha) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
    return Status::IoError(std::string(sqlite3_db_filename(db, "main")) + ": " + sql + ": " + sqlite3_errmsg(db));
  }
  sqlite3_bind_int64(stmt, 1, run_id);
  int rc = SQLITE_OK;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
      const std::string_view name = sqlite3_column_name(stmt, c);
      if (name == "run_id" || name == "results_digest") continue;
      const int type = sqlite3_column_type(stmt, c);
      HashU64(sha, static_cast<uint64_t>(type));
      if (type == SQLITE_INTEGER) {
        HashU64(sha, static_cast<uint64_t>(sqlite3_column_int64(stmt, c)));
      } else if (type == SQLITE_FLOAT) {
        const double value = sqlite3_column_double(stmt, c);
        uint64_t bits = 0;
        std::memcpy(&bits, &value, sizeof(bits));
        HashU64(sha, bits);
      } else if (type == SQLITE_TEXT || type == SQLITE_BLOB) {
        const void* data = type == SQLITE_TEXT ? static_cast<const void*>(sqlite3_column_text(stmt, c))
                                               : sqlite3_column_blob(stmt, c);
        const auto bytes = static_cast<uint64_t>(sqlite3_column_bytes(stmt, c));
        HashU64(sha, bytes);
        if (bytes > 0) sha->Update(data, bytes);
      }
    }
  }
  const std::string error = rc == SQLITE_DONE ? "" : sqlite3_errmsg(db);
  sqlite3_finalize(stmt);
  if (!error.empty()) {
    return Status::IoError(std::string(sqlite3_db_filename(db, "main")) + ": reading run " + std::to_string(run_id) +
                           " for its checksum: " + error);
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> RunDigest(sqlite3* db, int64_t run_id) {
  engine::Sha256 sha;
  COLIBRI_RETURN_IF_ERROR(HashRows(db, "SELECT * FROM runs WHERE run_id = ?", run_id, &sha));
  for (const auto& [table, key] : kResultTables) {
    sha.Update(table, std::strlen(table) + 1);
    COLIBRI_RETURN_IF_ERROR(
        HashRows(db, std::string("SELECT * FROM ") + table + " WHERE run_id = ? ORDER BY " + key, run_id, &sha));
  }
  return sha.Finish();
}

Status CheckStorePath(const std::string& path, bool must_exist) {
  if (path.empty()) return Status::InvalidArgument("the run store path is empty");
  const fs::path file(path);
  const fs::path parent = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  std::error_code error;
  const fs::file_status parent_status = fs::status(parent, error);
  if (parent_status.type() == fs::file_type::not_found) {
    return Status::NotFound(parent.string() + ": no such directory (for the run store " + path + ")");
  }
  if (parent_status.type() != fs::file_type::directory) {
    return Status::InvalidArgument(parent.string() + ": not a directory (for the run store " + path + ")");
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT && !must_exist) return Status::Ok();  // created by the open
    if (errno == ENOENT) return Status::NotFound(path + ": no such run store (nothing to read)");
    return Status::IoError(path + ": cannot stat the run store: " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) return Status::InvalidArgument(path + ": is a directory, not a run store");
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(path + ": not a regular file, not a run store");
  if (st.st_size == 0) return Status::Ok();  // an empty file becomes a new database
  static constexpr char kMagic[16] = {'S', 'Q', 'L', 'i', 't', 'e', ' ', 'f', 'o', 'r', 'm', 'a', 't', ' ', '3', '\0'};
  char head[16] = {};
  std::ifstream in(path, std::ios::binary);
  in.read(head, sizeof(head));
  if (!in || std::memcmp(head, kMagic, sizeof(kMagic)) != 0) {
    return Status::InvalidArgument(path + ": not an SQLite database (its first bytes are not \"SQLite format 3\"), "
                                   "not a run store");
  }
  return Status::Ok();
}

namespace {

fs::path ParentOf(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

bool OnReadOnlyFileSystem(const fs::path& dir) {
  struct statvfs info {};
  return ::statvfs(dir.c_str(), &info) == 0 && (info.f_flag & ST_RDONLY) != 0;
}

// "" when `dir` can be written, else why not.
std::string WhyNotWritable(const fs::path& dir) {
  if (OnReadOnlyFileSystem(dir)) return "its file system is mounted read-only";
  if (::access(dir.c_str(), W_OK) != 0) return std::string("its directory cannot be written (") + std::strerror(errno) + ")";
  return "";
}

}  // namespace

Status CheckStoreWritable(const std::string& path) {
  const fs::path dir = ParentOf(path);
  const std::string why = WhyNotWritable(dir);
  if (!why.empty()) {
    return Status::IoError(path + ": the run store cannot be written: " + why +
                           " (SQLite also creates " + fs::path(path).filename().string() + "-wal and -shm in " +
                           dir.string() + "); use --no-store, or --db on a writable file system");
  }
  std::error_code error;
  if (fs::exists(path, error) && ::access(path.c_str(), W_OK) != 0) {
    return Status::IoError(path + ": the run store cannot be written: the file is read-only (" + std::strerror(errno) +
                           ")");
  }
  return Status::Ok();
}

Result<bool> NeedsImmutableOpen(const std::string& path) {
  const std::string why = WhyNotWritable(ParentOf(path));
  if (why.empty()) return false;
  std::error_code error;
  const std::string wal = path + "-wal";
  if (fs::exists(wal, error) && fs::file_size(wal, error) > 0 && !error) {
    return Status::IoError(path + ": cannot be read: " + why + ", and " + wal +
                           " holds changes SQLite can only read with a writable directory; copy both files to a "
                           "writable directory");
  }
  return true;
}

std::string ImmutableUri(const std::string& path) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string uri = "file:";
  for (const unsigned char c : fs::absolute(path).string()) {
    if (c == '%' || c == '?' || c == '#' || c < 0x21 || c >= 0x7f) {
      uri += '%';
      uri += kHex[c >> 4];
      uri += kHex[c & 0xf];
    } else {
      uri += static_cast<char>(c);
    }
  }
  return uri + "?immutable=1";
}

Status QuickCheck(sqlite3* db, const std::string& path) {
  std::error_code error;
  const uint64_t bytes = fs::file_size(path, error);
  if (error || bytes == 0 || bytes > kQuickCheckMaxBytes) return Status::Ok();
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, "PRAGMA quick_check(1)", -1, &stmt, nullptr) != SQLITE_OK) {
    const int code = sqlite3_errcode(db) & 0xff;
    if (code == SQLITE_BUSY || code == SQLITE_LOCKED) return Status::Ok();  // another writer holds it
    if (code != SQLITE_CORRUPT && code != SQLITE_NOTADB) {
      return Status::IoError(path + ": PRAGMA quick_check: " + sqlite3_errmsg(db));
    }
    return Status::Corruption(path + ": PRAGMA quick_check: " + sqlite3_errmsg(db) +
                              "; the database is damaged: nothing was written (move it aside or restore it)");
  }
  std::string verdict;
  const int rc = sqlite3_step(stmt);
  if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) {  // another writer holds it: SQLite checks pages as read
    sqlite3_finalize(stmt);
    return Status::Ok();
  }
  if (rc == SQLITE_ROW) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    verdict = text != nullptr ? text : "";
  } else {
    verdict = sqlite3_errmsg(db);
  }
  sqlite3_finalize(stmt);
  if (verdict == "ok") return Status::Ok();
  return Status::Corruption(path + ": PRAGMA quick_check: " + verdict +
                            "; the database is damaged: nothing was written (move it aside or restore it)");
}

}  // namespace colibri::reports::store_integrity
