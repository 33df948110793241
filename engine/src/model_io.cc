#include "model_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

namespace colibri::engine::model_detail {
namespace {

constexpr uint64_t kHashChunkBytes = 8ull << 20;
constexpr uint64_t kMaxIoBytes = 1ull << 30;  // per read()/write() call

Status OsError(const std::string& path, const std::string& what, int error) {
  const std::string message = path + ": " + what + ": " + std::strerror(error);
  return error == ENOENT ? Status::NotFound(message) : Status::IoError(message);
}

}  // namespace

Result<std::string> Sha256OfFile(const std::string& path) {
  COLIBRI_ASSIGN_OR_RETURN(InputFile file, InputFile::Open(path));
  Sha256 sha256;
  std::vector<std::byte> chunk(std::min(kHashChunkBytes, std::max<uint64_t>(file.bytes(), 1)));
  for (uint64_t at = 0; at < file.bytes(); at += chunk.size()) {
    const uint64_t bytes = std::min<uint64_t>(chunk.size(), file.bytes() - at);
    COLIBRI_RETURN_IF_ERROR(file.ReadAt(at, chunk.data(), bytes));
    sha256.Update(chunk.data(), bytes);
  }
  return sha256.Finish();
}

Result<std::string> Sha256OfBytes(const void* data, uint64_t bytes) {
  Sha256 sha256;
  sha256.Update(data, bytes);
  return sha256.Finish();
}

Result<InputFile> InputFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OsError(path, "cannot open", errno);
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    return OsError(path, "cannot stat", error);
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(path + ": not a regular file");
  }
  return InputFile(fd, path, static_cast<uint64_t>(info.st_size));
}

InputFile::InputFile(InputFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)), bytes_(other.bytes_) {}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    bytes_ = other.bytes_;
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status InputFile::ReadAt(uint64_t offset, void* dst, uint64_t bytes) const {
  auto* out = static_cast<std::byte*>(dst);
  uint64_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd_, out + done, std::min(bytes - done, kMaxIoBytes), static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return OsError(path_, "read at byte " + std::to_string(offset + done) + " failed", errno);
    if (n == 0) {
      return Status::Truncated(path_ + ": ends at byte " + std::to_string(offset + done) + ", needed " +
                               std::to_string(bytes) + " bytes at byte " + std::to_string(offset));
    }
    done += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Result<OutputFile> OutputFile::Create(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return OsError(path, "cannot create", errno);
  return OutputFile(fd, path);
}

OutputFile::OutputFile(int fd, std::string path)
    : fd_(fd), path_(std::move(path)), sha256_(std::make_unique<Sha256>()) {}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      bytes_(other.bytes_),
      sha256_(std::move(other.sha256_)) {}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status OutputFile::Write(const void* data, uint64_t bytes) {
  const auto* in = static_cast<const std::byte*>(data);
  sha256_->Update(in, bytes);
  uint64_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::write(fd_, in + done, std::min(bytes - done, kMaxIoBytes));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return OsError(path_, "write failed", errno);
    done += static_cast<uint64_t>(n);
  }
  bytes_ += bytes;
  return Status::Ok();
}

Result<ModelFile> OutputFile::Close() {
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) return OsError(path_, "close failed", errno);
  COLIBRI_ASSIGN_OR_RETURN(std::string digest, sha256_->Finish());
  return ModelFile{std::filesystem::path(path_).filename().string(), bytes_, std::move(digest)};
}

Result<std::string> ReadTextFile(const std::string& path, uint64_t max_bytes) {
  COLIBRI_ASSIGN_OR_RETURN(InputFile file, InputFile::Open(path));
  if (file.bytes() > max_bytes) {
    return Status::InvalidArgument(path + ": " + std::to_string(file.bytes()) + " bytes, more than the " +
                                   std::to_string(max_bytes) + " accepted");
  }
  std::string text(file.bytes(), '\0');
  COLIBRI_RETURN_IF_ERROR(file.ReadAt(0, text.data(), text.size()));
  return text;
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  COLIBRI_ASSIGN_OR_RETURN(OutputFile file, OutputFile::Create(path));
  COLIBRI_RETURN_IF_ERROR(file.Write(text.data(), text.size()));
  return file.Close().status();
}

}  // namespace colibri::engine::model_detail
