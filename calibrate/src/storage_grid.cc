#include "colibri/calibrate/storage_grid.h"

#include <fcntl.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "colibri/bench/files.h"
#include "colibri/engine/slab_pool.h"
#include "colibri/engine/storage.h"
#include "colibri/sim/machine_identity.h"
#include "colibri/sim/random.h"

namespace colibri::calibrate {
namespace {

constexpr uint64_t kAlignmentBytes = 4096;
constexpr uint64_t kSpaceMarginBytes = 256ull << 20;
constexpr long kTmpfsMagic = 0x01021994;

// The tags of the block device (its first hardware queue), 0 when unknown.
uint32_t DeviceTags(const std::string& block_device) {
  const std::string name = block_device.substr(0, block_device.find(' '));
  if (name.empty() || name.rfind("device ", 0) == 0) return 0;
  std::ifstream in("/sys/block/" + name + "/mq/0/nr_tags");
  uint32_t tags = 0;
  in >> tags;
  return tags;
}

double Error(double model, double measured) { return measured > 0 ? (model - measured) / measured : 0.0; }

engine::TimeNs QuantileOf(std::vector<engine::TimeNs> samples, double q) {
  std::sort(samples.begin(), samples.end());
  return sim::SampleQuantileNs(samples, q);
}

// read_bytes and studied_read_bytes, ascending, each once.
std::vector<uint64_t> GridReadSizes(const StorageGridOptions& o) {
  std::vector<uint64_t> sizes = o.read_bytes;
  sizes.insert(sizes.end(), o.studied_read_bytes.begin(), o.studied_read_bytes.end());
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

Status CheckOptions(const StorageGridOptions& o) {
  if (o.read_bytes.empty() || o.queue_depths.empty()) {
    return Status::InvalidArgument("storage grid: no read sizes or queue depths");
  }
  for (uint64_t s : GridReadSizes(o)) {
    if (s == 0 || s % kAlignmentBytes != 0 || s > o.file_bytes) {
      return Status::InvalidArgument("storage grid: read size " + std::to_string(s) +
                                     " must be a positive multiple of 4096 within the file");
    }
  }
  if (o.queue_depths.front() != 1 || !std::is_sorted(o.queue_depths.begin(), o.queue_depths.end())) {
    return Status::InvalidArgument("storage grid: queue depths must ascend from 1");
  }
  return Status::Ok();
}

// A new read pool in *pool, as the engine has its pools: registered with the backend
// (io_uring fixed buffers; LocalEngine registers the engine's). The engine's
// reads take that path, and it is faster: 12 MiB random reads at depth 12 on
// this VM's virtio disk ran 1.6x faster into registered buffers (fio
// --fixedbufs, 2026-12-02). Registration refused: the reads still work, as
// the engine's do, unregistered; the first refusal is a warning.
Status ReplaceReadPool(engine::StorageBackend& storage, uint64_t bytes, uint64_t slot_bytes,
                       std::unique_ptr<engine::SlabPool>* pool, std::vector<std::string>* warnings) {
  COLIBRI_RETURN_IF_ERROR(storage.RegisterBuffers({}));  // the old pool leaves the ring before it is freed
  pool->reset();
  COLIBRI_ASSIGN_OR_RETURN(*pool, engine::SlabPool::Create(bytes, slot_bytes, kAlignmentBytes));
  const Status registered = storage.RegisterBuffers(engine::RegistrableRegions(**pool));
  const char* kWarning = "read buffers not registered";
  if (!registered.ok() && std::none_of(warnings->begin(), warnings->end(),
                                       [&](const std::string& w) { return w.rfind(kWarning, 0) == 0; })) {
    warnings->push_back(std::string(kWarning) + " (" + registered.message() +
                        "): measured unregistered reads, as the engine reads when its own registration is refused");
  }
  return Status::Ok();
}

}  // namespace

StorageGridOptions DefaultStorageGrid(bool quick) {
  StorageGridOptions o;
  if (quick) {
    o.file_bytes = 1ull << 30;
    o.read_bytes = {4096, 65536, 1 << 20, 4 << 20, 16 << 20};
    o.queue_depths = {1, 4, 16, 32};
    o.seconds_per_point_ns = 250'000'000;
    o.reads_per_point = 2000;
    o.min_reads_per_point = 32;
    o.max_in_flight_bytes = 256ull << 20;
  } else {
    o.read_bytes = {4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
    o.queue_depths = {1, 2, 4, 8, 16, 32, 64};
  }
  return o;
}

Result<StorageGrid> MeasureStorageGrid(const StorageGridOptions& o) {
  COLIBRI_RETURN_IF_ERROR(CheckOptions(o));
  std::error_code error;
  if (!std::filesystem::is_directory(o.dir, error)) return Status::NotFound(o.dir + ": not a directory");
  StorageGrid out;
  struct statvfs vfs {};
  if (::statvfs(o.dir.c_str(), &vfs) != 0) return Status::IoError(o.dir + ": statvfs failed: " + std::strerror(errno));
  const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  if (free_bytes < o.file_bytes + kSpaceMarginBytes) {
    return Status::InvalidArgument(o.dir + ": " + std::to_string(free_bytes) + " bytes free; measuring needs a " +
                                   std::to_string(o.file_bytes) + "-byte file plus " +
                                   std::to_string(kSpaceMarginBytes) + " to spare (nothing was written)");
  }
  struct statfs fs {};
  if (::statfs(o.dir.c_str(), &fs) == 0 && static_cast<long>(fs.f_type) == kTmpfsMagic) {
    out.warnings.push_back(o.dir + " is tmpfs: this measures memory, not a drive");
  }
  out.block_device = sim::ThisMachineIdentity(o.dir).block_device;
  out.file_bytes = o.file_bytes;
  out.device_queue_depth = DeviceTags(out.block_device);

  const bench::ScratchFile file(
      (std::filesystem::path(o.dir) / ("colibri-calibrate-" + std::to_string(::getpid()) + ".bin")).string());
  COLIBRI_RETURN_IF_ERROR(bench::CreateRandomFile(file.path(), o.file_bytes, sim::DeriveSeed(o.seed, "calibrate_file")));
  engine::MonotonicClock clock;
  engine::StorageOptions storage_options;
  storage_options.clock = &clock;
  storage_options.queue_depth = o.queue_depths.back();
  storage_options.direct_io = true;
  std::string fallback;
  Result<std::unique_ptr<engine::StorageBackend>> opened = engine::OpenStorage("auto", file.path(), storage_options, &fallback);
  if (!opened.ok()) return opened.status();
  if (!fallback.empty()) out.warnings.push_back(fallback + ": measured with pread");
  std::unique_ptr<engine::StorageBackend> storage = std::move(opened).value();
  out.backend = storage->caps().name;
  if (!storage->warning().empty()) out.warnings.push_back(storage->warning() + ": measured through the page cache");

  out.grid.quantiles.assign(std::begin(sim::kReadGridQuantiles), std::end(sim::kReadGridQuantiles));
  const std::vector<uint64_t> sizes = GridReadSizes(o);
  std::vector<std::pair<uint64_t, uint32_t>> points;
  for (uint64_t s : sizes) {
    for (uint32_t d : o.queue_depths) {
      if (d == 1 || static_cast<uint64_t>(d) * s <= o.max_in_flight_bytes) points.emplace_back(s, d);
    }
  }
  // Every point is measured once per pass, the passes one after another (so a transient stall of
  // the device lands in one pass of a point, not in all); each pass has its share of the time and
  // read limits. The pass with the median p99 is kept, and the spread of the passes' p99s reported.
  const uint32_t passes = std::max<uint32_t>(1, o.passes);
  std::vector<std::vector<sim::ReadGridPoint>> measured(points.size());
  uint64_t seed = o.seed;
  std::unique_ptr<engine::SlabPool> buffers;
  for (uint32_t pass = 0; pass < passes; ++pass) {
    for (size_t i = 0; i < points.size(); ++i) {
      const auto [read_bytes, depth] = points[i];
      if (buffers == nullptr || buffers->slot_bytes() != read_bytes || buffers->slot_count() < depth) {
        uint32_t most = 1;
        for (const auto& [s, d] : points) {
          if (s == read_bytes) most = std::max(most, d);
        }
        COLIBRI_RETURN_IF_ERROR(ReplaceReadPool(*storage, read_bytes * most, read_bytes, &buffers, &out.warnings));
      }
      const uint64_t min_reads = std::max<uint64_t>(o.min_reads_per_point, 4ull * depth);
      COLIBRI_ASSIGN_OR_RETURN(
          sim::ClosedLoopReads reads,
          sim::RunClosedLoopReads(*storage, clock, buffers->base(), read_bytes, depth,
                                  std::max<uint64_t>(o.reads_per_point / passes, min_reads), min_reads,
                                  o.seconds_per_point_ns / passes, ++seed, o.file_bytes));
      COLIBRI_ASSIGN_OR_RETURN(sim::ReadGridPoint point,
                               sim::MakeReadGridPoint(read_bytes, depth, reads.latencies_ns, reads.elapsed_ns));
      point.submit_ns = std::max<engine::TimeNs>(1, QuantileOf(reads.submit_ns, 0.5));
      measured[i].push_back(std::move(point));
      if (o.progress) o.progress(pass * points.size() + i + 1, passes * points.size());
    }
  }
  std::vector<double> p99_spreads;
  for (std::vector<sim::ReadGridPoint>& runs : measured) {
    constexpr size_t kP99 = 9;  // kReadGridQuantiles' p99
    std::sort(runs.begin(), runs.end(), [](const sim::ReadGridPoint& a, const sim::ReadGridPoint& b) {
      return a.latency_ns[kP99] < b.latency_ns[kP99];
    });
    const sim::ReadGridPoint& kept = runs[(runs.size() - 1) / 2];
    p99_spreads.push_back(static_cast<double>(runs.back().latency_ns[kP99] - runs.front().latency_ns[kP99]) /
                          static_cast<double>(kept.latency_ns[kP99]));
    out.grid.points.push_back(kept);
  }
  // Bursts, measured on the same file while it is open.
  struct BurstRun {
    uint64_t read_bytes;
    uint32_t burst;
    std::vector<engine::TimeNs> spans_ns;
  };
  std::vector<BurstRun> burst_runs;
  for (uint64_t read_bytes : sizes) {
    const bool studied = std::find(o.studied_read_bytes.begin(), o.studied_read_bytes.end(), read_bytes) !=
                         o.studied_read_bytes.end();
    if (read_bytes > o.max_burst_read_bytes && !studied) continue;
    for (uint32_t burst : o.burst_sizes) {
      if (burst == 0 || static_cast<uint64_t>(burst) * read_bytes > o.max_in_flight_bytes) continue;
      COLIBRI_RETURN_IF_ERROR(ReplaceReadPool(*storage, read_bytes * burst, read_bytes, &buffers, &out.warnings));
      COLIBRI_ASSIGN_OR_RETURN(std::vector<engine::TimeNs> spans,
                               sim::RunReadBursts(*storage, clock, buffers->base(), read_bytes, burst,
                                                  std::max<uint64_t>(o.bursts_per_point, 1), ++seed, o.file_bytes));
      burst_runs.push_back(BurstRun{read_bytes, burst, std::move(spans)});
    }
  }
  storage.reset();
  buffers.reset();

  COLIBRI_ASSIGN_OR_RETURN(out.channel, sim::FitChannelModel(out.grid));
  sim::NvmeProfile grid_model;
  grid_model.id = "calibrate-grid";
  grid_model.channels = out.channel.channels;
  grid_model.queue_depth = o.queue_depths.back();
  grid_model.per_op_ns = out.channel.per_op_ns;
  grid_model.channel_read_bytes_per_s = out.channel.channel_read_bytes_per_s;
  grid_model.read_bytes_per_s = out.channel.read_bytes_per_s;
  grid_model.read_latency = out.channel.read_latency;
  sim::NvmeProfile channel_model = grid_model;
  channel_model.id = "calibrate-channels";
  grid_model.read_grid = out.grid;
  for (const sim::ReadGridPoint& p : out.grid.points) {
    PointFit fit;
    fit.read_bytes = p.read_bytes;
    fit.queue_depth = p.queue_depth;
    fit.measured_bytes_per_s = p.bytes_per_s;
    const size_t median = 5, p99 = 9;  // kReadGridQuantiles' p50 and p99
    fit.measured_p50_ns = p.latency_ns[median];
    fit.measured_submit_ns = p.submit_ns;
    fit.measured_p99_ns = p.latency_ns[p99];
    fit.pass_p99_spread = p99_spreads[out.fits.size()];
    const uint64_t reads = std::max<uint64_t>(p.reads, 200);
    for (const auto& [model, errors] :
         {std::pair{&grid_model, std::array<double*, 3>{&fit.grid_throughput_error, &fit.grid_p50_error, &fit.grid_p99_error}},
          std::pair{&channel_model, std::array<double*, 3>{&fit.channel_throughput_error, &fit.channel_p50_error,
                                                           &fit.channel_p99_error}}}) {
      COLIBRI_ASSIGN_OR_RETURN(sim::ClosedLoopReads modelled,
                               sim::SimulateClosedLoopReads(*model, p.read_bytes, p.queue_depth, reads, o.seed, o.file_bytes));
      *errors[0] = Error(static_cast<double>(modelled.bytes_per_s), static_cast<double>(p.bytes_per_s));
      *errors[1] = Error(static_cast<double>(QuantileOf(modelled.latencies_ns, 0.5)), static_cast<double>(fit.measured_p50_ns));
      *errors[2] = Error(static_cast<double>(QuantileOf(modelled.latencies_ns, 0.99)), static_cast<double>(fit.measured_p99_ns));
    }
    out.fits.push_back(fit);
  }
  // The burst mode: each candidate replays every burst point on the grid model.
  double independent_cost = 0, shared_cost = 0;
  for (const BurstRun& run : burst_runs) {
    BurstFit fit;
    fit.read_bytes = run.read_bytes;
    fit.burst = run.burst;
    fit.bursts = run.spans_ns.size();
    fit.measured_p50_ns = QuantileOf(run.spans_ns, 0.5);
    fit.measured_p99_ns = QuantileOf(run.spans_ns, 0.99);
    for (const sim::ReadGridBurst mode : {sim::ReadGridBurst::kIndependent, sim::ReadGridBurst::kShared}) {
      sim::NvmeProfile model = grid_model;
      model.read_grid.burst = mode;
      COLIBRI_ASSIGN_OR_RETURN(const std::vector<engine::TimeNs> modelled,
                               sim::SimulateReadBursts(model, run.read_bytes, run.burst,
                                                       std::max<uint64_t>(fit.bursts, 200), o.seed, o.file_bytes));
      const double p50 = Error(static_cast<double>(QuantileOf(modelled, 0.5)), static_cast<double>(fit.measured_p50_ns));
      const double p99 = Error(static_cast<double>(QuantileOf(modelled, 0.99)), static_cast<double>(fit.measured_p99_ns));
      const bool shared = mode == sim::ReadGridBurst::kShared;
      (shared ? fit.shared_p50_error : fit.independent_p50_error) = p50;
      (shared ? fit.shared_p99_error : fit.independent_p99_error) = p99;
      (shared ? shared_cost : independent_cost) += std::abs(p50) + std::abs(p99);
    }
    out.bursts.push_back(fit);
  }
  out.grid.burst = shared_cost < independent_cost ? sim::ReadGridBurst::kShared : sim::ReadGridBurst::kIndependent;
  return out;
}

}  // namespace colibri::calibrate
