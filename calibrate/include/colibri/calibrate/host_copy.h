// Measuring host memory copies (engine::MakeCpuTransfer: the L2 -> L1 copy a
// CPU machine makes when it has an L1 host pool) by size, fitted to the
// generation-0 pcie profile's per_copy_ns + bytes / rate (sim_transfer.h).
// Ownership: allocates its pools while it runs. Thread-safety: one call at a
// time. Errors: Status values from the transfer backend.
#pragma once

#include <cstdint>
#include <vector>

#include "colibri/engine/clock.h"
#include "colibri/status.h"

namespace colibri::calibrate {

struct HostCopySize {
  uint64_t bytes = 0;
  engine::TimeNs median_ns = 0;
  double fit_error = 0;  // (fitted - measured) / measured
};

struct HostCopies {
  std::vector<HostCopySize> sizes;
  engine::TimeNs per_copy_ns = 0;
  uint64_t bytes_per_s = 0;
};

// `copies` copies of each size (ascending multiples of 4096).
Result<HostCopies> MeasureHostCopies(const std::vector<uint64_t>& sizes, uint32_t copies);

}  // namespace colibri::calibrate
