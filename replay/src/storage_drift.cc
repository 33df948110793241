#include "colibri/replay/storage_drift.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <vector>

#include "colibri/engine/slab_pool.h"
#include "colibri/engine/storage.h"
#include "colibri/sim/read_grid.h"

namespace colibri::replay {
namespace {

constexpr uint64_t kAlignmentBytes = 4096;
constexpr uint64_t kModelledReads = 1000;  // a fixed count: the profile side is the same in every probe of one point

engine::TimeNs MedianNs(std::vector<engine::TimeNs> samples) {
  std::sort(samples.begin(), samples.end());
  return sim::SampleQuantileNs(samples, 0.5);
}

}  // namespace

Result<StorageDrift> ProbeStorageDrift(const StorageDriftOptions& o, const sim::NvmeProfile& profile) {
  std::error_code error;
  const uint64_t file_bytes = std::filesystem::file_size(o.file, error);
  if (error) return Status::NotFound(o.file + ": cannot read its size: " + error.message());
  if (o.read_bytes == 0 || o.read_bytes % kAlignmentBytes != 0 || o.read_bytes > file_bytes) {
    return Status::InvalidArgument(o.file + ": a storage probe's read size (" + std::to_string(o.read_bytes) +
                                   ") must be a positive multiple of 4096 within the file (" +
                                   std::to_string(file_bytes) + " bytes)");
  }
  if (o.queue_depth == 0) return Status::InvalidArgument("storage probe: queue depth must be at least 1");
  engine::MonotonicClock clock;
  engine::StorageOptions storage_options;
  storage_options.clock = &clock;
  storage_options.queue_depth = o.queue_depth;
  storage_options.direct_io = true;
  Result<std::unique_ptr<engine::StorageBackend>> opened = engine::OpenStorage("auto", o.file, storage_options);  // as the engine
  if (!opened.ok()) return opened.status().WithPrefix(o.file);
  std::unique_ptr<engine::StorageBackend> storage = std::move(opened).value();
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<engine::SlabPool> buffers,
                           engine::SlabPool::Create(o.read_bytes * o.queue_depth, o.read_bytes, kAlignmentBytes));
  // Registered as the engine registers its pools; refused, the reads go unregistered, as the engine's would.
  (void)storage->RegisterBuffers(engine::RegistrableRegions(*buffers));
  const uint64_t min_reads = std::max<uint64_t>(o.min_reads, 4ull * o.queue_depth);
  COLIBRI_ASSIGN_OR_RETURN(sim::ClosedLoopReads measured,
                           sim::RunClosedLoopReads(*storage, clock, buffers->base(), o.read_bytes, o.queue_depth,
                                                   std::max(o.max_reads, min_reads), min_reads, o.duration_ns, o.seed,
                                                   file_bytes));
  COLIBRI_RETURN_IF_ERROR(storage->RegisterBuffers({}));  // the pool leaves the ring before it is freed
  storage.reset();
  COLIBRI_ASSIGN_OR_RETURN(sim::ClosedLoopReads modelled,
                           sim::SimulateClosedLoopReads(profile, o.read_bytes, o.queue_depth,
                                                        kModelledReads, o.seed, file_bytes));
  StorageDrift d;
  d.read_bytes = o.read_bytes;
  d.queue_depth = o.queue_depth;
  d.reads = measured.reads;
  d.measured_p50_ns = MedianNs(measured.latencies_ns);
  d.profile_p50_ns = MedianNs(modelled.latencies_ns);
  d.measured_bytes_per_s = measured.bytes_per_s;
  d.profile_bytes_per_s = modelled.bytes_per_s;
  if (d.measured_p50_ns > 0) {
    d.drift = static_cast<double>(d.profile_p50_ns - d.measured_p50_ns) / static_cast<double>(d.measured_p50_ns);
  }
  return d;
}

}  // namespace colibri::replay
