// The GFLOP/s reference of the CPU compute benchmark: one fp32 SwiGLU expert
// FFN with OpenBLAS (X W_gate^T and X W_up^T as sgemm, SiLU(gate) x up with
// libm expf, then H W_down^T), over the same cycled expert blocks as ours.
// Also which kernels OpenBLAS chose, and whether they are older than the CPU.
//
// Ownership: the call allocates its activations and frees them. Thread-safety:
// NOT thread-safe: openblas_set_num_threads is process-wide, so one timing at
// a time per process. Errors: kInvalidArgument for a set that is not fp32.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "colibri/bench/call_timing.h"
#include "colibri/bench/expert_set.h"
#include "colibri/status.h"

namespace colibri::bench {

// The best of `repeats` windows of `seconds` of OpenBLAS FFNs of `tokens`
// tokens with `threads` OpenBLAS threads on fp32_set.View(0), View(1), ...
Result<CallWindow> TimeOpenBlasFfn(const ExpertSet& fp32_set, uint32_t tokens, uint32_t threads, double seconds,
                                   int repeats);

// openblas_get_corename(): the kernels it runs ("Haswell", "SkylakeX", ...).
std::string OpenBlasCoreName();

// A warning when OpenBLAS fell back to kernels older than AVX2 on a CPU that
// has AVX2 (a build that predates the CPU: Debian 12's 0.3.21 runs some
// Xeons as "Prescott", SSE3 only), which makes a weak reference; else nullopt.
std::optional<std::string> OpenBlasFallbackWarning();

}  // namespace colibri::bench
