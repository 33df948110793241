// The measured read grid of an NVMe profile (hardware.h, ReadGrid): making
// its points from measured latencies, the latency model SimStorage draws
// from, a fitted channel model for comparison, and a closed-loop driver that
// measures any modelled drive the way `colibri calibrate` measures a real one.
//
// The grid model. A point (s, d) holds the latency distribution, as
// quantiles, of random reads of s bytes kept d in flight. A read of b bytes
// issued as the n-th read in the device (n counts it) takes
// L(b, n, u) for a uniform u in [0, 1) drawn from the drive's seeded stream:
//  - at a point: linear between the quantile knots around u (knots 0 and 1
//    are the measured minimum and maximum, so draws stay inside them);
//  - between the depths measured for a size: linear in n (a drive's latency
//    is flat in depth until it saturates, then grows in proportion); past the
//    deepest depth D: L(D) x n / D (the drive is taken as saturated there:
//    throughput n b / L stays at its last value);
//  - between sizes: linear in b (a read's time is a fixed cost plus its bytes
//    over a rate), each size taken at depth n as above; below the smallest
//    size: the smallest's; past the largest S: L(S) x b / S (bandwidth-bound).
// One u serves every corner of an interpolation (common random numbers), so
// L is monotone in u. At a measured point a closed loop of d reads
// reproduces the measured quantiles, and so (Little's law: throughput =
// d s / mean latency) the measured throughput, up to sampling noise.
//
// Errors are Status values naming what is wrong. Thread-safety: ReadGridModel
// is an immutable value; the functions share no state.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "colibri/engine/storage.h"
#include "colibri/sim/hardware.h"
#include "colibri/status.h"

namespace colibri::sim {

// The quantile knots `colibri calibrate` records: minimum, p1, p5, p10, p25,
// p50, p75, p90, p95, p99, p99.9, maximum.
inline constexpr double kReadGridQuantiles[] = {0.0, 0.01, 0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95, 0.99, 0.999, 1.0};

// The sample quantile of `sorted` (ascending, non-empty) at q in [0, 1]:
// linear between order statistics (Hyndman-Fan type 7), rounded to ns.
TimeNs SampleQuantileNs(std::span<const TimeNs> sorted, double q);

// A grid point from measured submit-to-complete latencies (any order) of
// reads of `read_bytes` kept `queue_depth` in flight for `elapsed_ns`.
// Errors: no latencies, a latency or elapsed time <= 0, bad quantiles.
Result<ReadGridPoint> MakeReadGridPoint(uint64_t read_bytes, uint32_t queue_depth, std::vector<TimeNs> latencies_ns,
                                        TimeNs elapsed_ns, std::span<const double> quantiles = kReadGridQuantiles);

// The submitting thread's cost of handing one read of `read_bytes` to the
// storage as the `depth`-th in flight (this one included), from the grid's
// points that measured it (submit_ns > 0; at depth d a closed loop submits
// each read with d - 1 in flight, as a batch's burst submits its i-th read
// with i - 1). Per measured size: linear in the depth between measured
// depths, the nearest measured depth outside them. Across sizes: linear in
// the read size, the smallest size's cost below it, along the last two sizes'
// slope above the largest (not below the largest's cost). 0 when no point
// measured it.
TimeNs ReadSubmitNs(const ReadGrid& grid, uint64_t read_bytes, uint32_t depth);

class ReadGridModel {
 public:
  // Errors: an empty grid, quantiles not from 0 to 1 strictly increasing, a
  // point without one latency per quantile or with latencies decreasing, a
  // size without depth 1; `what` names the profile in messages.
  static Result<ReadGridModel> Make(const ReadGrid& grid, const std::string& what);
  // L(read_bytes, in_flight, u) above; in_flight >= 1, u in [0, 1). >= 1 ns.
  TimeNs LatencyNs(uint64_t read_bytes, uint32_t in_flight, double u) const;

 private:
  struct Size {
    uint64_t read_bytes = 0;
    std::vector<uint32_t> depths;                   // ascending, depths[0] == 1
    std::vector<std::vector<TimeNs>> latency_ns;    // [depth index][quantile index]
  };
  double AtPoint(const std::vector<TimeNs>& knots, double u) const;
  double AtSize(const Size& size, uint32_t in_flight, double u) const;

