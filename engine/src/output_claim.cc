#include "colibri/engine/output_claim.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace colibri::engine {
namespace {

namespace fs = std::filesystem;

constexpr int kLockAttempts = 16;

std::string ParentOf(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

Status CreateError(const std::string& lock_path, int error) {
  const std::string parent = ParentOf(lock_path);
  if (error == ENOENT) return Status::NotFound(parent + ": no such directory (cannot write " + lock_path + ")");
  if (error == ENOTDIR) return Status::InvalidArgument(parent + ": not a directory (cannot write " + lock_path + ")");
  return Status::IoError("cannot create " + lock_path + ": " + std::strerror(error));
}

// Removes what earlier writers of `path` left behind: "<name>.partial" (the
// older fixed name) and "<name>.partial-*". Called with the lock held, so
// none of them belongs to a live writer.
void SweepLeftovers(const std::string& path) {
  const fs::path target(path);
  const std::string name = target.filename().string();
  const std::string fixed = name + ".partial";
  const std::string prefix = fixed + "-";
  std::error_code error;
  fs::directory_iterator it(ParentOf(path), error);
  if (error) return;
  for (const fs::directory_entry& entry : it) {
    const std::string entry_name = entry.path().filename().string();
    if (entry_name == fixed || entry_name.rfind(prefix, 0) == 0) {
      std::error_code ignored;
      fs::remove_all(entry.path(), ignored);
    }
  }
}

void RemoveQuietly(const std::string& path) {
  if (path.empty()) return;
  std::error_code ignored;
  fs::remove_all(path, ignored);
}

}  // namespace

Result<OutputClaim> OutputClaim::Acquire(const std::string& path) {
  if (path.empty()) return Status::InvalidArgument("the output path is empty");
  if (path.back() == '/') return Status::InvalidArgument(path + ": output path ends in '/'");
  OutputClaim claim;
  claim.path_ = path;
  claim.lock_path_ = path + ".lock";
  for (int attempt = 0; attempt < kLockAttempts; ++attempt) {
    const int fd = ::open(claim.lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return CreateError(claim.lock_path_, errno);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      ::close(fd);
      if (error == EWOULDBLOCK) {
        return Status::InvalidArgument(path + ": another writer is writing this output now (it holds " +
                                       claim.lock_path_ + "); this one stops without writing");
      }
      return Status::IoError("cannot lock " + claim.lock_path_ + ": " + std::strerror(error));
    }
    // The holder before us may have unlinked the lock file after we opened it:
    // the lock counts only on the inode that the name still points to.
    struct stat held {}, named {};
    if (::fstat(fd, &held) == 0 && ::stat(claim.lock_path_.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev) {
      claim.lock_fd_ = fd;
      break;
    }
    ::close(fd);
  }
  if (claim.lock_fd_ < 0) return Status::IoError(claim.lock_path_ + ": the lock file keeps changing; not writing");
  SweepLeftovers(path);
  static std::atomic<uint64_t> next_temp{0};
  claim.temp_path_ = path + ".partial-" + std::to_string(::getpid()) + "-" + std::to_string(next_temp++);
  return claim;
}

OutputClaim::OutputClaim(OutputClaim&& other) noexcept { *this = std::move(other); }

OutputClaim& OutputClaim::operator=(OutputClaim&& other) noexcept {
  if (this == &other) return *this;
  Abandon();
  path_ = std::move(other.path_);
  temp_path_ = std::move(other.temp_path_);
  lock_path_ = std::move(other.lock_path_);
  lock_fd_ = other.lock_fd_;
  other.lock_fd_ = -1;
  other.temp_path_.clear();
  return *this;
}

OutputClaim::~OutputClaim() { Abandon(); }

void OutputClaim::Release() {
  if (lock_fd_ < 0) return;
  ::unlink(lock_path_.c_str());  // while still holding it: see Acquire's inode check
  ::close(lock_fd_);
  lock_fd_ = -1;
}

void OutputClaim::Abandon() {
  if (lock_fd_ < 0) return;
  RemoveQuietly(temp_path_);
  temp_path_.clear();
  Release();
}

Status OutputClaim::Commit() {
  if (lock_fd_ < 0) return Status::Internal(path_ + ": commit of an output claim that is not held");
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const int error = errno;
    Status status = Status::IoError("cannot rename " + temp_path_ + " to " + path_ + ": " + std::strerror(error));
    if (error == ENOTEMPTY || error == EEXIST) {
      status = Status::InvalidArgument(path_ + ": exists and is not empty; the output was not written");
    } else if (error == EISDIR) {
      status = Status::InvalidArgument(path_ + ": is a directory; the output was not written");
    }
    Abandon();
    return status;
  }
  // Make the rename durable before the writer reports success.
  const int dir_fd = ::open(ParentOf(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    (void)::fsync(dir_fd);
    ::close(dir_fd);
  }
  temp_path_.clear();
  Release();
  return Status::Ok();
}

Status WriteFileWhole(const std::string& path, const std::string& bytes) {
  COLIBRI_ASSIGN_OR_RETURN(OutputClaim claim, OutputClaim::Acquire(path));
  const int fd = ::open(claim.temp_path().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IoError("cannot create " + claim.temp_path() + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return Status::IoError("cannot write " + claim.temp_path() + ": " + std::strerror(error));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    return Status::IoError("cannot write " + claim.temp_path() + ": " + std::strerror(errno));
  }
  return claim.Commit();
}

uint64_t TempOutputBytes(const std::string& path) {
  const std::string prefix = fs::path(path).filename().string() + ".partial-";
  uint64_t bytes = 0;
  std::error_code error;
  fs::directory_iterator it(ParentOf(path), error);
  if (error) return 0;
  for (const fs::directory_entry& entry : it) {
    if (entry.path().filename().string().rfind(prefix, 0) != 0) continue;
    std::error_code ignored;
    const uint64_t size = entry.file_size(ignored);
    if (!ignored) bytes += size;
  }
  return bytes;
}

}  // namespace colibri::engine
