#include "colibri/sim/fault_injection.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "colibri/engine/dtype.h"

namespace colibri::sim {
namespace {

using engine::ReadCompletion;
using engine::ReadRequest;
using engine::TimeNs;

// "tag T: read of Y bytes at offset O"
std::string DescribeRead(const ReadRequest& r) {
  return "tag " + std::to_string(r.tag) + ": read of " + std::to_string(r.bytes) + " bytes at offset " +
         std::to_string(r.offset);
}

std::string ReadOf(const ReadRequest& r) {
  return "read of " + std::to_string(r.bytes) + " bytes at offset " + std::to_string(r.offset);
}

// Whether `compute` would run this expert FFN (compute.h's argument checks;
// a time-only model needs no data): only such calls may be failed.
bool RunsKernel(const engine::ComputeCaps& caps, const engine::ExpertView& expert, const float* x, size_t tokens,
                const float* y) {
  const engine::ExpertLayout* layout = expert.layout;
  if (tokens == 0 || layout == nullptr || layout->hidden == 0 || layout->intermediate == 0 ||
      engine::DTypeBytes(layout->dtype) == 0) {
    return false;
  }
  return !caps.reads_data ||
         (engine::ValidateExpertView(expert).ok() && engine::ValidateComputeVectors(x, tokens, y).ok());
}

}  // namespace

void FaultLog::Append(TimeNs at_ns, FaultKind kind, std::string detail) {
  if (events_ != nullptr) events_->Append(at_ns, at_ns, EventKind::kFault, static_cast<uint64_t>(kind), Fnv1a64(detail));
  records_.push_back(InjectedFault{at_ns, FaultKindName(kind), std::move(detail)});
  ++counts_[static_cast<size_t>(kind)];
}

bool DrawFault(const FaultRate& rate, Rng* rng) {
  if (!rate.on() || rate.d == 0) return false;
  return rng->NextU64() % rate.d < rate.n;
}

// ---------------------------------------------------------------------------
// FaultInjectionStorage

FaultInjectionStorage::FaultInjectionStorage(engine::StorageBackend* target, const FaultSpec& spec, uint64_t seed,
                                             engine::EventLoop* loop, FaultLog* log)
    : StorageWrapper(target),
      spec_(spec),
      passthrough_(!spec.storage_any()),
      loop_(loop),
      log_(log),
      rng_(DeriveSeed(seed, "fault_storage")),
      cell_(std::make_shared<Cell>(Cell{this})) {}

FaultInjectionStorage::~FaultInjectionStorage() { cell_->self = nullptr; }

const engine::StorageCounters& FaultInjectionStorage::counters() const {
  if (passthrough_) return target()->counters();
  const engine::StorageCounters& inner = target()->counters();
  counters_.queue_full_events = inner.queue_full_events;
  counters_.registered_reads = inner.registered_reads;
  return counters_;
}

size_t FaultInjectionStorage::outstanding() const {
  if (passthrough_) return target()->outstanding();
  return static_cast<size_t>(accepted_ - handed_over_);
}

Status FaultInjectionStorage::RegisterBuffers(const std::vector<engine::MemoryRegion>& regions) {
  if (!passthrough_ && outstanding() > 0) {
    return Status::InvalidArgument("fault injection storage: cannot register buffers with " +
                                   std::to_string(outstanding()) + " reads outstanding");
  }
  return target()->RegisterBuffers(regions);
}

Status FaultInjectionStorage::Submit(const ReadRequest& request) {
  if (passthrough_) return target()->Submit(request);
  if (loop_ == nullptr) {
    return Status::InvalidArgument("fault injection storage: an event loop is required to inject storage faults");
  }
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(reads_.size());
    reads_.emplace_back();
  }
  ReadRequest inner = request;
  inner.tag = slot;
  Status submitted = target()->Submit(inner);
  if (!submitted.ok()) {
    free_slots_.push_back(slot);
    return submitted;
  }
  Read read;
  read.request = request;
  read.submit_ns = loop_->Now();
  // The draws, in the documented order.
  read.eio = DrawFault(spec_.storage_eio, &rng_);
  read.short_read = DrawFault(spec_.storage_short, &rng_);
  if (read.short_read) {
    const uint64_t unit = std::max<uint64_t>(target()->caps().alignment_bytes, 1);
    const uint64_t units = std::max<uint64_t>(request.bytes / unit, 1);
    read.short_bytes = unit * (rng_.NextU64() % units);
  }
  read.spike = DrawFault(spec_.storage_spike, &rng_);
  read.stuck = DrawFault(spec_.storage_stuck, &rng_);
  read.corrupt = DrawFault(spec_.storage_corrupt, &rng_);
  if (read.corrupt) read.corrupt_at = rng_.NextU64() % request.bytes;
  reads_[slot] = read;
  ++accepted_;
  if (read.stuck) Schedule(read.submit_ns + spec_.storage_stuck.duration_ns, slot);
  return Status::Ok();
}

