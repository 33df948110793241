// What the compute benchmarks record about this machine's CPU: its model name
// and its last-level cache (the working sets are sized from it).
// Ownership: values only. Thread-safety: plain functions reading sysconf,
// sysfs and /proc. Errors:
// none (0 or "unknown" when the system does not say).
#pragma once

#include <cstdint>
#include <string>

namespace colibri::bench {

// The last-level cache in bytes: sysconf L3, else L2, else
// /sys/devices/system/cpu/cpu0/cache/index3/size; 0 when unknown.
uint64_t LastLevelCacheBytes();

// /proc/cpuinfo's first "model name"; "unknown" when absent.
std::string CpuModelName();

// 4 x max(llc_bytes, 64 MiB): a working set no cache holds (the compute
// benchmarks' default).
inline uint64_t BeyondCacheBytes(uint64_t llc_bytes) {
  return 4 * (llc_bytes > (uint64_t{64} << 20) ? llc_bytes : uint64_t{64} << 20);
}

}  // namespace colibri::bench
