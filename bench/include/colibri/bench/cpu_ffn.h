// CpuCompute's expert FFN timed as the engine calls it: engine::CpuCompute::
// ExpertFfn for one dtype and expert shape (the ExpertSet's), `tokens` tokens
// per call and `threads` threads, cycling through the set's distinct experts
// so that the weights come from DRAM (`colibri bench compute`; a compute
// calibration reuses it).
//
// Ownership: the call makes its CpuCompute (and its thread pool) and its
// activations, and frees them before returning; the ExpertSet is the
// caller's. Thread-safety: one call at a time per ExpertSet is not required
// (the set is read-only), but concurrent calls compete for the cores they
// time. Errors: those of CpuCompute::Create (threads out of range:
// kInvalidArgument; an ISA this CPU cannot run: kUnsupported) and of ExpertFfn.
#pragma once

#include <cstdint>
#include <optional>

#include "colibri/bench/call_timing.h"
#include "colibri/bench/expert_set.h"
#include "colibri/engine/cpu_compute.h"
#include "colibri/status.h"

namespace colibri::bench {

struct CpuFfnTiming {
  engine::CpuIsa isa = engine::CpuIsa::kScalar;  // the path CpuCompute ran
  CallWindow best;                                // the best window, with every call's duration
};

// The best of `repeats` windows of `seconds` of ExpertFfn calls on
// set.View(0), set.View(1), ...; `isa` unset: the best this CPU runs.
Result<CpuFfnTiming> TimeCpuExpertFfn(const ExpertSet& set, uint32_t tokens, uint32_t threads,
                                      std::optional<engine::CpuIsa> isa, double seconds, int repeats);

}  // namespace colibri::bench
