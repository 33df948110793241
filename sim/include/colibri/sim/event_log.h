// EventLog: the digest of a modelled run. Models append one entry per event
// they complete (a read, a copy, a kernel; the replay adds layer batches),
// and the log folds each into a running 64-bit FNV-1a hash over the entry's
// little-endian bytes (time 8, kind 4, a 8, b 8). The same inputs give the
// same digest on every run and thread count (ARCHITECTURE.md, "Determinism
// rules"); entries are not stored.
//
// Ownership: a plain value, borrowed by the models that append to it.
// Thread-safety: none; one thread drives a modelled run.
#pragma once

#include <cstdint>
#include <string>

#include "colibri/engine/clock.h"

namespace colibri::sim {

// What an entry records; a and b per kind.
enum class EventKind : uint32_t {
  kRead = 1,        // SimStorage read completed: a = offset, b = bytes
  kCopy = 2,        // SimTransfer copy completed: a = tag, b = bytes
  kCompute = 3,     // SimCompute expert FFN ended: a = tokens, b = modelled ns
  kGate = 4,        // SimCompute gate GEMV ended: a = tokens, b = modelled ns
  kLayerBatch = 5,  // a layer batch ended (replay): a = layer index, b = tokens
};

class EventLog {
 public:
  void Append(engine::TimeNs time, uint32_t kind, uint64_t a, uint64_t b);
  void Append(engine::TimeNs time, EventKind kind, uint64_t a, uint64_t b) {
    Append(time, static_cast<uint32_t>(kind), a, b);
  }

  uint64_t events() const { return events_; }
  uint64_t digest() const { return digest_; }
  // The digest as 16 lower-case hex digits.
  std::string digest_hex() const;

 private:
  void Fold(uint64_t value, int bytes);

  uint64_t digest_ = 0xCBF29CE484222325ull;  // FNV-1a 64 offset basis: the digest of an empty log
  uint64_t events_ = 0;
};

}  // namespace colibri::sim
