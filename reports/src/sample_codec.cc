#include "sample_codec.h"

#include <zstd.h>

#include <cstring>
#include <memory>

namespace colibri::reports {

namespace {

constexpr char kMagic[4] = {'Z', 'V', 'I', '1'};
constexpr size_t kHeaderBytes = sizeof(kMagic) + 8 + 8;
constexpr size_t kMaxVarintBytes = 10;  // ceil(64 / 7)
constexpr int kZstdLevel = 3;
// The most a zstd frame can expand: its smallest block (a 4-byte RLE block)
// holds at most 128 KiB. Bounds what a decode allocates for a blob.
constexpr uint64_t kMaxZstdRatio = (128 * 1024) / 4;

void PutU64(uint64_t v, char* out) { std::memcpy(out, &v, 8); }  // little-endian hosts only (x86-64, aarch64)

uint64_t GetU64(const char* in) {
  uint64_t v = 0;
  std::memcpy(&v, in, 8);
  return v;
}

Status Bad(const std::string& what) { return Status::Corruption("sample blob: " + what); }

// Writes the zigzag-delta varints of `values` to `out` (room for
// kMaxVarintBytes each); returns the bytes written.
template <typename T>
size_t PutVarints(std::span<const T> values, uint8_t* out) {
  uint8_t* p = out;
  uint64_t prev = 0;
  for (const T value : values) {
    const auto u = static_cast<uint64_t>(value);
    const uint64_t delta = u - prev;  // wrapping
    prev = u;
    uint64_t zigzag = (delta << 1) ^ static_cast<uint64_t>(static_cast<int64_t>(delta) >> 63);
    while (zigzag >= 0x80) {
      *p++ = static_cast<uint8_t>(zigzag | 0x80);
      zigzag >>= 7;
    }
    *p++ = static_cast<uint8_t>(zigzag);
  }
  return static_cast<size_t>(p - out);
}

// Reads exactly values->size() varints spanning exactly [in, end).
template <typename T>
Status GetVarints(const uint8_t* in, const uint8_t* end, std::vector<T>* values) {
  uint64_t prev = 0;
  for (size_t i = 0; i < values->size(); ++i) {
    uint64_t zigzag = 0;
    for (int shift = 0;; shift += 7) {
      if (in == end) return Bad("varints end inside value " + std::to_string(i));
      const uint8_t byte = *in++;
      if (shift == 63 && byte > 1) return Bad("value " + std::to_string(i) + " overflows 64 bits");
      zigzag |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) break;
    }
    prev += (zigzag >> 1) ^ (~(zigzag & 1) + 1);  // wrapping
    (*values)[i] = static_cast<T>(prev);
  }
  if (in != end) return Bad(std::to_string(end - in) + " bytes left after the last value");
  return Status::Ok();
}

template <typename T>
Result<std::string> Encode(std::span<const T> values) {
  const auto varints = std::make_unique_for_overwrite<uint8_t[]>(values.size() * kMaxVarintBytes);
  const size_t varint_bytes = PutVarints(values, varints.get());
  std::string blob(kHeaderBytes + ZSTD_compressBound(varint_bytes), '\0');
  std::memcpy(blob.data(), kMagic, sizeof(kMagic));
  PutU64(values.size(), blob.data() + sizeof(kMagic));
  PutU64(varint_bytes, blob.data() + sizeof(kMagic) + 8);
  const size_t n = ZSTD_compress(blob.data() + kHeaderBytes, blob.size() - kHeaderBytes, varints.get(), varint_bytes,
                                 kZstdLevel);
  if (ZSTD_isError(n)) return Status::Internal(std::string("zstd compression failed: ") + ZSTD_getErrorName(n));
  blob.resize(kHeaderBytes + n);
  return blob;
}

template <typename T>
Result<std::vector<T>> Decode(std::string_view blob) {
  if (blob.size() < kHeaderBytes) {
    return Bad(std::to_string(blob.size()) + " bytes, shorter than the " + std::to_string(kHeaderBytes) +
               "-byte header");
  }
  if (std::memcmp(blob.data(), kMagic, sizeof(kMagic)) != 0) return Bad("expected the \"ZVI1\" magic");
  const uint64_t count = GetU64(blob.data() + sizeof(kMagic));
  const uint64_t varint_bytes = GetU64(blob.data() + sizeof(kMagic) + 8);
  const std::string_view frame = blob.substr(kHeaderBytes);
  if (varint_bytes / kMaxZstdRatio > frame.size()) {
    return Bad(std::to_string(varint_bytes) + " varint bytes cannot come from a zstd frame of " +
               std::to_string(frame.size()) + " bytes");
  }
  if (count > varint_bytes || varint_bytes > count * kMaxVarintBytes) {
    return Bad(std::to_string(count) + " values cannot take " + std::to_string(varint_bytes) + " varint bytes");
  }
  const auto varints = std::make_unique_for_overwrite<uint8_t[]>(varint_bytes);
  const size_t n = ZSTD_decompress(varints.get(), varint_bytes, frame.data(), frame.size());
  if (ZSTD_isError(n)) return Bad(std::string("zstd: ") + ZSTD_getErrorName(n));
  if (n != varint_bytes) {
    return Bad("zstd frame holds " + std::to_string(n) + " bytes, header says " + std::to_string(varint_bytes));
  }
  std::vector<T> values(count);
  COLIBRI_RETURN_IF_ERROR(GetVarints(varints.get(), varints.get() + n, &values));
  return values;
}

}  // namespace

Result<std::string> EncodeSamples(std::span<const int64_t> values) { return Encode(values); }
Result<std::vector<int64_t>> DecodeSamples(std::string_view blob) { return Decode<int64_t>(blob); }
Result<std::string> EncodeCounts(std::span<const uint64_t> counts) { return Encode(counts); }
Result<std::vector<uint64_t>> DecodeCounts(std::string_view blob) { return Decode<uint64_t>(blob); }

}  // namespace colibri::reports
