// Files and checksums for the model tools: positioned reads, streaming writes
// with a running SHA-256, whole small files. Errors name the path and the OS
// reason. Each object is used by one thread at a time, except
// InputFile::ReadAt, which is thread-safe (pread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "colibri/engine/model.h"
#include "colibri/engine/sha256.h"
#include "colibri/status.h"

namespace colibri::engine::model_detail {

using engine::Sha256;

// SHA-256 of a whole file, read in large chunks.
Result<std::string> Sha256OfFile(const std::string& path);
// SHA-256 of bytes in memory.
Result<std::string> Sha256OfBytes(const void* data, uint64_t bytes);

class InputFile {
 public:
  // kNotFound for a missing file.
  static Result<InputFile> Open(const std::string& path);
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  ~InputFile();

  uint64_t bytes() const { return bytes_; }  // size when opened
  // Reads exactly `bytes` at `offset`; kTruncated when the file ends first.
  Status ReadAt(uint64_t offset, void* dst, uint64_t bytes) const;

 private:
  InputFile(int fd, std::string path, uint64_t bytes) : fd_(fd), path_(std::move(path)), bytes_(bytes) {}
  int fd_ = -1;
  std::string path_;
  uint64_t bytes_ = 0;
};

// A new file (never overwrites), hashed as it is written.
class OutputFile {
 public:
  static Result<OutputFile> Create(const std::string& path);
  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&& other) = delete;
  ~OutputFile();

  Status Write(const void* data, uint64_t bytes);
  // Closes the file; returns its name (without directories), size and digest.
  Result<ModelFile> Close();

 private:
  OutputFile(int fd, std::string path);
  int fd_ = -1;
  std::string path_;
  uint64_t bytes_ = 0;
  std::unique_ptr<Sha256> sha256_;
};

Result<std::string> ReadTextFile(const std::string& path, uint64_t max_bytes);
Status WriteTextFile(const std::string& path, const std::string& text);

}  // namespace colibri::engine::model_detail
