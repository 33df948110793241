// StorageBackend: the NVMe tier (L3). Reads of whole expert blocks from one
// file into caller-provided, suitably aligned buffers.
//
// Implementations: UringStorage (io_uring, O_DIRECT, registered buffers,
// bounded queue depth), PreadStorage (portable fallback), and later the
// modelled SimStorage. All share one contract, tested by one conformance
// suite: every submitted read completes exactly once, through Poll(), with
// its tag, status and byte count; reads beyond the queue depth wait inside
// the backend (counted in queue_full_events) and are issued in submission order.
// Thread-safety: not thread-safe; one engine thread submits and polls.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "colibri/engine/clock.h"
#include "colibri/status.h"

namespace colibri::engine {

struct StorageCaps {
  const char* name = "";
  uint32_t alignment_bytes = 1;  // offsets, lengths and buffers must be multiples of this
  uint32_t queue_depth = 1;      // reads in flight at most
  bool direct_io = false;        // bypasses the page cache (O_DIRECT)
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

struct StorageOptions {
  const Clock* clock = nullptr;  // required; owned by the caller, outlives the backend
  uint32_t queue_depth = 32;
  bool direct_io = true;        // O_DIRECT; falls back (with a warning) where the file system refuses it
  std::vector<void*> registered_buffers;  // optional: buffers to register with the kernel (io_uring)
  uint64_t registered_buffer_bytes = 0;   // length of each registered buffer
};

struct StorageCounters {
  uint64_t reads = 0;
  uint64_t read_bytes = 0;
  uint64_t queue_full_events = 0;  // submissions that had to wait for a free queue slot
};

class StorageBackend {
 public:
  virtual ~StorageBackend() = default;
  virtual const StorageCaps& caps() const = 0;
  virtual const StorageCounters& counters() const = 0;
  // Queues a read. Errors only for a request that breaks the caps (alignment, range).
  virtual Status Submit(const ReadRequest& request) = 0;
  // Appends finished reads to `out`. With `wait`, blocks until at least one
  // read finishes (returns at once when none is outstanding).
  virtual Status Poll(bool wait, std::vector<ReadCompletion>* out) = 0;
  // Reads submitted and not yet returned by Poll().
  virtual size_t outstanding() const = 0;
  // A warning the backend wants printed (e.g. "O_DIRECT unsupported, using buffered reads"), or empty.
  virtual const std::string& warning() const = 0;
};

// Opens `path` read-only. Clear errors for a missing file or an unusable option.
Result<std::unique_ptr<StorageBackend>> OpenUringStorage(const std::string& path, const StorageOptions& options);
Result<std::unique_ptr<StorageBackend>> OpenPreadStorage(const std::string& path, const StorageOptions& options);

}  // namespace colibri::engine
