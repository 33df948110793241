// Request-arrival traces: when requests arrived at a real LLM service and how
// many tokens each read and wrote, for driving replay with real load instead
// of a synthetic arrival process.
//
// Formats (detected from the content, never from the file name):
//   azure-csv       Azure LLM inference trace 2023 (Patel et al., Splitwise):
//                   header `TIMESTAMP,ContextTokens,GeneratedTokens`, then rows
//                   `2023-11-16 18:15:46.6805900,374,44`. The timestamp is
//                   `YYYY-MM-DD HH:MM:SS[.fraction]` with 0-9 fractional
//                   digits (no dot when none), read as a proleptic Gregorian
//                   date and time with no time zone: converted exactly with
//                   integer arithmetic, independent of TZ and locale.
//   mooncake-jsonl  Mooncake FAST'25 traces: one JSON object per line,
//                   `{"timestamp": <ms from trace start>, "input_length": N,
//                   "output_length": N, ...}`; other keys (hash_ids, ...) are
//                   ignored. The timestamp is a non-negative JSON integer or
//                   number of milliseconds that must be a whole number of
//                   nanoseconds (1.5 is fine, 1e-7 is not); the token counts
//                   are integers.
// Both: LF or CRLF line ends, the last line needs no newline, blank lines are
// allowed only at the end, a leading UTF-8 byte order mark is ignored. Token
// counts are integers in 0..UINT32_MAX. Times must not go backwards.
//
// Errors: every malformed input is a Status::InvalidArgument of the form
// "<name>: line <L> (byte <B>): <field> '<value>': <what is wrong>: expected
// <what>", where L is 1-based and B is the 0-based byte offset in the file of
// the offending field (of the line where no single field is at fault). Empty
// input, a header without rows, an unknown format, a wrong column count, bad
// or out-of-range token counts, invalid dates or times (month 13, Feb 30,
// hour 24, second 60), times going backwards (naming both lines), lines that
// are not JSON objects, missing or duplicated fields, and NUL bytes are all
// rejected; nothing is defaulted or skipped. No input crashes the parser.
//
// Ownership: results are plain values owned by the caller; the parser keeps
// no reference to the text. Thread-safety: free functions with no shared
// state, safe to call concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "colibri/status.h"

namespace colibri::traces {

enum class ArrivalFormat { kAzureCsv, kMooncakeJsonl };

// "azure-csv" or "mooncake-jsonl" ("unknown" for a value outside the enum).
const char* ArrivalFormatName(ArrivalFormat format);

struct Arrival {
  int64_t time_ns = 0;         // since the first arrival (the first is 0), integer ns
  uint32_t input_tokens = 0;   // ContextTokens / input_length
  uint32_t output_tokens = 0;  // GeneratedTokens / output_length
};

struct ArrivalTrace {
  ArrivalFormat format = ArrivalFormat::kAzureCsv;
  std::vector<Arrival> arrivals;  // in file order, non-decreasing time; never empty
};

// Detects the format from the content (the Azure header line vs a JSON object
// line), parses and validates all of `text`. `name` is used in messages only.
Result<ArrivalTrace> ParseArrivals(std::string_view text, const std::string& name);

// Reads the whole file at `path` and parses it; messages name the path. A
// file that cannot be opened is NotFound, a failed read IoError.
Result<ArrivalTrace> ReadArrivals(const std::string& path);

}  // namespace colibri::traces
