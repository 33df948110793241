// Fault-injecting backends: wrappers (engine/backend_wrappers.h) that make a
// storage, transfer or compute backend fail as a FaultSpec (fault_spec.h)
// says, on a seeded stream, and record every fault they inject in a FaultLog.
// They wrap real backends (UringStorage, PreadStorage, CpuTransfer, ...) and
// modelled ones (SimStorage, SimTransfer, SimCompute) alike.
//
// Seeding (the project's one scheme, sim/random.h): each wrapper has one
// sim::Rng, seeded DeriveSeed(seed, "fault_storage"), DeriveSeed(seed,
// "fault_transfer") or DeriveSeed(seed, "fault_compute") from the run's root
// seed. A decision for a rule N/D is one draw u = rng.NextU64(), firing when
// u % D < N (DrawFault). Rules that are off draw nothing, so a spec of zero
// rates draws nothing at all, and then each wrapper forwards every call to
// its target untouched: the same completions, tags, times and counters.
//
// FaultInjectionStorage. Per accepted read (a Submit the target accepted;
// a rejected one draws nothing), at Submit, in this order: the storage.eio
// decision; the storage.short decision, and when it fires one more draw for
// the bytes delivered X = a x (u % (Y / a)), Y the request's bytes, a the
// caps' alignment (so 0 <= X < Y, a multiple of a); the storage.spike
// decision; the storage.stuck decision; the storage.corrupt decision, and
// when it fires one more draw for the byte flipped, P = u % Y. Drawing at
// Submit (not at completion) keeps the stream in submission order whatever
// order the target completes in. The read is always submitted to the target
// (under a tag of the wrapper's own: callers' tags need not be unique). When
// the target's completion arrives, in Poll:
//  - stuck: the completion is swallowed; the read completes with an IoError
//    "read of Y bytes at offset O: read timed out after DUR (injected
//    storage.stuck)", bytes 0, at complete_ns = max(submit + DUR, the
//    target's own complete_ns). So the buffer stays the backend's until the
//    target has finished with it (storage.h's ownership rule holds: a
//    timeout shorter than the target's read is delivered when the target
//    completes), and outstanding() counts the read until then. A stuck read
//    gets none of the other faults.
//  - otherwise, where the target's completion is OK (a target error is
//    passed on as it is): eio makes it an IoError "read of Y bytes at offset
//    O: input/output error (injected storage.eio)", bytes 0 (the buffer holds
//    whatever the target put there); else short makes it an IoError "short
//    read: X of Y bytes at offset O (injected storage.short)", bytes X, and
//    bytes X..Y of the buffer are zeroed (where the target delivers data);
//    else corrupt XORs byte P of the buffer with 0xFF and leaves the status
//    OK (where the target delivers data; a time-only model's buffer is
//    never touched, and the fault is then neither applied nor logged);
//  - spike (whatever the status) adds DUR to complete_ns and holds the
//    completion back until then.
// Held completions are released by tasks on the loop (RunAt), so time stays
// on the loop's clock: the stuck timeout at submit + DUR, a spiked
// completion at its new complete_ns; a poll releases those whose time the
// loop's Now() has reached (the clock moved by WaitUntil, or a real loop's
// time passed, before the task ran; the task then does nothing). Poll(false)
// hands over what is ready; Poll(true) with nothing ready polls the target
// waiting when no release is scheduled, else runs the loop (RunUntil,
// polling the target between tasks) until something is ready, as
// SimStorage does. On a simulated loop that is exact. On a RealEventLoop
// whose sources do not include this wrapper, a target completion that
// arrives while a release is scheduled is noticed at the latest when that
// release runs (the loop sleeps until its next task).
// counters(): reads, read_bytes and read_errors count completions as handed
// over (a faulted read is an error, a corrupt one a read);
// queue_full_events and registered_reads are the target's. caps() and
// warning() are the target's; RegisterBuffers is refused while reads are
// outstanding (held ones included).
//
// FaultInjectionTransfer. transfer.fail: one decision per accepted Copy
// (under a tag of its own, as above); the copy is still performed by the
// target and its completion carries an IoError "copy of N bytes (tag T):
// transfer failed (injected transfer.fail)". transfer.oom: one decision per
// CreateDevicePool / CreateHostPool call with a budget > 0; when it fires
// the target is not called and the call fails with InvalidArgument "...:
// device out of memory (injected transfer.oom)" -- the code the engine's
// pools give for a real allocation failure (SlabPool::Create, cudaMalloc).
// With transfer.fail on, counters() count copies handed over with an OK
// status; otherwise they are the target's.
//
// FaultInjectionCompute. compute.fail: one decision per ExpertFfn call the
// target would run: tokens > 0, a layout of a non-empty shape and known
// dtype, and, where the target reads data, a block, input and output
// (compute.h's checks; other calls go to the target, which rejects or skips
// them as it does, and draw nothing). When it fires the target is not
// called, so no output is written and no time is kept, and the call returns
// Internal "expert FFN of T tokens (hidden H, intermediate I): kernel failed
// (injected compute.fail)". GateGemv is never failed.
//
// Every fault applied is appended to the FaultLog (when one is given): at
// the modelled completion time for storage faults (the completion's final
// complete_ns) and transfer.fail, at the clock's Now() for transfer.oom and
// compute.fail.
//
// Ownership: every wrapper borrows its target, the loop or clock, and the
// log, which must outlive it. Destroying FaultInjectionStorage drops the
// completions it holds (its scheduled tasks become no-ops); reads still in
// the target stay there: the target's own destructor waits for them (real
// backends) or drops them (SimStorage), so read buffers must outlive the
// target, and the target must not be polled after the wrapper is gone (its
// completions carry the wrapper's tags). Thread-safety: none; the loop's
// thread submits, copies, computes and polls.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "colibri/engine/backend_wrappers.h"
#include "colibri/engine/clock.h"
#include "colibri/engine/compute.h"
#include "colibri/engine/event_loop.h"
#include "colibri/engine/storage.h"
#include "colibri/engine/transfer.h"
#include "colibri/sim/event_log.h"
#include "colibri/sim/fault_spec.h"
#include "colibri/sim/random.h"
#include "colibri/status.h"

