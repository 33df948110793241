// Expert streaming from storage, measured the way the engine reads: random
// whole-block O_DIRECT reads of one size, kept at a fixed queue depth through
// an engine::StorageBackend (UringStorage or PreadStorage) over one file,
// for a duration or a number of reads, each read timed from its submit to
// its completion on engine::MonotonicClock (`colibri bench io`; a storage
// calibration reuses it).
//
// Ownership: the call opens the file, owns its buffers (queue_depth blocks in
// one page-aligned arena, registered with io_uring when asked) and closes
// everything before it returns. Thread-safety: none needed; one call uses
// one thread and shares nothing. Errors: kInvalidArgument for a zero block
// size, queue depth or stop condition, an unknown backend, or a file smaller
// than one block; the backend's open errors (kNotFound, kIoError, kUnsupported
// for io_uring where the kernel has none); the first failed read's status.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "colibri/status.h"

namespace colibri::bench {

// Reads are aligned to (and O_DIRECT needs) this.
inline constexpr uint64_t kPageBytes = 4096;

struct StorageReadOptions {
  std::string backend = "uring";  // "uring" or "pread"
  uint64_t block_bytes = 0;       // bytes per read: a multiple of kPageBytes for O_DIRECT
  // Where the blocks start (a model's expert offsets); empty: every
  // block_bytes-aligned offset of the file that leaves a whole block.
  std::vector<uint64_t> offsets;
  uint32_t queue_depth = 32;      // reads in flight
  bool register_buffers = true;   // io_uring registered buffers (READ_FIXED); pread ignores it
  // When to stop submitting (the reads in flight then drain): after
  // duration_ns, or after read_count reads were submitted; 0 = no such limit,
  // at least one must be set. The first queue_depth reads (or read_count,
  // when fewer) are submitted before the clock is checked.
  uint64_t duration_ns = 0;
  uint64_t read_count = 0;
  uint64_t seed = 1;              // of the block choice (std::mt19937_64, uniform over the blocks)
};

struct StorageReadRun {
  uint64_t reads = 0;              // completed successfully
  uint64_t read_bytes = 0;
  uint64_t queue_full_events = 0;  // submissions that waited for a queue slot (the backend's counter)
  double elapsed_s = 0;            // first submit to last completion
  std::vector<int64_t> latencies_ns;  // every read's submit-to-complete time, in completion order
  std::string backend;             // the backend's name (caps().name)
  bool direct_io = false;          // whether O_DIRECT held (the backend may fall back, with a warning)
  std::string warning;             // the backend's warning, or empty
  double read_bytes_per_s() const { return elapsed_s > 0 ? static_cast<double>(read_bytes) / elapsed_s : 0; }
};

// Reads random whole blocks of the file at `path` as `options` say.
Result<StorageReadRun> MeasureStorageReads(const std::string& path, const StorageReadOptions& options);

}  // namespace colibri::bench
