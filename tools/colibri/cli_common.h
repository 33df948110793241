// Shared conventions of the `colibri` CLI: exit codes, size and duration
// parsing, JSON output, progress lines. Used by every subcommand file.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "colibri/status.h"
#include "colibri/traces/writer.h"

namespace colibri::cli {

using Json = nlohmann::ordered_json;

// Exit codes a CI script can rely on.
inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;  // corruption, torn tail, failed gate or invariant
inline constexpr int kExitBadInput = 2;     // missing file, not a trace, bad flags

// Corruption and truncation are failed checks (1); everything else is bad input (2).
int ExitCodeFor(const Status& status);
// Prints "colibri: <message>" to stderr and returns ExitCodeFor(status).
int Fail(const Status& status);

// "64K", "512M", "4G", "1T", "123" (bytes); binary multiples (K = 2^10).
Result<uint64_t> ParseSizeBytes(const std::string& text);
// "250ns", "10us", "5ms", "2s"; a bare number is nanoseconds.
Result<uint64_t> ParseDurationNs(const std::string& text);

// CLI11 transformers that validate and canonicalise size/duration flags.
CLI::Validator SizeValidator();
CLI::Validator DurationValidator();

// Splits "a,b,c" (empty parts are an error).
Result<std::vector<std::string>> SplitList(const std::string& text, const std::string& flag);

// Options shared by every command that writes a trace: --compress and --zstd-level.
struct TraceOutputFlags {
  std::string compress = "none";
  int zstd_level = 3;
};
// Adds --compress none|zstd and --zstd-level to `command`; defaults are the struct's.
void AddTraceOutputFlags(CLI::App* command, TraceOutputFlags* flags);
traces::WriterOptions ToWriterOptions(const TraceOutputFlags& flags);
Json ToJson(const TraceOutputFlags& flags);

// Writes `bytes` to stdout (empty path) or to `path` through a temporary file
// and a rename, so a failed write leaves no partial file; says so on stderr.
Status WriteOutput(const std::string& path, const std::string& bytes);

// The median of `values` (the mean of the middle two for an even count); 0 when empty.
double Median(std::vector<double> values);

// This process's peak resident set so far (getrusage ru_maxrss), in bytes.
uint64_t PeakRssBytes();

// Prints a JSON document to stdout followed by a newline.
void PrintJson(const Json& doc);

// Ends a command that computed `result`: on error prints it and returns its
// exit code; otherwise prints the JSON document (`json`) or calls `human`
// with it, and returns kExitOk.
int Emit(const Result<Json>& result, bool json, void (*human)(const Json&));

// A single progress line on stderr, redrawn at most a few times a second,
// printed only when stderr is a terminal. Not thread-safe.
class Progress {
 public:
  explicit Progress(std::string label);
  ~Progress();
  void Update(uint64_t done, uint64_t total);  // total 0 = unknown
  void Done();

 private:
  std::string label_;
  bool enabled_;
  int64_t last_draw_ms_ = 0;
  bool drawn_ = false;
};

}  // namespace colibri::cli