void FaultInjectionStorage::Schedule(TimeNs when, uint32_t slot) {
  const TimerKey key{when, next_timer_id_++};
  timers_.emplace(key, slot);
  const std::shared_ptr<Cell> cell = cell_;
  loop_->RunAt(when, [cell, key] {
    if (cell->self != nullptr) cell->self->FireTimer(key);
  });
}

void FaultInjectionStorage::FireTimer(TimerKey key) {
  const auto it = timers_.find(key);
  if (it == timers_.end()) return;  // fired already, by a poll after its time
  const uint32_t slot = it->second;
  timers_.erase(it);
  OnTimer(slot);
}

void FaultInjectionStorage::FireDueTimers() {
  if (timers_.empty()) return;  // (and without a loop there are none)
  const TimeNs now = loop_->Now();
  while (!timers_.empty() && timers_.begin()->first.first <= now) {
    const uint32_t slot = timers_.begin()->second;
    timers_.erase(timers_.begin());
    OnTimer(slot);
  }
}

void FaultInjectionStorage::OnTimer(uint32_t slot) {
  Read& r = reads_[slot];
  if (!r.stuck) {  // a spiked completion's release
    Deliver(slot, std::move(r.held));
    return;
  }
  r.timed_out = true;
  // The target finished first: the timeout is the completion. Else it comes with the target's completion.
  if (!r.in_target) DeliverTimeout(slot, r.submit_ns + spec_.storage_stuck.duration_ns);
}

void FaultInjectionStorage::Deliver(uint32_t slot, ReadCompletion c) {
  ready_.push_back(std::move(c));
  free_slots_.push_back(slot);
}

void FaultInjectionStorage::DeliverTimeout(uint32_t slot, TimeNs at_ns) {
  const Read& r = reads_[slot];
  const std::string timeout = FormatFaultDuration(spec_.storage_stuck.duration_ns);
  Log(at_ns, FaultKind::kStorageStuck, DescribeRead(r.request) + ": timed out after " + timeout);
  Deliver(slot, ReadCompletion{r.request.tag,
                               Status::IoError(ReadOf(r.request) + ": read timed out after " + timeout +
                                               " (injected storage.stuck)"),
                               0, r.submit_ns, at_ns});
}

void FaultInjectionStorage::Log(TimeNs at_ns, FaultKind kind, std::string detail) {
  if (log_ != nullptr) log_->Append(at_ns, kind, std::move(detail));
}

void FaultInjectionStorage::TakeIn(ReadCompletion c) {
  ++taken_in_;
  const uint32_t slot = static_cast<uint32_t>(c.tag);
  Read& r = reads_[slot];
  r.in_target = false;
  c.tag = r.request.tag;
  if (r.stuck) {  // swallowed: the timeout is the completion
    if (r.timed_out) DeliverTimeout(slot, std::max(r.submit_ns + spec_.storage_stuck.duration_ns, c.complete_ns));
    return;
  }
  if (r.spike) c.complete_ns += spec_.storage_spike.duration_ns;
  const std::string read = DescribeRead(r.request);
  if (c.status.ok()) {
    const bool data = target()->caps().delivers_data;
    if (r.eio) {
      c.status = Status::IoError(ReadOf(r.request) + ": input/output error (injected storage.eio)");
      c.bytes = 0;
      Log(c.complete_ns, FaultKind::kStorageEio, read);
    } else if (r.short_read) {
      if (data) std::memset(static_cast<char*>(r.request.buffer) + r.short_bytes, 0, r.request.bytes - r.short_bytes);
      c.status = Status::IoError("short read: " + std::to_string(r.short_bytes) + " of " +
                                 std::to_string(r.request.bytes) + " bytes at offset " +
                                 std::to_string(r.request.offset) + " (injected storage.short)");
      c.bytes = r.short_bytes;
      Log(c.complete_ns, FaultKind::kStorageShort,
          read + ": " + std::to_string(r.short_bytes) + " of " + std::to_string(r.request.bytes) + " bytes delivered");
    } else if (r.corrupt && data) {
      static_cast<unsigned char*>(r.request.buffer)[r.corrupt_at] ^= 0xFF;
      Log(c.complete_ns, FaultKind::kStorageCorrupt,
          read + ": byte " + std::to_string(r.corrupt_at) + " of the buffer (file offset " +
              std::to_string(r.request.offset + r.corrupt_at) + ") flipped");
    }
  }
  if (!r.spike) {
    Deliver(slot, std::move(c));
    return;
  }
  Log(c.complete_ns, FaultKind::kStorageSpike,
      read + ": delayed by " + FormatFaultDuration(spec_.storage_spike.duration_ns));
  const TimeNs release_ns = c.complete_ns;
  r.held = std::move(c);
  Schedule(release_ns, slot);
}

