#include "colibri/traces/reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>

#include "colibri/engine/input_file.h"
#include "colibri/traces/crc32c.h"
#include "file_format.h"
#include "record_codec.h"
#include "wire.h"

namespace colibri::traces {
namespace {

constexpr size_t kReadChunkBytes = 1 << 20;

}  // namespace

Result<std::unique_ptr<TraceReader>> TraceReader::Open(const std::string& path, const ReadOptions& options) {
  COLIBRI_RETURN_IF_ERROR(engine::CheckInputFile(path, "trace file"));
  std::unique_ptr<TraceReader> reader(new TraceReader());
  reader->path_ = path;
  reader->options_ = options;
  reader->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (reader->fd_ < 0) {
    if (errno == ENOENT) return Status::NotFound(path + ": no such file");
    return Status::IoError(path + ": cannot open: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(reader->fd_, &st) != 0) return Status::IoError(path + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(path + ": not a regular file, not a trace file");
  reader->file_bytes_ = static_cast<uint64_t>(st.st_size);
  COLIBRI_RETURN_IF_ERROR(reader->ReadFileHeader());
  return reader;
}

TraceReader::~TraceReader() {
  if (fd_ >= 0) ::close(fd_);
  ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(zstd_ctx_));
}

Result<size_t> TraceReader::Fill(size_t n) {
  size_t available = buffer_end_ - buffer_pos_;
  if (available >= n || eof_) return available;
  // Compact: move the unread bytes to the front, then grow to fit n.
  if (buffer_pos_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + buffer_pos_, available);
    buffer_offset_ += buffer_pos_;
    buffer_pos_ = 0;
    buffer_end_ = available;
  }
  // Up to 1 MiB at a time, never more than the file holds beyond what is buffered.
  const uint64_t file_left = file_bytes_ > buffer_offset_ + buffer_end_ ? file_bytes_ - buffer_offset_ - buffer_end_ : 0;
  const size_t want = std::max(n, buffer_end_ + static_cast<size_t>(std::min<uint64_t>(kReadChunkBytes, file_left)));
  if (buffer_.size() < want) buffer_.resize(want);
  while (buffer_end_ < n && !eof_) {
    const ssize_t got = ::read(fd_, buffer_.data() + buffer_end_, buffer_.size() - buffer_end_);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Status::IoError(path_ + ": read failed: " + std::strerror(errno));
    if (got == 0) eof_ = true;
    buffer_end_ += static_cast<size_t>(got);
  }
  return buffer_end_ - buffer_pos_;
}

Status TraceReader::ReadFileHeader() {
  COLIBRI_ASSIGN_OR_RETURN(size_t available, Fill(kFilePreambleBytes));
  if (file_bytes_ == 0) return Status::InvalidArgument(path_ + ": empty file, not a Colibri trace");
  const auto* p = reinterpret_cast<const uint8_t*>(buffer_.data());
  if (available < sizeof(kMagic) || std::memcmp(p, kMagic, sizeof(kMagic)) != 0) {
    return Status::InvalidArgument(path_ + ": not a Colibri trace (bad magic at byte offset 0, expected \"COLTRACE\")");
  }
  if (available < kFilePreambleBytes) {
    return Status::Truncated(path_ + ": file ends inside the 20-byte preamble (" + std::to_string(available) +
                             " bytes)");
  }
  version_ = wire::LoadFixed32(p + 8);
  if (version_ == kFormatVersionV1 && !options_.allow_v1) {
    return Status::Unsupported(path_ + ": trace format version 1 (no end marker: a torn file cannot be told from a "
                               "whole one); convert it with `colibri trace upgrade " + path_ + " -o OUT`");
  }
  if (version_ != kFormatVersion && version_ != kFormatVersionV1) {
    return Status::Unsupported(path_ + ": trace format version " + std::to_string(version_) +
                               " not supported (this build reads version " + std::to_string(kFormatVersion) +
                               ", and version 1 through `colibri trace upgrade`)");
  }
  const uint32_t header_bytes = wire::LoadFixed32(p + 12);
  const uint32_t header_crc = wire::LoadFixed32(p + 16);
  if (header_bytes > kMaxHeaderBytes) {
    return Status::Corruption(path_ + ": header length " + std::to_string(header_bytes) + " at byte offset 12 exceeds " +
                              std::to_string(kMaxHeaderBytes));
  }
  buffer_pos_ += kFilePreambleBytes;
  COLIBRI_ASSIGN_OR_RETURN(available, Fill(header_bytes));
  if (available < header_bytes) {
    return Status::Truncated(path_ + ": file ends inside the header (byte offset 20, " + std::to_string(header_bytes) +
                             " bytes expected)");
  }
  const auto* h = reinterpret_cast<const uint8_t*>(buffer_.data() + buffer_pos_);
  if (Crc32c(h, header_bytes) != header_crc) {
    return Status::Corruption(path_ + ": header CRC mismatch at byte offset 20");
  }
  COLIBRI_RETURN_IF_ERROR(DecodeHeader(h, header_bytes, &header_).WithPrefix(path_));
  buffer_pos_ += header_bytes;
  tail_offset_ = kFilePreambleBytes + header_bytes;
  if (header_.compression == Compression::kZstd) zstd_ctx_ = ZSTD_createDCtx();
  frames_end_ = file_bytes_;
  if (version_ != kFormatVersionV1) COLIBRI_RETURN_IF_ERROR(FindTrailer());
  return Status::Ok();
}

Status TraceReader::FindTrailer() {
  if (file_bytes_ < tail_offset_ + kEndBytes) return Status::Ok();
  uint8_t end[kEndBytes];
  const off_t at = static_cast<off_t>(file_bytes_ - kEndBytes);
  size_t done = 0;
  while (done < kEndBytes) {
    const ssize_t n = ::pread(fd_, end + done, kEndBytes - done, at + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::IoError(path_ + ": read failed: " + std::strerror(errno));
    if (n == 0) return Status::Ok();  // the file shrank: no trailer
    done += static_cast<size_t>(n);
  }
  Trailer trailer;
  if (!DecodeTrailer(end + 1, &trailer)) return Status::Ok();
  if (trailer.frames_end_offset != file_bytes_ - kEndBytes) {
    // Closed whole once (a valid trailer ends the file), but bytes were added or removed since:
    // whatever the scan meets that looks torn is corruption.
    closed_trailer_mismatch_ = true;
    return Status::Ok();
  }
  has_trailer_ = true;
  trailer_records_ = trailer.records;
  trailer_frames_ = trailer.frames;
  trailer_crc32c_ = trailer.frames_crc32c;
  frames_end_ = trailer.frames_end_offset;
  end_marker_byte_ = end[0];
  return Status::Ok();
}

Result<bool> TraceReader::EndAt(uint64_t offset) {
  if (end_marker_byte_ != 0) {
    return Status::Corruption(path_ + ": the end marker at byte offset " + std::to_string(offset) + " is " +
                              std::to_string(end_marker_byte_) + ", expected 0");
  }
  if (records_read_ != trailer_records_ || frames_read_ != trailer_frames_ || frames_crc32c_ != trailer_crc32c_) {
    return Status::Corruption(path_ + ": the trailer at byte offset " + std::to_string(offset + 1) + " says " +
                              std::to_string(trailer_records_) + " records in " + std::to_string(trailer_frames_) +
                              " frames, but the file holds " + std::to_string(records_read_) + " records in " +
                              std::to_string(frames_read_) + " frames" +
                              (frames_crc32c_ != trailer_crc32c_ ? " with another CRC32C" : ""));
  }
  end_ = TraceEnd::kComplete;
  return false;
}

Result<bool> TraceReader::TornAt(uint64_t offset) {
  tail_offset_ = offset;
  if (closed_trailer_mismatch_) {
    return Status::Corruption(path_ + ": the frames stop at byte offset " + std::to_string(offset) +
                              " without their end, but the file ends with a trailer (it was written whole; bytes "
                              "were changed, added or removed since)");
  }
  if (!options_.allow_torn) {
    return Status::Truncated(path_ + ": torn at byte offset " + std::to_string(offset) + " of " +
                             std::to_string(file_bytes_) + ": a prefix of " + std::to_string(records_read_) +
                             " whole records and no trailer (its writer did not finish); --allow-torn reads the "
                             "prefix");
  }
  end_ = TraceEnd::kTorn;
  return false;
}

Result<bool> TraceReader::StrayEnd() {
  const uint64_t marker = frame_offset_;
  if (version_ == kFormatVersionV1) return CorruptionAt("a frame of length 0");
  if (has_trailer_) {
    return CorruptionAt("an end marker before the end of the frames at byte offset " + std::to_string(frames_end_));
  }
  if (file_bytes_ < marker + kEndBytes) return TornAt(marker);  // cut inside the trailer
  COLIBRI_ASSIGN_OR_RETURN(size_t available, Fill(kEndBytes));
  if (available < kEndBytes) return TornAt(marker);
  Trailer trailer;
  if (!DecodeTrailer(reinterpret_cast<const uint8_t*>(buffer_.data() + buffer_pos_ + 1), &trailer)) {
    return CorruptionAt("an end marker followed by a damaged trailer");
  }
  if (file_bytes_ == marker + kEndBytes) {  // the trailer ends the file but names another end of the frames
    return Status::Corruption(path_ + ": the trailer at byte offset " + std::to_string(marker + 1) +
                              " says the frames end at byte offset " + std::to_string(trailer.frames_end_offset) +
                              ", they end at " + std::to_string(marker) + " (frames removed or added)");
  }
  return Status::Corruption(path_ + ": " + std::to_string(file_bytes_ - marker - kEndBytes) +
                            " bytes after the trailer that ends at byte offset " + std::to_string(marker + kEndBytes));
}

Status TraceReader::CorruptionAt(const std::string& what) const {
  return Status::Corruption(path_ + ": " + what + " (frame at byte offset " + std::to_string(frame_offset_) +
                            ", record index " + std::to_string(records_read_) + ")");
}

Result<bool> TraceReader::NextFrame() {
  frame_offset_ = buffer_offset_ + buffer_pos_;
  if (has_trailer_ && frame_offset_ == frames_end_) return EndAt(frame_offset_);
  COLIBRI_ASSIGN_OR_RETURN(size_t available, Fill(10 + kFrameCrcBytes));
  if (available == 0) {
    if (version_ == kFormatVersionV1) {
      end_ = TraceEnd::kComplete;
      return false;
    }
    return TornAt(frame_offset_);  // the file stops at a frame boundary without a trailer
  }
  const auto* start = reinterpret_cast<const uint8_t*>(buffer_.data() + buffer_pos_);
  const uint8_t* p = start;
  uint64_t length = 0;
  if (!wire::GetVarint(&p, start + available, &length)) {
    if (available < 10 && eof_ && !has_trailer_) return TornAt(frame_offset_);  // the length itself is cut off
    return CorruptionAt("bad frame length varint");
  }
  if (length == 0) return StrayEnd();
  const size_t prefix = static_cast<size_t>(p - start) + kFrameCrcBytes;
  if (length > kMaxFrameBytes) {
    return CorruptionAt("frame length " + std::to_string(length) + " exceeds the 1 GiB limit");
  }
  if (frame_offset_ + prefix + length > frames_end_) {
    if (has_trailer_) {
      return CorruptionAt("a frame of " + std::to_string(length) + " bytes runs past the end of the frames at byte "
                          "offset " + std::to_string(frames_end_));
    }
    return TornAt(frame_offset_);
  }
  COLIBRI_ASSIGN_OR_RETURN(available, Fill(prefix + length));
  if (available < prefix + length) return TornAt(frame_offset_);  // the file shrank under us
  start = reinterpret_cast<const uint8_t*>(buffer_.data() + buffer_pos_);
  const uint32_t expected_crc = wire::LoadFixed32(start + prefix - kFrameCrcBytes);
  frame_ = start + prefix;
  frame_bytes_ = length;
  if (Crc32c(frame_, frame_bytes_) != expected_crc) return CorruptionAt("CRC32C mismatch");
  frames_crc32c_ = Crc32cExtend(frames_crc32c_, start, prefix + length);
  ++frames_read_;
  buffer_pos_ += prefix + length;
  tail_offset_ = buffer_offset_ + buffer_pos_;
  return true;
}

Status TraceReader::LoadBlock() {
  const uint8_t* p = frame_;
  const uint8_t* end = frame_ + frame_bytes_;
  uint64_t count = 0, raw_bytes = 0;
  if (!wire::GetVarint(&p, end, &count) || !wire::GetVarint(&p, end, &raw_bytes)) {
    return CorruptionAt("bad zstd block prefix");
  }
  if (count == 0 || raw_bytes > kMaxBlockBytes || count > raw_bytes) {
    return CorruptionAt("zstd block declares " + std::to_string(count) + " records in " + std::to_string(raw_bytes) +
                        " bytes");
  }
  block_.resize(raw_bytes);
  const size_t n = ZSTD_decompressDCtx(static_cast<ZSTD_DCtx*>(zstd_ctx_), block_.data(), block_.size(), p,
                                       static_cast<size_t>(end - p));
  if (ZSTD_isError(n)) return CorruptionAt(std::string("zstd: ") + ZSTD_getErrorName(n));
  if (n != raw_bytes) return CorruptionAt("zstd block decompressed to " + std::to_string(n) + " bytes, expected " +
                                          std::to_string(raw_bytes));
  block_pos_ = 0;
  block_records_left_ = count;
  return Status::Ok();
}

Status TraceReader::DecodeAt(const uint8_t* data, size_t n, TraceRecord* record) {
  Status status = DecodeRecord(data, n, header_.expert_id_width_bytes, record);
  if (status.ok()) status = ValidateRecord(header_.shape, *record);
  if (!status.ok()) return CorruptionAt(status.message());
  return Status::Ok();
}

Result<bool> TraceReader::Next(TraceRecord* record) {
  if (header_.compression == Compression::kNone) {
    COLIBRI_ASSIGN_OR_RETURN(bool have, NextFrame());
    if (!have) return false;
    COLIBRI_RETURN_IF_ERROR(DecodeAt(frame_, frame_bytes_, record));
    ++records_read_;
    return true;
  }
  if (block_records_left_ == 0) {
    if (block_pos_ != block_.size()) return CorruptionAt("zstd block has bytes after its last record");
    COLIBRI_ASSIGN_OR_RETURN(bool have, NextFrame());
    if (!have) return false;
    COLIBRI_RETURN_IF_ERROR(LoadBlock());
  }
  const auto* base = reinterpret_cast<const uint8_t*>(block_.data());
  const uint8_t* p = base + block_pos_;
  const uint8_t* end = base + block_.size();
  uint64_t length = 0;
  if (!wire::GetVarint(&p, end, &length) || length > static_cast<uint64_t>(end - p)) {
    return CorruptionAt("bad record length inside zstd block");
  }
  COLIBRI_RETURN_IF_ERROR(DecodeAt(p, length, record));
  block_pos_ = static_cast<size_t>(p - base) + length;
  --block_records_left_;
  ++records_read_;
  return true;
}

Result<TraceHeader> ReadTraceHeader(const std::string& path) {
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> reader, TraceReader::Open(path, ReadOptions{.allow_torn = true}));
  return reader->header();
}

std::string TornEnding(uint64_t torn_at_byte, uint64_t records) {
  return "torn at byte offset " + std::to_string(torn_at_byte) + ": its first " + std::to_string(records) +
         " records only (--allow-torn)";
}

}  // namespace colibri::traces
