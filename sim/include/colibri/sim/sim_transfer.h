// SimTransfer: the modelled PCIe link, a TransferBackend that keeps time on
// an EventLoop and moves no bytes (caps: name "sim", delivers_data = false).
//
// Model: the link has `copy_engines` engines, each with a next-free time. A
// copy issued at Now() takes the engine free earliest (lowest index on ties),
// starts at max(Now(), engine.next_free) and ends per_copy_ns +
// ceil(bytes x 1e9 / rate) later, rate = pinned_bytes_per_s (or
// pageable_bytes_per_s with options.pinned = false). Integer ns. A profile of
// generation 0 ("no link": CPU compute, host memory is device memory)
// advertises device_is_host; its copies (L2 to the L1 host pool) cost 0 ns,
// or, when it carries a measured host memcpy rate (pinned_bytes_per_s > 0,
// from `colibri calibrate`), per_copy_ns + bytes at that rate.
//
// Poll(false) hands over the copies whose end is <= Now(); Poll(true) with
// none due moves the loop's clock to the earliest end (WaitUntil: the engine
// waits for its copies synchronously) and hands over what is due then.
// Completions come in (end, issue order) order.
//
// Ownership: borrows the loop and the event log (they must outlive the
// backend); source and destination memory are never touched. Thread-safety:
// none; the loop's thread copies and polls.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "colibri/engine/event_loop.h"
#include "colibri/engine/transfer.h"
#include "colibri/sim/event_log.h"
#include "colibri/sim/hardware.h"
#include "colibri/status.h"

namespace colibri::sim {

struct SimTransferOptions {
  engine::EventLoop* loop = nullptr;  // required; borrowed
  bool pinned = true;                 // host buffers are pinned (else the pageable rate applies)
  EventLog* event_log = nullptr;      // optional; one kCopy entry per copy, at its end
};

class SimTransfer final : public engine::TransferBackend {
 public:
  const engine::TransferCaps& caps() const override { return caps_; }
  // copies / copied_bytes count copies handed over by Poll.
  const engine::TransferCounters& counters() const override { return counters_; }
  // A pool of reserved, never-backed address space (SlabPool::CreateReserved).
  Result<std::unique_ptr<engine::SlabPool>> CreateDevicePool(uint64_t budget_bytes, uint64_t slot_bytes) override;
  // Errors: InvalidArgument for a null pointer or 0 bytes (nothing is queued).
  Status Copy(std::byte* device_dst, const std::byte* host_src, uint64_t bytes, uint64_t tag) override;
  Status Poll(bool wait, std::vector<engine::TransferCompletion>* out) override;
  size_t outstanding() const override { return pending_.size(); }

  // The modelled duration of one copy of `bytes` on an idle engine.
  engine::TimeNs CopyNs(uint64_t bytes) const;

 private:
  friend Result<std::unique_ptr<SimTransfer>> MakeSimTransfer(const PcieProfile&, const SimTransferOptions&);
  SimTransfer(const PcieProfile& profile, const SimTransferOptions& options);

  const PcieProfile profile_;
  const SimTransferOptions options_;
  engine::TransferCaps caps_;
  engine::TransferCounters counters_;
  std::vector<engine::TimeNs> engine_free_ns_;
  // Copies not yet handed over, by (end, issue sequence).
  std::map<std::pair<engine::TimeNs, uint64_t>, engine::TransferCompletion> pending_;
  uint64_t next_sequence_ = 0;
};

// Errors: InvalidArgument for a missing loop, or a profile of generation > 0
// with 0 copy engines, 0 pinned_bytes_per_s, 0 pageable_bytes_per_s (when
// options.pinned is false) or a negative per_copy_ns, naming the profile.
Result<std::unique_ptr<SimTransfer>> MakeSimTransfer(const PcieProfile& profile, const SimTransferOptions& options);

}  // namespace colibri::sim
