// TraceReader: streaming reader of a Colibri trace file.
//
// Memory stays bounded by one record (one block when compressed) plus a 1 MiB
// read buffer. A file that ends inside a record is a torn tail: Next() returns
// false, and truncated() / tail_offset() say where; every complete record
// before it stays readable. A CRC mismatch or malformed record is a
// kCorruption error naming the byte offset and the record index. Wrong magic
// or version fails Open() with a clear message. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "colibri/status.h"
#include "colibri/traces/trace.h"

namespace colibri::traces {

class TraceReader {
 public:
  static Result<std::unique_ptr<TraceReader>> Open(const std::string& path);
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  const TraceHeader& header() const { return header_; }
  const std::string& path() const { return path_; }

  // Reads the next record. true: `record` holds it. false: clean end of file
  // or a torn tail (see truncated()). Error: corruption, with offset and index.
  Result<bool> Next(TraceRecord* record);

  uint64_t records_read() const { return records_read_; }
  bool truncated() const { return truncated_; }
  // Byte offset where the torn tail starts (the end of the last whole frame).
  uint64_t tail_offset() const { return tail_offset_; }
  uint64_t file_bytes() const { return file_bytes_; }

 private:
  TraceReader() = default;
  Status ReadFileHeader();
  // Makes at least `n` bytes available at pos_; returns how many are (fewer only at EOF).
  Result<size_t> Fill(size_t n);
  Result<bool> NextFrame();  // loads the next frame payload into frame_
  Status LoadBlock();
  Status DecodeAt(const uint8_t* data, size_t n, TraceRecord* record);
  Status CorruptionAt(const std::string& what) const;

  std::string path_;
  int fd_ = -1;
  uint64_t file_bytes_ = 0;
  TraceHeader header_;
  std::string buffer_;       // file bytes [buffer_offset_, buffer_offset_ + buffer_end_)
  size_t buffer_pos_ = 0;
  size_t buffer_end_ = 0;
  uint64_t buffer_offset_ = 0;
  bool eof_ = false;
  // Current frame.
  const uint8_t* frame_ = nullptr;
  size_t frame_bytes_ = 0;
  uint64_t frame_offset_ = 0;
  // Current decompressed block (zstd traces).
  std::string block_;
  size_t block_pos_ = 0;
  uint64_t block_records_left_ = 0;
  void* zstd_ctx_ = nullptr;
  uint64_t records_read_ = 0;
  bool truncated_ = false;
  uint64_t tail_offset_ = 0;
};

// Reads only the header of a trace file (fast: does not scan the records).
Result<TraceHeader> ReadTraceHeader(const std::string& path);

}  // namespace colibri::traces
