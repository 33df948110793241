// Shared conventions of the `colibri` CLI: exit codes, size and duration
// parsing, JSON output, progress lines. Used by every subcommand file.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "colibri/bench/harness.h"
#include "colibri/engine/model.h"
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
// A finite number > 0 (>= 0): CLI11's PositiveNumber/NonNegativeNumber with
// messages of human size ("'-1' is not a positive number", not a bound of
// 309 digits).
CLI::Validator PositiveNumber();
CLI::Validator NonNegativeNumber();

// Makes every integer and floating-point option of `app` and its
// subcommands strict: an integer is decimal digits (a '-' only for signed
// ones) within 64 bits, never wrapped or clamped (CLI11 alone takes
// "-1" for an unsigned option and clamps 2^64); a floating-point value is a
// finite number (no nan, no inf). Call once every option is added.
void ApplyStrictNumbers(CLI::App* app);

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

// --allow-torn on a command that reads a trace: read a torn trace (no
// trailer) as its whole records, with a warning and the truncation recorded.
void AddAllowTornFlag(CLI::App* command, bool* allow_torn);
// {"complete": bool, "records": N, "torn_at_byte": offset or null}: how the
// trace a run read ended, for its JSON and the run store.
Json TraceEndingJson(bool torn, uint64_t torn_at_byte, uint64_t records);

// --verify auto|blocks|full|none on a command that reads a model's weights
// (engine::ModelVerify), default auto; ToModelVerify maps the checked text.
void AddModelVerifyFlag(CLI::App* command, std::string* verify);
engine::ModelVerify ToModelVerify(const std::string& verify);

// Writes `bytes` to stdout (empty path) or to `path` through a temporary file
// and a rename, so a failed write leaves no partial file; says so on stderr.
Status WriteOutput(const std::string& path, const std::string& bytes);
// "wrote <path> (<bytes> bytes)" on stderr: what WriteOutput says of a file,
// for files a library wrote.
void SayWritten(const std::string& path, uint64_t bytes);

// Prints a JSON document to stdout followed by a newline.
void PrintJson(const Json& doc);

// Ends a command that computed `result`: on error prints it and returns its
// exit code; otherwise prints the JSON document (`json`) or calls `human`
// with it, and returns kExitOk.
int Emit(const Result<Json>& result, bool json, void (*human)(const Json&));

// A GPU benchmark's "profiles_written" (null, or the paths written): each
// file as SayWritten says it, on stderr; and "profile: <path>" lines on stdout.
void SayProfilesWritten(const Json& paths);
void PrintProfilesWritten(const Json& paths);

// A benchmark's document: {"config": config (the flags it ran with), then
// every key of `measured`}; an error as it is.
Result<Json> WithConfig(Json config, Result<Json> measured);

class Progress;
// A harness's Observer for the CLI: progress to `progress` (may be null),
// warnings as "colibri: warning: <line>" and notes as they are, on stderr.
bench::Observer StderrObserver(Progress* progress);

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
