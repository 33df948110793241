#include "colibri/sim/event_log.h"

namespace colibri::sim {

void EventLog::Fold(uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    digest_ ^= (value >> (8 * i)) & 0xFFu;
    digest_ *= 0x100000001B3ull;
  }
}

void EventLog::Append(engine::TimeNs time, uint32_t kind, uint64_t a, uint64_t b) {
  Fold(static_cast<uint64_t>(time), 8);
  Fold(kind, 4);
  Fold(a, 8);
  Fold(b, 8);
  ++events_;
}

std::string EventLog::digest_hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex(16, '0');
  for (int i = 0; i < 16; ++i) hex[15 - i] = kDigits[(digest_ >> (4 * i)) & 0xFu];
  return hex;
}

}  // namespace colibri::sim
