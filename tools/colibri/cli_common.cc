#include "cli_common.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "colibri/bench/files.h"
#include "colibri/bounded_echo.h"
#include "colibri/engine/output_claim.h"

namespace colibri::cli {

int ExitCodeFor(const Status& status) {
  if (status.ok()) return kExitOk;
  if (status.code() == StatusCode::kCorruption || status.code() == StatusCode::kTruncated) return kExitCheckFailed;
  return kExitBadInput;
}

int Fail(const Status& status) {
  std::cerr << "colibri: " << status.message() << "\n";
  return ExitCodeFor(status);
}

namespace {

// Parses "<digits><suffix>" with the suffix looked up in `units` (value = multiplier).
Result<uint64_t> ParseScaled(const std::string& text, const char* what,
                             const std::vector<std::pair<std::string, uint64_t>>& units) {
  size_t i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  if (i == 0) return Status::InvalidArgument("'" + text + "' is not a " + what);
  uint64_t value = 0;
  for (size_t j = 0; j < i; ++j) {
    const uint64_t digit = static_cast<uint64_t>(text[j] - '0');
    if (value > (UINT64_MAX - digit) / 10) return Status::InvalidArgument("'" + text + "' overflows 64 bits");
    value = value * 10 + digit;
  }
  const std::string suffix = text.substr(i);
  for (const auto& [name, multiplier] : units) {
    if (suffix != name) continue;
    if (multiplier != 0 && value > UINT64_MAX / multiplier) {
      return Status::InvalidArgument("'" + text + "' overflows 64 bits");
    }
    return value * multiplier;
  }
  std::string accepted;
  for (const auto& unit : units) accepted += (accepted.empty() ? "" : ", ") + (unit.first.empty() ? "none" : unit.first);
  return Status::InvalidArgument("'" + text + "': unknown unit '" + suffix + "' for a " + what + " (accepted: " +
                                 accepted + ")");
}

}  // namespace

Result<uint64_t> ParseSizeBytes(const std::string& text) {
  static const std::vector<std::pair<std::string, uint64_t>> kUnits = {
      {"", 1},          {"B", 1},          {"K", 1ull << 10}, {"KiB", 1ull << 10}, {"M", 1ull << 20},
      {"MiB", 1ull << 20}, {"G", 1ull << 30}, {"GiB", 1ull << 30}, {"T", 1ull << 40}, {"TiB", 1ull << 40}};
  return ParseScaled(text, "size (e.g. 64K, 512M, 4G)", kUnits);
}

Result<uint64_t> ParseDurationNs(const std::string& text) {
  static const std::vector<std::pair<std::string, uint64_t>> kUnits = {
      {"", 1}, {"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000}};
  return ParseScaled(text, "duration (e.g. 250ns, 10us, 5ms, 2s)", kUnits);
}

namespace {

CLI::Validator CanonicalNumber(Result<uint64_t> (*parse)(const std::string&), const std::string& name) {
  return CLI::Validator(
      [parse](std::string& value) -> std::string {
        Result<uint64_t> parsed = parse(value);
        if (!parsed.ok()) return parsed.status().message();
        value = std::to_string(parsed.value());
        return std::string();
      },
      name);
}

}  // namespace

CLI::Validator SizeValidator() { return CanonicalNumber(&ParseSizeBytes, "SIZE"); }
CLI::Validator DurationValidator() { return CanonicalNumber(&ParseDurationNs, "DURATION"); }

Result<std::vector<std::string>> SplitList(const std::string& text, const std::string& flag) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (part.empty()) return Status::InvalidArgument(flag + ": empty element in list '" + text + "'");
    parts.push_back(std::move(part));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return parts;
}

void AddTraceOutputFlags(CLI::App* command, TraceOutputFlags* flags) {
  command->add_option("--compress", flags->compress, "Record framing: none, or zstd blocks")
      ->check(CLI::IsMember({"none", "zstd"}))
      ->capture_default_str();
  command->add_option("--zstd-level", flags->zstd_level, "zstd level with --compress zstd")
      ->check(CLI::Range(1, 22))
      ->capture_default_str();
}

traces::WriterOptions ToWriterOptions(const TraceOutputFlags& flags) {
  traces::WriterOptions options;
  options.compression = flags.compress == "zstd" ? traces::Compression::kZstd : traces::Compression::kNone;
  options.zstd_level = flags.zstd_level;
  return options;
}

void AddAllowTornFlag(CLI::App* command, bool* allow_torn) {
  command->add_flag("--allow-torn", *allow_torn,
                    "Read a torn trace (no trailer: its writer did not finish) as its whole records; the run "
                    "records the truncation");
}

void AddModelVerifyFlag(CLI::App* command, std::string* verify) {
  command
      ->add_option("--verify", *verify,
                   "How the model's bytes are checked: auto (experts.bin hashed at open up to 1 GiB, above that "
                   "each block as it is read), blocks (each block as it is read), full (all at open), none")
      ->check(CLI::IsMember({"auto", "blocks", "full", "none"}))
      ->capture_default_str();
}

engine::ModelVerify ToModelVerify(const std::string& verify) {
  for (engine::ModelVerify mode : {engine::ModelVerify::kNone, engine::ModelVerify::kBlocks, engine::ModelVerify::kFull}) {
    if (verify == engine::ModelVerifyName(mode)) return mode;
  }
  return engine::ModelVerify::kAuto;
}

Json TraceEndingJson(bool torn, uint64_t torn_at_byte, uint64_t records) {
  return Json{{"complete", !torn}, {"records", records}, {"torn_at_byte", torn ? Json(torn_at_byte) : Json(nullptr)}};
}

namespace {

// "" when `text` is a decimal integer of the kind `type` ("UINT" or "INT") that fits 64 bits.
std::string CheckInteger(const std::string& text, bool is_signed) {
  const bool negative = !text.empty() && text[0] == '-';
  const std::string digits = negative ? text.substr(1) : text;
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || (negative && !is_signed)) {
    return "'" + BoundedEcho(text) + "' is not " + (is_signed ? "an integer" : "a non-negative integer");
  }
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  const uint64_t limit = is_signed ? (negative ? (1ull << 63) : (1ull << 63) - 1) : ~0ull;
  if (error == std::errc::result_out_of_range || value > limit) {
    return "'" + BoundedEcho(text) + "' is out of range (" +
           (is_signed ? std::string("-2^63 .. 2^63-1") : std::string("0 .. 2^64-1")) + ")";
  }
  return "";
}

std::string CheckFinite(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size()) return "'" + BoundedEcho(text) + "' is not a number";
  if (!std::isfinite(value) || errno == ERANGE) return "'" + BoundedEcho(text) + "' is not a finite number";
  return "";
}

void StrictNumbersIn(CLI::App* app) {
  for (CLI::Option* option : app->get_options()) {
    const std::string type = option->get_type_name();
    if (type.rfind("UINT", 0) == 0) {
      option->check(CLI::Validator([](std::string& t) { return CheckInteger(t, false); }, ""));
    } else if (type.rfind("INT", 0) == 0) {
      option->check(CLI::Validator([](std::string& t) { return CheckInteger(t, true); }, ""));
    } else if (type.rfind("FLOAT", 0) == 0) {
      option->check(CLI::Validator([](std::string& t) { return CheckFinite(t); }, ""));
    }
  }
  for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; })) StrictNumbersIn(sub);
}

}  // namespace

