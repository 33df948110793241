// LineReader: reads a text file line by line through a fixed buffer, keeping
// the 1-based line number and the byte offset of each line for error
// messages. Lines may end in \n or \r\n; the last line needs no newline; a
// UTF-8 byte-order mark at the start of the file is dropped. Open() refuses
// what is not a regular file by type (engine::CheckInputFile). Internal to
// traces/. Not thread-safe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "colibri/status.h"

namespace colibri::traces {

class LineReader {
 public:
  static Result<std::unique_ptr<LineReader>> Open(const std::string& path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Sets *line to the next line (without its terminator); false at the end.
  // The view is valid until the next call.
  Result<bool> Next(std::string_view* line);
  uint64_t line_number() const { return line_number_; }
  uint64_t line_offset() const { return line_offset_; }
  const std::string& path() const { return path_; }
  // "<path>:<line>: <what>" as an InvalidArgument status.
  Status Error(const std::string& what) const;

 private:
  LineReader(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}
  std::string path_;
  std::FILE* file_;
  std::string buffer_;
  size_t pos_ = 0;
  bool eof_ = false;
  uint64_t line_number_ = 0;
  uint64_t line_offset_ = 0;
  uint64_t consumed_ = 0;  // file offset of buffer_[0]
};

}  // namespace colibri::traces
