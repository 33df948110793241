// The `colibri bench io` suite: all-miss expert streaming from storage
// (docs/BENCHMARKS.md). Rounds of our storage reads (MeasureStorageReads),
// then with a model the engine streaming the same blocks
// (MeasureEngineStreaming), then fio with the same file, block size and queue
// depth (interleaved, so drift hits all alike); the best round of each is
// reported, with every round's rate. Without a file or model, a file of
// pseudo-random data is created in `dir` and removed at the end.
//
// Ownership: the created file (ScratchFile) lives for the call. Thread-safety:
// one call on one thread. Errors: kInvalidArgument for a zero block size or a
// file smaller than one block, kNotFound for a missing file, and those of the
// harnesses it runs (storage_reads.h, engine_streaming.h, fio.h, files.h).
#pragma once

#include <cstdint>
#include <string>

#include "colibri/bench/harness.h"
#include "colibri/status.h"

namespace colibri::bench {

struct IoBenchOptions {
  std::string model;               // a model directory: read its experts.bin's expert blocks, and run the engine
  uint32_t batch_tokens = 64;      // with a model: tokens per layer batch of the engine run
  uint32_t threads = 2;            // with a model: CPU compute threads of the engine run
  std::string file;                // the file to read; empty (and no model): create one of size_bytes in dir
  uint64_t size_bytes = 2ull << 30;
  std::string dir;                 // where the file is created
  uint64_t block_bytes = 3059712;  // bytes per read, rounded up to 4 KiB (a model: its expert block)
  uint32_t queue_depth = 32;
  uint32_t seconds = 5;            // per run
  std::string backend = "uring";   // "uring" or "pread"
  bool register_buffers = true;    // io_uring registered buffers (READ_FIXED); fio gets --fixedbufs to match
  std::string fio = "fio";         // the fio binary; "none" skips the reference
  int repeats = 1;                 // rounds
  uint64_t seed = 1;               // root of the created file's data and of each round's read offsets (DeriveSeed)
};

// Whether fio runs with --fixedbufs: exactly when our reads use registered buffers.
bool UsesRegisteredBuffers(const IoBenchOptions& options);

// The suite's figures: file, file_bytes, created_file, backend, direct_io,
// registered_buffers, warning, block_bytes, queue_depth, reads, read_bytes,
// elapsed_s, read_bytes_per_s, queue_full_events, read_latency_ns,
// runs_read_bytes_per_s, fio, fio_note, colibri_over_fio, engine (in that
// order; docs/BENCHMARKS.md). Progress: the file's bytes while it is
// created, then the runs.
Result<Json> RunIoBench(const IoBenchOptions& options, const Observer& observer = {});

}  // namespace colibri::bench
