// FaultSpec: which faults the fault-injecting backends (fault_injection.h)
// inject, and how often, parsed from and formatted to one line of text (a
// flag value, a repro spec field, a run store column).
//
// Grammar (no whitespace anywhere; kinds and units are lower case):
//
//   spec     = "" | "none" | rule { "," rule } ;
//   rule     = site "." kind "=" rate [ ":" duration ] ;
//   site     = "storage" | "transfer" | "compute" ;
//   kind     = (storage) "eio" | "short" | "spike" | "stuck" | "corrupt"
//            | (transfer) "fail" | "oom"
//            | (compute) "fail" ;
//   rate     = N "/" D ;                  (* N, D decimal: 1 <= N <= D <= 1000000000 *)
//   duration = integer ( "ns" | "us" | "ms" | "s" ) ;   (* > 0, at most 1 hour *)
//
// A rule N/D fires on N of every D decisions on average: a decision is one
// draw u from the wrapper's stream, firing when u % D < N (N == D: always).
// Each kind appears at most once. A duration is required by storage.spike
// (the delay) and storage.stuck (the timeout) and refused everywhere else.
// The kinds (fault_injection.h has the details):
//   storage.eio      a read completes with an IoError (a transient error);
//   storage.short    a read completes with fewer bytes than asked and an
//                    IoError "short read: X of Y bytes";
//   storage.spike    a read's completion is delayed by the duration;
//   storage.stuck    a read does not complete by itself: after the duration
//                    it completes with an IoError "read timed out after D";
//   storage.corrupt  a read completes OK with one byte of its buffer flipped;
//   transfer.fail    a copy's completion carries an IoError;
//   transfer.oom     CreateDevicePool / CreateHostPool fails: "device out of
//                    memory (injected)";
//   compute.fail     an ExpertFfn call fails: "kernel failed (injected)".
//
// Errors are InvalidArgument naming the 0-based byte offset in the text and
// what was expected there, e.g. `fault spec: at byte 12: expected "/" after
// the rate's numerator`. FormatFaultSpec writes the canonical text ("none"
// for no faults; kinds in FaultKind order; durations in the largest unit
// that divides them exactly), and ParseFaultSpec(FormatFaultSpec(s)) == s
// for every parsed s.
//
// Plain values and free functions; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "colibri/engine/clock.h"
#include "colibri/status.h"

namespace colibri::sim {

// Every kind, in the fixed order of FormatFaultSpec, FaultLog counts and the
// storage wrapper's draws.
enum class FaultKind : uint8_t {
  kStorageEio = 0,
  kStorageShort,
  kStorageSpike,
  kStorageStuck,
  kStorageCorrupt,
  kTransferFail,
  kTransferOom,
  kComputeFail,
};
inline constexpr size_t kFaultKindCount = 8;

// The spec name, e.g. "storage.eio".
const char* FaultKindName(FaultKind kind);
// Whether a rule of `kind` takes (and requires) a duration: storage.spike and storage.stuck.
bool FaultKindTakesDuration(FaultKind kind);

// One rule: fires on n of every d decisions; n == 0: off (d is then 0 too).
struct FaultRate {
  uint32_t n = 0;
  uint32_t d = 0;
  engine::TimeNs duration_ns = 0;  // the delay or timeout, for the kinds that take one

  bool on() const { return n > 0; }
  bool operator==(const FaultRate&) const = default;
};

struct FaultSpec {
  FaultRate storage_eio;
  FaultRate storage_short;
  FaultRate storage_spike;
  FaultRate storage_stuck;
  FaultRate storage_corrupt;
  FaultRate transfer_fail;
  FaultRate transfer_oom;
  FaultRate compute_fail;

  // The rule of `kind` (one of the fields above).
  FaultRate& rate(FaultKind kind);
  const FaultRate& rate(FaultKind kind) const;
  bool any() const { return storage_any() || transfer_any() || compute_any(); }
  bool storage_any() const {
    return storage_eio.on() || storage_short.on() || storage_spike.on() || storage_stuck.on() || storage_corrupt.on();
  }
  bool transfer_any() const { return transfer_fail.on() || transfer_oom.on(); }
  bool compute_any() const { return compute_fail.on(); }
  bool operator==(const FaultSpec&) const = default;
};

// Errors: InvalidArgument as the header says.
Result<FaultSpec> ParseFaultSpec(std::string_view text);
// The canonical text of `spec` (of a spec as ParseFaultSpec returns them).
std::string FormatFaultSpec(const FaultSpec& spec);
// A duration as the grammar writes it, in the largest exact unit: 5000000 -> "5ms".
std::string FormatFaultDuration(engine::TimeNs duration_ns);

}  // namespace colibri::sim
