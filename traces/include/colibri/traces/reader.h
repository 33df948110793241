// TraceReader: streaming reader of a Colibri trace file.
//
// Memory stays bounded by one record (one block when compressed) plus a 1 MiB
// read buffer. A version-2 file ends with a trailer (record and frame counts,
// a CRC32C of every frame byte) that only a clean close writes, so the reader
// tells three endings apart:
//   - complete: the trailer is there and matches the frames: Next() returns
//     false after the last record, end() == kComplete;
//   - torn at byte N: the file stops without a trailer (its writer was killed
//     or the file was cut), holding a prefix of K whole records. Next() fails
//     with kTruncated naming N and K, unless ReadOptions::allow_torn: then it
//     returns false, end() == kTorn, truncated() and tail_offset() say where;
//   - corrupt at byte N: a CRC mismatch, a malformed record, a frame running
//     past the trailer's end, bytes after the trailer, a trailer that does not
//     match the frames: a kCorruption error naming the byte offset and record.
// Open() refuses what is not a regular file (FIFOs, devices, /proc) by type
// before opening it, wrong magic, and version-1 files (no trailer: upgrade
// them with `colibri trace upgrade`) unless ReadOptions::allow_v1, which only
// the upgrade uses (a v1 file ending at a frame boundary reads as complete).
// Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "colibri/status.h"
#include "colibri/traces/trace.h"

namespace colibri::traces {

struct ReadOptions {
  bool allow_torn = false;  // a torn file reads as its prefix (end() == kTorn) instead of failing
  bool allow_v1 = false;    // read version-1 files (for `trace upgrade` only)
};

enum class TraceEnd {
  kNotReached,  // Next() has not returned false yet
  kComplete,    // the trailer was read and matches (v1: the file ended at a frame boundary)
  kTorn,        // the file stops without a trailer (allow_torn)
};

class TraceReader {
 public:
  static Result<std::unique_ptr<TraceReader>> Open(const std::string& path, const ReadOptions& options = {});
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  const TraceHeader& header() const { return header_; }
  const std::string& path() const { return path_; }

  // Reads the next record. true: `record` holds it. false: the end (see
  // end()). Error: corruption (offset and index), or a torn file without
  // allow_torn.
  Result<bool> Next(TraceRecord* record);

  uint32_t format_version() const { return version_; }
  TraceEnd end() const { return end_; }
  uint64_t records_read() const { return records_read_; }
  bool truncated() const { return end_ == TraceEnd::kTorn; }
  // Byte offset where the torn tail starts (the end of the last whole frame).
  uint64_t tail_offset() const { return tail_offset_; }
  uint64_t file_bytes() const { return file_bytes_; }

 private:
  TraceReader() = default;
  Status ReadFileHeader();
  // Reads the last kEndBytes of the file; sets has_trailer_ when they are a valid end.
  Status FindTrailer();
  // The end of the frames: complete (checks the trailer) or torn.
  Result<bool> EndAt(uint64_t offset);
  Result<bool> TornAt(uint64_t offset);
  // A 0x00 frame where no trailer was found at the file's end.
  Result<bool> StrayEnd();
  // Makes at least `n` bytes available at pos_; returns how many are (fewer only at EOF).
  Result<size_t> Fill(size_t n);
  Result<bool> NextFrame();  // loads the next frame payload into frame_
  Status LoadBlock();
  Status DecodeAt(const uint8_t* data, size_t n, TraceRecord* record);
  Status CorruptionAt(const std::string& what) const;

  std::string path_;
  ReadOptions options_;
  uint32_t version_ = 0;
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
  uint64_t frames_read_ = 0;
  uint32_t frames_crc32c_ = 0;  // of every frame byte read so far
  bool has_trailer_ = false;    // a valid end marker + trailer closes the file
  uint64_t trailer_records_ = 0;
  uint64_t trailer_frames_ = 0;
  uint64_t frames_end_ = 0;     // has_trailer_: offset of the end marker; else file_bytes_
  uint32_t trailer_crc32c_ = 0;
  uint8_t end_marker_byte_ = 0;  // the byte before the trailer (0 in a whole file)
  bool closed_trailer_mismatch_ = false;  // a valid trailer ends the file but names another end of the frames
  TraceEnd end_ = TraceEnd::kNotReached;
  uint64_t tail_offset_ = 0;
};

// How a read of a torn trace (ReadOptions::allow_torn) ended, in the words
// every warning and stored run uses: "torn at byte offset N: its first K
// records only (--allow-torn)".
std::string TornEnding(uint64_t torn_at_byte, uint64_t records);

// Reads only the header of a trace file (fast: does not scan the records;
// the version is checked, the trailer is not).
Result<TraceHeader> ReadTraceHeader(const std::string& path);

}  // namespace colibri::traces
