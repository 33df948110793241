// Request-arrival trace parser: azure-csv and mooncake-jsonl (see arrivals.h).
#include "colibri/traces/arrivals.h"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "import_util.h"

namespace colibri::traces {

const char* ArrivalFormatName(ArrivalFormat format) {
  switch (format) {
    case ArrivalFormat::kAzureCsv:
      return "azure-csv";
    case ArrivalFormat::kMooncakeJsonl:
      return "mooncake-jsonl";
  }
  return "unknown";
}

namespace {

constexpr std::string_view kAzureHeader = "TIMESTAMP,ContextTokens,GeneratedTokens";
constexpr std::string_view kTimestampShape = "expected YYYY-MM-DD HH:MM:SS[.fraction] (0-9 fractional digits)";
constexpr int64_t kNsPerSecond = 1'000'000'000;
constexpr int64_t kNsPerDay = 86'400 * kNsPerSecond;
constexpr int64_t kNsPerMs = 1'000'000;
constexpr size_t kMaxQuoted = 48;

// `text` for a message: printable ASCII kept, other bytes (and ' and \) as
// \xNN, cut after kMaxQuoted bytes with "...".
std::string Printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < text.size() && i < kMaxQuoted; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c >= 0x7f || c == '\'' || c == '\\') {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > kMaxQuoted) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

std::string Quoted(std::string_view text) { return "'" + Printable(text) + "'"; }

bool IsBlank(std::string_view line) { return line.find_first_not_of(" \t") == std::string_view::npos; }

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// One line of the input: its text without the terminator (\n, or \r\n), its
// 1-based number and the file offset of its first byte.
struct Line {
  std::string_view text;
  uint64_t number = 0;
  size_t offset = 0;
};

class LineSplitter {
 public:
  LineSplitter(std::string_view text, size_t start) : text_(text), pos_(start) {}

  bool Next(Line* line) {
    if (pos_ >= text_.size()) return false;
    const size_t newline = text_.find('\n', pos_);
    const size_t end = newline == std::string_view::npos ? text_.size() : newline;
    line->text = text_.substr(pos_, end - pos_);
    if (!line->text.empty() && line->text.back() == '\r') line->text.remove_suffix(1);
    line->number = ++number_;
    line->offset = pos_;
    pos_ = newline == std::string_view::npos ? text_.size() : newline + 1;
    return true;
  }

  // Whether everything after the line last read is whitespace.
  bool RestIsBlank() const { return text_.find_first_not_of(" \t\r\n", pos_) == std::string_view::npos; }
  // Where the next line would start (the end of the text at the end).
  size_t position() const { return pos_; }

 private:
  std::string_view text_;
  size_t pos_;
  uint64_t number_ = 0;
};

class Errors {
 public:
  explicit Errors(const std::string& name) : name_(name) {}
  Status At(uint64_t line, size_t byte, const std::string& what) const {
    return Status::InvalidArgument(name_ + ": line " + std::to_string(line) + " (byte " + std::to_string(byte) +
                                   "): " + what);
  }
  Status At(const Line& line, const std::string& what) const { return At(line.number, line.offset, what); }

