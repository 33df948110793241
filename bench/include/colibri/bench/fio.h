// fio (https://github.com/axboe/fio) as the storage reference: random reads
// of one block size at one queue depth through io_uring with O_DIRECT for a
// fixed time, run as a child process in the same run as our own reads
// (`colibri bench io`), its JSON output parsed.
//
// Ownership: RunFio owns the child process until it exits. Thread-safety:
// plain functions (popen / system). Errors: kIoError when fio cannot be run,
// exits non-zero or prints no job read figures (the message names the command).
#pragma once

#include <cstdint>
#include <string>

#include "colibri/bench/harness.h"
#include "colibri/status.h"

namespace colibri::bench {

struct FioOptions {
  std::string fio = "fio";       // the binary
  std::string path;              // the file to read
  uint64_t block_bytes = 0;
  uint32_t queue_depth = 32;
  uint32_t seconds = 5;
  bool fixed_buffers = false;    // --fixedbufs: registered buffers, like ours when we register them
};

// The command line: --ioengine=io_uring --direct=1 --rw=randread --time_based,
// completion-latency percentiles 50/90/99/99.9, JSON output.
std::string FioCommand(const FioOptions& options);

// Whether `fio` names a runnable binary (false for "none").
bool FioAvailable(const std::string& fio);

// Runs `command` (a FioCommand) and returns its first job's "read" section
// (bw_bytes, iops, clat_ns, ...), as fio printed it.
Result<Json> RunFio(const std::string& command);

// That section's completion latency percentiles, named like ours: {p50, p90,
// p99, p999, max} in ns, null where fio gave none.
Json FioLatencyJson(const Json& read);

}  // namespace colibri::bench
