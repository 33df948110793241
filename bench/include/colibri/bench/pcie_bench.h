// The `colibri bench pcie` suite (docs/BENCHMARKS.md): host-to-device
// bandwidth for expert-sized copies on a CUDA GPU, ours against a plain
// cudaMemcpy (HostToDeviceBench, per size), plus the small-copy latency.
// Goal: ours / pageable cudaMemcpy >= 0.9 at every size. With profile_out,
// the figures are written as hardware profiles (profile_out.h).
//
// Ownership: the call owns its HostToDeviceBench. Thread-safety: one thread.
// Errors: kInvalidArgument for no sizes; HostToDeviceBench's (kNotFound "no
// CUDA device: ...", kUnsupported "built without CUDA"); the profile writers'.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "colibri/bench/harness.h"
#include "colibri/status.h"

namespace colibri::bench {

struct PcieBenchOptions {
  std::vector<uint64_t> sizes_bytes;  // copy sizes
  uint32_t iterations = 50;           // copies per size, way and repeat
  int repeats = 3;                    // best of
  int cuda_device = 0;
  uint32_t copy_streams = 2;          // CudaTransfer streams (the engine's default)
  uint32_t in_flight = 8;             // CudaTransfer copies in flight
  uint32_t small_copies = 200;        // kSmallCopyBytes copies for the latency
  std::string profile_out;            // a directory to write profiles into; empty: none
};

// The suite's figures: device, method, goal, goal_met, results (per size:
// size_bytes, cuda_transfer_pinned, memcpy_pageable, memcpy_pinned,
// ours_over_pageable, ours_over_pinned, goal_met), small_copy,
// profiles_written (null, or the paths). Progress: one step per size.
Result<Json> RunPcieBench(const PcieBenchOptions& options, const Observer& observer = {});

}  // namespace colibri::bench
