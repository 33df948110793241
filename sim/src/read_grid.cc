#include "colibri/sim/read_grid.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "colibri/engine/slab_pool.h"
#include "colibri/sim/random.h"
#include "colibri/sim/sim_event_loop.h"
#include "colibri/sim/sim_storage.h"

namespace colibri::sim {
namespace {

constexpr uint64_t kAlignmentBytes = 4096;

Status CheckQuantiles(std::span<const double> quantiles, const std::string& what) {
  if (quantiles.size() < 2 || quantiles.front() != 0.0 || quantiles.back() != 1.0) {
    return Status::InvalidArgument(what + ": read grid quantiles must run from 0 to 1");
  }
  for (size_t i = 1; i < quantiles.size(); ++i) {
    if (!(quantiles[i] > quantiles[i - 1])) {
      return Status::InvalidArgument(what + ": read grid quantiles must be strictly increasing");
    }
  }
  return Status::Ok();
}

double Lerp(double a, double b, double t) { return a + t * (b - a); }

// t of x between a and b (a < b).
double Fraction(double x, double a, double b) { return (x - a) / (b - a); }

}  // namespace

TimeNs SampleQuantileNs(std::span<const TimeNs> sorted, double q) {
  const double position = q * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  const double t = position - static_cast<double>(below);
  const double value = static_cast<double>(sorted[below]) + t * static_cast<double>(sorted[above] - sorted[below]);
  return static_cast<TimeNs>(std::llround(value));
}

Result<ReadGridPoint> MakeReadGridPoint(uint64_t read_bytes, uint32_t queue_depth, std::vector<TimeNs> latencies_ns,
                                        TimeNs elapsed_ns, std::span<const double> quantiles) {
  COLIBRI_RETURN_IF_ERROR(CheckQuantiles(quantiles, "read grid point"));
  if (latencies_ns.empty()) return Status::InvalidArgument("read grid point: no latencies");
  if (read_bytes == 0 || queue_depth == 0 || elapsed_ns <= 0) {
    return Status::InvalidArgument("read grid point: read_bytes, queue_depth and the elapsed time must be > 0");
  }
  std::sort(latencies_ns.begin(), latencies_ns.end());
  if (latencies_ns.front() <= 0) return Status::InvalidArgument("read grid point: a latency <= 0 ns");
  ReadGridPoint p;
  p.read_bytes = read_bytes;
  p.queue_depth = queue_depth;
  p.reads = latencies_ns.size();
  const long double bytes = static_cast<long double>(p.reads) * read_bytes;
  p.bytes_per_s = std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(bytes * 1e9L / elapsed_ns)));
  for (double q : quantiles) p.latency_ns.push_back(std::max<TimeNs>(1, SampleQuantileNs(latencies_ns, q)));
  return p;
}

namespace {

long double Lerp(uint64_t x0, long double y0, uint64_t x1, long double y1, uint64_t x) {
  return y0 + (y1 - y0) * static_cast<long double>(x - x0) / static_cast<long double>(x1 - x0);
}

// The submit cost of one size's points (ascending depths) at `depth`.
long double SubmitAtDepth(const std::vector<std::pair<uint32_t, TimeNs>>& by_depth, uint32_t depth) {
  if (depth <= by_depth.front().first) return static_cast<long double>(by_depth.front().second);
  for (size_t i = 1; i < by_depth.size(); ++i) {
    if (depth <= by_depth[i].first) {
      return Lerp(by_depth[i - 1].first, by_depth[i - 1].second, by_depth[i].first, by_depth[i].second, depth);
    }
  }
  return static_cast<long double>(by_depth.back().second);
}

}  // namespace

