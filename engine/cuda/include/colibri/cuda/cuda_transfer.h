// CudaTransfer: the engine's host-to-device tier on a CUDA GPU
// (engine::TransferBackend; the contract is in colibri/engine/transfer.h and
// tests/engine/transfer_conformance.h). Exposes no CUDA types.
//
// Copies: cudaMemcpyAsync host -> device on `copy_streams` non-blocking
// streams taken round-robin, with an event recorded after each copy; Poll()
// hands a copy over once its event has completed (cudaEventQuery, or
// cudaEventSynchronize on the oldest copy when waiting and none is done).
// submit_ns is the clock when Copy() enqueued the copy; complete_ns is the
// clock when Poll() saw it done (an upper bound of the true completion time,
// never before submit_ns, never decreasing). A source in pinned memory
// (AllocatePinnedHost) is copied asynchronously and must stay unchanged until
// its copy is handed over; a pageable source is staged by CUDA before Copy()
// returns (slower, and Copy() blocks meanwhile).
//
// The L1 pool (CreateDevicePool) is ONE cudaMalloc of the whole budget (plus
// up to 4 KiB to align the base up: cudaMalloc promises only 256 bytes),
// carved into slots (SlabPool::AllocateAligned): slot addresses are device addresses,
// to be handed to CudaCompute as they are; touching them on the host faults,
// as it should. The pool frees its device memory when destroyed (it may
// outlive the transfer). The host pools (CreateHostPool: the engine's L2 and
// staging slots, where NVMe reads land and copies start) are pinned memory
// from cudaHostAlloc, aligned up to a page the same way, so copies from them are asynchronous DMA
// and O_DIRECT reads can land in them.
//
// Errors are Status values, never crashes: kNotFound "no CUDA device: <why>"
// without a device or driver; kInvalidArgument for bad arguments, a budget
// the device cannot hold, or a destination that is neither a pool slot of
// this transfer nor device memory; kUnsupported for a device in a mode the
// engine cannot use; kInternal for other CUDA failures (a failed copy is
// handed over by Poll() with its error status).
// Thread-safety: not thread-safe; one engine thread copies and polls. Each
// call makes the transfer's device current on the calling thread.
// Ownership: owns its streams and events;
// borrows the clock, which must outlive it. Destruction waits for the copies
// in flight; pools it made free their own memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "colibri/engine/clock.h"
#include "colibri/engine/slab_pool.h"
#include "colibri/engine/transfer.h"
#include "colibri/status.h"

namespace colibri::cuda {

// Checks that the engine can use CUDA device `device` and makes it current on
// the calling thread (creating its primary context). Errors: kNotFound
// "no CUDA device: <why>" without a device or driver; kInvalidArgument for an
// ordinal out of range; kUnsupported when the device's compute mode is
// "prohibited", or when MIG is in the way (the message says so and how to fix
// it): CUDA sees no device while NVML sees a GPU with MIG enabled (no MIG
// instance visible to this process), or the device's GPU has MIG enabled
// (DeviceInfo::mig_enabled) and its context cannot be created; kInternal
// otherwise.
Status OpenCudaDevice(int device);

// Page-locked host memory from cudaHostAlloc (portable: usable with every
// device), freed with cudaFreeHost on destruction. Move-only.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  std::byte* data() const { return data_; }
  uint64_t bytes() const { return bytes_; }

 private:
  friend class CudaTransfer;
  PinnedBuffer(std::byte* data, uint64_t bytes) : data_(data), bytes_(bytes) {}
  void Free();
  std::byte* data_ = nullptr;
  uint64_t bytes_ = 0;
};

class CudaTransfer final : public engine::TransferBackend {
 public:
  static constexpr uint32_t kMaxCopyStreams = 16;

  // A transfer to CUDA device `device` over `copy_streams` (1..16) streams,
  // keeping time on `clock`. Errors: a null clock or a stream count out of
  // range (kInvalidArgument, checked before CUDA is touched), then those of
  // OpenCudaDevice, then kInternal if streams cannot be made.
  static Result<std::unique_ptr<CudaTransfer>> Create(int device, const engine::Clock* clock,
                                                      uint32_t copy_streams = 2);
  ~CudaTransfer() override;
  CudaTransfer(const CudaTransfer&) = delete;
  CudaTransfer& operator=(const CudaTransfer&) = delete;

