// How far this machine's storage is, at this moment, from what a profile says
// of it: a short closed loop of random O_DIRECT reads of one size at one
// depth on a file (the fidelity model's experts.bin), through UringStorage
// into registered buffers (the engine's path, as `colibri calibrate`
// measures), beside the same closed loop on the profile's modelled drive
// (sim::SimulateClosedLoopReads). `colibri fidelity` probes before and after
// each configuration's real runs: on a virtual disk whose throughput moves
// 2x within minutes, the drive's change between calibration and the runs is
// part of every nvme_read error, and the probe says how large a part.
//
// drift = (profile p50 - measured p50) / measured p50, the same sign
// convention as fidelity's errors: +50% means the profile's reads are 50%
// slower than the drive's are now, so nvme_read is predicted about that
// much too long from the drive's change alone.
//
// Ownership: opens the file for the call only. Thread-safety: one call at a
// time per file (it times the drive). Errors: Status values naming the file
// (missing, smaller than one read, a failed read) or the model's.
#pragma once

#include <cstdint>
#include <string>

#include "colibri/engine/clock.h"
#include "colibri/sim/hardware.h"
#include "colibri/status.h"

namespace colibri::replay {

struct StorageDriftOptions {
  std::string file;                      // read at random aligned offsets; never written
  uint64_t read_bytes = 0;               // a positive multiple of 4096, at most the file's size
  uint32_t queue_depth = 1;
  engine::TimeNs duration_ns = 400'000'000;  // once min_reads completed
  uint64_t min_reads = 16;
  uint64_t max_reads = 4000;
  uint64_t seed = 1;
};

struct StorageDrift {
  uint64_t read_bytes = 0;
  uint32_t queue_depth = 0;
  uint64_t reads = 0;                    // measured
  engine::TimeNs measured_p50_ns = 0, profile_p50_ns = 0;
  uint64_t measured_bytes_per_s = 0, profile_bytes_per_s = 0;
  double drift = 0;                      // (profile p50 - measured p50) / measured p50
};

Result<StorageDrift> ProbeStorageDrift(const StorageDriftOptions& options, const sim::NvmeProfile& profile);

}  // namespace colibri::replay