namespace colibri::sim {

// One fault injected: the shape of the run store's run_faults rows.
struct InjectedFault {
  engine::TimeNs at_ns = 0;
  std::string kind;    // FaultKindName, e.g. "storage.eio"
  std::string detail;  // what it hit: the read's tag, offset and bytes; the copy's tag and bytes; ...
  bool operator==(const InjectedFault&) const = default;
};

// The faults of a run, in the order they were injected. With an event log,
// each is also appended there (EventKind::kFault, an instant at at_ns), so
// the run's digest covers them. Plain value; not thread-safe; borrows the
// event log, which must outlive the appends.
class FaultLog {
 public:
  FaultLog() = default;
  explicit FaultLog(EventLog* events) : events_(events) {}
  void Append(engine::TimeNs at_ns, FaultKind kind, std::string detail);
  const std::vector<InjectedFault>& records() const { return records_; }
  // Faults of `kind` so far.
  uint64_t count(FaultKind kind) const { return counts_[static_cast<size_t>(kind)]; }
  // Per kind, in FaultKind order.
  const std::array<uint64_t, kFaultKindCount>& counts() const { return counts_; }
  size_t size() const { return records_.size(); }

 private:
  EventLog* events_ = nullptr;
  std::vector<InjectedFault> records_;
  std::array<uint64_t, kFaultKindCount> counts_{};
};

// One decision for `rate`: false without drawing when the rate is off, else
// one draw u = rng->NextU64(), firing when u % rate.d < rate.n.
bool DrawFault(const FaultRate& rate, Rng* rng);

class FaultInjectionStorage final : public engine::StorageWrapper {
 public:
  // `target` must not be null; `loop` is required when spec.storage_any()
  // (Submit is refused with InvalidArgument without it); `log` may be null.
  FaultInjectionStorage(engine::StorageBackend* target, const FaultSpec& spec, uint64_t seed, engine::EventLoop* loop,
                        FaultLog* log);
  ~FaultInjectionStorage() override;
  FaultInjectionStorage(const FaultInjectionStorage&) = delete;
  FaultInjectionStorage& operator=(const FaultInjectionStorage&) = delete;

  const engine::StorageCounters& counters() const override;
  Status Submit(const engine::ReadRequest& request) override;
  Status Poll(bool wait, std::vector<engine::ReadCompletion>* out) override;
  size_t outstanding() const override;
  Status RegisterBuffers(const std::vector<engine::MemoryRegion>& regions) override;

 private:
  // An accepted read, by slot (the tag the target sees).
  struct Read {
    engine::ReadRequest request;  // as submitted (the caller's tag)
    engine::TimeNs submit_ns = 0;
    bool eio = false;
    bool short_read = false;
    bool spike = false;
    bool stuck = false;
    bool corrupt = false;
    uint64_t short_bytes = 0;  // X, when short_read
    uint64_t corrupt_at = 0;   // P, when corrupt
    bool in_target = true;     // the target's completion not yet taken in
    bool timed_out = false;    // stuck: submit + DUR has passed
    engine::ReadCompletion held;  // spike: the completion waiting for its release
  };
  // Scheduled tasks reach the wrapper through this cell, null once it is gone.
  struct Cell {
    FaultInjectionStorage* self = nullptr;
  };

