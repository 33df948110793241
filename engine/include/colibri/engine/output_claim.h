// OutputClaim: one writer's exclusive hold on an output path while it writes it.
//
// Every file or directory the project writes as a whole (traces, models,
// timelines) is written under a temporary name and renamed into place only
// when complete. OutputClaim owns that protocol:
//   - Acquire(path) takes an exclusive, non-blocking flock on "<path>.lock".
//     A second writer of the same path (this process or another) fails at
//     once with kInvalidArgument naming the path: one writer wins whole, the
//     other fails clearly. The kernel drops the lock when its holder dies, so
//     a kill -9 never leaves the path locked.
//   - Holding the lock, it sweeps the leftovers of earlier writers of this
//     path that died ("<path>.partial-*": files or directories) and names a
//     temporary path unique to this writer, "<path>.partial-<pid>-<n>".
//   - Commit() renames the temporary path onto `path` and releases the lock;
//     the destructor without Commit() removes the temporary path and releases.
// A temporary trace has no trailer (the writer adds it just before Commit),
// so a left-over temp file never validates as whole.
//
// Ownership: movable, not copyable; the claim owns the lock file descriptor
// and the temporary path. Not thread-safe: one claim per writer. Errors are
// Status values naming the path and the cause.
#pragma once

#include <string>

#include "colibri/status.h"

namespace colibri::engine {

class OutputClaim {
 public:
  // Claims `path` (a file or directory name that need not exist; its parent
  // directory must). Fails when another writer holds it or the lock file
  // cannot be created (the message names the directory and the cause).
  static Result<OutputClaim> Acquire(const std::string& path);

  OutputClaim(OutputClaim&& other) noexcept;
  OutputClaim& operator=(OutputClaim&& other) noexcept;
  OutputClaim(const OutputClaim&) = delete;
  OutputClaim& operator=(const OutputClaim&) = delete;
  ~OutputClaim();

  const std::string& path() const { return path_; }
  // Where the writer writes until Commit(); nothing exists there yet.
  const std::string& temp_path() const { return temp_path_; }

  // Renames temp_path() onto path() (replacing a file, or an empty
  // directory) and releases the lock. On error the temporary path is removed.
  Status Commit();
  // Removes the temporary path and releases the lock (what the destructor does).
  void Abandon();

 private:
  OutputClaim() = default;
  void Release();

  std::string path_;
  std::string temp_path_;
  std::string lock_path_;
  int lock_fd_ = -1;
};

// Writes `bytes` as the whole file `path` through a claim: a unique temporary
// file, fsync, rename. On error nothing is left at `path` or beside it.
Status WriteFileWhole(const std::string& path, const std::string& bytes);

// The bytes written so far by the writers of `path` now in progress (the
// sizes of its "<path>.partial-*" temporary files): for progress lines.
uint64_t TempOutputBytes(const std::string& path);

}  // namespace colibri::engine
