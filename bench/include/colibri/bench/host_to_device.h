// Host-to-device copies of expert-sized blocks on a CUDA GPU, three ways in
// the same run (`colibri bench pcie`; a link calibration reuses it):
//   cuda_transfer_pinned: ours, cuda::CudaTransfer::Copy from a pinned host
//     pool into device pool slots, `in_flight` copies at a time over the copy
//     streams, timed on engine::MonotonicClock from the first submit to the
//     last completion handed over by Poll;
//   memcpy_pageable: the reference, a plain synchronous cudaMemcpy from
//     malloc'd (touched) memory, what code without a transfer backend does;
//   memcpy_pinned: the ceiling, a synchronous cudaMemcpy from pinned memory.
// And the latency of small copies one at a time (the profile's per_copy_ns).
// No CUDA types here: without CUDA (COLIBRI_HAVE_CUDA 0) Create fails with
// kUnsupported "built without CUDA".
//
// Ownership: a HostToDeviceBench owns its clock and CudaTransfer (streams,
// events); each Measure* call allocates its pools and frees them before it
// returns. Thread-safety: none; one thread uses an instance. Errors: those of
// OpenCudaDevice (kNotFound "no CUDA device: ..."), kInvalidArgument for zero
// sizes or counts and for memory the device or the host cannot give
// (pinning), kInternal for other CUDA failures.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "colibri/status.h"

namespace colibri::bench {

// The small copy of the per-copy latency.
inline constexpr uint64_t kSmallCopyBytes = 4096;

struct CopyRate {
  uint64_t copies = 0;
  double seconds = 0;
  double bytes_per_s(uint64_t bytes) const {
    return seconds > 0 ? static_cast<double>(bytes) * static_cast<double>(copies) / seconds : 0;
  }
};

// The best of each way at one copy size.
struct HostToDeviceRates {
  uint64_t size_bytes = 0;
  CopyRate cuda_transfer_pinned;
  CopyRate memcpy_pageable;
  CopyRate memcpy_pinned;
};

struct SmallCopyLatencies {
  uint64_t bytes = kSmallCopyBytes;
  std::vector<int64_t> cuda_transfer_ns;  // CudaTransfer: Copy to its hand-over by Poll(wait), one at a time
  std::vector<int64_t> memcpy_pinned_ns;  // synchronous cudaMemcpy from pinned memory
};

class HostToDeviceBench {
 public:
  // A CudaTransfer to device `device` over `copy_streams` streams (1..16).
  static Result<std::unique_ptr<HostToDeviceBench>> Create(int device, uint32_t copy_streams);
  ~HostToDeviceBench();
  HostToDeviceBench(const HostToDeviceBench&) = delete;
  HostToDeviceBench& operator=(const HostToDeviceBench&) = delete;

  // Copies of `bytes` (in_flight host and device slots): after a warm-up of
  // each way, `repeats` rounds of `copies` copies per way, interleaved so
  // that drift hits the three alike; the best round of each.
  Result<HostToDeviceRates> MeasureSize(uint64_t bytes, uint32_t copies, int repeats, uint32_t in_flight);
  // `copies` kSmallCopyBytes copies one at a time each way, after 10 warm-up copies.
  Result<SmallCopyLatencies> MeasureSmallCopies(uint32_t copies);

 private:
  struct Impl;
  explicit HostToDeviceBench(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace colibri::bench
