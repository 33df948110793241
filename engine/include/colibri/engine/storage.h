// StorageBackend: the NVMe tier (L3). Reads of whole expert blocks from one
// file into caller-provided, suitably aligned buffers.
//
// Implementations: UringStorage (io_uring, O_DIRECT, registered buffers,
// bounded queue depth), PreadStorage (portable fallback), and later the
// modelled SimStorage. All share one contract, tested by one conformance
// suite (tests/engine/storage_conformance_test.cc): every accepted read
// completes exactly once, through Poll(), with its tag, status and byte count;
// at most queue_depth reads are in flight; reads beyond the queue depth wait
// inside the backend (counted in queue_full_events) and are issued in
// submission order. Completion ORDER is not part of the contract: UringStorage
// completes in whatever order the device finishes, PreadStorage in submission
// order. A read's buffer belongs to the backend from Submit until its
// completion is returned (or the backend is destroyed: destruction waits for
// reads in flight and drops their completions).
// Thread-safety: not thread-safe; one engine thread submits and polls.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "colibri/engine/clock.h"
#include "colibri/status.h"

namespace colibri::engine {

// The most reads in flight any storage backend accepts: what io_uring accepts
// for a ring (IORING_MAX_ENTRIES). Every backend, real or modelled, accepts the
// same range, so that a configuration is portable between them.
inline constexpr uint32_t kMaxStorageQueueDepth = 32768;

struct StorageCaps {
  const char* name = "";
  uint32_t alignment_bytes = 1;  // offsets, lengths and buffers must be multiples of this
  uint32_t queue_depth = 1;      // reads in flight at most
  bool direct_io = false;        // bypasses the page cache (O_DIRECT)
  bool delivers_data = true;     // reads fill their buffers (false: a model that only keeps time)
};

struct ReadRequest {
  uint64_t offset = 0;
  uint64_t bytes = 0;
  void* buffer = nullptr;  // `bytes` long, aligned to caps().alignment_bytes
  uint64_t tag = 0;        // returned in the completion
};

struct ReadCompletion {
  uint64_t tag = 0;
  Status status;
  uint64_t bytes = 0;        // bytes read (== request bytes on success)
  TimeNs submit_ns = 0;      // on StorageOptions::clock
  TimeNs complete_ns = 0;
};

// A span of memory reads may land in (for registration with the backend).
struct MemoryRegion {
  void* data = nullptr;
  uint64_t bytes = 0;
};

struct StorageOptions {
  const Clock* clock = nullptr;  // required; owned by the caller, outlives the backend
  uint32_t queue_depth = 32;
  bool direct_io = true;        // O_DIRECT; falls back (with a warning) where the file system refuses it
  // Optional: buffers to register with the kernel (io_uring; pread ignores them).
  // A read whose buffer lies inside one is issued as IORING_OP_READ_FIXED.
  // They must outlive the backend.
  std::vector<void*> registered_buffers;
  uint64_t registered_buffer_bytes = 0;   // length of each registered buffer
};

struct StorageCounters {
  uint64_t reads = 0;        // reads completed successfully
  uint64_t read_bytes = 0;   // bytes of those reads
  uint64_t read_errors = 0;  // reads completed with an error status
  uint64_t queue_full_events = 0;  // submissions that had to wait for a free queue slot
  uint64_t registered_reads = 0;   // reads issued into a registered buffer (io_uring READ_FIXED)
};

// Counts one completion a backend hands over: in reads and read_bytes when
// its status is OK, else in read_errors.
inline void CountCompletion(const ReadCompletion& completion, StorageCounters* counters) {
  if (completion.status.ok()) {
    ++counters->reads;
    counters->read_bytes += completion.bytes;
  } else {
    ++counters->read_errors;
  }
}

class StorageBackend {
 public:
  virtual ~StorageBackend() = default;
  virtual const StorageCaps& caps() const = 0;
  virtual const StorageCounters& counters() const = 0;
  // Queues a read. Errors: InvalidArgument for a request that breaks the caps
  // (alignment, range, null buffer, 0 bytes), which is then not queued; or
  // IoError when the backend itself fails (io_uring_submit), after which it
  // is unusable.
  virtual Status Submit(const ReadRequest& request) = 0;
  // Appends finished reads to `out`. With `wait`, blocks until at least one
  // read finishes (returns at once when none is outstanding). A synchronous
  // backend (pread) performs its waiting reads here, with or without `wait`.
  // An error Status means the backend itself failed (e.g. the ring), not a read:
  // a failed read is a completion with a non-OK status.
  virtual Status Poll(bool wait, std::vector<ReadCompletion>* out) = 0;
  // Reads submitted and not yet returned by Poll().
  virtual size_t outstanding() const = 0;
  // Registers the memory reads will land in, replacing any earlier set. With
  // io_uring these are fixed buffers: a read inside one is issued as
  // IORING_OP_READ_FIXED (no per-read page pinning). Backends without
  // registration accept and ignore it. The regions must outlive the backend
  // or the next call. Errors: InvalidArgument for a null or empty region or
  // reads outstanding; IoError when the kernel refuses (RLIMIT_MEMLOCK, more
  // than 16384 regions, a region above 1 GiB) -- the backend then reads into
  // unregistered memory, which still works.
  virtual Status RegisterBuffers(const std::vector<MemoryRegion>& regions) {
    (void)regions;
    return Status::Ok();
  }
  // A warning the backend wants printed (e.g. "O_DIRECT unsupported, using buffered reads"), or empty.
  virtual const std::string& warning() const = 0;
};

// Whether a read that completed with `status` may succeed if read again: an
// I/O error (EIO, a short read, a read that timed out) or a block whose bytes
// do not match its digest (kCorruption from CheckBlocksOnRead: the bytes were
// damaged on the way, or the file changed, which the retries then confirm).
// A request that breaks the caps (kInvalidArgument) is not retried.
inline bool RetryableReadError(const Status& status) {
  return status.code() == StatusCode::kIoError || status.code() == StatusCode::kCorruption;
}

// Opens `path` (a regular file or a block device) read-only. Errors: NotFound
// for a missing file; InvalidArgument for a null clock, queue depth 0 or above
// 32768, bad registered buffers; Unsupported from OpenUringStorage when the
// kernel refuses io_uring (ENOSYS, EPERM: fall back to OpenPreadStorage);
// IoError for anything else the OS refuses.
Result<std::unique_ptr<StorageBackend>> OpenUringStorage(const std::string& path, const StorageOptions& options);
Result<std::unique_ptr<StorageBackend>> OpenPreadStorage(const std::string& path, const StorageOptions& options);

// The real storage backends by name, the one table every caller uses:
// "uring", "pread", and "auto" (io_uring, or pread where the kernel refuses
// io_uring: Unsupported, as OpenUringStorage; `*fallback`, when given, then
// says so). The modelled "sim" is replay's (sim/sim_storage.h).
// Errors: another name (InvalidArgument), and the backend's own.
const std::vector<std::string>& StorageBackendNames();  // auto, uring, pread
Result<std::unique_ptr<StorageBackend>> OpenStorage(const std::string& name, const std::string& path,
                                                    const StorageOptions& options, std::string* fallback = nullptr);

}  // namespace colibri::engine
