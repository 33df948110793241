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
//  Version 2 ends with the end marker, written only by a clean close:
//  one 0x00 byte (a frame of length 0; a record frame is never empty), then
//  the 40-byte trailer:
//   0  magic "CTRAILER"                                      8 bytes
//   8  records in the file                                   u64 LE
//  16  frames in the file                                    u64 LE
//  24  byte offset of the 0x00 byte (where the frames end)   u64 LE
//  32  CRC32C of every frame byte (lengths, CRCs, payloads)  u32 LE
//  36  CRC32C of trailer bytes 0..35                         u32 LE
//  Version 1 (no end marker) is read only by `colibri trace upgrade`.
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
inline constexpr uint32_t kFormatVersionV1 = 1;  // no end marker
inline constexpr char kTrailerMagic[8] = {'C', 'T', 'R', 'A', 'I', 'L', 'E', 'R'};
inline constexpr size_t kTrailerBytes = 40;
inline constexpr size_t kEndBytes = 1 + kTrailerBytes;  // the 0x00 end frame + the trailer

struct Trailer {
  uint64_t records = 0;
  uint64_t frames = 0;
  uint64_t frames_end_offset = 0;
  uint32_t frames_crc32c = 0;
};

// The 40 trailer bytes (without the 0x00 byte before them).
std::string EncodeTrailer(const Trailer& trailer);
// Decodes 40 bytes; false when the magic or the trailer's own CRC does not match.
bool DecodeTrailer(const uint8_t* data, Trailer* trailer);

std::string EncodeHeader(const TraceHeader& header);
Status DecodeHeader(const uint8_t* data, size_t n, TraceHeader* header);

}  // namespace colibri::traces