Status FaultInjectionStorage::PollTarget(bool wait) {
  // A vector of this call's own: the target may run the loop, which may poll this wrapper again.
  std::vector<ReadCompletion> completions;
  COLIBRI_RETURN_IF_ERROR(target()->Poll(wait, &completions));
  for (ReadCompletion& c : completions) {
    if (c.tag >= reads_.size() || !reads_[c.tag].in_target) {
      return Status::Internal("fault injection storage: the target completed a read it was not given (tag " +
                              std::to_string(c.tag) + ")");
    }
    TakeIn(std::move(c));
  }
  return Status::Ok();
}

void FaultInjectionStorage::HandOver(std::vector<ReadCompletion>* out) {
  for (ReadCompletion& c : ready_) {
    engine::CountCompletion(c, &counters_);
    ++handed_over_;
    out->push_back(std::move(c));
  }
  ready_.clear();
}

Status FaultInjectionStorage::Poll(bool wait, std::vector<ReadCompletion>* out) {
  if (passthrough_) return target()->Poll(wait, out);
  FireDueTimers();
  if (target()->outstanding() > 0) COLIBRI_RETURN_IF_ERROR(PollTarget(false));
  const uint64_t handed_before = handed_over_;
  while (wait && ready_.empty() && handed_over_ == handed_before && outstanding() > 0) {
    if (timers_.empty()) {
      // Everything not ready is in the target: wait for it.
      if (target()->outstanding() == 0) {
        return Status::Internal("fault injection storage: reads outstanding but none in the target or scheduled");
      }
      const uint64_t taken_before = taken_in_;
      COLIBRI_RETURN_IF_ERROR(PollTarget(true));
      if (taken_in_ == taken_before && handed_over_ == handed_before) {
        return Status::Internal("fault injection storage: a waiting poll of the target returned nothing");
      }
      continue;
    }
    // A release is scheduled: run the loop, taking in the target's completions between its tasks.
    Status polled;
    COLIBRI_RETURN_IF_ERROR(loop_->RunUntil([&] {
      if (polled.ok() && target()->outstanding() > 0) polled = PollTarget(false);
      return !polled.ok() || !ready_.empty() || handed_over_ != handed_before;
    }));
    COLIBRI_RETURN_IF_ERROR(polled);
    if (ready_.empty() && handed_over_ == handed_before) {
      return Status::Internal("fault injection storage: reads outstanding but the event loop ran dry");
    }
  }
  HandOver(out);
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// FaultInjectionTransfer

FaultInjectionTransfer::FaultInjectionTransfer(engine::TransferBackend* target, const FaultSpec& spec, uint64_t seed,
                                               const engine::Clock* clock, FaultLog* log)
    : TransferWrapper(target), spec_(spec), clock_(clock), log_(log), rng_(DeriveSeed(seed, "fault_transfer")) {}

const engine::TransferCounters& FaultInjectionTransfer::counters() const {
  return spec_.transfer_fail.on() ? counters_ : target()->counters();
}

bool FaultInjectionTransfer::PoolFails(const char* what, uint64_t budget_bytes, uint64_t slot_bytes,
                                       std::string* message) {
  if (budget_bytes == 0 || !DrawFault(spec_.transfer_oom, &rng_)) return false;
  const std::string pool = std::string(what) + " of " + std::to_string(budget_bytes) + " bytes in " +
                           std::to_string(slot_bytes) + "-byte slots";
  *message = pool + ": device out of memory (injected transfer.oom)";
  if (log_ != nullptr) log_->Append(clock_ != nullptr ? clock_->Now() : 0, FaultKind::kTransferOom, pool);
  return true;
}

Result<std::unique_ptr<engine::SlabPool>> FaultInjectionTransfer::CreateDevicePool(uint64_t budget_bytes,
                                                                                   uint64_t slot_bytes) {
  std::string message;
  if (PoolFails("device pool", budget_bytes, slot_bytes, &message)) return Status::InvalidArgument(message);
  return target()->CreateDevicePool(budget_bytes, slot_bytes);
}

Result<std::unique_ptr<engine::SlabPool>> FaultInjectionTransfer::CreateHostPool(uint64_t budget_bytes,
                                                                                 uint64_t slot_bytes) {
  std::string message;
  if (PoolFails("host pool", budget_bytes, slot_bytes, &message)) return Status::InvalidArgument(message);
  return target()->CreateHostPool(budget_bytes, slot_bytes);
}

Status FaultInjectionTransfer::Copy(std::byte* device_dst, const std::byte* host_src, uint64_t bytes, uint64_t tag) {
  if (!spec_.transfer_fail.on()) return target()->Copy(device_dst, host_src, bytes, tag);
  uint64_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = copies_.size();
    copies_.emplace_back();
  }
  Status copied = target()->Copy(device_dst, host_src, bytes, slot);
  if (!copied.ok()) {
    free_slots_.push_back(slot);
    return copied;
  }
  copies_[slot] = Copied{tag, DrawFault(spec_.transfer_fail, &rng_)};
  return Status::Ok();
}

