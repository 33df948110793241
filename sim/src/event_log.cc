#include "colibri/sim/event_log.h"

namespace colibri::sim {

namespace {

uint64_t FoldBytes(uint64_t digest, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) digest = engine::Fnv1a64Byte(digest, static_cast<uint8_t>(value >> (8 * i)));
  return digest;
}

}  // namespace

void EventLog::Fold(engine::TimeNs time, uint32_t kind, uint64_t a, uint64_t b) {
  uint64_t digest = FoldBytes(digest_, static_cast<uint64_t>(time), 8);
  digest = FoldBytes(digest, kind, 4);
  digest = FoldBytes(digest, a, 8);
  digest_ = FoldBytes(digest, b, 8);
  ++events_;
}

std::string EventLog::digest_hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex(16, '0');
  for (int i = 0; i < 16; ++i) hex[15 - i] = kDigits[(digest_ >> (4 * i)) & 0xFu];
  return hex;
}

}  // namespace colibri::sim