  // A release or timeout: (due time, scheduling sequence).
  using TimerKey = std::pair<engine::TimeNs, uint64_t>;

  Status PollTarget(bool wait);
  void TakeIn(engine::ReadCompletion c);
  void Schedule(engine::TimeNs when, uint32_t slot);
  void FireTimer(TimerKey key);
  void FireDueTimers();
  void OnTimer(uint32_t slot);
  void Deliver(uint32_t slot, engine::ReadCompletion c);
  void DeliverTimeout(uint32_t slot, engine::TimeNs at_ns);
  void Log(engine::TimeNs at_ns, FaultKind kind, std::string detail);
  void HandOver(std::vector<engine::ReadCompletion>* out);

  const FaultSpec spec_;
  const bool passthrough_;  // no storage rule on: every call goes to the target as it is
  engine::EventLoop* const loop_;
  FaultLog* const log_;
  Rng rng_;
  std::vector<Read> reads_;
  std::vector<uint32_t> free_slots_;
  std::vector<engine::ReadCompletion> ready_;  // completed, not yet handed over
  uint64_t accepted_ = 0;
  uint64_t handed_over_ = 0;
  uint64_t taken_in_ = 0;        // target completions taken in
  std::map<TimerKey, uint32_t> timers_;  // armed, by due time: the slot each releases or times out
  uint64_t next_timer_id_ = 0;
  mutable engine::StorageCounters counters_;
  std::shared_ptr<Cell> cell_;
};

class FaultInjectionTransfer final : public engine::TransferWrapper {
 public:
  // `target` must not be null; `clock` (the loop's; for the log's times) and `log` may be null.
  FaultInjectionTransfer(engine::TransferBackend* target, const FaultSpec& spec, uint64_t seed,
                         const engine::Clock* clock, FaultLog* log);

  const engine::TransferCounters& counters() const override;
  Result<std::unique_ptr<engine::SlabPool>> CreateDevicePool(uint64_t budget_bytes, uint64_t slot_bytes) override;
  Result<std::unique_ptr<engine::SlabPool>> CreateHostPool(uint64_t budget_bytes, uint64_t slot_bytes) override;
  Status Copy(std::byte* device_dst, const std::byte* host_src, uint64_t bytes, uint64_t tag) override;
  Status Poll(bool wait, std::vector<engine::TransferCompletion>* out) override;

 private:
  struct Copied {
    uint64_t tag = 0;  // the caller's
    bool fail = false;
  };
  // Whether a pool of `budget_bytes` fails; logs it.
  bool PoolFails(const char* what, uint64_t budget_bytes, uint64_t slot_bytes, std::string* message);

  const FaultSpec spec_;
  const engine::Clock* const clock_;
  FaultLog* const log_;
  Rng rng_;
  std::vector<Copied> copies_;  // by slot (the tag the target sees)
  std::vector<uint64_t> free_slots_;
  engine::TransferCounters counters_;
};

class FaultInjectionCompute final : public engine::ComputeWrapper {
 public:
  // `target` must not be null; `clock` (the loop's; for the log's times) and `log` may be null.
  FaultInjectionCompute(engine::ComputeBackend* target, const FaultSpec& spec, uint64_t seed,
                        const engine::Clock* clock, FaultLog* log);

  Status ExpertFfn(const engine::ExpertView& expert, const float* x, size_t tokens, float* y) override;

 private:
  const FaultSpec spec_;
  const engine::Clock* const clock_;
  FaultLog* const log_;
  Rng rng_;
};

// `backend` under its fault injector, both owned by the result
// (engine::OwningWrapper: the injector goes first): what a run that injects
// `spec` uses in place of `backend`.
std::unique_ptr<engine::StorageBackend> WithFaults(std::unique_ptr<engine::StorageBackend> backend,
                                                   const FaultSpec& spec, uint64_t seed, engine::EventLoop* loop,
                                                   FaultLog* log);
std::unique_ptr<engine::TransferBackend> WithFaults(std::unique_ptr<engine::TransferBackend> backend,
                                                    const FaultSpec& spec, uint64_t seed, const engine::Clock* clock,
                                                    FaultLog* log);
std::unique_ptr<engine::ComputeBackend> WithFaults(std::unique_ptr<engine::ComputeBackend> backend,
                                                   const FaultSpec& spec, uint64_t seed, const engine::Clock* clock,
                                                   FaultLog* log);

}  // namespace colibri::sim
