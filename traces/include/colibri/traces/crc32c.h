// CRC32C (Castagnoli), as used by iSCSI, ext4 and LevelDB. Uses the SSE4.2
// crc32 instruction when the CPU has it, a table otherwise. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace colibri::traces {

// Extends `crc` (the CRC of earlier bytes, 0 for none) over data[0, n).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);
inline uint32_t Crc32c(const void* data, size_t n) { return Crc32cExtend(0, data, n); }

}  // namespace colibri::traces
