// Protobuf wire-format primitives (varints, little-endian fixed ints) used by
// the record codec and the file framing. Internal to traces/.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace colibri::traces::wire {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

inline void PutVarint(std::string* out, uint64_t v) {
  char buf[10];
  int n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out->append(buf, n);
}

inline void PutFixed32(std::string* out, uint32_t v) {
  char buf[4];
  std::memcpy(buf, &v, 4);  // little-endian hosts only (x86-64, aarch64)
  out->append(buf, 4);
}

inline uint32_t LoadFixed32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline void PutFixed64(std::string* out, uint64_t v) {
  char buf[8];
  std::memcpy(buf, &v, 8);  // little-endian hosts only
  out->append(buf, 8);
}

inline uint64_t LoadFixed64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

inline void PutTag(std::string* out, uint32_t field, WireType type) { PutVarint(out, (field << 3) | type); }

inline int VarintLength(uint64_t v) {
  int n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Reads a varint from [*p, end). Returns false (leaving *p unspecified) when
// the input ends first or the varint is longer than 10 bytes.
inline bool GetVarint(const uint8_t** p, const uint8_t* end, uint64_t* v) {
  const uint8_t* q = *p;
  if (q < end && *q < 0x80) {  // fast path: one byte
    *v = *q;
    *p = q + 1;
    return true;
  }
  uint64_t result = 0;
  for (int shift = 0; shift < 70 && q < end; shift += 7) {
    const uint64_t byte = *q++;
    result |= (byte & 0x7F) << shift;
    if (byte < 0x80) {
      if (shift == 63 && byte > 1) return false;  // overflows 64 bits
      *v = result;
      *p = q;
      return true;
    }
  }
  return false;
}

}  // namespace colibri::traces::wire
