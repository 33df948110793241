#include "colibri/bench/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

namespace colibri::bench {

ScratchFile::~ScratchFile() {
  if (path_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove(path_, ignored);
}

ScratchFile& ScratchFile::operator=(ScratchFile&& other) noexcept {
  if (this != &other) {
    ScratchFile old(std::move(path_));
    path_ = std::move(other.path_);
    other.path_.clear();
  }
  return *this;
}

Status CreateRandomFile(const std::string& path, uint64_t size_bytes, uint64_t seed, const Observer& observer) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IoError(path + ": cannot create: " + std::strerror(errno));
  std::vector<uint64_t> chunk((8u << 20) / sizeof(uint64_t));
  std::mt19937_64 rng(seed);
  Status status;
  for (uint64_t written = 0; written < size_bytes && status.ok();) {
    for (uint64_t& word : chunk) word = rng();
    const uint64_t n = std::min<uint64_t>(size_bytes - written, chunk.size() * sizeof(uint64_t));
    if (::write(fd, chunk.data(), n) != static_cast<ssize_t>(n)) status = Status::IoError(path + ": write failed");
    written += n;
    observer.Progress(written, size_bytes);
  }
  if (status.ok() && ::fsync(fd) != 0) status = Status::IoError(path + ": fsync failed");
  if (status.ok()) ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  return status;
}

uint64_t FileBytes(const std::string& path) {
  std::error_code error;
  const uint64_t bytes = std::filesystem::file_size(path, error);
  return error ? 0 : bytes;
}

}  // namespace colibri::bench
