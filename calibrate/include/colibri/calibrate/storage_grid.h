// Measuring this machine's storage for a measured nvme profile: random
// O_DIRECT reads through UringStorage (the engine's real backend) over a grid
// of read sizes x queue depths, on a file written for the purpose on the
// file system of a chosen directory (sim/read_grid.h's closed loop, so the
// model is measured exactly as the drive was). Each point becomes a
// ReadGridPoint; the grid model and a fitted channel model are then replayed
// on the same closed loop and their errors per point reported.
//
// Then bursts of reads (a batch's misses issued at once) are measured, and
// the grid model's burst mode (sim::ReadGridBurst) chosen by which one
// reproduces them.
//
// Before writing, the directory's file system is checked: too little free
// space refuses (nothing written); tmpfs or a file system without O_DIRECT
// is measured anyway with a warning that says what was measured (memory, or
// reads through the page cache). The file holds seeded pseudo-random bytes
// (a virtual disk may short-cut zeros; bench::CreateRandomFile, which also
// drops it from the page cache) and is removed at the end.
//
// Ownership: owns the file while it runs. Thread-safety: one call at a time
// per directory. Errors: Status values naming the path or the point.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "colibri/engine/clock.h"
#include "colibri/sim/hardware.h"
#include "colibri/sim/read_grid.h"
#include "colibri/status.h"

namespace colibri::calibrate {

struct StorageGridOptions {
  std::string dir = ".";                 // the file system to measure
  uint64_t file_bytes = 2ull << 30;
  std::vector<uint64_t> read_bytes;      // ascending multiples of 4096
  // The studied model's expert block sizes (multiples of 4096): measured at
  // every depth beside read_bytes, and in bursts whatever max_burst_read_bytes
  // says, so the model's reads meet measured points rather than an
  // interpolation between sizes 4x apart (this VM's virtual disk is far from
  // linear between them: 5.9 GB/s at 4 MiB and 1.4 GB/s at 16 MiB, depth 1,
  // in one calibration).
  std::vector<uint64_t> studied_read_bytes;
  std::vector<uint32_t> queue_depths;    // ascending, starting at 1
  uint64_t max_in_flight_bytes = 1ull << 30;  // depths above this x read size are skipped for that size
  uint64_t reads_per_point = 4000;       // at most
  uint64_t min_reads_per_point = 64;     // before the time limit may stop a point
  engine::TimeNs seconds_per_point_ns = 500'000'000;  // in all, over the passes
  // Passes over the whole grid, one after another; each point keeps the pass
  // with the median p99 (a transient stall of a virtual disk lands in one pass,
  // and would otherwise become the model's tail). Reads and time are shared out.
  uint32_t passes = 3;
  // Bursts (sim::RunReadBursts: a layer batch's misses issued at once), for
  // each read size up to max_burst_read_bytes x each burst size: how reads in
  // flight together share the device's state, which a closed loop cannot show.
  std::vector<uint32_t> burst_sizes = {4, 16};
  uint64_t bursts_per_point = 40;
  uint64_t max_burst_read_bytes = 1 << 20;
  uint64_t seed = 1;
  // Called after each point of each pass with (done, passes x points); may be empty.
  std::function<void(size_t, size_t)> progress;
};

// The fit of one point: measured vs the two models on the same closed loop.
struct PointFit {
  uint64_t read_bytes = 0;
  uint32_t queue_depth = 0;
  uint64_t measured_bytes_per_s = 0;
  engine::TimeNs measured_p50_ns = 0, measured_p99_ns = 0;  // of the pass kept
  engine::TimeNs measured_submit_ns = 0;  // median time inside Submit (ReadGridPoint::submit_ns)
  double pass_p99_spread = 0;         // (largest - smallest p99 over the passes) / the kept p99
  double grid_throughput_error = 0;   // (model - measured) / measured
  double grid_p50_error = 0, grid_p99_error = 0;
  double channel_throughput_error = 0;
  double channel_p50_error = 0, channel_p99_error = 0;
};

// One burst point: the measured spans of bursts vs the grid model drawing
// each read independently and the burst sharing one draw.
struct BurstFit {
  uint64_t read_bytes = 0;
  uint32_t burst = 0;
  uint64_t bursts = 0;
  engine::TimeNs measured_p50_ns = 0, measured_p99_ns = 0;
  double independent_p50_error = 0, independent_p99_error = 0;  // (model - measured) / measured
  double shared_p50_error = 0, shared_p99_error = 0;
};

struct StorageGrid {
  sim::ReadGrid grid;                  // figure left for the caller
  sim::FittedChannelModel channel;     // the classic model fitted to it
  std::vector<PointFit> fits;
  // The burst points; grid.burst is the mode with the smaller mean of
  // |p50 error| + |p99 error| over them (independent on a tie or without any).
  std::vector<BurstFit> bursts;
  uint32_t device_queue_depth = 0;     // the block device's tags (/sys/block/*/mq/*/nr_tags), 0 when unknown
  std::string backend;                 // "uring" or "pread"
  uint64_t file_bytes = 0;             // the file the reads went to
  std::vector<std::string> warnings;   // tmpfs, no O_DIRECT, ...
  std::string block_device;            // sim::ThisMachineIdentity's for the file
};

// The sizes and depths of the default grids: full, 4 KiB to 64 MiB x 1 to
// 64; quick, 4 KiB to 16 MiB x 1, 4, 16, 32.
StorageGridOptions DefaultStorageGrid(bool quick);

Result<StorageGrid> MeasureStorageGrid(const StorageGridOptions& options);

}  // namespace colibri::calibrate
