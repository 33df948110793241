// TransferBackend: the host-to-device tier (PCIe). Copies expert blocks from
// L2 host slots into L1 device slots and owns the device memory the L1 pool
// lives in.
//
// Implementations: CpuTransfer (no GPU: the "device" pool is host memory and a
// copy is a memcpy), CudaTransfer (engine/cuda, when built with CUDA:
// cudaMemcpyAsync on copy streams) and the modelled SimTransfer. Contract (tested over every
// implementation, tests/engine/transfer_conformance.h): every accepted Copy()
// completes exactly once, returned by Poll() with its tag; Poll appends to
// its output; completions may come in any order (copy engines run in
// parallel); submit_ns <= complete_ns, and nothing is handed over before it
// completes; a null pointer or a 0-byte copy is InvalidArgument and queues
// nothing; the source is never written; with delivers_data the destination
// holds the source bytes.
// Thread-safety: not thread-safe; one engine thread copies and polls.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "colibri/engine/clock.h"
#include "colibri/engine/slab_pool.h"
#include "colibri/status.h"

namespace colibri::engine {

struct TransferCaps {
  const char* name = "";
  bool device_is_host = true;  // L1 slots are host memory (CpuTransfer)
  bool delivers_data = true;   // copies move bytes (false: a model that only keeps time)
};

struct TransferCompletion {
  uint64_t tag = 0;
  Status status;
  uint64_t bytes = 0;
  TimeNs submit_ns = 0;
  TimeNs complete_ns = 0;
};

struct TransferCounters {
  uint64_t copies = 0;
  uint64_t copied_bytes = 0;
};

class TransferBackend {
 public:
  virtual ~TransferBackend() = default;
  virtual const TransferCaps& caps() const = 0;
  virtual const TransferCounters& counters() const = 0;
  // The L1 pool: `budget_bytes` of device memory carved into `slot_bytes` slots
  // (0 = no L1 tier). Called once at start-up.
  virtual Result<std::unique_ptr<SlabPool>> CreateDevicePool(uint64_t budget_bytes, uint64_t slot_bytes) = 0;
  // A pool of the host memory copies start from fastest (the engine's L2 and
  // staging slots, where NVMe reads land): heap memory by default, pinned
  // memory for a GPU transfer. Page-aligned. Errors as SlabPool::Create's.
  virtual Result<std::unique_ptr<SlabPool>> CreateHostPool(uint64_t budget_bytes, uint64_t slot_bytes) {
    return SlabPool::Create(budget_bytes, slot_bytes);
  }
  // Copies `bytes` from host memory to a device slot.
  virtual Status Copy(std::byte* device_dst, const std::byte* host_src, uint64_t bytes, uint64_t tag) = 0;
  virtual Status Poll(bool wait, std::vector<TransferCompletion>* out) = 0;
  virtual size_t outstanding() const = 0;
};

// memcpy into a host-memory "device" pool; copies complete at once.
std::unique_ptr<TransferBackend> MakeCpuTransfer(const Clock* clock);

}  // namespace colibri::engine
