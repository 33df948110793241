#include "colibri/traces/writer.h"

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "colibri/traces/crc32c.h"
#include "file_format.h"
#include "record_codec.h"
#include "wire.h"

namespace colibri::traces {
namespace {

constexpr size_t kWriteThresholdBytes = 1 << 20;

Status ErrnoStatus(const std::string& what, const std::string& path) {
  return Status::IoError(path + ": " + what + ": " + std::strerror(errno));
}

}  // namespace

Result<std::unique_ptr<TraceWriter>> TraceWriter::Create(const std::string& path, TraceHeader header,
                                                         const WriterOptions& options) {
  COLIBRI_RETURN_IF_ERROR(header.shape.Validate().WithPrefix(path));
  if (options.compression == Compression::kZstd &&
      (options.block_bytes == 0 || options.block_bytes > kMaxBlockBytes / 2)) {
    return Status::InvalidArgument("zstd block_bytes must be in 1.." + std::to_string(kMaxBlockBytes / 2));
  }
  header.compression = options.compression;
  header.expert_id_width_bytes = ExpertIdWidthBytes(header.shape.experts_per_layer);
  COLIBRI_ASSIGN_OR_RETURN(engine::OutputClaim claim, engine::OutputClaim::Acquire(path));
  const int fd = ::open(claim.temp_path().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("cannot create", claim.temp_path());
  std::unique_ptr<TraceWriter> writer(new TraceWriter(std::move(claim), fd, std::move(header), options));
  const std::string header_bytes = EncodeHeader(writer->header_);
  std::string preamble(kMagic, sizeof(kMagic));
  wire::PutFixed32(&preamble, kFormatVersion);
  wire::PutFixed32(&preamble, static_cast<uint32_t>(header_bytes.size()));
  wire::PutFixed32(&preamble, Crc32c(header_bytes.data(), header_bytes.size()));
  preamble += header_bytes;
  COLIBRI_RETURN_IF_ERROR(writer->WriteOut(preamble));
  return writer;
}

TraceWriter::TraceWriter(engine::OutputClaim claim, int fd, TraceHeader header, WriterOptions options)
    : claim_(std::move(claim)), fd_(fd), header_(std::move(header)), options_(options) {}

TraceWriter::~TraceWriter() {
  if (closed_) return;
  ::close(fd_);
  claim_.Abandon();  // no trailer was written: the temporary file goes
}

Status TraceWriter::WriteOut(const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("write failed", claim_.temp_path());
    done += static_cast<size_t>(n);
  }
  bytes_written_ += bytes.size();
  return Status::Ok();
}

void TraceWriter::AppendFrame(const std::string& payload) {
  const size_t start = frames_.size();
  wire::PutVarint(&frames_, payload.size());  // never 0: a record encodes at least its tokens
  wire::PutFixed32(&frames_, Crc32c(payload.data(), payload.size()));
  frames_ += payload;
  frames_crc32c_ = Crc32cExtend(frames_crc32c_, frames_.data() + start, frames_.size() - start);
  ++frames_written_;
}

Status TraceWriter::Append(const TraceRecord& record) {
  if (closed_) return Status::Internal("append to a closed trace writer");
  COLIBRI_RETURN_IF_ERROR(ValidateRecord(header_.shape, record).WithPrefix("record " + std::to_string(records_written_)));
  scratch_.clear();
  EncodeRecord(record, header_.expert_id_width_bytes, &scratch_);
  if (scratch_.size() > kMaxFrameBytes) return Status::InvalidArgument("record larger than 1 GiB");
  ++records_written_;
  if (options_.compression == Compression::kZstd) {
    wire::PutVarint(&block_, scratch_.size());
    block_ += scratch_;
    ++block_records_;
    if (block_.size() >= options_.block_bytes) COLIBRI_RETURN_IF_ERROR(EndBlock());
  } else {
    AppendFrame(scratch_);
  }
  if (frames_.size() >= kWriteThresholdBytes) {
    COLIBRI_RETURN_IF_ERROR(WriteOut(frames_));
    frames_.clear();
  }
  return Status::Ok();
}

Status TraceWriter::EndBlock() {
  if (block_records_ == 0) return Status::Ok();
  std::string payload;
  wire::PutVarint(&payload, block_records_);
  wire::PutVarint(&payload, block_.size());
  const size_t head = payload.size();
  payload.resize(head + ZSTD_compressBound(block_.size()));
  const size_t n = ZSTD_compress(payload.data() + head, payload.size() - head, block_.data(), block_.size(),
                                 options_.zstd_level);
  if (ZSTD_isError(n)) return Status::Internal(std::string("zstd compression failed: ") + ZSTD_getErrorName(n));
  payload.resize(head + n);
  AppendFrame(payload);
  block_.clear();
  block_records_ = 0;
  return Status::Ok();
}

Status TraceWriter::Flush() {
  if (closed_) return Status::Ok();
  COLIBRI_RETURN_IF_ERROR(EndBlock());
  COLIBRI_RETURN_IF_ERROR(WriteOut(frames_));
  frames_.clear();
  return Status::Ok();
}

Status TraceWriter::Close() {
  if (closed_) return Status::Ok();
  Status status = Flush();
  if (status.ok()) {
    Trailer trailer;
    trailer.records = records_written_;
    trailer.frames = frames_written_;
    trailer.frames_end_offset = bytes_written_;
    trailer.frames_crc32c = frames_crc32c_;
    status = WriteOut(std::string(1, '\0') + EncodeTrailer(trailer));
  }
  if (status.ok() && ::fsync(fd_) != 0) status = ErrnoStatus("fsync failed", claim_.temp_path());
  if (::close(fd_) != 0 && status.ok()) status = ErrnoStatus("close failed", claim_.temp_path());
  closed_ = true;
  if (status.ok()) return claim_.Commit();
  claim_.Abandon();
  return status;
}

}  // namespace colibri::traces
