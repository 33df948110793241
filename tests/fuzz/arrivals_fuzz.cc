// Fuzzes ParseArrivals (azure-csv and mooncake-jsonl request-arrival traces)
// over arbitrary bytes, from memory and through ReadArrivals on a file. Any
// Status is fine; crashes, leaks and undefined behaviour are the bugs, and so
// is an accepted trace that breaks the documented contract: at least one
// arrival, the first at time 0, times non-decreasing, the same result either way.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "colibri/traces/arrivals.h"
#include "fuzz_util.h"

namespace {

[[noreturn]] void Violation(const char* what) {
  std::fprintf(stderr, "ParseArrivals broke its contract: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace colibri::traces;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto trace = ParseArrivals(text, "fuzz-input");
  if (trace.ok()) {
    const auto& arrivals = trace->arrivals;
    if (arrivals.empty()) Violation("accepted a trace without arrivals");
    if (arrivals.front().time_ns != 0) Violation("first arrival not at time 0");
    for (size_t i = 1; i < arrivals.size(); ++i) {
      if (arrivals[i].time_ns < arrivals[i - 1].time_ns) Violation("times go backwards");
    }
  } else if (trace.status().code() != colibri::StatusCode::kInvalidArgument) {
    Violation("an error other than InvalidArgument for in-memory text");
  } else if (trace.status().message().rfind("fuzz-input: line ", 0) != 0) {
    Violation("an error that does not start with the name and line");
  }
  // The same bytes through a file: the same outcome.
  auto from_file = ReadArrivals(colibri::fuzz::InputFile::Get().Write(data, size));
  if (from_file.ok() != trace.ok()) Violation("ReadArrivals and ParseArrivals disagree");
  if (trace.ok() && (from_file->arrivals.size() != trace->arrivals.size() ||
                     from_file->arrivals.back().time_ns != trace->arrivals.back().time_ns)) {
    Violation("ReadArrivals and ParseArrivals give different arrivals");
  }
  return 0;
}