  // name "cuda", device_is_host = false, delivers_data = true.
  const engine::TransferCaps& caps() const override { return caps_; }
  const engine::TransferCounters& counters() const override { return counters_; }
  // budget / slot_bytes slots of one cudaMalloc (see the file comment for the
  // slot addresses). Errors as SlabPool's (budget below one slot, slot size 0
  // or not a multiple of 4096: kInvalidArgument); a budget the device cannot
  // allocate is kInvalidArgument, with the device's free memory in the message.
  Result<std::unique_ptr<engine::SlabPool>> CreateDevicePool(uint64_t budget_bytes, uint64_t slot_bytes) override;
  // budget / slot_bytes slots of pinned host memory. Errors as SlabPool's,
  // and kInvalidArgument when the memory cannot be pinned (the size in the
  // message: a large L2 may exceed what the system lets a process lock).
  Result<std::unique_ptr<engine::SlabPool>> CreateHostPool(uint64_t budget_bytes, uint64_t slot_bytes) override;
  // Enqueues the copy. `device_dst` is a pool slot address of this transfer
  // (with [dst, dst + bytes) inside that pool) or device memory. Errors
  // (nothing queued): null pointers or 0 bytes, a destination out of bounds
  // (kInvalidArgument); an enqueue failure (kInternal).
  Status Copy(std::byte* device_dst, const std::byte* host_src, uint64_t bytes, uint64_t tag) override;
  Status Poll(bool wait, std::vector<engine::TransferCompletion>* out) override;
  size_t outstanding() const override;

  // `bytes` of pinned host memory (for a pinned L2 pool). Errors: 0 bytes
  // (kInvalidArgument); cudaHostAlloc failing (kInvalidArgument, out of memory).
  Result<PinnedBuffer> AllocatePinnedHost(uint64_t bytes);
  // Checks that [address, address + bytes) is device memory this transfer
  // can copy to and returns `address`: inside one of its live L1 pools, or
  // device memory of its device (or managed memory). kInvalidArgument
  // otherwise, e.g. a range that runs past the end of a pool.
  Result<std::byte*> DeviceAddress(const std::byte* address, uint64_t bytes) const;
  // Synchronously copies `bytes` at `device_src` (as for DeviceAddress) to
  // host memory, for tests and debugging. Does not wait for copies in flight:
  // read a destination after its copy was handed over.
  Status ReadBack(const std::byte* device_src, uint64_t bytes, std::byte* host_dst) const;

  int device() const { return device_; }
  uint32_t copy_streams() const { return static_cast<uint32_t>(streams_.size()); }

 private:
  // An enqueued copy; `event` (a cudaEvent_t) is null once the copy is known
  // to be done, with `status` its outcome.
  struct Pending {
    uint64_t tag = 0;
    uint64_t bytes = 0;
    engine::TimeNs submit_ns = 0;
    void* event = nullptr;
    Status status;
  };
  // A live L1 pool's device memory (removed when the pool is destroyed).
  struct DeviceRange {
    const std::byte* base = nullptr;
    uint64_t bytes = 0;
  };

  CudaTransfer(int device, const engine::Clock* clock);
  Status MakeStreams(uint32_t copy_streams);
  Result<void*> AcquireEvent();
  void ReleaseEvent(void* event);
  // Moves the completed copies of pending_ to `out`, in submission order.
  size_t HandOverCompleted(std::vector<engine::TransferCompletion>* out);

  int device_;
  const engine::Clock* clock_;
  engine::TransferCaps caps_{"cuda", /*device_is_host=*/false, /*delivers_data=*/true};
  engine::TransferCounters counters_;
  std::vector<void*> streams_;  // cudaStream_t
  uint32_t next_stream_ = 0;
  std::vector<void*> free_events_;  // cudaEvent_t, reused
  std::vector<Pending> pending_;    // in submission order
  std::shared_ptr<std::vector<DeviceRange>> pools_;  // shared with the pools' release functions
};

}  // namespace colibri::cuda