TimeNs ReadSubmitNs(const ReadGrid& grid, uint64_t read_bytes, uint32_t depth) {
  std::vector<std::pair<uint64_t, std::vector<std::pair<uint32_t, TimeNs>>>> sizes;  // ascending sizes, then depths
  std::vector<const ReadGridPoint*> measured;
  for (const ReadGridPoint& p : grid.points) {
    if (p.submit_ns > 0) measured.push_back(&p);
  }
  if (measured.empty()) return 0;
  std::sort(measured.begin(), measured.end(), [](const ReadGridPoint* a, const ReadGridPoint* b) {
    return a->read_bytes != b->read_bytes ? a->read_bytes < b->read_bytes : a->queue_depth < b->queue_depth;
  });
  for (const ReadGridPoint* p : measured) {
    if (sizes.empty() || sizes.back().first != p->read_bytes) sizes.push_back({p->read_bytes, {}});
    sizes.back().second.emplace_back(p->queue_depth, p->submit_ns);
  }
  std::vector<std::pair<uint64_t, long double>> curve;  // (read_bytes, cost at `depth`)
  for (const auto& [bytes, by_depth] : sizes) curve.emplace_back(bytes, SubmitAtDepth(by_depth, depth));
  long double y;
  if (read_bytes <= curve.front().first || curve.size() == 1) {
    y = read_bytes <= curve.front().first ? curve.front().second : curve.back().second;
  } else {
    size_t hi = 1;
    while (hi < curve.size() - 1 && curve[hi].first < read_bytes) ++hi;
    y = Lerp(curve[hi - 1].first, curve[hi - 1].second, curve[hi].first, curve[hi].second, read_bytes);
    if (read_bytes > curve.back().first) y = std::max(y, curve.back().second);
  }
  return static_cast<TimeNs>(std::llround(std::max<long double>(y, 0)));
}

Result<ReadGridModel> ReadGridModel::Make(const ReadGrid& grid, const std::string& what) {
  if (grid.empty()) return Status::InvalidArgument(what + ": the read grid has no points");
  COLIBRI_RETURN_IF_ERROR(CheckQuantiles(grid.quantiles, what));
  std::vector<ReadGridPoint> points = grid.points;
  std::sort(points.begin(), points.end(), [](const ReadGridPoint& a, const ReadGridPoint& b) {
    return a.read_bytes != b.read_bytes ? a.read_bytes < b.read_bytes : a.queue_depth < b.queue_depth;
  });
  ReadGridModel model;
  model.quantiles_ = grid.quantiles;
  for (const ReadGridPoint& p : points) {
    const std::string where = what + ": read grid point " + std::to_string(p.read_bytes) + " bytes at depth " +
                              std::to_string(p.queue_depth);
    if (p.read_bytes == 0 || p.queue_depth == 0) return Status::InvalidArgument(where + ": size and depth must be > 0");
    if (p.latency_ns.size() != grid.quantiles.size()) {
      return Status::InvalidArgument(where + ": expected one latency per quantile");
    }
    for (size_t i = 0; i < p.latency_ns.size(); ++i) {
      if (p.latency_ns[i] <= 0 || (i > 0 && p.latency_ns[i] < p.latency_ns[i - 1])) {
        return Status::InvalidArgument(where + ": latencies must be > 0 and non-decreasing");
      }
    }
    if (model.sizes_.empty() || model.sizes_.back().read_bytes != p.read_bytes) {
      if (p.queue_depth != 1) return Status::InvalidArgument(where + ": the size has no point at depth 1");
      model.sizes_.push_back(Size{p.read_bytes, {}, {}});
    } else if (model.sizes_.back().depths.back() == p.queue_depth) {
      return Status::InvalidArgument(where + ": repeated");
    }
    model.sizes_.back().depths.push_back(p.queue_depth);
    model.sizes_.back().latency_ns.push_back(p.latency_ns);
  }
  return model;
}

double ReadGridModel::AtPoint(const std::vector<TimeNs>& knots, double u) const {
  const auto upper = std::upper_bound(quantiles_.begin(), quantiles_.end(), u);
  if (upper == quantiles_.end()) return static_cast<double>(knots.back());
  const size_t k = static_cast<size_t>(upper - quantiles_.begin()) - 1;  // quantiles_[k] <= u < quantiles_[k + 1]
  const double t = (u - quantiles_[k]) / (quantiles_[k + 1] - quantiles_[k]);
  return static_cast<double>(knots[k]) + t * static_cast<double>(knots[k + 1] - knots[k]);
}

double ReadGridModel::AtSize(const Size& size, uint32_t in_flight, double u) const {
  const std::vector<uint32_t>& d = size.depths;
  if (in_flight >= d.back()) {
    return AtPoint(size.latency_ns.back(), u) * static_cast<double>(in_flight) / static_cast<double>(d.back());
  }
  const size_t j = static_cast<size_t>(std::upper_bound(d.begin(), d.end(), in_flight) - d.begin()) - 1;
  if (d[j] == in_flight) return AtPoint(size.latency_ns[j], u);
  const double t = Fraction(in_flight, d[j], d[j + 1]);
  return Lerp(AtPoint(size.latency_ns[j], u), AtPoint(size.latency_ns[j + 1], u), t);
}

