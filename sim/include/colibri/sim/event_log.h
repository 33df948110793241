// EventLog: the digest of a modelled run. Models append one entry per event
// they complete (a read, a copy, a kernel; the replay adds layer batches),
// and the log folds each into a running 64-bit FNV-1a hash over the entry's
// little-endian bytes (time 8, kind 4, a 8, b 8). The same inputs give the
// same digest on every run and thread count (ARCHITECTURE.md, "Determinism
// rules"); entries are not stored.
//
// Each entry also has a start (when the device began working on it); the
// digest does not include it. An optional EventSink receives every entry as a
// span [start, end] (e.g. replay::TraceEventWriter, a Perfetto timeline).
//
// Ownership: a plain value, borrowed by the models that append to it; the
// sink is borrowed and must outlive the appends. Thread-safety: none; one
// thread drives a modelled run.
#pragma once

#include <cstdint>
#include <string>

#include "colibri/engine/clock.h"
#include "colibri/engine/mix.h"

namespace colibri::sim {

// What an entry records; a and b per kind, and the span's start.
enum class EventKind : uint32_t {
  kRead = 1,        // SimStorage read completed: a = offset, b = bytes; from when a channel starts serving it
  kCopy = 2,        // SimTransfer copy completed: a = tag, b = bytes; from when its copy engine starts it
  kCompute = 3,     // SimCompute expert FFN ended: a = tokens, b = modelled ns; from end - modelled ns
  kGate = 4,        // SimCompute gate GEMV ended: a = tokens, b = modelled ns; from end - modelled ns
  kLayerBatch = 5,  // a layer batch ended (replay): a = layer index, b = tokens; from the batch's start
  kDense = 6,       // the non-MoE part of a layer (replay; sink only, see Span): a = layer index, b = bytes
  kFault = 7,       // a fault injected (fault_injection.h): a = FaultKind, b = FNV-1a of its detail; an instant
};

// Receives every entry of an EventLog as a span, in append order (about end
// order; starts are not ordered). start_ns <= end_ns.
class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void OnSpan(engine::TimeNs start_ns, engine::TimeNs end_ns, EventKind kind, uint64_t a, uint64_t b) = 0;
};

class EventLog {
 public:
  // Folds (end_ns, kind, a, b) into the digest and passes the span to the sink, if any.
  void Append(engine::TimeNs start_ns, engine::TimeNs end_ns, EventKind kind, uint64_t a, uint64_t b) {
    Fold(end_ns, static_cast<uint32_t>(kind), a, b);
    if (sink_ != nullptr) sink_->OnSpan(start_ns, end_ns, kind, a, b);
  }
  // Passes a span to the sink only: not in the digest nor the event count
  // (timeline detail that must not change the digest, e.g. kDense).
  void Span(engine::TimeNs start_ns, engine::TimeNs end_ns, EventKind kind, uint64_t a, uint64_t b) {
    if (sink_ != nullptr) sink_->OnSpan(start_ns, end_ns, kind, a, b);
  }

  // nullptr: no sink (the default).
  void set_sink(EventSink* sink) { sink_ = sink; }
  EventSink* sink() const { return sink_; }

  uint64_t events() const { return events_; }
  uint64_t digest() const { return digest_; }
  // The digest as 16 lower-case hex digits.
  std::string digest_hex() const;

 private:
  // Folds one entry: time 8, kind 4, a 8, b 8 bytes, little-endian; counts it.
  void Fold(engine::TimeNs time, uint32_t kind, uint64_t a, uint64_t b);

  EventSink* sink_ = nullptr;
  uint64_t digest_ = engine::kFnv1a64Basis;  // the digest of an empty log
  uint64_t events_ = 0;
};

}  // namespace colibri::sim