void ApplyStrictNumbers(CLI::App* app) { StrictNumbersIn(app); }

namespace {

CLI::Validator SignValidator(bool zero_allowed) {
  return CLI::Validator(
      [zero_allowed](std::string& text) {
        std::string error = CheckFinite(text);
        if (!error.empty()) return error;
        const double value = std::strtod(text.c_str(), nullptr);
        if (value > 0 || (zero_allowed && value == 0)) return std::string();
        return "'" + BoundedEcho(text) + "' is not " + (zero_allowed ? "a number >= 0" : "a positive number");
      },
      zero_allowed ? ">= 0" : "> 0", zero_allowed ? "NONNEGATIVE" : "POSITIVE");
}

}  // namespace

CLI::Validator PositiveNumber() { return SignValidator(false); }
CLI::Validator NonNegativeNumber() { return SignValidator(true); }

Json ToJson(const TraceOutputFlags& flags) {
  return Json{{"compress", flags.compress}, {"zstd_level", flags.zstd_level}};
}

Status WriteOutput(const std::string& path, const std::string& bytes) {
  if (path.empty()) {
    std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    return Status::Ok();
  }
  COLIBRI_RETURN_IF_ERROR(engine::WriteFileWhole(path, bytes));
  SayWritten(path, bytes.size());
  return Status::Ok();
}

void SayWritten(const std::string& path, uint64_t bytes) {
  std::fprintf(stderr, "wrote %s (%llu bytes)\n", path.c_str(), static_cast<unsigned long long>(bytes));
}

void SayProfilesWritten(const Json& paths) {
  if (!paths.is_array()) return;
  for (const Json& path : paths) SayWritten(path.get<std::string>(), bench::FileBytes(path.get<std::string>()));
}

void PrintProfilesWritten(const Json& paths) {
  if (!paths.is_array()) return;
  for (const Json& path : paths) std::printf("profile: %s\n", path.get<std::string>().c_str());
}

Result<Json> WithConfig(Json config, Result<Json> measured) {
  if (!measured.ok()) return measured.status();
  Json doc{{"config", std::move(config)}};
  for (auto& [key, value] : measured.value().items()) doc[key] = std::move(value);
  return doc;
}

bench::Observer StderrObserver(Progress* progress) {
  bench::Observer observer;
  if (progress != nullptr) {
    observer.progress = [progress](uint64_t done, uint64_t total) { progress->Update(done, total); };
    observer.progress_done = [progress] { progress->Done(); };
  }
  observer.warning = [](const std::string& line) { std::fprintf(stderr, "colibri: warning: %s\n", line.c_str()); };
  observer.note = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  return observer;
}

void PrintJson(const Json& doc) { std::cout << doc.dump(2) << "\n"; }

int Emit(const Result<Json>& result, bool json, void (*human)(const Json&)) {
  if (!result.ok()) return Fail(result.status());
  if (json) {
    PrintJson(result.value());
  } else {
    human(result.value());
  }
  return kExitOk;
}

namespace {
int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

Progress::Progress(std::string label) : label_(std::move(label)), enabled_(::isatty(2) == 1) {}

Progress::~Progress() { Done(); }

void Progress::Update(uint64_t done, uint64_t total) {
  if (!enabled_) return;
  const int64_t now = WallMs();
  if (drawn_ && now - last_draw_ms_ < 200) return;
  last_draw_ms_ = now;
  drawn_ = true;
  if (total > 0) {
    std::fprintf(stderr, "\r%s %5.1f%% (%llu/%llu)", label_.c_str(), 100.0 * static_cast<double>(done) / total,
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total));
  } else {
    std::fprintf(stderr, "\r%s %llu", label_.c_str(), static_cast<unsigned long long>(done));
  }
  std::fflush(stderr);
}

void Progress::Done() {
  if (enabled_ && drawn_) std::fprintf(stderr, "\r\033[K");
  drawn_ = false;
}

}  // namespace colibri::cli