TimeNs ReadGridModel::LatencyNs(uint64_t read_bytes, uint32_t in_flight, double u) const {
  in_flight = std::max<uint32_t>(in_flight, 1);
  u = std::clamp(u, 0.0, 1.0);
  double latency = 0;
  if (read_bytes <= sizes_.front().read_bytes) {
    latency = AtSize(sizes_.front(), in_flight, u);
  } else if (read_bytes >= sizes_.back().read_bytes) {
    latency = AtSize(sizes_.back(), in_flight, u) * static_cast<double>(read_bytes) /
              static_cast<double>(sizes_.back().read_bytes);
  } else {
    const auto above = std::lower_bound(sizes_.begin(), sizes_.end(), read_bytes,
                                        [](const Size& s, uint64_t bytes) { return s.read_bytes < bytes; });
    if (above->read_bytes == read_bytes) {
      latency = AtSize(*above, in_flight, u);
    } else {
      const Size& below = *(above - 1);
      const double t = Fraction(static_cast<double>(read_bytes), static_cast<double>(below.read_bytes),
                                static_cast<double>(above->read_bytes));
      latency = Lerp(AtSize(below, in_flight, u), AtSize(*above, in_flight, u), t);
    }
  }
  return std::max<TimeNs>(1, static_cast<TimeNs>(std::llround(latency)));
}

Result<FittedChannelModel> FitChannelModel(const ReadGrid& grid) {
  COLIBRI_ASSIGN_OR_RETURN(const ReadGridModel model, ReadGridModel::Make(grid, "channel fit"));
  (void)model;  // validates the grid
  const size_t median = static_cast<size_t>(
      std::lower_bound(grid.quantiles.begin(), grid.quantiles.end(), 0.5) - grid.quantiles.begin());
  const size_t p99 = static_cast<size_t>(
      std::lower_bound(grid.quantiles.begin(), grid.quantiles.end(), 0.99) - grid.quantiles.begin());
  auto at = [&](const ReadGridPoint& p, size_t i) {
    return static_cast<double>(p.latency_ns[std::min(i, p.latency_ns.size() - 1)]);
  };
  FittedChannelModel fit;
  std::vector<const ReadGridPoint*> qd1;
  for (const ReadGridPoint& p : grid.points) {
    fit.read_bytes_per_s = std::max(fit.read_bytes_per_s, p.bytes_per_s);
    if (p.queue_depth == 1) qd1.push_back(&p);
  }
  std::sort(qd1.begin(), qd1.end(), [](const ReadGridPoint* a, const ReadGridPoint* b) { return a->read_bytes < b->read_bytes; });
  // Least squares of the depth-1 median on the read size.
  double intercept = at(*qd1.front(), median);
  double slope = 0;
  if (qd1.size() >= 2) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const ReadGridPoint* p : qd1) {
      const double x = static_cast<double>(p->read_bytes);
      const double y = at(*p, median);
      sx += x;
      sy += y;
      sxx += x * x;
      sxy += x * y;
    }
    const double n = static_cast<double>(qd1.size());
    const double denominator = n * sxx - sx * sx;
    if (denominator > 0) {
      slope = (n * sxy - sx * sy) / denominator;
      intercept = (sy - slope * sx) / n;
    }
  }
  if (!(slope > 0)) slope = 1e9 / static_cast<double>(fit.read_bytes_per_s);  // ns per byte at the link's rate
  intercept = std::max(intercept, 2.0);
  fit.channel_read_bytes_per_s = std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(1e9 / slope)));
  fit.per_op_ns = static_cast<TimeNs>(std::llround(intercept / 2));
  fit.read_latency.p50_ns = static_cast<TimeNs>(std::llround(intercept)) - fit.per_op_ns;
  const ReadGridPoint& smallest = *qd1.front();
  fit.read_latency.p99_ns = fit.read_latency.p50_ns + static_cast<TimeNs>(std::max(0.0, at(smallest, p99) - at(smallest, median)));
  uint64_t best = 0;
  for (const ReadGridPoint& p : grid.points) {
    if (p.read_bytes == smallest.read_bytes) best = std::max(best, p.bytes_per_s);
  }
  const double occupancy_ns = static_cast<double>(fit.per_op_ns) + static_cast<double>(smallest.read_bytes) * slope;
  const double reads_per_s = static_cast<double>(best) / static_cast<double>(smallest.read_bytes);
  fit.channels = static_cast<uint32_t>(std::max(1.0, std::round(reads_per_s * occupancy_ns / 1e9)));
  return fit;
}

