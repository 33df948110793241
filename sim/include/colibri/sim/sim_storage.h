// SimStorage: the modelled NVMe drive, a StorageBackend that keeps time on an
// EventLoop (normally SimEventLoop; a RealEventLoop gives emulation).
//
// Model (ARCHITECTURE.md, "Modelled device recipe"): the drive has C channels,
// each with a next-free time, and one link shared by all of them. A read
// issued at time t takes the channel that is free earliest (lowest index on
// ties), starts at s = max(t, channel.next_free) and holds the channel for
// per_op_ns + ceil(bytes x 1e9 / channel_read_bytes_per_s); its bytes cross
// the link from max(s, link.next_free) for ceil(bytes x 1e9 / read_bytes_per_s).
// It completes at max(channel end, link end) plus a latency drawn from the
// profile's read_latency (seeded: stream DeriveSeed(seed, "sim_storage")).
// All integer ns. A profile with a measured read grid (profile.read_grid,
// from `colibri calibrate`) replaces the channels, the link and the added
// latency: a read issued as the n-th read in the device (n counts it) starts
// at issue and completes after ReadGridModel::LatencyNs(bytes, n, u), u a
// uniform from the same seeded stream (read_grid.h has the interpolation);
// with read_grid.burst "shared", reads issued at the same modelled instant
// share one uniform.
// At most min(queue_depth, profile.queue_depth) reads are
// issued to the device; later ones wait in the backend in FIFO order (each
// counts one queue_full_event) and are issued when a read completes, at that
// completion's modelled time (never earlier than their own submission).
//
// A completion is a task the model schedules on the loop at its modelled time;
// the task marks the read ready (and, with a data file, preads its bytes into
// the buffer then). Poll(false) hands over ready reads; Poll(true) with none
// ready runs the loop (RunUntil) until one is. complete_ns is the modelled
// instant, which may be earlier than the loop's Now() when the loop's clock
// was moved on by WaitUntil meanwhile. Completion order is the modelled order.
//
// Validation and error messages are the real backends' (storage.h): 4096-byte
// alignment (caps().direct_io is true: the model is of O_DIRECT reads),
// reads past file_bytes rejected, null buffer, length 0.
//
// Ownership: borrows the loop and the event log (they must outlive the
// backend) and the read buffers (as storage.h says); owns the data file's
// descriptor. Destroying the backend drops its reads: their scheduled tasks
// become no-ops and their buffers are not written. Thread-safety: none; the
// loop's thread submits and polls.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "colibri/engine/event_loop.h"
#include "colibri/engine/storage.h"
#include "colibri/sim/event_log.h"
#include "colibri/sim/hardware.h"
#include "colibri/status.h"

namespace colibri::sim {

struct SimStorageOptions {
  engine::EventLoop* loop = nullptr;  // required; borrowed
  uint32_t queue_depth = 0;           // the engine's issue depth; 0 = the profile's; capped at the profile's
  uint64_t seed = 0;                  // the run's root seed
  // Optional: a file whose bytes reads deliver (pread at completion time;
  // caps().delivers_data = true). Its size bounds the reads. Empty: a model
  // that only keeps time; buffers are never touched.
  std::string data_path;
  uint64_t file_bytes = 0;            // size of the modelled experts file, without data_path (required then)
  EventLog* event_log = nullptr;      // optional; one kRead entry per completed read, at its modelled time
};

// Errors: InvalidArgument for a missing loop, a queue depth above 32768, no
// data_path and file_bytes 0, a data_path that is not a regular file, or a
// profile that cannot be modelled (0 channels, queue depth or bandwidth;
// negative per_op_ns; latency jitter with p50 0), naming the profile;
// NotFound for a missing data_path; IoError when it cannot be opened.
Result<std::unique_ptr<engine::StorageBackend>> MakeSimStorage(const NvmeProfile& profile,
                                                               const SimStorageOptions& options);

}  // namespace colibri::sim
