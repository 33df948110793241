#include "colibri/bench/storage_reads.h"

#include <cstdlib>
#include <memory>
#include <random>

#include "colibri/bench/files.h"
#include "colibri/engine/clock.h"
#include "colibri/engine/storage.h"

namespace colibri::bench {
namespace {

// `count` buffers of one block each, in one page-aligned arena (registered with io_uring).
struct BlockBuffers {
  BlockBuffers(uint32_t count, uint64_t block_bytes)
      : arena(static_cast<char*>(std::aligned_alloc(kPageBytes, count * block_bytes)), &std::free) {
    for (uint32_t i = 0; i < count; ++i) pointers.push_back(arena.get() + i * block_bytes);
  }
  std::unique_ptr<char, decltype(&std::free)> arena;
  std::vector<void*> pointers;
};

Status CheckOptions(const std::string& path, const StorageReadOptions& o, uint64_t* blocks) {
  if (o.block_bytes == 0 || o.queue_depth == 0) {
    return Status::InvalidArgument("storage reads: block_bytes and queue_depth must be > 0");
  }
  if (o.duration_ns == 0 && o.read_count == 0) {
    return Status::InvalidArgument("storage reads: give a duration or a read count");
  }
  if (o.backend == "auto" || o.backend.empty()) {
    return Status::InvalidArgument("storage reads: name the backend measured (uring or pread), not 'auto'");
  }
  *blocks = o.offsets.empty() ? FileBytes(path) / o.block_bytes : o.offsets.size();
  if (*blocks == 0) {
    return Status::InvalidArgument(path + ": holds no whole block of " + std::to_string(o.block_bytes) + " bytes");
  }
  return Status::Ok();
}

}  // namespace

Result<StorageReadRun> MeasureStorageReads(const std::string& path, const StorageReadOptions& o) {
  uint64_t blocks = 0;
  COLIBRI_RETURN_IF_ERROR(CheckOptions(path, o, &blocks));
  engine::MonotonicClock clock;
  BlockBuffers buffers(o.queue_depth, o.block_bytes);
  engine::StorageOptions options;
  options.clock = &clock;
  options.queue_depth = o.queue_depth;
  options.direct_io = true;
  if (o.register_buffers) {
    options.registered_buffers = buffers.pointers;
    options.registered_buffer_bytes = o.block_bytes;
  }
  auto opened = engine::OpenStorage(o.backend, path, options);
  if (!opened.ok()) return opened.status();
  engine::StorageBackend& storage = *opened.value();

  std::mt19937_64 rng(o.seed);
  uint64_t submitted = 0;
  auto submit = [&](uint64_t slot) {
    const uint64_t block = rng() % blocks;
    const uint64_t offset = o.offsets.empty() ? block * o.block_bytes : o.offsets[block];
    ++submitted;
    return storage.Submit({offset, o.block_bytes, buffers.pointers[slot], slot});
  };
  auto counted_out = [&] { return o.read_count != 0 && submitted >= o.read_count; };
  StorageReadRun run;
  const engine::TimeNs start_ns = clock.Now();
  const engine::TimeNs deadline_ns = start_ns + static_cast<engine::TimeNs>(o.duration_ns);
  for (uint32_t slot = 0; slot < o.queue_depth && !counted_out(); ++slot) COLIBRI_RETURN_IF_ERROR(submit(slot));
  std::vector<engine::ReadCompletion> done;
  while (storage.outstanding() > 0) {
    done.clear();
    COLIBRI_RETURN_IF_ERROR(storage.Poll(true, &done));
    const bool in_time = o.duration_ns == 0 || clock.Now() < deadline_ns;
    for (const engine::ReadCompletion& c : done) {
      if (!c.status.ok()) return c.status;
      run.latencies_ns.push_back(c.complete_ns - c.submit_ns);
      if (in_time && !counted_out()) COLIBRI_RETURN_IF_ERROR(submit(c.tag));
    }
  }
  run.elapsed_s = static_cast<double>(clock.Now() - start_ns) / 1e9;
  run.reads = storage.counters().reads;
  run.read_bytes = storage.counters().read_bytes;
  run.queue_full_events = storage.counters().queue_full_events;
  run.backend = storage.caps().name;
  run.direct_io = storage.caps().direct_io;
  run.warning = storage.warning();
  return run;
}

}  // namespace colibri::bench