  std::vector<double> quantiles_;
  std::vector<Size> sizes_;  // ascending read_bytes
};

// A channel-and-link model (hardware.h's NvmeProfile fields) fitted to a
// grid, for comparison with the grid model (its error per point says how
// well the classic model describes the drive):
//  - read_bytes_per_s: the highest measured throughput (the link);
//  - per_op_ns + latency p50 and channel_read_bytes_per_s: the least-squares
//    line of the depth-1 medians over read size (intercept, 1 / slope); the
//    intercept is split half per_op_ns (channel occupancy), half latency
//    (assumed: depth-1 reads cannot tell them apart);
//  - channels: the smallest size's best throughput in reads/s x its
//    occupancy, rounded, at least 1;
//  - latency p99: p50 plus the smallest size's depth-1 p99 - p50.
// Errors: Make's.
struct FittedChannelModel {
  uint32_t channels = 1;
  TimeNs per_op_ns = 0;
  uint64_t channel_read_bytes_per_s = 0;
  uint64_t read_bytes_per_s = 0;
  LatencyDistribution read_latency;
};
Result<FittedChannelModel> FitChannelModel(const ReadGrid& grid);

// What a closed loop of reads measured on a (modelled) drive.
struct ClosedLoopReads {
  uint64_t reads = 0;
  TimeNs elapsed_ns = 0;                 // first submit to last completion
  uint64_t bytes_per_s = 0;
  std::vector<TimeNs> latencies_ns;      // submit -> complete, in completion order
  std::vector<TimeNs> submit_ns;         // time spent inside each Submit call, in submission order
};

// Keeps `queue_depth` reads of `read_bytes` in flight on `storage` (real or
// modelled): each completion resubmits at once at a seeded random aligned
// offset below `file_bytes`, into the buffer slot its completed read freed
// (`buffers` holds depth slots of read_bytes, aligned as the storage needs), until `reads` completed or, once at least `min_reads` did, `clock`
// passed `max_duration_ns` from the first submit (0: no time limit).
// Latencies are the completions' submit -> complete. Errors: a failed read or
// submit (with its message), 0 reads or depth, a read larger than the file.
Result<ClosedLoopReads> RunClosedLoopReads(engine::StorageBackend& storage, const engine::Clock& clock,
                                           std::byte* buffers, uint64_t read_bytes, uint32_t queue_depth, uint64_t reads,
                                           uint64_t min_reads, TimeNs max_duration_ns, uint64_t seed,
                                           uint64_t file_bytes);

// Drives MakeSimStorage(profile) on a SimEventLoop with `queue_depth` reads
// of `read_bytes` kept in flight (each completion resubmits at once), `reads`
// in all, at seeded random aligned offsets over a modelled file of
// `file_bytes`: calibrate's measurement, on the model. Errors: the model's,
// 0 reads or depth, a read larger than the file.
Result<ClosedLoopReads> SimulateClosedLoopReads(const NvmeProfile& profile, uint64_t read_bytes, uint32_t queue_depth,
                                                uint64_t reads, uint64_t seed, uint64_t file_bytes = uint64_t{1} << 36);

// Bursts of reads as the engine issues a layer batch's misses: `burst` reads
// of `read_bytes` submitted at once at seeded random aligned offsets below
// `file_bytes` (into `buffers`: burst slots of read_bytes), all waited for,
// then the next burst, `bursts` times. Each value is one burst's span, first
// submit to last completion, in burst order. Errors: a failed read or submit,
// 0 bursts or burst, a read larger than the file.
Result<std::vector<TimeNs>> RunReadBursts(engine::StorageBackend& storage, const engine::Clock& clock,
                                          std::byte* buffers, uint64_t read_bytes, uint32_t burst, uint64_t bursts,
                                          uint64_t seed, uint64_t file_bytes);

// RunReadBursts on MakeSimStorage(profile) on a SimEventLoop. Errors: the
// model's and RunReadBursts'.
Result<std::vector<TimeNs>> SimulateReadBursts(const NvmeProfile& profile, uint64_t read_bytes, uint32_t burst,
                                               uint64_t bursts, uint64_t seed, uint64_t file_bytes = uint64_t{1} << 36);

}  // namespace colibri::sim
