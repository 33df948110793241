// HostMemoryModel: memory pressure on a machine whose engine keeps its dense
// weights memory-mapped in host RAM beside the expert cache and the KV cache
// (hardware.h, HostMemoryProfile). When they do not fit the RAM available to
// the process, the kernel reclaims file pages -- the mapped dense weights --
// and the engine faults them back from the drive, one synchronous small
// read per major fault, in every forward pass.
//
// Model (docs/HARDWARE_PROFILES.md, "Host memory"):
//  - resident demand D = expert cache + mapped dense weights + KV cache
//    (HostMemoryDemand; the caller sums them for the pass);
//  - shortfall S = max(0, D - available_bytes);
//  - the dense weights of the layers are scanned in full every pass; the
//    kernel keeps what fits and the rest is read again, so a pass faults
//    F = min(S, layers' dense bytes) bytes, shared by the layers in
//    proportion to their dense bytes: a layer of d bytes faults
//    ceil(F x d / dense / fault_read_bytes) major faults (anonymous memory --
//    the expert cache, the KV cache -- is not reclaimed: the model has no swap);
//  - each fault is one read of fault_read_bytes alone on the drive (the
//    faulting thread waits for it): its time is the drive model's mean
//    latency for that read at queue depth 1 (SimulateClosedLoopReads on the
//    machine's nvme profile, read grid or channel model alike), integer ns.
// A demand that fits costs nothing. Integer arithmetic throughout (the
// proportional share in 128-bit).
//
// Ownership: a value (copies what it needs of the profiles). Thread-safety:
// immutable after Make; const methods may be called concurrently.
// Errors: Make's, as Status values naming the machine's field.
#pragma once

#include <cstdint>
#include <string>

#include "colibri/sim/hardware.h"
#include "colibri/status.h"

namespace colibri::sim {

// What a pass keeps resident in host memory, in bytes.
struct HostMemoryDemand {
  uint64_t expert_cache_bytes = 0;  // the L2 budget
  uint64_t layer_dense_bytes = 0;   // the MoE layers' dense parts, summed: the pages scanned every pass
  uint64_t other_dense_bytes = 0;   // other mapped weights (embeddings, LM head): resident, not charged
  uint64_t kv_cache_bytes = 0;      // the KV cache at the pass's context
  uint64_t total() const { return expert_cache_bytes + layer_dense_bytes + other_dense_bytes + kv_cache_bytes; }
};

// One layer's page faults in one pass.
struct LayerFaults {
  uint64_t faulted_bytes = 0;  // faults x fault_read_bytes
  uint64_t faults = 0;
  TimeNs fault_ns = 0;         // faults x FaultNs()
};

class HostMemoryModel {
 public:
  // `profile` must be present. `seed` draws the drive's latency samples (a
  // drive with jitter). Errors: InvalidArgument for an absent profile or a
  // fault_read_bytes of 0 or not a multiple of 4096 (naming `machine`), and
  // the drive model's errors for the fault read.
  static Result<HostMemoryModel> Make(const std::string& machine, const HostMemoryProfile& profile,
                                      const NvmeProfile& nvme, uint64_t seed);

  // S above: the bytes of demand beyond available_bytes.
  uint64_t ShortfallBytes(const HostMemoryDemand& demand) const;
  // The faults of a layer whose dense part is `layer_bytes`, in a pass of `demand`.
  LayerFaults Faults(const HostMemoryDemand& demand, uint64_t layer_bytes) const;
  // One major fault: the drive's mean latency for fault_read_bytes at queue depth 1.
  TimeNs FaultNs() const { return fault_ns_; }
  const HostMemoryProfile& profile() const { return profile_; }

 private:
  HostMemoryModel(const HostMemoryProfile& profile, TimeNs fault_ns) : profile_(profile), fault_ns_(fault_ns) {}
  HostMemoryProfile profile_;
  TimeNs fault_ns_ = 0;
};

}  // namespace colibri::sim
