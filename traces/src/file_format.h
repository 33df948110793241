// File layout constants and the header codec (libprotobuf). Internal.
//
//   0  magic "COLTRACE"            8 bytes
//   8  format version              u32 LE
//  12  header length H             u32 LE
//  16  CRC32C of the header bytes  u32 LE
//  20  TraceHeader message         H bytes
//  then frames: varint payload length, u32 LE CRC32C of the payload, payload.
//  Uncompressed payload = one Record. zstd payload = varint record count,
//  varint uncompressed bytes, zstd frame of (varint length, Record)*.
#pragma once

#include <cstdint>
#include <string>

#include "colibri/status.h"
#include "colibri/traces/trace.h"

namespace colibri::traces {

inline constexpr size_t kFilePreambleBytes = 20;
inline constexpr uint64_t kMaxHeaderBytes = 64ull << 20;
inline constexpr uint64_t kMaxFrameBytes = 1ull << 30;   // one record or one compressed block
inline constexpr uint64_t kMaxBlockBytes = 1ull << 30;   // one decompressed block
inline constexpr size_t kFrameCrcBytes = 4;

std::string EncodeHeader(const TraceHeader& header);
Status DecodeHeader(const uint8_t* data, size_t n, TraceHeader* header);

}  // namespace colibri::traces