namespace {

// A driver's read size: a positive multiple of 4096 within the file.
Status CheckReadSize(const char* driver, uint64_t read_bytes, uint64_t file_bytes) {
  if (read_bytes == 0 || read_bytes % kAlignmentBytes != 0 || read_bytes > file_bytes) {
    return Status::InvalidArgument(std::string(driver) + ": read size " + std::to_string(read_bytes) +
                                   " must be a positive multiple of 4096 within the file (" +
                                   std::to_string(file_bytes) + " bytes)");
  }
  return Status::Ok();
}

}  // namespace

Result<ClosedLoopReads> RunClosedLoopReads(engine::StorageBackend& storage, const engine::Clock& clock,
                                           std::byte* buffers, uint64_t read_bytes, uint32_t queue_depth, uint64_t reads,
                                           uint64_t min_reads, TimeNs max_duration_ns, uint64_t seed,
                                           uint64_t file_bytes) {
  if (reads == 0 || queue_depth == 0) return Status::InvalidArgument("closed loop: reads and queue depth must be > 0");
  COLIBRI_RETURN_IF_ERROR(CheckReadSize("closed loop", read_bytes, file_bytes));
  Rng offsets(DeriveSeed(seed, "closed_loop_offsets"));
  const uint64_t slots = file_bytes / read_bytes;
  // A read's tag is its buffer slot; a completion frees it for the next read.
  ClosedLoopReads out;
  auto submit = [&](uint64_t slot) {
    const uint64_t offset = (offsets.NextU64() % slots) * read_bytes;
    const TimeNs before = clock.Now();
    Status status = storage.Submit(engine::ReadRequest{offset, read_bytes, buffers + slot * read_bytes, slot});
    out.submit_ns.push_back(clock.Now() - before);
    return status;
  };
  out.latencies_ns.reserve(reads);
  out.submit_ns.reserve(reads);
  const TimeNs first_submit = clock.Now();
  uint64_t submitted = 0;
  for (; submitted < std::min<uint64_t>(queue_depth, reads); ++submitted) COLIBRI_RETURN_IF_ERROR(submit(submitted));
  TimeNs last_complete = first_submit;
  bool stop = false;
  std::vector<engine::ReadCompletion> done;
  while (out.latencies_ns.size() < submitted) {
    done.clear();
    COLIBRI_RETURN_IF_ERROR(storage.Poll(/*wait=*/true, &done));
    for (const engine::ReadCompletion& c : done) {
      COLIBRI_RETURN_IF_ERROR(c.status);
      out.latencies_ns.push_back(c.complete_ns - c.submit_ns);
      last_complete = std::max(last_complete, c.complete_ns);
    }
    stop = stop || (max_duration_ns > 0 && out.latencies_ns.size() >= min_reads &&
                    clock.Now() - first_submit >= max_duration_ns);
    // Resubmit one read per completion, in the slot the completed read freed.
    for (size_t i = 0; i < done.size() && !stop && submitted < reads; ++i, ++submitted) {
      COLIBRI_RETURN_IF_ERROR(submit(done[i].tag));
    }
  }
  out.reads = out.latencies_ns.size();
  out.elapsed_ns = std::max<TimeNs>(1, last_complete - first_submit);
  out.bytes_per_s = static_cast<uint64_t>(static_cast<long double>(out.reads) * read_bytes * 1e9L / out.elapsed_ns);
  return out;
}

