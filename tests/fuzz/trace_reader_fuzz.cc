// Fuzzes TraceReader over arbitrary bytes: open (the header parsing that
// ReadTraceHeader shares), read every record, check each against the shape.
// Each input is read as given, and again with its header and frame CRCs
// recomputed, so that mutations reach the header and record decoders instead
// of stopping at the checksum. Any Status is fine; crashes, leaks, undefined
// behaviour and unbounded allocations are bugs.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "colibri/traces/crc32c.h"
#include "colibri/traces/reader.h"
#include "fuzz_util.h"

namespace {

using namespace colibri::traces;

void PutU32(std::string* bytes, size_t at, uint32_t value) {
  for (int i = 0; i < 4; ++i) (*bytes)[at + i] = static_cast<char>(value >> (8 * i));
}

// Rewrites the header CRC and the CRC of every whole frame (layout in
// docs/TRACE_FORMAT.md); stops at the first torn or implausible frame.
void FixCrcs(std::string* bytes) {
  const size_t size = bytes->size();
  if (size < 20 || std::memcmp(bytes->data(), kMagic, sizeof(kMagic)) != 0) return;
  uint32_t header_bytes = 0;
  for (int i = 0; i < 4; ++i) header_bytes |= static_cast<uint32_t>(static_cast<uint8_t>((*bytes)[12 + i])) << (8 * i);
  if (header_bytes > size - 20) return;
  PutU32(bytes, 16, Crc32c(bytes->data() + 20, header_bytes));
  size_t pos = 20 + static_cast<size_t>(header_bytes);
  while (pos < size) {
    uint64_t length = 0;
    int shift = 0;
    size_t at = pos;
    while (at < size && shift < 64) {
      const auto byte = static_cast<uint8_t>((*bytes)[at++]);
      length |= static_cast<uint64_t>(byte & 0x7f) << shift;
      shift += 7;
      if ((byte & 0x80) == 0) break;
    }
    if (at + 4 > size || length > size - at - 4) return;
    PutU32(bytes, at, Crc32c(bytes->data() + at + 4, static_cast<size_t>(length)));
    pos = at + 4 + static_cast<size_t>(length);
  }
}

void ReadAll(const std::string& bytes) {
  const std::string& path =
      colibri::fuzz::InputFile::Get().Write(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  // Strict, torn allowed, and as `trace upgrade` reads (version 1 too).
  for (const ReadOptions options : {ReadOptions{}, ReadOptions{.allow_torn = true},
                                    ReadOptions{.allow_torn = true, .allow_v1 = true}}) {
    auto reader = TraceReader::Open(path, options);
    if (!reader.ok()) continue;
    TraceRecord record;
    while (true) {
      auto more = (*reader)->Next(&record);
      if (!more.ok() || !more.value()) break;
      (void)ValidateRecord((*reader)->header().shape, record);
    }
    if ((*reader)->end() == TraceEnd::kTorn && !options.allow_torn) __builtin_trap();  // torn must be an error
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  ReadAll(bytes);
  FixCrcs(&bytes);
  if (bytes.size() == size && std::memcmp(bytes.data(), data, size) != 0) ReadAll(bytes);
  return 0;
}
