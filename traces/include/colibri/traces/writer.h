// TraceWriter: append-only writer of a Colibri trace file.
//
// Records are framed (length + CRC32C) and written in whole frames only. With
// Compression::kZstd, records are grouped in zstd blocks of about
// `block_bytes` uncompressed.
//
// The file is written under a temporary name unique to this writer
// (engine::OutputClaim: "<path>.partial-<pid>-<n>", with "<path>.lock" held
// so a second writer of the same path fails at Create), and Close() writes
// the end marker and trailer (record and frame counts, CRC32C of the frames),
// syncs and renames it onto <path>. A writer destroyed without Close(), or
// whose Close() fails, removes its temporary file; one killed leaves a temp
// file without a trailer, which never reads as whole and which the next
// writer of <path> sweeps. Not thread-safe: one writer per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "colibri/engine/output_claim.h"
#include "colibri/status.h"
#include "colibri/traces/trace.h"

namespace colibri::traces {

struct WriterOptions {
  Compression compression = Compression::kNone;
  int zstd_level = 3;
  size_t block_bytes = 1 << 20;  // uncompressed bytes per zstd block
};

class TraceWriter {
 public:
  // Validates the header's shape, claims `path`, creates the temporary file
  // and writes the file header. expert_id_width_bytes and compression are set from the shape
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
  // Flushes, writes the trailer, syncs, closes and renames into place.
  // Idempotent; after an error the output is not written.
  Status Close();

  const TraceHeader& header() const { return header_; }
  uint64_t records_written() const { return records_written_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  TraceWriter(engine::OutputClaim claim, int fd, TraceHeader header, WriterOptions options);
  Status WriteOut(const std::string& bytes);
  void AppendFrame(const std::string& payload);
  Status EndBlock();

  engine::OutputClaim claim_;  // the final path and the temporary one being written
  int fd_ = -1;
  TraceHeader header_;
  WriterOptions options_;
  std::string frames_;     // whole frames not yet written
  std::string block_;      // records of the open zstd block
  uint64_t block_records_ = 0;
  std::string scratch_;
  uint64_t records_written_ = 0;
  uint64_t frames_written_ = 0;
  uint32_t frames_crc32c_ = 0;  // of every frame byte so far
  uint64_t bytes_written_ = 0;
  bool closed_ = false;
};

}  // namespace colibri::traces
