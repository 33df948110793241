// This process's memory as the benchmarks report it: the peak resident set
// (getrusage) and the fields of /proc/self/status (VmRSS now, VmHWM at peak).
// Ownership: nothing held. Thread-safety: plain functions reading process-wide figures. Errors: none
// (0 when the figure is unknown).
#pragma once

#include <cstdint>
#include <string>

namespace colibri::bench {

// This process's peak resident set so far (getrusage ru_maxrss), in bytes.
uint64_t PeakRssBytes();

// A "<field>: <n> kB" line of /proc/self/status in bytes ("VmRSS": the
// resident set now, "VmHWM": its peak); 0 when the field is absent.
uint64_t ProcStatusBytes(const std::string& field);

}  // namespace colibri::bench
