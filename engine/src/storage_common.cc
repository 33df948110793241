#include "storage_common.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace colibri::engine::storage_internal {
namespace {

constexpr uint32_t kFileDirectAlignmentBytes = 4096;

std::string ErrnoText(int error_number) { return std::strerror(error_number); }

Status CheckOptions(const StorageOptions& options) {
  if (options.clock == nullptr) return Status::InvalidArgument("storage: StorageOptions::clock is required");
  if (options.queue_depth < 1) return Status::InvalidArgument("storage: queue depth must be >= 1");
  if (options.queue_depth > kMaxQueueDepth) {
    return Status::InvalidArgument("storage: queue depth must be <= " + std::to_string(kMaxQueueDepth) + " (got " +
                                   std::to_string(options.queue_depth) + ")");
  }
  if (options.registered_buffers.empty()) return Status::Ok();
  if (options.registered_buffer_bytes == 0) {
    return Status::InvalidArgument("storage: registered_buffer_bytes must be > 0 when buffers are registered");
  }
  for (size_t i = 0; i < options.registered_buffers.size(); ++i) {
    if (options.registered_buffers[i] == nullptr) {
      return Status::InvalidArgument("storage: registered buffer " + std::to_string(i) + " is null");
    }
  }
  return Status::Ok();
}

Status OpenError(const std::string& path, int error_number) {
  if (error_number == ENOENT || error_number == ENOTDIR) return Status::NotFound(path + ": no such file");
  return Status::IoError(path + ": cannot open: " + ErrnoText(error_number));
}

// Opens with O_DIRECT when asked; where the file system refuses it (EINVAL),
// opens buffered and records the warning.
Status OpenFd(const std::string& path, bool direct_io, StorageFile* file) {
  const int flags = O_RDONLY | O_CLOEXEC;
  if (direct_io) {
    const int fd = ::open(path.c_str(), flags | O_DIRECT);
    if (fd >= 0) {
      file->fd = UniqueFd(fd);
      file->direct_io = true;
      return Status::Ok();
    }
    if (errno != EINVAL) return OpenError(path, errno);
    file->warning = "O_DIRECT unsupported on " + path + "'s file system; reading through the page cache";
  }
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) return OpenError(path, errno);
  file->fd = UniqueFd(fd);
  return Status::Ok();
}

// Size and O_DIRECT alignment: a regular file's from fstat, a block device's from its ioctls.
Status ReadGeometry(StorageFile* file) {
  struct stat st {};
  if (::fstat(file->fd.get(), &st) != 0) return Status::IoError(file->path + ": fstat failed: " + ErrnoText(errno));
  uint32_t direct_alignment_bytes = kFileDirectAlignmentBytes;
  if (S_ISREG(st.st_mode)) {
    file->size_bytes = static_cast<uint64_t>(st.st_size);
  } else if (S_ISBLK(st.st_mode)) {
    int logical_block_bytes = 0;
    if (::ioctl(file->fd.get(), BLKGETSIZE64, &file->size_bytes) != 0 ||
        ::ioctl(file->fd.get(), BLKSSZGET, &logical_block_bytes) != 0 || logical_block_bytes <= 0) {
      return Status::IoError(file->path + ": cannot read the block device's size and block size: " +
                             ErrnoText(errno));
    }
    direct_alignment_bytes = static_cast<uint32_t>(logical_block_bytes);
  } else {
    return Status::InvalidArgument(file->path + ": not a regular file or block device");
  }
  file->alignment_bytes = file->direct_io ? direct_alignment_bytes : 1;
  return Status::Ok();
}

std::string DescribeRead(const std::string& path, const ReadRequest& request) {
  return path + ": read of " + std::to_string(request.bytes) + " bytes at offset " + std::to_string(request.offset);
}

Status CheckRequest(const std::string& path, const StorageCaps& caps, uint64_t file_bytes,
                    const ReadRequest& request) {
  const uint64_t align = caps.alignment_bytes;
  const std::string rule = std::string(" (alignment ") + std::to_string(align) +
                           (caps.direct_io ? " bytes with O_DIRECT)" : " bytes)");
  if (request.buffer == nullptr) return Status::InvalidArgument(DescribeRead(path, request) + ": buffer is null");
  if (request.bytes == 0) return Status::InvalidArgument(DescribeRead(path, request) + ": length must be > 0");
  if (request.offset % align != 0) {
    return Status::InvalidArgument(DescribeRead(path, request) + ": offset is not aligned" + rule);
  }
  if (request.bytes % align != 0) {
    return Status::InvalidArgument(DescribeRead(path, request) + ": length is not aligned" + rule);
  }
  if (reinterpret_cast<uintptr_t>(request.buffer) % align != 0) {
    return Status::InvalidArgument(DescribeRead(path, request) + ": buffer address is not aligned" + rule);
  }
  if (request.offset > file_bytes || request.bytes > file_bytes - request.offset) {
    return Status::InvalidArgument(DescribeRead(path, request) + ": ends past the end of the file (" +
                                   std::to_string(file_bytes) + " bytes)");
  }
  return Status::Ok();
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

int UniqueFd::release() { return std::exchange(fd_, -1); }

Result<StorageFile> OpenStorageFile(const std::string& path, const StorageOptions& options) {
  COLIBRI_RETURN_IF_ERROR(CheckOptions(options));
  StorageFile file;
  file.path = path;
  COLIBRI_RETURN_IF_ERROR(OpenFd(path, options.direct_io, &file));
  COLIBRI_RETURN_IF_ERROR(ReadGeometry(&file));
  return file;
}

Status UnexpectedEof(const std::string& path, uint64_t offset) {
  return Status::IoError(path + ": read at offset " + std::to_string(offset) +
                         ": unexpected end of file (did the file shrink?)");
}

Status ReadError(const std::string& path, uint64_t offset, int error_number) {
  return Status::IoError(path + ": read at offset " + std::to_string(offset) + " failed: " + ErrnoText(error_number));
}

FileStorage::FileStorage(const char* name, StorageFile file, const StorageOptions& options)
    : file_(std::move(file)), clock_(options.clock) {
  caps_.name = name;
  caps_.alignment_bytes = file_.alignment_bytes;
  caps_.queue_depth = options.queue_depth;
  caps_.direct_io = file_.direct_io;
}

Status FileStorage::Enqueue(const ReadRequest& request) {
  COLIBRI_RETURN_IF_ERROR(CheckRequest(file_.path, caps_, file_.size_bytes, request));
  if (outstanding() >= caps_.queue_depth) ++counters_.queue_full_events;
  waiting_.push_back(PendingRead{request, clock_->Now()});
  return Status::Ok();
}

PendingRead FileStorage::TakeWaiting() {
  PendingRead read = waiting_.front();
  waiting_.pop_front();
  ++in_flight_;
  return read;
}

void FileStorage::Complete(const PendingRead& read, Status status, uint64_t bytes,
                           std::vector<ReadCompletion>* out) {
  --in_flight_;
  if (status.ok()) {
    ++counters_.reads;
    counters_.read_bytes += bytes;
  } else {
    ++counters_.read_errors;
  }
  out->push_back(ReadCompletion{read.request.tag, std::move(status), bytes, read.submit_ns, clock_->Now()});
}

}  // namespace colibri::engine::storage_internal
