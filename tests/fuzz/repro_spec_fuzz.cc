// Fuzzes the repro spec parser (replay::ParseReproSpec): a spec is JSON a
// user writes by hand or a minimizer writes, so any bytes must give a spec or
// an InvalidArgument naming the file -- never a crash, an exception or
// undefined behaviour. An accepted spec must survive its own round trip:
// ReproSpecJson of it parses to the same spec.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string_view>

#include "colibri/replay/repro.h"

namespace {

[[noreturn]] void Violation(const char* what) {
  std::fprintf(stderr, "repro spec parser broke its contract: %s\n", what);
  __builtin_trap();
}

bool SameSpec(const colibri::replay::ReproSpec& a, const colibri::replay::ReproSpec& b) {
  if (a.invariants.size() != b.invariants.size()) return false;
  for (size_t i = 0; i < a.invariants.size(); ++i) {
    if (a.invariants[i].text != b.invariants[i].text || a.invariants[i].bound != b.invariants[i].bound) return false;
  }
  return a.trace_as_written == b.trace_as_written && a.machine == b.machine && a.seed == b.seed &&
         a.hidden == b.hidden && a.l1_bytes == b.l1_bytes && a.l2_bytes == b.l2_bytes && a.policy == b.policy &&
         a.queue_depth == b.queue_depth && a.routing == b.routing && a.fault.kind == b.fault.kind &&
         a.expect_violation == b.expect_violation;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto spec = colibri::replay::ParseReproSpec(text, "fuzz/spec.json");
  if (!spec.ok()) {
    if (spec.status().code() != colibri::StatusCode::kInvalidArgument) Violation("an error other than InvalidArgument");
    if (spec.status().message().find("fuzz/spec.json") == std::string::npos) Violation("an error without the file name");
    return 0;
  }
  const std::string again = colibri::replay::ReproSpecJson(spec.value(), spec.value().trace_as_written);
  auto reparsed = colibri::replay::ParseReproSpec(again, "fuzz/spec.json");
  if (!reparsed.ok() || !SameSpec(spec.value(), reparsed.value())) Violation("an accepted spec does not round-trip");
  return 0;
}