 private:
  const std::string& name_;
};

// A non-negative decimal integer of at most UINT32_MAX: digits only, no sign
// or spaces.
bool ParseTokenCount(std::string_view text, uint32_t* value) {
  if (text.empty()) return false;
  uint64_t n = 0;
  for (const char c : text) {
    if (!IsDigit(c)) return false;
    n = n * 10 + static_cast<uint64_t>(c - '0');
    if (n > std::numeric_limits<uint32_t>::max()) return false;
  }
  *value = static_cast<uint32_t>(n);
  return true;
}

// --- azure-csv ---

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
// days_from_civil); exact for any year here (0..9999).
int64_t DaysFromCivil(int64_t year, int64_t month, int64_t day) {
  year -= month <= 2 ? 1 : 0;
  const int64_t era = (year >= 0 ? year : year - 399) / 400;
  const int64_t year_of_era = year - era * 400;                                               // [0, 399]
  const int64_t day_of_year = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;  // [0, 365]
  const int64_t day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + day_of_era - 719468;
}

bool IsLeapYear(int64_t year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

int64_t DaysInMonth(int64_t year, int64_t month) {
  static constexpr int64_t kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && IsLeapYear(year) ? 29 : kDays[month - 1];
}

// An instant as whole days since 1970-01-01 and nanoseconds into the day.
struct CivilInstant {
  int64_t days = 0;
  int64_t ns_of_day = 0;
  bool operator<(const CivilInstant& other) const {
    return days != other.days ? days < other.days : ns_of_day < other.ns_of_day;
  }
};

int64_t Digits(std::string_view text, size_t at, size_t count) {
  int64_t n = 0;
  for (size_t i = at; i < at + count; ++i) n = n * 10 + (text[i] - '0');
  return n;
}

// Parses `YYYY-MM-DD HH:MM:SS[.fraction]`; on error, says what is wrong.
bool ParseAzureTimestamp(std::string_view text, CivilInstant* instant, std::string* why) {
  // Shape: fixed positions of digits and separators, then an optional fraction.
  static constexpr std::string_view kPattern = "dddd-dd-dd dd:dd:dd";
  bool shape_ok = text.size() >= kPattern.size();
  for (size_t i = 0; shape_ok && i < kPattern.size(); ++i) {
    shape_ok = kPattern[i] == 'd' ? IsDigit(text[i]) : text[i] == kPattern[i];
  }
  size_t fraction_digits = 0;
  if (shape_ok && text.size() > kPattern.size()) {
    shape_ok = text[kPattern.size()] == '.';
    fraction_digits = text.size() - kPattern.size() - 1;
    for (size_t i = kPattern.size() + 1; shape_ok && i < text.size(); ++i) shape_ok = IsDigit(text[i]);
    if (shape_ok && fraction_digits == 0) {
      *why = "a '.' without fractional digits: " + std::string(kTimestampShape);
      return false;
    }
    if (shape_ok && fraction_digits > 9) {
      *why = std::to_string(fraction_digits) + " fractional digits (finer than 1 ns): " + std::string(kTimestampShape);
      return false;
    }
  }
  if (!shape_ok) {
    *why = "not a date and time: " + std::string(kTimestampShape);
    return false;
  }
  const int64_t year = Digits(text, 0, 4);
  const int64_t month = Digits(text, 5, 2);
  const int64_t day = Digits(text, 8, 2);
  const int64_t hour = Digits(text, 11, 2);
  const int64_t minute = Digits(text, 14, 2);
  const int64_t second = Digits(text, 17, 2);
  const std::string expected = "expected YYYY-MM-DD HH:MM:SS[.fraction] with ";
  if (month < 1 || month > 12) {
    *why = "month " + std::to_string(month) + ": " + expected + "month 01-12";
    return false;
  }
  const int64_t month_days = DaysInMonth(year, month);
  if (day < 1 || day > month_days) {
    *why = "day " + std::to_string(day) + " of month " + std::string(text.substr(0, 7)) + ": " + expected + "day 01-" +
           std::to_string(month_days);
    return false;
  }
  if (hour > 23) {
    *why = "hour " + std::to_string(hour) + ": " + expected + "hour 00-23";
    return false;
  }
  if (minute > 59) {
    *why = "minute " + std::to_string(minute) + ": " + expected + "minute 00-59";
    return false;
  }
  if (second > 59) {
    *why = "second " + std::to_string(second) + ": " + expected + "second 00-59 (no leap seconds)";
    return false;
  }
  int64_t fraction_ns = fraction_digits == 0 ? 0 : Digits(text, kPattern.size() + 1, fraction_digits);
  for (size_t i = fraction_digits; i < 9; ++i) fraction_ns *= 10;
  instant->days = DaysFromCivil(year, month, day);
  instant->ns_of_day = ((hour * 60 + minute) * 60 + second) * kNsPerSecond + fraction_ns;
  return true;
}

Status ParseAzureRows(LineSplitter* lines, const Line& header, const Errors& errors, ArrivalTrace* trace) {
  CivilInstant first;
  CivilInstant previous;
  std::string_view previous_text;
  uint64_t previous_line = 0;
  Line line;
  while (lines->Next(&line)) {
    if (IsBlank(line.text)) {
      if (lines->RestIsBlank()) break;
      return errors.At(line,
                       "blank line: expected a row TIMESTAMP,ContextTokens,GeneratedTokens (blank lines are "
                       "allowed only at the end)");
    }
    std::string_view fields[3];
    size_t columns = 0;
    size_t field_offsets[3] = {0, 0, 0};
    size_t start = 0;
    while (true) {
      const size_t comma = line.text.find(',', start);
      const size_t end = comma == std::string_view::npos ? line.text.size() : comma;
      if (columns < 3) {
        fields[columns] = line.text.substr(start, end - start);
        field_offsets[columns] = line.offset + start;
      }
      ++columns;
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (columns != 3) {
      return errors.At(line, "row " + Quoted(line.text) + " has " + std::to_string(columns) +
                                 " columns: expected 3 (TIMESTAMP,ContextTokens,GeneratedTokens)");
    }
    CivilInstant instant;
    std::string why;
    if (!ParseAzureTimestamp(fields[0], &instant, &why)) {
      return errors.At(line.number, field_offsets[0], "TIMESTAMP " + Quoted(fields[0]) + ": " + why);
    }
    Arrival arrival;
    static constexpr const char* kTokenColumns[] = {"ContextTokens", "GeneratedTokens"};
    uint32_t* const token_fields[] = {&arrival.input_tokens, &arrival.output_tokens};
    for (size_t i = 0; i < 2; ++i) {
      if (!ParseTokenCount(fields[i + 1], token_fields[i])) {
        return errors.At(line.number, field_offsets[i + 1],
                         std::string(kTokenColumns[i]) + " " + Quoted(fields[i + 1]) +
                             ": expected a non-negative integer 0.." +
                             std::to_string(std::numeric_limits<uint32_t>::max()));
      }
    }
    if (trace->arrivals.empty()) {
      first = instant;
    } else if (instant < previous) {
      return errors.At(line.number, field_offsets[0],
                       "TIMESTAMP " + Quoted(fields[0]) + " is earlier than line " + std::to_string(previous_line) +
                           "'s " + Quoted(previous_text) + ": expected non-decreasing arrival times");
    }
    // Since the first arrival, checked: years apart overflow int64 ns.
    int64_t day_ns = 0;
    if (__builtin_mul_overflow(instant.days - first.days, kNsPerDay, &day_ns) ||
        __builtin_add_overflow(day_ns, instant.ns_of_day - first.ns_of_day, &arrival.time_ns)) {
      return errors.At(line.number, field_offsets[0],
                       "TIMESTAMP " + Quoted(fields[0]) + " is " + std::to_string(instant.days - first.days) +
                           " days after the first arrival (line " + std::to_string(header.number + 1) +
                           "): expected at most ~292 years (int64 nanoseconds)");
    }
    previous = instant;
    previous_text = fields[0];
    previous_line = line.number;
    trace->arrivals.push_back(arrival);
  }
  return Status::Ok();
}

// --- mooncake-jsonl ---

// A forward iterator over chars that records how far the JSON lexer has read,
// so that a key's position in the line is known when the SAX handler sees it.
class TrackingIterator {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackingIterator() = default;
  TrackingIterator(const char* at, const char** read_to) : at_(at), read_to_(read_to) {}
  reference operator*() const { return *at_; }
  TrackingIterator& operator++() {
    ++at_;
    if (read_to_ != nullptr && *read_to_ < at_) *read_to_ = at_;
    return *this;
  }
  TrackingIterator operator++(int) {
    TrackingIterator copy = *this;
    ++*this;
    return copy;
  }
  bool operator==(const TrackingIterator& other) const { return at_ == other.at_; }
  bool operator!=(const TrackingIterator& other) const { return at_ != other.at_; }

 private:
  const char* at_ = nullptr;
  const char** read_to_ = nullptr;
};

// One top-level field of a line's object, as seen by the SAX handler.
struct JsonField {
  enum class Kind { kAbsent, kNegative, kUnsigned, kFloat, kString, kBool, kNull, kObject, kArray };
  Kind kind = Kind::kAbsent;
  int64_t negative = 0;         // kNegative
  uint64_t unsigned_value = 0;  // kUnsigned
  std::string text;             // kFloat: the number as written; kString: the string
  bool boolean = false;         // kBool
  size_t offset = 0;            // file offset of the value

  // The value for a message: `-5`, `1.5e3`, `"abc"`, `an object`.
  std::string Describe() const {
    switch (kind) {
      case Kind::kAbsent:
        return "missing";
      case Kind::kNegative:
        return std::to_string(negative);
      case Kind::kUnsigned:
        return std::to_string(unsigned_value);
      case Kind::kFloat:
        return Printable(text);
      case Kind::kString:
        return "\"" + Printable(text) + "\" (a string)";
      case Kind::kBool:
        return boolean ? "true" : "false";
      case Kind::kNull:
        return "null";
      case Kind::kObject:
        return "an object";
      case Kind::kArray:
        return "a list";
    }
    return "?";
  }
};

constexpr const char* kMooncakeFields[] = {"timestamp", "input_length", "output_length"};
constexpr size_t kTimestamp = 0;
constexpr size_t kInputLength = 1;
constexpr size_t kOutputLength = 2;

// Collects the three known top-level fields of one JSON line; everything else
// (other keys, nested values) is skipped without being built, so deep nesting
// costs no stack and hash_ids build no JSON values.
class MooncakeLineHandler final : public nlohmann::json_sax<nlohmann::json> {
 public:
  MooncakeLineHandler(const Line& line, const char* const* read_to) : line_(line), read_to_(read_to) {}

  JsonField fields[3];
  JsonField top;  // the line's value itself (its kind; a scalar's value)
  // The first known key given twice, and where.
  const char* duplicate_key = nullptr;
  size_t duplicate_offset = 0;
  // A syntax error: where (file offset) and the parser's words (its "last
  // read" quote may be long: printable ASCII only, cut at 240 bytes).
  bool syntax_error = false;
  size_t error_offset = 0;
  std::string error_message;

  bool null() override { return Value(JsonField::Kind::kNull); }
  bool boolean(bool value) override {
    if (JsonField* field = Target()) field->boolean = value;
    return Value(JsonField::Kind::kBool);
  }
  bool number_integer(number_integer_t value) override {
    if (JsonField* field = Target()) field->negative = value;
    return Value(JsonField::Kind::kNegative);
  }
  bool number_unsigned(number_unsigned_t value) override {
    if (JsonField* field = Target()) field->unsigned_value = value;
    return Value(JsonField::Kind::kUnsigned);
  }
  bool number_float(number_float_t, const string_t& raw) override {
    if (JsonField* field = Target()) field->text = raw;
    return Value(JsonField::Kind::kFloat);
  }
  bool string(string_t& value) override {
    if (JsonField* field = Target()) field->text = value.substr(0, kMaxQuoted + 1);
    return Value(JsonField::Kind::kString);
  }
  bool binary(binary_t&) override { return Value(JsonField::Kind::kString); }  // not produced by the JSON lexer
  bool start_object(std::size_t) override { return Open(JsonField::Kind::kObject); }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(JsonField::Kind::kArray); }
  bool end_array() override { return Close(); }

  bool key(string_t& name) override {
    target_ = -1;
    if (depth_ != 1) return true;
    for (size_t i = 0; i < 3; ++i) {
      if (name != kMooncakeFields[i]) continue;
      // The lexer has read up to the key's closing quote; the value follows
      // after blanks, ':' and blanks.
      const size_t value_offset = ValueOffset();
      if (seen_[i]) {
        if (duplicate_key == nullptr) {
          duplicate_key = kMooncakeFields[i];
          duplicate_offset = value_offset;
        }
      } else {
        seen_[i] = true;
        target_ = static_cast<int>(i);
        fields[i].offset = value_offset;
      }
      break;
    }
    return true;
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& error) override {
    syntax_error = true;
    const size_t in_line = std::min(position == 0 ? 0 : position - 1, line_.text.size());
    error_offset = line_.offset + in_line;
    std::string what = error.what();
    const size_t tag_end = what.find("] ");
    if (tag_end != std::string::npos) what = what.substr(tag_end + 2);
    // The line and column are given as line/byte of the file instead.
    if (what.rfind("parse error at line ", 0) == 0) {
      const size_t colon = what.find(": ");
      if (colon != std::string::npos) what = what.substr(colon + 2);
    }
    error_message = SanitizeLong(what);
    return false;
  }

 private:
  static std::string SanitizeLong(const std::string& text) {
    std::string out;
    for (size_t i = 0; i < text.size() && i < 240; ++i) {
      const auto c = static_cast<unsigned char>(text[i]);
      out += c < 0x20 || c >= 0x7f ? '?' : static_cast<char>(c);
    }
    return out;
  }

  // Where the value now being read goes: the line's value, a known field, or nowhere.
  JsonField* Target() {
    if (depth_ == 0) return &top;
    return depth_ == 1 && target_ >= 0 ? &fields[target_] : nullptr;
  }

  bool Value(JsonField::Kind kind) {
    if (JsonField* field = Target()) field->kind = kind;
    target_ = -1;
    return true;
  }
  bool Open(JsonField::Kind kind) {
    Value(kind);
    ++depth_;
    return true;
  }
  bool Close() {
    --depth_;
    target_ = -1;
    return true;
  }

  size_t ValueOffset() const {
    const char* const begin = line_.text.data();
    size_t at = static_cast<size_t>(*read_to_ - begin);
    const auto skip_blanks = [&] {
      while (at < line_.text.size() &&
             (line_.text[at] == ' ' || line_.text[at] == '\t' || line_.text[at] == '\r' || line_.text[at] == '\n')) {
        ++at;
      }
    };
    skip_blanks();
    if (at < line_.text.size() && line_.text[at] == ':') ++at;
    skip_blanks();
    return line_.offset + at;
  }

  const Line& line_;
  const char* const* read_to_;
  size_t depth_ = 0;
  int target_ = -1;
  bool seen_[3] = {false, false, false};
};

// Milliseconds as written in JSON (-?digits[.digits][e[+-]digits]) to whole
// nanoseconds, exactly; on error, says what is wrong.
bool DecimalMsToNs(std::string_view text, int64_t* ns, std::string* why) {
  size_t at = 0;
  bool negative = false;
  if (at < text.size() && text[at] == '-') {
    negative = true;
    ++at;
  }
  std::string digits;  // significant digits, integer part then fraction
  int64_t fraction_digits = 0;
  while (at < text.size() && IsDigit(text[at])) digits += text[at++];
  if (at < text.size() && text[at] == '.') {
    ++at;
    while (at < text.size() && IsDigit(text[at])) {
      digits += text[at++];
      ++fraction_digits;
    }
  }
  int64_t exponent = 0;
  if (at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
    ++at;
    bool exponent_negative = false;
    if (at < text.size() && (text[at] == '+' || text[at] == '-')) exponent_negative = text[at++] == '-';
    constexpr int64_t kExponentCap = 1'000'000'000;  // far beyond any meaningful scale; avoids overflow
    while (at < text.size() && IsDigit(text[at])) {
      exponent = std::min(kExponentCap, exponent * 10 + (text[at++] - '0'));
    }
    if (exponent_negative) exponent = -exponent;
  }
  if (digits.empty() || at != text.size()) {
    *why = "not a number";
    return false;
  }
  const size_t first_nonzero = digits.find_first_not_of('0');
  if (first_nonzero == std::string::npos) {  // zero, however written
    *ns = 0;
    return true;
  }
  if (negative) {
    *why = "negative";
    return false;
  }
  digits.erase(0, first_nonzero);
  // value = digits x 10^scale nanoseconds.
  int64_t scale = exponent - fraction_digits + 6;
  if (scale < 0) {
    const auto drop = static_cast<size_t>(-scale);
    if (drop >= digits.size() || digits.find_first_not_of('0', digits.size() - drop) != std::string::npos) {
      *why = "not a whole number of nanoseconds";
      return false;
    }
    digits.resize(digits.size() - drop);
    scale = 0;
  }
  if (static_cast<int64_t>(digits.size()) + scale > 19) {
    *why = "too large for int64 nanoseconds";
    return false;
  }
  digits.append(static_cast<size_t>(scale), '0');
  uint64_t value = 0;
  for (const char c : digits) value = value * 10 + static_cast<uint64_t>(c - '0');  // < 10^19 < 2^64
  if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    *why = "too large for int64 nanoseconds";
    return false;
  }
  *ns = static_cast<int64_t>(value);
  return true;
}

// The timestamp field in nanoseconds, or an error message part.
bool MooncakeTimestampNs(const JsonField& field, int64_t* ns, std::string* why) {
  switch (field.kind) {
    case JsonField::Kind::kNegative:
      if (field.negative == 0) {
        *ns = 0;
        return true;
      }
      *why = "negative";
      return false;
    case JsonField::Kind::kUnsigned:
      if (field.unsigned_value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / kNsPerMs)) {
        *why = "too large for int64 nanoseconds";
        return false;
      }
      *ns = static_cast<int64_t>(field.unsigned_value) * kNsPerMs;
      return true;
    case JsonField::Kind::kFloat:
      return DecimalMsToNs(field.text, ns, why);
    default:
      *why = "not a number";
      return false;
  }
}

