// Hardware profiles: the parameters of the modelled NVMe drive, PCIe link and
// compute device, and the machines that combine one of each by component id.
// Every figure carries where it came from (see docs/HARDWARE_PROFILES.md):
// profiles are data files in sim/profiles/, built into the binary, and user
// files can be loaded the same way.
//
// Units are in the names; bandwidths are integer bytes per second and times
// integer nanoseconds, so the models are exact integer arithmetic.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "colibri/engine/clock.h"

namespace colibri::sim {

using engine::TimeNs;

// How a figure is known.
enum class Basis { kSpec, kMeasured, kDerived, kAssumed };

// Provenance of one parameter of a component.
struct Figure {
  std::string field;   // the parameter's name in the profile file, e.g. "read_bytes_per_s"
  Basis basis = Basis::kAssumed;
  std::string source;  // citation (document, URL, or "../shared/design/HARDWARE.md: <row>")
  std::string note;    // how it was derived, when derived or assumed
};

// A latency added to each operation's service time, drawn per operation from
// a log-normal distribution fitted to p50 and p99 (p99 == p50: no jitter, the
// latency is exactly p50).
struct LatencyDistribution {
  TimeNs p50_ns = 0;
  TimeNs p99_ns = 0;
  bool has_jitter() const { return p99_ns > p50_ns; }
};

struct NvmeProfile {
  std::string id;    // e.g. "optane-p5800x"
  std::string name;  // e.g. "Intel Optane SSD DC P5800X 800 GB (PCIe 4.0 x4)"
  uint32_t channels = 1;                 // internal units serving reads in parallel
  uint32_t queue_depth = 1;              // reads the device accepts in flight; more wait (queue_full)
  TimeNs per_op_ns = 0;                  // fixed channel occupancy per read
  uint64_t channel_read_bytes_per_s = 0; // one channel's transfer rate
  uint64_t read_bytes_per_s = 0;         // the whole device's (the link's) rate, shared by channels
  LatencyDistribution read_latency;      // added after service (the device's access latency)
  std::vector<Figure> figures;
};

struct PcieProfile {
  std::string id;    // e.g. "pcie-gen5-x16"
  std::string name;
  uint32_t generation = 0;               // 0 for "no link" (CPU compute: host memory is device memory)
  uint32_t lanes = 0;
  uint64_t pinned_bytes_per_s = 0;       // effective host-to-device rate from pinned memory, per copy engine
  uint64_t pageable_bytes_per_s = 0;     // from pageable memory
  TimeNs per_copy_ns = 0;                // fixed cost per copy (launch + DMA set-up)
  uint32_t copy_engines = 1;             // copies on one engine serialise
  std::vector<Figure> figures;
};

enum class ComputeKind { kGpu, kCpu };

struct ComputeProfile {
  std::string id;    // e.g. "h100-sxm"
  std::string name;
  ComputeKind kind = ComputeKind::kGpu;
  // Peak dense FLOP/s by weight dtype name ("fp32", "bf16", "fp16", "int8";
  // int8 figures are OP/s). A dtype missing here is an error when modelled.
  std::map<std::string, uint64_t> peak_flops_per_s;
  uint64_t memory_bytes_per_s = 0;       // device memory bandwidth
  TimeNs launch_ns = 0;                  // fixed cost per kernel (or per call on a CPU)
  uint64_t memory_bytes = 0;             // device memory capacity (bounds the L1 budget; 0 = unknown)
  std::vector<Figure> figures;
};

struct MachineProfile {
  std::string name;         // e.g. "h100-p5800x-gen5"
  std::string description;
  std::string nvme;         // component ids
  std::string pcie;
  std::string compute;
};

}  // namespace colibri::sim
