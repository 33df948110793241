// PreadStorage: the portable StorageBackend. Submit only validates and queues;
// Poll performs every waiting read with pread(2), in submission order, so
// completions come back in submission order. Short reads are continued and
// EINTR/EAGAIN retried; an early end of file is an error completion.
// Ownership and thread-safety: as FileStorage (storage_common.h).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "storage_common.h"

namespace colibri::engine {
namespace {

using storage_internal::FileStorage;
using storage_internal::PendingRead;

class PreadStorage final : public FileStorage {
 public:
  PreadStorage(storage_internal::StorageFile file, const StorageOptions& options)
      : FileStorage("pread", std::move(file), options) {}

  Status Submit(const ReadRequest& request) override { return Enqueue(request); }

  Status Poll(bool wait, std::vector<ReadCompletion>* out) override {
    while (HasWaiting()) {
      const PendingRead read = TakeWaiting();
      uint64_t done_bytes = 0;
      Status status = ReadFully(read.request, &done_bytes);
      Complete(read, std::move(status), done_bytes, out);
    }
    return Status::Ok();
  }

 private:
  // Reads the whole request, continuing short reads; *done_bytes says how far it got.
  Status ReadFully(const ReadRequest& request, uint64_t* done_bytes) {
    char* buffer = static_cast<char*>(request.buffer);
    while (*done_bytes < request.bytes) {
      const uint64_t offset = request.offset + *done_bytes;
      const size_t chunk = std::min(request.bytes - *done_bytes, storage_internal::kMaxChunkBytes);
      const ssize_t got = ::pread(fd(), buffer + *done_bytes, chunk, static_cast<off_t>(offset));
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got < 0) return storage_internal::ReadError(path(), offset, errno);
      if (got == 0) return storage_internal::UnexpectedEof(path(), offset);
      *done_bytes += static_cast<uint64_t>(got);
    }
    return Status::Ok();
  }
};

}  // namespace

Result<std::unique_ptr<StorageBackend>> OpenPreadStorage(const std::string& path, const StorageOptions& options) {
  COLIBRI_ASSIGN_OR_RETURN(storage_internal::StorageFile file, storage_internal::OpenStorageFile(path, options));
  return std::unique_ptr<StorageBackend>(new PreadStorage(std::move(file), options));
}

}  // namespace colibri::engine
