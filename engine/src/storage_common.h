// Shared part of the real storage backends (UringStorage, PreadStorage):
// opening the file (O_DIRECT with a buffered fallback), option and request
// validation, the FIFO of reads waiting for a queue slot, completion
// bookkeeping (timestamps, counters) and the read error messages. The two
// backends differ only in how they issue and reap reads.
//
// Ownership: FileStorage owns the file descriptor; the caller owns the read
// buffers and the Clock. Not thread-safe (like every StorageBackend).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "colibri/engine/storage.h"

namespace colibri::engine::storage_internal {

// The most bytes one read(2) transfers on Linux (MAX_RW_COUNT); longer reads
// are issued in pieces, like short reads.
inline constexpr uint64_t kMaxChunkBytes = 0x7ffff000;
inline constexpr uint32_t kMaxQueueDepth = kMaxStorageQueueDepth;

// An owned file descriptor, closed on destruction. Move-only.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();
  int get() const { return fd_; }
  int release();

 private:
  int fd_ = -1;
};

// An opened file and what a backend may promise about it.
struct StorageFile {
  std::string path;
  UniqueFd fd;
  uint64_t size_bytes = 0;
  uint32_t alignment_bytes = 1;  // 4096 (regular file) or the logical block size (device) with O_DIRECT, else 1
  bool direct_io = false;        // O_DIRECT is in effect
  std::string warning;           // set when O_DIRECT was asked for and the file system refused it
};

// Checks the options every backend needs (clock, queue depth, registered
// buffers), then opens `path` read-only. Errors: InvalidArgument for bad
// options or a path that is neither a regular file nor a block device,
// NotFound for a missing file, IoError for anything else the OS refuses.
Result<StorageFile> OpenStorageFile(const std::string& path, const StorageOptions& options);

// "<path>: read at offset O: unexpected end of file" (the file shrank after open).
Status UnexpectedEof(const std::string& path, uint64_t offset);
// "<path>: read at offset O failed: <strerror(error_number)>".
Status ReadError(const std::string& path, uint64_t offset, int error_number);

// A read accepted by Submit, with its submission instant.
struct PendingRead {
  ReadRequest request;
  TimeNs submit_ns = 0;
};

// Base of the real backends: caps, counters, warning, outstanding(), request
// validation and the FIFO of reads waiting for a slot. A backend's Submit calls
// Enqueue() and then issues what it can; its Poll takes reads with TakeWaiting()
// and hands each back once through Complete().
class FileStorage : public StorageBackend {
 public:
  const StorageCaps& caps() const final { return caps_; }
  const StorageCounters& counters() const final { return counters_; }
  const std::string& warning() const final { return file_.warning; }
  size_t outstanding() const final { return waiting_.size() + in_flight_; }

 protected:
  FileStorage(const char* name, StorageFile file, const StorageOptions& options);

  // Validates `request` against the caps and the file's size (InvalidArgument
  // naming the path, offset and rule), stamps it and appends it to the FIFO.
  // Counts a queue_full_event when queue_depth reads are already outstanding.
  Status Enqueue(const ReadRequest& request);
  bool HasWaiting() const { return !waiting_.empty(); }
  bool HasFreeSlot() const { return in_flight_ < caps_.queue_depth; }
  // Pops the oldest waiting read and counts it in flight.
  PendingRead TakeWaiting();
  // Drops the reads that never left the FIFO (used only on destruction).
  void DropWaiting() { waiting_.clear(); }
  // Ends an in-flight read: appends its completion to `out` (complete_ns = now)
  // and updates the counters.
  void Complete(const PendingRead& read, Status status, uint64_t bytes, std::vector<ReadCompletion>* out);

  void CountRegisteredRead() { ++counters_.registered_reads; }
  int fd() const { return file_.fd.get(); }
  const std::string& path() const { return file_.path; }
  size_t in_flight() const { return in_flight_; }

 private:
  StorageFile file_;
  const Clock* clock_;
  StorageCaps caps_;
  StorageCounters counters_;
  std::deque<PendingRead> waiting_;
  size_t in_flight_ = 0;
};

// Scratch lists for a Poll that may be re-entered: a backend below may run
// the event loop (a modelled device waiting for its next completion, a fault
// injector holding one back), and the loop polls the same chain again. Each
// nesting level gets its own list, kept between calls (a warm poll does not
// allocate), and the lists of outer levels never move. Not thread-safe.
template <typename T>
class NestedScratch {
 public:
  // The cleared list of the level being entered; call Leave when done with it.
  std::vector<T>& Enter() {
    if (depth_ == lists_.size()) lists_.emplace_back();
    std::vector<T>& list = lists_[depth_++];
    list.clear();
    return list;
  }
  void Leave() { --depth_; }

 private:
  std::deque<std::vector<T>> lists_;
  size_t depth_ = 0;
};

}  // namespace colibri::engine::storage_internal
