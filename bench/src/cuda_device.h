// What the GPU suites record about their CUDA device (built with CUDA only):
// the device as JSON, and the provenance of the profiles they write.
#pragma once

#if COLIBRI_HAVE_CUDA

#include "colibri/bench/harness.h"
#include "colibri/bench/profile_out.h"
#include "colibri/cuda/bench_reference.h"

namespace colibri::bench {

// {ordinal, name, pci_bus_id, compute_capability, memory_bytes,
// multiprocessors, l2_cache_bytes, runtime_version, driver_version};
// with_link adds async_engine_count (before the versions) and pcie_nvml (the
// link NVML reports, last).
Json CudaDeviceJson(const cuda::BenchDeviceInfo& info, bool with_link);

// This process's command line and the time now, on `info`'s device.
ProfileRun ProfileRunOn(const cuda::BenchDeviceInfo& info);

}  // namespace colibri::bench

#endif  // COLIBRI_HAVE_CUDA
