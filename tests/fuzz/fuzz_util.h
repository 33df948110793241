// Shared pieces of the libFuzzer targets: the input as a file (the readers
// and importers take paths) and a record sink that checks the sink contract
// and discards the records.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "colibri/traces/importers.h"

namespace colibri::fuzz {

// One file per process that holds the current input: a memfd (no disk I/O,
// nothing to clean up), else a file under the temp dir unique to this process,
// removed at exit. Write() replaces the contents and returns a path that
// open() accepts.
class InputFile {
 public:
  static InputFile& Get() {
    static InputFile file;
    return file;
  }

  const std::string& Write(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0) Die("ftruncate");
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) Die("pwrite");
      done += static_cast<size_t>(n);
    }
    return path_;
  }

 private:
  InputFile() {
    fd_ = ::memfd_create("colibri-fuzz-input", MFD_CLOEXEC);
    if (fd_ >= 0) {
      path_ = "/proc/self/fd/" + std::to_string(fd_);
      return;
    }
    std::string pattern = (std::filesystem::temp_directory_path() / "colibri-fuzz-XXXXXX").string();
    fd_ = ::mkstemp(pattern.data());
    if (fd_ < 0) Die("mkstemp");
    path_ = pattern;
    unlink_ = true;
  }
  ~InputFile() {
    ::close(fd_);
    if (unlink_) ::unlink(path_.c_str());
  }
  [[noreturn]] static void Die(const char* what) {
    std::perror(what);
    std::abort();
  }

  int fd_ = -1;
  std::string path_;
  bool unlink_ = false;
};

// Discards records; aborts when an importer breaks the sink contract (a
// record before the header, or two headers), which the writing sink would
// only report as an internal error.
class DiscardSink : public traces::RecordSink {
 public:
  Status Begin(const traces::TraceHeader&) override {
    if (begun_) Violation("Begin() called twice");
    begun_ = true;
    return Status::Ok();
  }
  Status Add(const traces::TraceRecord&) override {
    if (!begun_) Violation("Add() before Begin()");
    return Status::Ok();
  }

 private:
  [[noreturn]] static void Violation(const char* what) {
    std::fprintf(stderr, "importer broke the RecordSink contract: %s\n", what);
    std::abort();
  }
  bool begun_ = false;
};

// Where an importer gets the model shape from.
enum class ShapeSource {
  kInput,        // the format carries it (passing --experts would be an error)
  kExpertBytes,  // the format gives the expert count; --expert-bytes the sizes
  kOptions,      // from --experts and --expert-bytes
};

// Runs importer `format` over the input: once strict, once with skip_bad,
// --top-k 1 and --ids-only (the lenient and adapting paths). Any Status is a
// valid outcome; crashes, leaks and undefined behaviour are the bugs.
inline int FuzzImporter(const char* format, ShapeSource shape, const uint8_t* data, size_t size) {
  traces::ImportOptions options;
  options.format = format;
  options.inputs = {InputFile::Get().Write(data, size)};
  if (shape == ShapeSource::kOptions) options.experts = 64;
  if (shape != ShapeSource::kInput) options.expert_bytes = 1 << 20;
  for (bool lenient : {false, true}) {
    options.skip_bad = lenient;
    options.ids_only = lenient;
    if (lenient) options.top_k = 1;
    DiscardSink sink;
    traces::ImportReport report;
    (void)traces::RunImporter(options, &sink, &report);
  }
  return 0;
}

}  // namespace colibri::fuzz
