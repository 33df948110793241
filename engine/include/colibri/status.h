// Status and Result<T>: errors as values, used by every folder of the project.
//
// A Status is either OK or a code plus a human-readable message that names
// the input (file, byte offset, field) and what was expected. Result<T> holds
// either a value or a non-OK Status. Both are plain values: copyable, movable,
// not thread-safe to mutate concurrently (like any value type).
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace colibri {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad input or usage: a flag, a config value, a malformed file
  kNotFound,         // a file or entity that does not exist
  kCorruption,       // a checksum or structure check failed on data we wrote
  kTruncated,        // a file ends in the middle of a record (torn tail)
  kUnsupported,      // a valid input this build cannot handle (version, dtype)
  kIoError,          // the OS refused a read or write
  kInternal,         // a broken invariant inside Colibri
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status Truncated(std::string m) { return {StatusCode::kTruncated, std::move(m)}; }
  static Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
  static Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message is "<prefix>: <message>"; OK stays OK.
  Status WithPrefix(const std::string& prefix) const {
    if (ok()) return *this;
    return Status(code_, prefix + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : state_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(state_).ok() && "Result needs a value or an error");
  }

  bool ok() const { return std::holds_alternative<T>(state_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(state_);
  }
  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> state_;
};

}  // namespace colibri

// Propagates a non-OK Status from an expression returning Status.
#define COLIBRI_RETURN_IF_ERROR(expr)            \
  do {                                           \
    ::colibri::Status colibri_status_ = (expr);  \
    if (!colibri_status_.ok()) return colibri_status_; \
  } while (0)

#define COLIBRI_CONCAT_INNER(a, b) a##b
#define COLIBRI_CONCAT(a, b) COLIBRI_CONCAT_INNER(a, b)
// Declares `lhs` from a Result<T> expression or returns its error Status.
#define COLIBRI_ASSIGN_OR_RETURN(lhs, expr) \
  COLIBRI_ASSIGN_OR_RETURN_IMPL(COLIBRI_CONCAT(colibri_result_, __LINE__), lhs, expr)
#define COLIBRI_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