namespace {

// A modelled drive on its own loop, with `depth` buffer slots of read_bytes
// (address space only: a time-only model never touches the buffers).
struct ModelledDrive {
  SimEventLoop loop;  // outlives the storage
  std::unique_ptr<engine::StorageBackend> storage;
  std::unique_ptr<engine::SlabPool> buffers;
};

Result<std::unique_ptr<ModelledDrive>> MakeModelledDrive(const NvmeProfile& profile, uint64_t read_bytes,
                                                         uint32_t depth, uint64_t seed, uint64_t file_bytes) {
  if (depth == 0) return Status::InvalidArgument("modelled drive: queue depth must be > 0");
  auto drive = std::make_unique<ModelledDrive>();
  SimStorageOptions options;
  options.loop = &drive->loop;
  options.queue_depth = depth;
  options.seed = seed;
  options.file_bytes = file_bytes;
  NvmeProfile deep = profile;
  deep.queue_depth = std::max(deep.queue_depth, depth);  // the driver's depth, not the device's tags
  COLIBRI_ASSIGN_OR_RETURN(drive->storage, MakeSimStorage(deep, options));
  const uint64_t slot_bytes = std::max<uint64_t>(read_bytes, kAlignmentBytes) / kAlignmentBytes * kAlignmentBytes;
  COLIBRI_ASSIGN_OR_RETURN(drive->buffers, engine::SlabPool::CreateReserved(slot_bytes * depth, slot_bytes, kAlignmentBytes));
  return drive;
}

}  // namespace

Result<ClosedLoopReads> SimulateClosedLoopReads(const NvmeProfile& profile, uint64_t read_bytes, uint32_t queue_depth,
                                                uint64_t reads, uint64_t seed, uint64_t file_bytes) {
  COLIBRI_ASSIGN_OR_RETURN(const std::unique_ptr<ModelledDrive> drive,
                           MakeModelledDrive(profile, read_bytes, queue_depth, seed, file_bytes));
  return RunClosedLoopReads(*drive->storage, drive->loop, drive->buffers->base(), read_bytes, queue_depth, reads, reads,
                            0, seed, file_bytes);
}

Result<std::vector<TimeNs>> RunReadBursts(engine::StorageBackend& storage, const engine::Clock& clock,
                                          std::byte* buffers, uint64_t read_bytes, uint32_t burst, uint64_t bursts,
                                          uint64_t seed, uint64_t file_bytes) {
  if (bursts == 0 || burst == 0) return Status::InvalidArgument("read bursts: bursts and burst size must be > 0");
  COLIBRI_RETURN_IF_ERROR(CheckReadSize("read bursts", read_bytes, file_bytes));
  Rng offsets(DeriveSeed(seed, "read_burst_offsets"));
  const uint64_t slots = file_bytes / read_bytes;
  std::vector<TimeNs> spans_ns;
  spans_ns.reserve(bursts);
  std::vector<engine::ReadCompletion> done;
  for (uint64_t b = 0; b < bursts; ++b) {
    const TimeNs first_submit = clock.Now();
    for (uint32_t i = 0; i < burst; ++i) {
      const uint64_t offset = (offsets.NextU64() % slots) * read_bytes;
      COLIBRI_RETURN_IF_ERROR(storage.Submit(engine::ReadRequest{offset, read_bytes, buffers + i * read_bytes, i}));
    }
    TimeNs last_complete = first_submit;
    for (uint32_t completed = 0; completed < burst;) {
      done.clear();
      COLIBRI_RETURN_IF_ERROR(storage.Poll(/*wait=*/true, &done));
      for (const engine::ReadCompletion& c : done) {
        COLIBRI_RETURN_IF_ERROR(c.status);
        last_complete = std::max(last_complete, c.complete_ns);
        ++completed;
      }
    }
    spans_ns.push_back(std::max<TimeNs>(1, last_complete - first_submit));
  }
  return spans_ns;
}

Result<std::vector<TimeNs>> SimulateReadBursts(const NvmeProfile& profile, uint64_t read_bytes, uint32_t burst,
                                               uint64_t bursts, uint64_t seed, uint64_t file_bytes) {
  COLIBRI_ASSIGN_OR_RETURN(const std::unique_ptr<ModelledDrive> drive,
                           MakeModelledDrive(profile, read_bytes, burst, seed, file_bytes));
  return RunReadBursts(*drive->storage, drive->loop, drive->buffers->base(), read_bytes, burst, bursts, seed, file_bytes);
}

}  // namespace colibri::sim
