// Fuzzes the fault spec parser (sim::ParseFaultSpec): a spec is a flag value
// or a repro spec field a user writes by hand, so any bytes must give a spec
// or an InvalidArgument "fault spec: at byte N: ..." with N within the input
// -- never a crash, an exception or undefined behaviour. An accepted spec
// must survive its own round trip: FormatFaultSpec of it parses to the same
// spec, and formatting that again gives the same canonical text.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "colibri/sim/fault_spec.h"

namespace {

[[noreturn]] void Violation(const char* what) {
  std::fprintf(stderr, "fault spec parser broke its contract: %s\n", what);
  __builtin_trap();
}

// The N of "fault spec: at byte N: ...", or -1 when the message has no such prefix.
long long ByteOffset(const std::string& message) {
  constexpr std::string_view kPrefix = "fault spec: at byte ";
  if (message.compare(0, kPrefix.size(), kPrefix) != 0) return -1;
  size_t at = kPrefix.size();
  long long offset = 0;
  if (at >= message.size() || message[at] < '0' || message[at] > '9') return -1;
  while (at < message.size() && message[at] >= '0' && message[at] <= '9' && offset < (1ll << 40)) {
    offset = offset * 10 + (message[at++] - '0');
  }
  return message.compare(at, 2, ": ") == 0 ? offset : -1;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto spec = colibri::sim::ParseFaultSpec(text);
  if (!spec.ok()) {
    if (spec.status().code() != colibri::StatusCode::kInvalidArgument) Violation("an error other than InvalidArgument");
    const long long offset = ByteOffset(spec.status().message());
    if (offset < 0) Violation("an error without \"fault spec: at byte N: \"");
    if (static_cast<unsigned long long>(offset) > size) Violation("an error offset past the end of the input");
    if (spec.status().message().size() > 1000) Violation("an error message above 1000 bytes");
    return 0;
  }
  const std::string canonical = colibri::sim::FormatFaultSpec(spec.value());
  auto reparsed = colibri::sim::ParseFaultSpec(canonical);
  if (!reparsed.ok()) Violation("the canonical text of an accepted spec does not parse");
  if (!(reparsed.value() == spec.value())) Violation("an accepted spec does not round-trip");
  if (colibri::sim::FormatFaultSpec(reparsed.value()) != canonical) Violation("the canonical text is not stable");
  return 0;
}