Status FaultInjectionTransfer::Poll(bool wait, std::vector<engine::TransferCompletion>* out) {
  if (!spec_.transfer_fail.on()) return target()->Poll(wait, out);
  std::vector<engine::TransferCompletion> completions;
  COLIBRI_RETURN_IF_ERROR(target()->Poll(wait, &completions));
  for (engine::TransferCompletion& c : completions) {
    const uint64_t slot = c.tag;
    if (slot >= copies_.size()) {
      return Status::Internal("fault injection transfer: the target completed a copy it was not given (tag " +
                              std::to_string(slot) + ")");
    }
    const Copied copy = copies_[slot];
    free_slots_.push_back(slot);
    c.tag = copy.tag;
    if (copy.fail && c.status.ok()) {
      const std::string what = "copy of " + std::to_string(c.bytes) + " bytes (tag " + std::to_string(c.tag) + ")";
      c.status = Status::IoError(what + ": transfer failed (injected transfer.fail)");
      if (log_ != nullptr) log_->Append(c.complete_ns, FaultKind::kTransferFail, what);
    }
    if (c.status.ok()) {
      ++counters_.copies;
      counters_.copied_bytes += c.bytes;
    }
    out->push_back(std::move(c));
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// FaultInjectionCompute

FaultInjectionCompute::FaultInjectionCompute(engine::ComputeBackend* target, const FaultSpec& spec, uint64_t seed,
                                             const engine::Clock* clock, FaultLog* log)
    : ComputeWrapper(target), spec_(spec), clock_(clock), log_(log), rng_(DeriveSeed(seed, "fault_compute")) {}

Status FaultInjectionCompute::ExpertFfn(const engine::ExpertView& expert, const float* x, size_t tokens, float* y) {
  if (!spec_.compute_fail.on() || !RunsKernel(target()->caps(), expert, x, tokens, y) ||
      !DrawFault(spec_.compute_fail, &rng_)) {
    return target()->ExpertFfn(expert, x, tokens, y);
  }
  const std::string what = "expert FFN of " + std::to_string(tokens) + " tokens (hidden " +
                           std::to_string(expert.layout->hidden) + ", intermediate " +
                           std::to_string(expert.layout->intermediate) + ")";
  if (log_ != nullptr) log_->Append(clock_ != nullptr ? clock_->Now() : 0, FaultKind::kComputeFail, what);
  return Status::Internal(what + ": kernel failed (injected compute.fail)");
}

std::unique_ptr<engine::StorageBackend> WithFaults(std::unique_ptr<engine::StorageBackend> backend,
                                                   const FaultSpec& spec, uint64_t seed, engine::EventLoop* loop,
                                                   FaultLog* log) {
  auto injector = std::make_unique<FaultInjectionStorage>(backend.get(), spec, seed, loop, log);
  return std::make_unique<engine::OwningStorage>(std::move(backend), std::move(injector));
}

std::unique_ptr<engine::TransferBackend> WithFaults(std::unique_ptr<engine::TransferBackend> backend,
                                                    const FaultSpec& spec, uint64_t seed, const engine::Clock* clock,
                                                    FaultLog* log) {
  auto injector = std::make_unique<FaultInjectionTransfer>(backend.get(), spec, seed, clock, log);
  return std::make_unique<engine::OwningTransfer>(std::move(backend), std::move(injector));
}

std::unique_ptr<engine::ComputeBackend> WithFaults(std::unique_ptr<engine::ComputeBackend> backend,
                                                   const FaultSpec& spec, uint64_t seed, const engine::Clock* clock,
                                                   FaultLog* log) {
  auto injector = std::make_unique<FaultInjectionCompute>(backend.get(), spec, seed, clock, log);
  return std::make_unique<engine::OwningCompute>(std::move(backend), std::move(injector));
}

}  // namespace colibri::sim