Status ParseMooncakeLines(LineSplitter* lines, const Errors& errors, ArrivalTrace* trace) {
  int64_t first_ns = 0;
  int64_t previous_ns = 0;
  std::string previous_text;
  uint64_t previous_line = 0;
  Line line;
  while (lines->Next(&line)) {
    if (IsBlank(line.text)) {
      if (lines->RestIsBlank()) break;
      return errors.At(line, "blank line: expected a JSON object (blank lines are allowed only at the end)");
    }
    const char* read_to = line.text.data();
    MooncakeLineHandler handler(line, &read_to);
    const TrackingIterator begin(line.text.data(), &read_to);
    const TrackingIterator end(line.text.data() + line.text.size(), nullptr);
    const bool parsed = nlohmann::json::sax_parse(begin, end, &handler);
    if (!parsed || handler.syntax_error) {
      if (!handler.syntax_error) return errors.At(line, "invalid JSON: expected one JSON object");
      return errors.At(line.number, handler.error_offset, "invalid JSON: " + handler.error_message);
    }
    if (handler.top.kind != JsonField::Kind::kObject) {
      return errors.At(line, "a JSON value that is not an object (" + handler.top.Describe() +
                                 "): expected one object {\"timestamp\": ms, \"input_length\": N, "
                                 "\"output_length\": N} per line");
    }
    if (handler.duplicate_key != nullptr) {
      return errors.At(line.number, handler.duplicate_offset,
                       std::string("field '") + handler.duplicate_key + "' given twice: expected it once");
    }
    for (size_t i = 0; i < 3; ++i) {
      if (handler.fields[i].kind == JsonField::Kind::kAbsent) {
        return errors.At(line, std::string("field '") + kMooncakeFields[i] + "' missing: expected " +
                                   (i == kTimestamp ? "milliseconds from the trace start" : "a token count"));
      }
    }
    const JsonField& timestamp = handler.fields[kTimestamp];
    Arrival arrival;
    int64_t ns = 0;
    std::string why;
    if (!MooncakeTimestampNs(timestamp, &ns, &why)) {
      return errors.At(line.number, timestamp.offset,
                       "field 'timestamp' is " + timestamp.Describe() + ": " + why +
                           ": expected non-negative milliseconds from the trace start, in whole nanoseconds "
                           "within int64");
    }
    for (const size_t i : {kInputLength, kOutputLength}) {
      const JsonField& field = handler.fields[i];
      if (field.kind != JsonField::Kind::kUnsigned || field.unsigned_value > std::numeric_limits<uint32_t>::max()) {
        return errors.At(line.number, field.offset,
                         std::string("field '") + kMooncakeFields[i] + "' is " + field.Describe() +
                             ": expected a non-negative integer 0.." +
                             std::to_string(std::numeric_limits<uint32_t>::max()));
      }
      (i == kInputLength ? arrival.input_tokens : arrival.output_tokens) = static_cast<uint32_t>(field.unsigned_value);
    }
    if (trace->arrivals.empty()) {
      first_ns = ns;
    } else if (ns < previous_ns) {
      return errors.At(line.number, timestamp.offset,
                       "field 'timestamp' is " + timestamp.Describe() + " ms, earlier than line " +
                           std::to_string(previous_line) + "'s " + previous_text +
                           " ms: expected non-decreasing arrival times");
    }
    arrival.time_ns = ns - first_ns;  // both in [0, INT64_MAX], ns >= first_ns
    previous_ns = ns;
    previous_text = timestamp.Describe();
    previous_line = line.number;
    trace->arrivals.push_back(arrival);
  }
  return Status::Ok();
}

}  // namespace

