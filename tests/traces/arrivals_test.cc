// Arrival-trace parser (colibri/traces/arrivals.h): the real Azure 2023 and
// Mooncake FAST'25 traces (tests/data/real, or ../shared/data for the larger ones) parse fully, with counts, first
// and last arrivals and token sums computed independently with python3 on the
// files (values below); exact timestamp conversion across month, leap-year,
// century and year boundaries; CRLF, missing final newline, BOM, blank tail;
// and every rejected input with its message checked for line, byte and field.
#include "colibri/traces/arrivals.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>

#include "test_util.h"

namespace colibri::traces {
namespace {

using testing::TempDir;
using testing::WriteFileBytes;

constexpr char kHeader[] = "TIMESTAMP,ContextTokens,GeneratedTokens\n";  // 40 bytes
constexpr size_t kHeaderBytes = sizeof(kHeader) - 1;

// The committed copy (tests/data/real) when there is one, else ../shared/data's (the larger traces,
// optional: their tests skip when it is absent).
std::string DataPath(const std::string& relative) {
  const std::string committed = std::string(COLIBRI_SHARED_DATA) + "/" + relative;
  return std::filesystem::exists(committed) ? committed : std::string(COLIBRI_OPTIONAL_DATA) + "/" + relative;
}

ArrivalTrace MustParse(std::string_view text) {
  auto trace = ParseArrivals(text, "t.txt");
  EXPECT_TRUE(trace.ok()) << trace.status().message();
  if (!trace.ok()) return {};
  return std::move(trace).value();
}

// The message of a rejected input; fails the test when it is accepted or
// the code is not InvalidArgument.
std::string ErrorOf(std::string_view text) {
  auto trace = ParseArrivals(text, "t.txt");
  EXPECT_FALSE(trace.ok()) << "accepted: " << text.substr(0, 200);
  if (trace.ok()) return "";
  EXPECT_EQ(trace.status().code(), StatusCode::kInvalidArgument) << trace.status().message();
  return trace.status().message();
}

std::string Where(uint64_t line, size_t byte) {
  return "t.txt: line " + std::to_string(line) + " (byte " + std::to_string(byte) + "): ";
}

// Asserts `message` starts with the location and contains every part.
void ExpectError(const std::string& message, uint64_t line, size_t byte, std::initializer_list<const char*> parts) {
  EXPECT_EQ(message.rfind(Where(line, byte), 0), 0u) << message;
  for (const char* part : parts) EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' in " << message;
}

std::string Azure(std::initializer_list<const char*> rows) {
  std::string text = kHeader;
  for (const char* row : rows) text += std::string(row) + "\n";
  return text;
}

// --- real traces ---

struct RealTrace {
  const char* path;
  ArrivalFormat format;
  size_t count;
  uint32_t first_input, first_output;
  int64_t last_time_ns;
  uint32_t last_input, last_output;
  uint64_t sum_input, sum_output;
};

// Computed with python3 directly from the files: rows after the header (CSV)
// or non-blank lines (JSONL); times by datetime/decimal arithmetic on the text.
//   code: 2023-11-16 18:17:03.9799600 .. 19:14:19.9280160 -> 3435.948206000 s
//   conv: 2023-11-16 18:15:46.6805900 .. 19:14:08.4025270 -> 3501.721937000 s
//   mooncake: timestamp 0 .. 3536999 ms
const RealTrace kRealTraces[] = {
    {"azure-llm-2023/AzureLLMInferenceTrace_code.csv", ArrivalFormat::kAzureCsv, 8819, 4808, 10, 3'435'948'056'000, 549,
     173, 18'059'974, 245'896},
    {"azure-llm-2023/AzureLLMInferenceTrace_conv.csv", ArrivalFormat::kAzureCsv, 19366, 374, 44, 3'501'721'937'000, 197,
     183, 22'361'870, 4'088'665},
    {"mooncake-fast25/conversation_trace.jsonl", ArrivalFormat::kMooncakeJsonl, 12031, 6758, 500, 3'536'999'000'000,
     20774, 508, 144'793'823, 4'122'048},
};

class ArrivalRealTraceTest : public ::testing::TestWithParam<RealTrace> {};

TEST_P(ArrivalRealTraceTest, ParsesWholeFile) {
  const RealTrace& expected = GetParam();
  const std::string path = DataPath(expected.path);
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  auto trace = ReadArrivals(path);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_EQ(trace->format, expected.format);
  ASSERT_EQ(trace->arrivals.size(), expected.count);
  const Arrival& first = trace->arrivals.front();
  const Arrival& last = trace->arrivals.back();
  EXPECT_EQ(first.time_ns, 0);
  EXPECT_EQ(first.input_tokens, expected.first_input);
  EXPECT_EQ(first.output_tokens, expected.first_output);
  EXPECT_EQ(last.time_ns, expected.last_time_ns);
  EXPECT_EQ(last.input_tokens, expected.last_input);
  EXPECT_EQ(last.output_tokens, expected.last_output);
  uint64_t sum_input = 0;
  uint64_t sum_output = 0;
  for (size_t i = 0; i < trace->arrivals.size(); ++i) {
    sum_input += trace->arrivals[i].input_tokens;
    sum_output += trace->arrivals[i].output_tokens;
    if (i > 0) {
      ASSERT_GE(trace->arrivals[i].time_ns, trace->arrivals[i - 1].time_ns) << "arrival " << i;
    }
  }
  EXPECT_EQ(sum_input, expected.sum_input);
  EXPECT_EQ(sum_output, expected.sum_output);
}

INSTANTIATE_TEST_SUITE_P(SharedData, ArrivalRealTraceTest, ::testing::ValuesIn(kRealTraces));

TEST(ArrivalTest, FormatNames) {
  EXPECT_STREQ(ArrivalFormatName(ArrivalFormat::kAzureCsv), "azure-csv");
  EXPECT_STREQ(ArrivalFormatName(ArrivalFormat::kMooncakeJsonl), "mooncake-jsonl");
}

// --- azure-csv conversions ---

TEST(ArrivalTest, AzureCrossesMonthLeapYearAndCenturyBoundaries) {
  // Offsets worked by hand: 2024 is a leap year (Feb 29 exists), 2100 is not,
  // 2000 is; every step below is relative to the first row.
  const ArrivalTrace trace = MustParse(Azure({
      "2023-12-31 23:59:59.9999999,1,2",  // 0
      "2024-01-01 00:00:00,3,4",          // +100 ns (year boundary)
      "2024-01-31 23:59:59.5,5,6",        // +30 days + 23:59:59.5
      "2024-02-29 00:00:00.25,7,8",       // leap day
      "2024-03-01 00:00:00,9,10",         // Feb 29 -> Mar 1 is one day
  }));
  ASSERT_EQ(trace.format, ArrivalFormat::kAzureCsv);
  ASSERT_EQ(trace.arrivals.size(), 5u);
  constexpr int64_t kSecond = 1'000'000'000;
  constexpr int64_t kDay = 86'400 * kSecond;
  // Offsets from 2024-01-01 00:00:00, plus the 100 ns the first row is before it.
  constexpr int64_t kLead = 100;
  EXPECT_EQ(trace.arrivals[0].time_ns, 0);
  EXPECT_EQ(trace.arrivals[1].time_ns, kLead);
  EXPECT_EQ(trace.arrivals[2].time_ns, kLead + 30 * kDay + 86'399 * kSecond + 500'000'000);
  EXPECT_EQ(trace.arrivals[3].time_ns, kLead + (31 + 28) * kDay + 250'000'000);
  EXPECT_EQ(trace.arrivals[4].time_ns, kLead + (31 + 29) * kDay);
  EXPECT_EQ(trace.arrivals[4].input_tokens, 9u);
  EXPECT_EQ(trace.arrivals[4].output_tokens, 10u);

  // Century rules: Feb 28 -> Mar 1 spans 1 day in 2100 and 2 in 2000 (and in year 0000).
  EXPECT_EQ(MustParse(Azure({"2100-02-28 00:00:00,1,1", "2100-03-01 00:00:00,1,1"})).arrivals[1].time_ns, kDay);
  EXPECT_EQ(MustParse(Azure({"2000-02-28 00:00:00,1,1", "2000-03-01 00:00:00,1,1"})).arrivals[1].time_ns, 2 * kDay);
  EXPECT_EQ(MustParse(Azure({"0000-02-28 00:00:00,1,1", "0000-03-01 00:00:00,1,1"})).arrivals[1].time_ns, 2 * kDay);
  // Against an absolute instant: python3 gives 19677 days from 1970-01-01 to
  // 2023-11-16, so 2023-11-16 18:15:46.6805900 is 1700158546680590000 ns after it.
  EXPECT_EQ(MustParse(Azure({"1970-01-01 00:00:00,1,1", "2023-11-16 18:15:46.6805900,1,1"})).arrivals[1].time_ns,
            1'700'158'546'680'590'000);
}

TEST(ArrivalTest, AzureFractionDigitsZeroToNine) {
  const ArrivalTrace trace = MustParse(Azure({
      "2023-11-16 18:00:00,1,1",
      "2023-11-16 18:00:00.1,1,1",
      "2023-11-16 18:00:00.12,1,1",
      "2023-11-16 18:00:00.1234567,1,1",
      "2023-11-16 18:00:00.123456789,1,1",
      "2023-11-16 18:00:01.000000001,1,1",
  }));
  ASSERT_EQ(trace.arrivals.size(), 6u);
  EXPECT_EQ(trace.arrivals[1].time_ns, 100'000'000);
  EXPECT_EQ(trace.arrivals[2].time_ns, 120'000'000);
  EXPECT_EQ(trace.arrivals[3].time_ns, 123'456'700);
  EXPECT_EQ(trace.arrivals[4].time_ns, 123'456'789);
  EXPECT_EQ(trace.arrivals[5].time_ns, 1'000'000'001);
}

TEST(ArrivalTest, AzureLineEndsBomAndBlankTail) {
  const std::string rows[] = {"2023-11-16 18:00:00.5,10,20", "2023-11-16 18:00:01,30,40"};
  const std::string header = "TIMESTAMP,ContextTokens,GeneratedTokens";
  const std::string variants[] = {
      header + "\r\n" + rows[0] + "\r\n" + rows[1],                 // CRLF, no final newline (like the real files)
      header + "\r\n" + rows[0] + "\r\n" + rows[1] + "\r\n",        // CRLF with a final newline
      header + "\n" + rows[0] + "\n" + rows[1],                     // LF, no final newline
      header + "\n" + rows[0] + "\n" + rows[1] + "\n\n  \r\n\n",    // blank tail
      "\xEF\xBB\xBF" + header + "\n" + rows[0] + "\r\n" + rows[1],  // BOM, mixed line ends
  };
  for (const std::string& text : variants) {
    SCOPED_TRACE(text);
    const ArrivalTrace trace = MustParse(text);
    ASSERT_EQ(trace.arrivals.size(), 2u);
    EXPECT_EQ(trace.arrivals[1].time_ns, 500'000'000);
    EXPECT_EQ(trace.arrivals[0].input_tokens, 10u);
    EXPECT_EQ(trace.arrivals[1].output_tokens, 40u);
  }
}

TEST(ArrivalTest, AzureTokenCountLimits) {
  const ArrivalTrace trace = MustParse(Azure({"2023-11-16 18:00:00,4294967295,0", "2023-11-16 18:00:00,007,0"}));
  EXPECT_EQ(trace.arrivals[0].input_tokens, 4294967295u);
  EXPECT_EQ(trace.arrivals[0].output_tokens, 0u);
  EXPECT_EQ(trace.arrivals[1].input_tokens, 7u);
  EXPECT_EQ(trace.arrivals[1].time_ns, 0);  // equal times are fine
}

TEST(ArrivalTest, ResultDoesNotDependOnTimeZone) {
  const std::string text = Azure({"2023-03-26 00:30:00,1,1", "2023-03-26 03:30:00,1,1"});  // a DST change in Europe
  const char* old_tz = std::getenv("TZ");
  const std::string saved = old_tz == nullptr ? "" : old_tz;
  int64_t seen[2] = {0, 0};
  const char* zones[] = {"UTC", "Europe/Berlin"};
  for (int i = 0; i < 2; ++i) {
    ::setenv("TZ", zones[i], 1);
    ::tzset();
    seen[i] = MustParse(text).arrivals[1].time_ns;
  }
  if (old_tz == nullptr) {
    ::unsetenv("TZ");
  } else {
    ::setenv("TZ", saved.c_str(), 1);
  }
  ::tzset();
  EXPECT_EQ(seen[0], 3 * 3600 * int64_t{1'000'000'000});
  EXPECT_EQ(seen[1], seen[0]);
}

// --- mooncake-jsonl conversions ---

TEST(ArrivalTest, MooncakeLinesAndNumbers) {
  const ArrivalTrace trace = MustParse(
      "{\"timestamp\": 1000, \"input_length\": 5, \"output_length\": 6, \"hash_ids\": [1, 2, 3]}\r\n"
      "{\"output_length\": 8, \"note\": {\"deep\": [[[[{\"timestamp\": -1}]]]]}, \"input_length\": 7, "
      "\"timestamp\": 1000.5}\n"
      "  {\"timestamp\": 1.0015e3, \"input_length\": 0, \"output_length\": 4294967295}\n"
      "{\"timestamp\":2000,\"input_length\":1,\"output_length\":1,\"extra\":null}\n"
      "{\"timestamp\": 2000000001000000000000e-18, \"input_length\": 1, \"output_length\": 1}\n"
      "\n\r\n");
  ASSERT_EQ(trace.format, ArrivalFormat::kMooncakeJsonl);
  ASSERT_EQ(trace.arrivals.size(), 5u);
  EXPECT_EQ(trace.arrivals[0].time_ns, 0);
  EXPECT_EQ(trace.arrivals[0].input_tokens, 5u);
  EXPECT_EQ(trace.arrivals[0].output_tokens, 6u);
  EXPECT_EQ(trace.arrivals[1].time_ns, 500'000);  // 1000.5 ms; the nested timestamp is not the line's
  EXPECT_EQ(trace.arrivals[1].input_tokens, 7u);
  EXPECT_EQ(trace.arrivals[1].output_tokens, 8u);
  EXPECT_EQ(trace.arrivals[2].time_ns, 1'500'000);  // 1001.5 ms
  EXPECT_EQ(trace.arrivals[2].output_tokens, 4294967295u);
  EXPECT_EQ(trace.arrivals[3].time_ns, 1'000'000'000);
  // 2000000001000000000000e-18 ms (more digits than uint64 holds) = 2000.000001 ms.
  EXPECT_EQ(trace.arrivals[4].time_ns, 2'000'000'001 - 1'000'000'000);
}

TEST(ArrivalTest, MooncakeRebasesToFirstArrival) {
  const ArrivalTrace trace = MustParse(
      "{\"timestamp\": 1700000000000, \"input_length\": 1, \"output_length\": 1}\n"
      "{\"timestamp\": 1700000000001, \"input_length\": 1, \"output_length\": 1}");
  ASSERT_EQ(trace.arrivals.size(), 2u);
  EXPECT_EQ(trace.arrivals[0].time_ns, 0);
  EXPECT_EQ(trace.arrivals[1].time_ns, 1'000'000);
}

// --- rejected inputs: azure-csv ---

TEST(ArrivalTest, RejectsEmptyHeaderOnlyAndUnknownFormats) {
  ExpectError(ErrorOf(""), 1, 0, {"empty file", "expected"});
  ExpectError(ErrorOf(" \r\n\n"), 1, 0, {"empty file"});
  ExpectError(ErrorOf("TIMESTAMP,ContextTokens,GeneratedTokens"), 2, 39, {"no arrivals", "expected at least one row"});
  ExpectError(ErrorOf("TIMESTAMP,ContextTokens,GeneratedTokens\r\n\r\n"), 2, 41, {"no arrivals"});
  ExpectError(ErrorOf("hello,world\n1,2,3\n"), 1, 0,
              {"unknown arrival trace format", "'hello,world'", "azure-csv header", "mooncake-jsonl"});
  ExpectError(ErrorOf("\n{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}"), 1, 0,
              {"unknown arrival trace format"});
  ExpectError(ErrorOf("TIMESTAMP,ContextTokens\n2023-11-16 18:00:00,1\n"), 1, 0,
              {"azure-csv header 'TIMESTAMP,ContextTokens'", "expected exactly"});
}

TEST(ArrivalTest, RejectsWrongColumnCounts) {
  const std::string text = Azure({"2023-11-16 18:00:00,1,2", "2023-11-16 18:00:01,1,2,3"});
  ExpectError(ErrorOf(text), 3, text.find("2023-11-16 18:00:01"), {"has 4 columns", "expected 3"});
  const std::string two = Azure({"2023-11-16 18:00:00,1"});
  ExpectError(ErrorOf(two), 2, kHeaderBytes, {"has 2 columns"});
  const std::string blank_middle = Azure({"2023-11-16 18:00:00,1,2", "", "2023-11-16 18:00:01,1,2"});
  ExpectError(ErrorOf(blank_middle), 3, blank_middle.find("\n\n") + 1, {"blank line", "only at the end"});
}

TEST(ArrivalTest, RejectsBadTokenCounts) {
  struct Case {
    const char* row;
    const char* field;
    const char* value;
  };
  const Case cases[] = {
      {"2023-11-16 18:00:00,abc,2", "ContextTokens", "'abc'"},
      {"2023-11-16 18:00:00,-5,2", "ContextTokens", "'-5'"},
      {"2023-11-16 18:00:00,+5,2", "ContextTokens", "'+5'"},
      {"2023-11-16 18:00:00,,2", "ContextTokens", "''"},
      {"2023-11-16 18:00:00, 5,2", "ContextTokens", "' 5'"},
      {"2023-11-16 18:00:00,4294967296,2", "ContextTokens", "'4294967296'"},
      {"2023-11-16 18:00:00,1,2.5", "GeneratedTokens", "'2.5'"},
      {"2023-11-16 18:00:00,1,99999999999999999999999", "GeneratedTokens", "'99999999999999999999999'"},
  };
  for (const Case& c : cases) {
    const std::string text = Azure({"2023-11-16 17:00:00,1,1", c.row});
    const std::string row = c.row;
    const size_t field_byte = std::string(c.field) == "ContextTokens" ? row.find(',') + 1 : row.rfind(',') + 1;
    ExpectError(ErrorOf(text), 3, text.find(c.row) + field_byte,
                {c.field, c.value, "expected a non-negative integer 0..4294967295"});
  }
}

TEST(ArrivalTest, RejectsInvalidTimestamps) {
  struct Case {
    const char* timestamp;
    const char* why;
  };
  const Case cases[] = {
      {"2023-13-01 00:00:00", "month 13"},
      {"2023-00-01 00:00:00", "month 0"},
      {"2023-02-30 00:00:00", "day 30 of month 2023-02"},
      {"2023-02-29 00:00:00", "day 01-28"},  // not a leap year
      {"2100-02-29 00:00:00", "day 01-28"},  // not a leap year either
      {"2023-04-31 00:00:00", "day 31"},
      {"2023-04-00 00:00:00", "day 0"},
      {"2023-11-16 24:00:00", "hour 24"},
      {"2023-11-16 23:60:00", "minute 60"},
      {"2023-11-16 23:59:60", "second 60"},
      {"2023-11-16 18:00:00.1234567890", "10 fractional digits"},
      {"2023-11-16 18:00:00.", "without fractional digits"},
      {"2023-11-16T18:00:00", "not a date and time"},
      {"2023/11/16 18:00:00", "not a date and time"},
      {"2023-11-16 18:00", "not a date and time"},
      {"23-11-16 18:00:00", "not a date and time"},
      {"2023-11-16 18:00:00Z", "not a date and time"},
      {"2023-11-16 18:00:00.5 ", "not a date and time"},
      {"", "not a date and time"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.timestamp);
    const std::string row = std::string(c.timestamp) + ",1,1";
    const std::string text = Azure({"2023-01-01 00:00:00,1,1", row.c_str()});
    ExpectError(ErrorOf(text), 3, kHeaderBytes + 24, {"TIMESTAMP '", c.why, "expected YYYY-MM-DD HH:MM:SS[.fraction]"});
  }
  // The first row is checked like any other.
  ExpectError(ErrorOf(Azure({"2023-13-01 18:15:46.6805900,1,1"})), 2, kHeaderBytes,
              {"TIMESTAMP '2023-13-01 18:15:46.6805900': month 13"});
}

TEST(ArrivalTest, RejectsTimeGoingBackwardsNamingBothLines) {
  const std::string text =
      Azure({"2023-11-16 18:00:00,1,1", "2023-11-16 18:00:05.5,1,1", "2023-11-16 18:00:05.4999999,1,1"});
  ExpectError(ErrorOf(text), 4, text.find("2023-11-16 18:00:05.4999999"),
              {"TIMESTAMP '2023-11-16 18:00:05.4999999' is earlier than line 3's '2023-11-16 18:00:05.5'",
               "expected non-decreasing"});
}

TEST(ArrivalTest, RejectsSpansBeyondInt64Nanoseconds) {
  const std::string text = Azure({"1970-01-01 00:00:00,1,1", "2300-01-01 00:00:00,1,1"});
  ExpectError(ErrorOf(text), 3, text.find("2300"), {"TIMESTAMP '2300-01-01 00:00:00'", "after the first arrival"});
  // 2262-04-11 is still within int64 ns of 1970-01-01.
  EXPECT_EQ(MustParse(Azure({"1970-01-01 00:00:00,1,1", "2262-04-11 00:00:00,1,1"})).arrivals.size(), 2u);
}

TEST(ArrivalTest, RejectsNulBytes) {
  std::string text = Azure({"2023-11-16 18:00:00,1,1", "2023-11-16 18:00:01,1,1"});
  const size_t at = text.find("18:00:01") + 2;
  text[at] = '\0';
  ExpectError(ErrorOf(text), 3, at, {"NUL byte"});
  ExpectError(ErrorOf(std::string_view("\0", 1)), 1, 0, {"NUL byte"});
}

// --- rejected inputs: mooncake-jsonl ---

constexpr char kGoodLine[] = "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n";

TEST(ArrivalTest, RejectsNonObjectAndInvalidJsonLines) {
  const std::string good = kGoodLine;
  ExpectError(ErrorOf(good + "[1, 2]\n"), 2, good.size(), {"not an object (a list)", "expected one object"});
  ExpectError(ErrorOf(good + "42\n"), 2, good.size(), {"not an object (42)"});
  ExpectError(ErrorOf(good + "\"x\"\n"), 2, good.size(), {"not an object"});
  // {"timestamp": 1, oops}: the parser stops at byte 17 of the line.
  ExpectError(ErrorOf(good + "{\"timestamp\": 1, oops}\n"), 2, good.size() + 17, {"invalid JSON"});
  ExpectError(ErrorOf(good + kGoodLine + "{\"timestamp\": 1} {}\n"), 3, 2 * good.size() + 17,
              {"invalid JSON", "end of input"});
  ExpectError(ErrorOf(good + "{\"timestamp\": 1\n"), 2, good.size() + 15, {"invalid JSON"});
  ExpectError(ErrorOf(good + "\n" + kGoodLine), 2, good.size(), {"blank line", "only at the end"});
  ExpectError(ErrorOf(std::string("{\"a\": \"\xff\"}")), 1, 7, {"invalid JSON"});
}

TEST(ArrivalTest, RejectsMissingAndDuplicateFields) {
  const std::string good = kGoodLine;
  ExpectError(ErrorOf(good + "{\"input_length\": 1, \"output_length\": 1}\n"), 2, good.size(),
              {"field 'timestamp' missing", "expected milliseconds"});
  ExpectError(ErrorOf(good + "{\"timestamp\": 3, \"output_length\": 1}\n"), 2, good.size(),
              {"field 'input_length' missing"});
  ExpectError(ErrorOf("{\"timestamp\": 3, \"input_length\": 1}"), 1, 0, {"field 'output_length' missing"});
  // Only top-level keys count.
  ExpectError(ErrorOf("{\"x\": {\"timestamp\": 3}, \"input_length\": 1, \"output_length\": 1}"), 1, 0,
              {"field 'timestamp' missing"});
  const std::string twice = "{\"timestamp\": 3, \"input_length\": 1, \"output_length\": 1, \"timestamp\": 4}";
  ExpectError(ErrorOf(twice), 1, twice.rfind('4'), {"field 'timestamp' given twice"});
}

TEST(ArrivalTest, RejectsBadTimestampsAndTokenCounts) {
  struct Case {
    const char* value;  // of the timestamp field
    const char* why;
  };
  const Case timestamps[] = {
      {"-5", "is -5: negative"},
      {"-0.5", "negative"},
      {"\"12\"", "is \"12\" (a string): not a number"},
      {"null", "is null"},
      {"true", "is true"},
      {"[1]", "is a list"},
      {"1e-7", "not a whole number of nanoseconds"},
      {"0.0000001", "not a whole number of nanoseconds"},
      {"9223372036855", "too large"},  // ms x 10^6 > INT64_MAX
      {"1e300", "too large"},
      {"99999999999999999999999", "too large"},
  };
  for (const Case& c : timestamps) {
    SCOPED_TRACE(c.value);
    const std::string line = std::string("{\"input_length\": 1, \"timestamp\": ") + c.value + ", \"output_length\": 1}";
    ExpectError(ErrorOf(line), 1, line.find(": ", line.find("timestamp")) + 2,
                {"field 'timestamp' ", c.why, "expected non-negative milliseconds"});
  }
  // Zero however written, and the largest whole-ms value.
  EXPECT_EQ(MustParse("{\"timestamp\": -0, \"input_length\": 1, \"output_length\": 1}").arrivals.size(), 1u);
  EXPECT_EQ(MustParse("{\"timestamp\": 0.0e5, \"input_length\": 1, \"output_length\": 1}").arrivals.size(), 1u);
  EXPECT_EQ(MustParse("{\"timestamp\": 9223372036854, \"input_length\": 1, \"output_length\": 1}").arrivals.size(), 1u);

  const Case counts[] = {
      {"-1", "is -1"},     {"1.5", "is 1.5"},   {"1.0", "is 1.0"},      {"4294967296", "is 4294967296"},
      {"\"7\"", "string"}, {"null", "is null"}, {"{}", "is an object"},
  };
  for (const Case& c : counts) {
    SCOPED_TRACE(c.value);
    const std::string line = std::string("{\"timestamp\": 1, \"input_length\": 1, \"output_length\":") + c.value + "}";
    ExpectError(ErrorOf(line), 1, line.rfind(':') + 1,
                {"field 'output_length' ", c.why, "expected a non-negative integer 0..4294967295"});
  }
}

TEST(ArrivalTest, RejectsMooncakeTimeGoingBackwards) {
  const std::string text = std::string(kGoodLine) +
                           "{\"timestamp\": 2000, \"input_length\": 1, \"output_length\": 1}\n"
                           "{\"timestamp\": 1999.5, \"input_length\": 1, \"output_length\": 1}\n";
  ExpectError(ErrorOf(text), 3, text.find("1999.5"),
              {"field 'timestamp' is 1999.5 ms, earlier than line 2's 2000 ms", "expected non-decreasing"});
}

// --- files ---

TEST(ArrivalTest, ReadArrivalsNamesThePath) {
  TempDir dir;
  const std::string path = dir.File("a.csv");
  WriteFileBytes(path, Azure({"2023-11-16 18:00:00,1,1", "2023-11-16 18:00:01,x,1"}));
  auto trace = ReadArrivals(path);
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.status().message().rfind(path + ": line 3 (byte ", 0), 0u) << trace.status().message();

  const std::string good = dir.File("b.jsonl");
  WriteFileBytes(good, kGoodLine);
  auto parsed = ReadArrivals(good);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->format, ArrivalFormat::kMooncakeJsonl);

  auto missing = ReadArrivals(dir.File("missing.csv"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("missing.csv"), std::string::npos);
}

}  // namespace
}  // namespace colibri::traces
