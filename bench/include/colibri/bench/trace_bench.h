// The `colibri bench trace` suite (docs/BENCHMARKS.md): trace read and
// import throughput on one core, each against a reference in the same run.
// A synthetic trace of a model's shape is written uncompressed and with zstd
// blocks; the reader reads both (best of `repeats`), against libprotobuf's
// own parser on the uncompressed file; the bmoe-csv importer imports a CSV
// written from the trace (and a real CSV when there is one), against
// Python's csv module splitting the same file (null without python3). The
// temporary files in `dir` are removed at the end.
//
// Ownership: the call owns its temporary files. Thread-safety: one thread
// (it runs python3 with std::system). Errors: those of the model config
// (kNotFound, kInvalidArgument), of synthesis, reading and import;
// kInvalidArgument when the trace is 2 GiB or more (the libprotobuf
// reference reads less); kInternal when the reference and the reader
// disagree on the selection count.
#pragma once

#include <cstdint>
#include <string>

#include "colibri/bench/harness.h"
#include "colibri/status.h"

namespace colibri::bench {

struct TraceBenchOptions {
  std::string model_config;        // a Hugging Face config.json: the synthetic trace's shape
  uint64_t selections = 50'000'000;  // in the synthetic trace (at least)
  uint64_t csv_rows = 5'000'000;   // rows of the synthetic bmoe CSV
  std::string real_csv;            // a real bmoe route CSV to import too; skipped when absent
  std::string dir;                 // for the temporary files
  int repeats = 3;                 // runs per measurement (the best is reported)
  uint64_t seed = 1;               // of the synthetic trace
};

// The suite's figures: synthetic_trace, read_native,
// read_libprotobuf_reference, read_zstd, import_bmoe_csv_synthetic,
// import_bmoe_csv_real (null when there is no real CSV), peak_rss_bytes.
// Progress: six steps.
Result<Json> RunTraceBench(const TraceBenchOptions& options, const Observer& observer = {});

}  // namespace colibri::bench