Result<ArrivalTrace> ParseArrivals(std::string_view text, const std::string& name) {
  const Errors errors(name);
  const size_t nul = text.find('\0');
  if (nul != std::string_view::npos) {
    const auto line =
        static_cast<uint64_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(nul), '\n')) + 1;
    return errors.At(line, nul, "NUL byte: expected text (an azure-csv or mooncake-jsonl trace)");
  }
  constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";
  const size_t start = text.substr(0, kUtf8Bom.size()) == kUtf8Bom ? kUtf8Bom.size() : 0;
  if (text.find_first_not_of(" \t\r\n", start) == std::string_view::npos) {
    return errors.At(1, 0,
                     "empty file: expected an azure-csv header '" + std::string(kAzureHeader) +
                         "' or mooncake-jsonl JSON object lines");
  }
  LineSplitter lines(text, start);
  Line first;
  lines.Next(&first);
  ArrivalTrace trace;
  const size_t first_char = first.text.find_first_not_of(" \t");
  if (first_char != std::string_view::npos && first.text[first_char] == '{') {
    trace.format = ArrivalFormat::kMooncakeJsonl;
    LineSplitter json_lines(text, start);  // the first line is data
    COLIBRI_RETURN_IF_ERROR(ParseMooncakeLines(&json_lines, errors, &trace));
    if (trace.arrivals.empty()) {  // cannot happen: the first line is not blank
      return errors.At(first, "no arrivals: expected at least one JSON object line");
    }
  } else if (first.text.rfind("TIMESTAMP", 0) == 0) {
    trace.format = ArrivalFormat::kAzureCsv;
    if (first.text != kAzureHeader) {
      return errors.At(
          first, "azure-csv header " + Quoted(first.text) + ": expected exactly '" + std::string(kAzureHeader) + "'");
    }
    const size_t rows_start = lines.position();
    COLIBRI_RETURN_IF_ERROR(ParseAzureRows(&lines, first, errors, &trace));
    if (trace.arrivals.empty()) {
      return errors.At(first.number + 1, rows_start,
                       "no arrivals after the azure-csv header: expected at least one row "
                       "TIMESTAMP,ContextTokens,GeneratedTokens");
    }
  } else {
    return errors.At(first, "unknown arrival trace format, first line " + Quoted(first.text) +
                                ": expected the azure-csv header '" + std::string(kAzureHeader) +
                                "' or a mooncake-jsonl JSON object line");
  }
  return trace;
}

Result<ArrivalTrace> ReadArrivals(const std::string& path) {
  COLIBRI_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  return ParseArrivals(text, path);
}

}  // namespace colibri::traces
