#include "colibri/sim/host_memory.h"

#include <algorithm>
#include <numeric>

#include "colibri/sim/random.h"
#include "colibri/sim/read_grid.h"

namespace colibri::sim {
namespace {

constexpr uint64_t kPageBytes = 4096;
// Lone reads averaged for one fault's time: exact for a drive without jitter,
// a mean within a few percent of the distribution's for one with it.
constexpr uint64_t kFaultSampleReads = 256;

uint64_t CeilDiv(uint64_t a, uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace

Result<HostMemoryModel> HostMemoryModel::Make(const std::string& machine, const HostMemoryProfile& profile,
                                              const NvmeProfile& nvme, uint64_t seed) {
  const std::string name = "machine '" + machine + "'";
  if (!profile.present) return Status::InvalidArgument(name + ": no host_memory to model");
  if (profile.fault_read_bytes == 0 || profile.fault_read_bytes % kPageBytes != 0) {
    return Status::InvalidArgument(name + ": host_memory.fault_read_bytes " + std::to_string(profile.fault_read_bytes) +
                                   " must be a positive multiple of 4096");
  }
  auto reads = SimulateClosedLoopReads(nvme, profile.fault_read_bytes, /*queue_depth=*/1, kFaultSampleReads,
                                       DeriveSeed(seed, "host_memory_faults"));
  if (!reads.ok()) return reads.status().WithPrefix(name + ": host_memory.fault_read_bytes on nvme '" + nvme.id + "'");
  const std::vector<TimeNs>& ns = reads.value().latencies_ns;
  const TimeNs sum = std::accumulate(ns.begin(), ns.end(), TimeNs{0});
  const auto count = static_cast<TimeNs>(ns.size());
  return HostMemoryModel(profile, (sum + count / 2) / count);
}

uint64_t HostMemoryModel::ShortfallBytes(const HostMemoryDemand& demand) const {
  const uint64_t total = demand.total();
  return total > profile_.available_bytes ? total - profile_.available_bytes : 0;
}

LayerFaults HostMemoryModel::Faults(const HostMemoryDemand& demand, uint64_t layer_bytes) const {
  LayerFaults out;
  const uint64_t faulted_total = std::min(ShortfallBytes(demand), demand.layer_dense_bytes);
  if (faulted_total == 0 || layer_bytes == 0) return out;
  // This layer's share: faulted_total x layer_bytes / layer_dense_bytes, whole pages read per fault.
  const unsigned __int128 share = static_cast<unsigned __int128>(faulted_total) * layer_bytes;
  const auto share_bytes = static_cast<uint64_t>((share + demand.layer_dense_bytes - 1) / demand.layer_dense_bytes);
  out.faults = CeilDiv(std::min(share_bytes, layer_bytes), profile_.fault_read_bytes);
  out.faulted_bytes = out.faults * profile_.fault_read_bytes;
  out.fault_ns = static_cast<TimeNs>(out.faults) * fault_ns_;
  return out;
}

}  // namespace colibri::sim
