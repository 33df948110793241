// TraceWriter: append-only writer of a Colibri trace file.
//
// Records are framed (length + CRC32C) and written in whole frames only, so a
// writer killed at any point leaves a file whose complete records stay
// readable (the reader reports the torn tail). With Compression::kZstd,
// records are grouped in zstd blocks of about `block_bytes` uncompressed.
//
// With `atomic`, the file is written as "<path>.partial" and renamed to
// <path> by Close(); a writer destroyed without Close() removes it, so a
// failed import leaves no partial output. Not thread-safe: one writer per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "colibri/status.h"
#include "colibri/traces/trace.h"

namespace colibri::traces {

struct WriterOptions {
  Compression compression = Compression::kNone;
  int zstd_level = 3;
  size_t block_bytes = 1 << 20;  // uncompressed bytes per zstd block
  bool atomic = false;
};

class TraceWriter {
 public:
  // Validates the header's shape, creates (truncates) the file and writes the
  // file header. expert_id_width_bytes and compression are set from the shape
  // and options.
  static Result<std::unique_ptr<TraceWriter>> Create(const std::string& path, TraceHeader header,
                                                     const WriterOptions& options = {});
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Validates `record` against the shape (ValidateRecord) and appends it.
  Status Append(const TraceRecord& record);
  // Writes every buffered record to the file (ending the current zstd block).
  Status Flush();
  // Flushes, syncs and closes; renames into place when atomic. Idempotent.
  Status Close();

  const TraceHeader& header() const { return header_; }
  uint64_t records_written() const { return records_written_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  TraceWriter(std::string path, std::string file_path, int fd, TraceHeader header, WriterOptions options);
  Status WriteOut(const std::string& bytes);
  void AppendFrame(const std::string& payload);
  Status EndBlock();

  std::string path_;       // final path
  std::string file_path_;  // path being written (path_ or path_.partial)
  int fd_ = -1;
  TraceHeader header_;
  WriterOptions options_;
  std::string frames_;     // whole frames not yet written
  std::string block_;      // records of the open zstd block
  uint64_t block_records_ = 0;
  std::string scratch_;
  uint64_t records_written_ = 0;
  uint64_t bytes_written_ = 0;
  bool closed_ = false;
};

}  // namespace colibri::traces
