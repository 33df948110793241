// Measuring the engine's own host work for a measured machine profile
// (sim/host_work_fit.h): the real engine (engine::LocalEngine: io_uring,
// CpuCompute) runs layer batches of 1 to 256 tokens on a small synthetic
// model of the studied router shape (experts, top-k, hidden; a tiny
// intermediate size, since the FFNs are not what is measured here), once
// with every expert resident in L2 (no reads: routing, scheduling, gather
// and aggregation alone) and once with no L2 (every expert read: the cost of
// submitting reads). The submission system calls themselves are the storage
// grid's (ReadGridPoint::submit_ns, charged per read by SimHostWork): given
// `read_submit_ns`, the reads a batch submits during its scheduling step
// (as many as the staging slots allow) are taken out of that step before
// the fit, so they are not counted twice. The gate GEMV is timed apart on CpuCompute (it is also
// the profile's gate table), and each step is fitted, once per thread count:
// the compute pool's dispatch is part of the routing step and of every
// batch's kernels, and its cost depends on how many workers it wakes.
//
// These are synthetic micro-workloads, one batch shape at a time: nothing
// like the fidelity harness's whole workloads (replay/fidelity.h).
// Ownership: writes its model under work_dir (removed afterwards).
// Thread-safety: one call at a time per work_dir. Errors: Status values.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "colibri/engine/clock.h"
#include "colibri/sim/hardware.h"
#include "colibri/sim/host_work_fit.h"
#include "colibri/status.h"

namespace colibri::calibrate {

struct HostWorkRunsOptions {
  std::string work_dir;                 // the synthetic model goes here
  uint32_t experts = 64;
  uint32_t top_k = 4;
  uint32_t hidden = 2048;
  std::vector<uint32_t> tokens = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  uint32_t repeats = 5;                 // batches per token count and layer
  std::vector<uint32_t> threads = {1};  // CpuCompute's in the engine runs, one fit each; also the gate table's columns
  uint64_t seed = 1;
  std::function<void(size_t, size_t)> progress;  // (done, total); may be empty
  // The cost of submitting one read of the given size as the depth-th in
  // flight (sim::ReadSubmitNs of the measured grid); may be empty (nothing
  // taken out).
  std::function<engine::TimeNs(uint64_t read_bytes, uint32_t depth)> read_submit_ns;
};

// The engine runs at one thread count.
struct HostWorkAtThreads {
  uint32_t threads = 0;
  std::vector<sim::HostWorkSample> samples;
  sim::HostWorkFit fit;                 // fit.profile.threads set
};

struct HostWorkMeasurement {
  std::vector<HostWorkAtThreads> runs;  // one per thread count, in the options' order
  std::vector<sim::KernelTimes> gate;   // the gate GEMV's median per token count, one entry per thread count
};

Result<HostWorkMeasurement> MeasureHostWork(const HostWorkRunsOptions& options);

}  // namespace colibri::calibrate
