// The files a harness makes: a scratch file removed when its owner goes, a
// file of pseudo-random bytes for storage benchmarks, an atomic write for the
// files a harness leaves (hardware profiles), and a file's size.
//
// Ownership: a ScratchFile owns its file; the functions own nothing after
// they return. Thread-safety: plain functions and a move-only owner;
// concurrent calls on different paths are independent. Errors: kIoError naming the path and the
// failing call (open, write, fsync, rename).
#pragma once

#include <cstdint>
#include <string>

#include "colibri/bench/harness.h"
#include "colibri/status.h"

namespace colibri::bench {

// Owns a path: removes the file (if any) on destruction. An empty path owns nothing.
class ScratchFile {
 public:
  explicit ScratchFile(std::string path = "") : path_(std::move(path)) {}
  ~ScratchFile();
  ScratchFile(ScratchFile&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  ScratchFile& operator=(ScratchFile&& other) noexcept;
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Writes `size_bytes` of pseudo-random data (std::mt19937_64 from `seed`; not
// zeros, so no sparse file and nothing a device could compress) to `path`
// (created or truncated) in 8 MiB chunks, fsyncs it and drops it from the
// page cache, so that reads of it reach the device. Reports each chunk as
// progress (bytes written of size_bytes).
Status CreateRandomFile(const std::string& path, uint64_t size_bytes, uint64_t seed, const Observer& observer = {});

// The size of the file at `path`; 0 when it does not exist or cannot be read.
uint64_t FileBytes(const std::string& path);

}  // namespace colibri::bench
