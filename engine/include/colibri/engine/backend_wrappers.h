// StorageWrapper, TransferWrapper, ComputeWrapper: backends that forward every
// call to a target backend, in the style of LevelDB's EnvWrapper. A decorator
// (fault injection, a check, a counter) derives from one and overrides only
// the methods it changes; everything else, including the interface's
// defaulted methods (StorageBackend::RegisterBuffers,
// TransferBackend::CreateHostPool), reaches the target unchanged, so a
// wrapper that overrides nothing behaves exactly as its target (same
// completions, same times, same caps and counters).
//
// Ownership: a wrapper borrows its target, which must outlive it; destroying
// a wrapper does nothing to the target (reads or copies in flight stay in
// the target, whose own destructor waits for or drops them, storage.h and
// transfer.h). Thread-safety: as the wrapped interface (one engine thread).
// Errors: the target's, passed on as they are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "colibri/engine/compute.h"
#include "colibri/engine/slab_pool.h"
#include "colibri/engine/storage.h"
#include "colibri/engine/transfer.h"
#include "colibri/status.h"

namespace colibri::engine {

class StorageWrapper : public StorageBackend {
 public:
  // `target` must not be null.
  explicit StorageWrapper(StorageBackend* target) : target_(target) {}

  StorageBackend* target() const { return target_; }

  const StorageCaps& caps() const override { return target_->caps(); }
  const StorageCounters& counters() const override { return target_->counters(); }
  Status Submit(const ReadRequest& request) override { return target_->Submit(request); }
  Status Poll(bool wait, std::vector<ReadCompletion>* out) override { return target_->Poll(wait, out); }
  size_t outstanding() const override { return target_->outstanding(); }
  Status RegisterBuffers(const std::vector<MemoryRegion>& regions) override {
    return target_->RegisterBuffers(regions);
  }
  const std::string& warning() const override { return target_->warning(); }

 private:
  StorageBackend* const target_;
};

class TransferWrapper : public TransferBackend {
 public:
  // `target` must not be null.
  explicit TransferWrapper(TransferBackend* target) : target_(target) {}

  TransferBackend* target() const { return target_; }

  const TransferCaps& caps() const override { return target_->caps(); }
  const TransferCounters& counters() const override { return target_->counters(); }
  Result<std::unique_ptr<SlabPool>> CreateDevicePool(uint64_t budget_bytes, uint64_t slot_bytes) override {
    return target_->CreateDevicePool(budget_bytes, slot_bytes);
  }
  Result<std::unique_ptr<SlabPool>> CreateHostPool(uint64_t budget_bytes, uint64_t slot_bytes) override {
    return target_->CreateHostPool(budget_bytes, slot_bytes);
  }
  Status Copy(std::byte* device_dst, const std::byte* host_src, uint64_t bytes, uint64_t tag) override {
    return target_->Copy(device_dst, host_src, bytes, tag);
  }
  Status Poll(bool wait, std::vector<TransferCompletion>* out) override { return target_->Poll(wait, out); }
  size_t outstanding() const override { return target_->outstanding(); }

 private:
  TransferBackend* const target_;
};

class ComputeWrapper : public ComputeBackend {
 public:
  // `target` must not be null.
  explicit ComputeWrapper(ComputeBackend* target) : target_(target) {}

  ComputeBackend* target() const { return target_; }

  const ComputeCaps& caps() const override { return target_->caps(); }
  Status ExpertFfn(const ExpertView& expert, const float* x, size_t tokens, float* y) override {
    return target_->ExpertFfn(expert, x, tokens, y);
  }
  Status GateGemv(const float* weight, const float* bias, uint32_t experts, uint32_t hidden, const float* x,
                  size_t tokens, float* logits) override {
    return target_->GateGemv(weight, bias, experts, hidden, x, tokens, logits);
  }

 private:
  ComputeBackend* const target_;
};

// OwningWrapper: a forwarding wrapper that owns the backends it forwards
// through, so a wrapped backend travels as one unique_ptr: `bottom` alone (a
// plain wrapper over it), or `top` wrapping `bottom` (e.g. a fault-injecting
// wrapper borrowing its target), calls going to `top`. Destroys `top` before
// `bottom`.
template <typename Wrapper, typename Interface>
class OwningWrapper final : public Wrapper {
 public:
  explicit OwningWrapper(std::unique_ptr<Interface> bottom, std::unique_ptr<Interface> top = nullptr)
      : Wrapper(top != nullptr ? top.get() : bottom.get()), bottom_(std::move(bottom)), top_(std::move(top)) {}

 private:
  std::unique_ptr<Interface> bottom_;
  std::unique_ptr<Interface> top_;  // declared last: destroyed first
};

using OwningStorage = OwningWrapper<StorageWrapper, StorageBackend>;
using OwningTransfer = OwningWrapper<TransferWrapper, TransferBackend>;
using OwningCompute = OwningWrapper<ComputeWrapper, ComputeBackend>;

}  // namespace colibri::engine
