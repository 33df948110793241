#include "line_reader.h"

#include <cerrno>
#include <cstring>

#include "colibri/engine/input_file.h"

namespace colibri::traces {
namespace {
constexpr size_t kChunkBytes = 1 << 20;
constexpr size_t kMaxLineBytes = 64 << 20;
}  // namespace

Result<std::unique_ptr<LineReader>> LineReader::Open(const std::string& path) {
  COLIBRI_RETURN_IF_ERROR(engine::CheckInputFile(path, "text file"));
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return Status::IoError(path + ": cannot open: " + std::strerror(errno));
  return std::unique_ptr<LineReader>(new LineReader(path, file));
}

LineReader::~LineReader() { std::fclose(file_); }

Result<bool> LineReader::Next(std::string_view* line) {
  while (true) {
    const size_t newline = buffer_.find('\n', pos_);
    if (newline != std::string::npos || (eof_ && pos_ < buffer_.size())) {
      const size_t end = newline == std::string::npos ? buffer_.size() : newline;
      size_t stop = end;
      if (stop > pos_ && buffer_[stop - 1] == '\r') --stop;
      *line = std::string_view(buffer_.data() + pos_, stop - pos_);
      line_offset_ = consumed_ + pos_;
      ++line_number_;
      // A UTF-8 byte-order mark (spreadsheet exports) is not part of the first line.
      if (line_number_ == 1 && line->substr(0, 3) == "\xEF\xBB\xBF") line->remove_prefix(3);
      pos_ = newline == std::string::npos ? buffer_.size() : newline + 1;
      return true;
    }
    if (eof_) return false;
    if (buffer_.size() - pos_ > kMaxLineBytes) return Error("line longer than 64 MiB");
    consumed_ += pos_;
    buffer_.erase(0, pos_);
    pos_ = 0;
    const size_t old = buffer_.size();
    buffer_.resize(old + kChunkBytes);
    const size_t got = std::fread(buffer_.data() + old, 1, kChunkBytes, file_);
    buffer_.resize(old + got);
    if (got < kChunkBytes) {
      if (std::ferror(file_)) return Status::IoError(path_ + ": read failed");
      eof_ = true;
    }
  }
}

Status LineReader::Error(const std::string& what) const {
  return Status::InvalidArgument(path_ + ":" + std::to_string(line_number_) + ": " + what);
}

}  // namespace colibri::traces
