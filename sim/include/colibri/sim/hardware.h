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

// A measured read-latency table (written by `colibri calibrate`): for each
// read size, the latency distribution of random O_DIRECT reads kept at a
// fixed number in flight (the queue depth), as quantiles. SimStorage uses it
// instead of the channel model when present (sim_storage.h says how).
struct ReadGridPoint {
  uint64_t read_bytes = 0;
  uint32_t queue_depth = 0;             // reads in flight while measured, this one included
  uint64_t reads = 0;                   // samples behind the quantiles
  uint64_t bytes_per_s = 0;             // measured throughput (reads x read_bytes / elapsed)
  std::vector<TimeNs> latency_ns;       // submit -> complete at each of ReadGrid::quantiles
  // Median time the submitting thread spent inside StorageBackend::Submit
  // for one read (io_uring_submit: building and queueing the block requests,
  // which grows with the read's size); 0 when not measured (older profiles,
  // published grids). The engine's host work charges it per read issued
  // (sim::ReadSubmitNs); latency_ns already includes it.
  TimeNs submit_ns = 0;
};

// How reads issued at one instant (a burst: a layer batch's misses) draw
// their latencies from the grid: each its own uniform (independent), or one
// uniform for the burst (shared: the device is in one state for all of them,
// so a slow moment slows the whole burst). A closed loop issues its reads at
// distinct instants, so the grid's points hold either way; `colibri
// calibrate` measures bursts and keeps the mode that reproduces them.
enum class ReadGridBurst { kIndependent, kShared };

struct ReadGrid {
  std::vector<double> quantiles;        // strictly increasing, from 0 (the minimum) to 1 (the maximum)
  ReadGridBurst burst = ReadGridBurst::kIndependent;  // JSON "burst": "independent" (when absent) or "shared"
  std::vector<ReadGridPoint> points;    // by read_bytes, then queue_depth; every size has depth 1
  Figure figure;                        // provenance of the whole table
  bool empty() const { return points.empty(); }
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
  ReadGrid read_grid;                    // optional; when present SimStorage models reads from it
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

// Measured call times of one kernel shape by tokens per call (written by
// `colibri calibrate`): median ns of ExpertFfn (or GateGemv) calls with
// `tokens[i]` tokens, on `threads` worker threads. SimCompute interpolates
// (sim_compute.h says how).
struct KernelTimes {
  std::string dtype;              // weight dtype name (ExpertFfn); "fp32" for the gate
  uint32_t rows = 0;              // ExpertFfn: intermediate; GateGemv: experts
  uint32_t hidden = 0;
  uint32_t threads = 0;
  std::vector<uint32_t> tokens;   // strictly increasing, from >= 1
  std::vector<TimeNs> ns;         // median per call at tokens[i], > 0
};

struct KernelTable {
  std::vector<KernelTimes> entries;
  Figure figure;
  bool empty() const { return entries.empty(); }
};

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
  KernelTable ffn_table;                 // optional measured expert FFN times (replace the roofline)
  KernelTable gate_table;                // optional measured gate GEMV times
  std::vector<Figure> figures;
};

// The engine's own work on the host per layer batch (engine/host_work.h),
// measured by `colibri calibrate` from the real engine's step times; absent
// (all zero) in published profiles, where that work is modelled as free.
// Linear in what each step handles; per-unit costs in picoseconds so that
// they stay integers. One per CpuCompute thread count measured: the routing
// step's gate GEMV and every kernel call dispatch to the compute pool, whose
// wake-up is most of a small batch's routing at 2 threads on a VM (a 1-token
// gate GEMV: 0.4 us at 1 thread, 73.5 us at 2; measured 2026-12-02).
struct HostWorkProfile {
  bool present = false;
  uint32_t threads = 0;  // the engine's compute threads when measured; 0: not recorded (older profiles), fits any
  // The whole routing step (gate GEMV, scoring, top-k, capacity) as the
  // engine measured it on the calibrated router shape (experts x hidden).
  TimeNs routing_fixed_ns = 0;
  uint64_t routing_ps_per_logit = 0;     // per token x expert
  TimeNs scheduling_fixed_ns = 0;        // union, lookups, slot choices, read submission
  uint64_t scheduling_ps_per_expert = 0; // per distinct expert of the batch
  uint64_t scheduling_ps_per_assignment = 0;  // per (token, slot)
  uint64_t scheduling_ps_per_read = 0;   // per read submitted
  TimeNs scheduling_read_fixed_ns = 0;   // once per batch that submits any read (the first submission's cost)
  TimeNs gather_fixed_ns = 0;            // per expert computed: gathering its inputs, scattering its outputs
  uint64_t gather_ps_per_element = 0;    // per row x hidden element moved
  TimeNs aggregation_fixed_ns = 0;
  uint64_t aggregation_ps_per_element = 0;  // per token x slot x hidden element summed
  Figure figure;
};

// The host's memory as the engine sees it, for the memory-pressure model
// (sim/host_memory.h): optional, on machines whose engine keeps its dense
// weights memory-mapped in host RAM beside the expert cache (the phone);
// absent (present false), memory is never short and costs nothing.
struct HostMemoryProfile {
  bool present = false;
  uint64_t ram_bytes = 0;         // installed RAM (MemTotal); descriptive, bounds available_bytes
  uint64_t available_bytes = 0;   // RAM the engine's process can hold (MemAvailable before the run)
  uint64_t fault_read_bytes = 0;  // bytes one major page fault reads from the drive (a multiple of 4096)
  std::vector<Figure> figures;    // fields "host_memory.<name>"
};

// What machine a measured profile describes (sim/machine_identity.h reads
// this machine's); empty for published profiles.
struct MachineIdentity {
  std::string cpu_model;     // /proc/cpuinfo "model name"
  std::string cpu_flags;     // the ISA flags the engine's kernels care about, e.g. "avx2 avx512f avx512bw fma"
  uint32_t cores = 0;        // online CPUs
  uint64_t ram_bytes = 0;    // MemTotal
  std::string kernel;        // uname -r
  std::string block_device;  // the device under the measured file, e.g. "vda (virtio, rotational 0)"
  std::string measured_on;   // "2026-12-01"
  std::string commit;        // the colibri build's git commit
  bool empty() const { return cpu_model.empty(); }
};

struct MachineProfile {
  std::string name;         // e.g. "h100-p5800x-gen5"
  std::string description;
  std::string nvme;         // component ids
  std::string pcie;
  std::string compute;
  std::vector<HostWorkProfile> host_work;  // optional: at most one per thread count (HostWorkAtThreads)
  HostMemoryProfile host_memory;  // optional
  MachineIdentity identity;   // optional: set on measured profiles
};

}  // namespace colibri::sim
