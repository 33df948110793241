#include "colibri/bench/io_bench.h"

#include <unistd.h>

#include <filesystem>
#include <optional>
#include <vector>

#include "colibri/bench/engine_streaming.h"
#include "colibri/bench/files.h"
#include "colibri/bench/fio.h"
#include "colibri/bench/storage_reads.h"
#include "colibri/engine/mix.h"
#include "colibri/reports/latency_json.h"

namespace colibri::bench {
namespace {

constexpr uint64_t kNsPerS = 1'000'000'000;

// What the rounds measured: the best of each, and every round's rate.
struct Measured {
  std::optional<EngineStreamingRun> engine_best;  // with a model
  std::vector<double> engine_runs_bytes_per_s;
  StorageReadRun best;
  std::vector<double> runs_bytes_per_s;
  Json fio_best = nullptr;  // fio's read section of its best run
  std::vector<double> fio_runs_bytes_per_s;
  std::string fio_note;  // why there is no fio figure
};

FioOptions FioOptionsOf(const IoBenchOptions& o, const std::string& path, uint64_t block_bytes) {
  return FioOptions{.fio = o.fio,
                    .path = path,
                    .block_bytes = block_bytes,
                    .queue_depth = o.queue_depth,
                    .seconds = o.seconds,
                    .fixed_buffers = UsesRegisteredBuffers(o)};
}

Result<Measured> Measure(const std::string& path, uint64_t block_bytes, const std::vector<uint64_t>& offsets,
                         const IoBenchOptions& o, const Observer& observer) {
  Measured m;
  const bool fio = FioAvailable(o.fio);
  if (!fio) m.fio_note = o.fio == "none" ? "skipped (--fio none)" : "'" + o.fio + "' not found";
  const int steps = o.model.empty() ? 2 : 3;
  StorageReadOptions reads;
  reads.backend = o.backend;
  reads.block_bytes = block_bytes;
  reads.offsets = offsets;
  reads.queue_depth = o.queue_depth;
  reads.register_buffers = o.register_buffers;
  reads.duration_ns = uint64_t{o.seconds} * kNsPerS;
  EngineStreamingOptions streaming{.model_dir = o.model,
                                   .storage = o.backend,
                                   .queue_depth = o.queue_depth,
                                   .threads = o.threads,
                                   .batch_tokens = o.batch_tokens,
                                   .register_buffers = o.register_buffers,
                                   .duration_ns = uint64_t{o.seconds} * kNsPerS};
  for (int round = 0; round < o.repeats; ++round) {
    observer.Progress(steps * round + 1, steps * o.repeats);
    reads.seed = engine::DeriveSeed(o.seed, "io_bench_reads." + std::to_string(round));
    COLIBRI_ASSIGN_OR_RETURN(StorageReadRun run, MeasureStorageReads(path, reads));
    m.runs_bytes_per_s.push_back(run.read_bytes_per_s());
    if (round == 0 || run.read_bytes_per_s() > m.best.read_bytes_per_s()) m.best = std::move(run);
    if (!o.model.empty()) {
      observer.Progress(steps * round + 2, steps * o.repeats);
      streaming.seed = engine::DeriveSeed(o.seed, "io_bench_engine." + std::to_string(round));
      COLIBRI_ASSIGN_OR_RETURN(EngineStreamingRun engine_run, MeasureEngineStreaming(streaming));
      m.engine_runs_bytes_per_s.push_back(engine_run.read_bytes_per_s());
      if (!m.engine_best || engine_run.read_bytes_per_s() > m.engine_best->read_bytes_per_s()) m.engine_best = engine_run;
    }
    if (!fio) continue;
    observer.Progress(steps * round + steps, steps * o.repeats);
    COLIBRI_ASSIGN_OR_RETURN(Json read, RunFio(FioCommand(FioOptionsOf(o, path, block_bytes))));
    const double bw = read.value("bw_bytes", 0.0);
    m.fio_runs_bytes_per_s.push_back(bw);
    if (m.fio_best.is_null() || bw > m.fio_best.value("bw_bytes", 0.0)) m.fio_best = read;
  }
  return m;
}

Json EngineJson(const EngineStreamingRun& e, const std::vector<double>& runs_bytes_per_s, const Json& fio) {
  return Json{{"read_bytes_per_s", e.read_bytes_per_s()},
              {"read_bytes", e.read_bytes},
              {"reads", e.reads},
              {"registered_reads", e.registered_reads},
              {"layer_batches", e.layer_batches},
              {"experts_per_batch", static_cast<double>(e.distinct_experts) / static_cast<double>(e.layer_batches)},
              {"compute_s", static_cast<double>(e.compute_ns) / 1e9},
              {"elapsed_s", e.elapsed_s},
              {"runs_read_bytes_per_s", runs_bytes_per_s},
              {"over_fio", fio.is_null() ? Json(nullptr)
                                         : Json(e.read_bytes_per_s() / fio["read_bytes_per_s"].get<double>())}};
}

Json ResultJson(const IoBenchOptions& o, const std::string& path, uint64_t file_bytes, bool created,
                uint64_t block_bytes, Measured* m) {
  StorageReadRun& best = m->best;
  Json fio = nullptr;
  Json ratio = nullptr;
  if (!m->fio_best.is_null()) {
    const double fio_bw = m->fio_best.value("bw_bytes", 0.0);
    fio = Json{{"command", FioCommand(FioOptionsOf(o, path, block_bytes))},
               {"read_bytes_per_s", fio_bw},
               {"iops", m->fio_best.value("iops", 0.0)},
               {"completion_latency_ns", FioLatencyJson(m->fio_best)},
               {"runs_read_bytes_per_s", m->fio_runs_bytes_per_s}};
    if (fio_bw > 0) ratio = best.read_bytes_per_s() / fio_bw;
  }
  const Json engine = m->engine_best ? EngineJson(*m->engine_best, m->engine_runs_bytes_per_s, fio) : Json(nullptr);
  return Json{{"file", path},
              {"file_bytes", file_bytes},
              {"created_file", created},
              {"backend", best.backend},
              {"direct_io", best.direct_io},
              {"registered_buffers", UsesRegisteredBuffers(o)},
              {"warning", best.warning.empty() ? Json(nullptr) : Json(best.warning)},
              {"block_bytes", block_bytes},
              {"queue_depth", o.queue_depth},
              {"reads", best.reads},
              {"read_bytes", best.read_bytes},
              {"elapsed_s", best.elapsed_s},
              {"read_bytes_per_s", best.read_bytes_per_s()},
              {"queue_full_events", best.queue_full_events},
              {"read_latency_ns", reports::LatencyJson(best.latencies_ns)},
              {"runs_read_bytes_per_s", m->runs_bytes_per_s},
              {"fio", fio},
              {"fio_note", m->fio_note.empty() ? Json(nullptr) : Json(m->fio_note)},
              {"colibri_over_fio", ratio},
              {"engine", engine}};
}

}  // namespace

bool UsesRegisteredBuffers(const IoBenchOptions& o) { return o.backend == "uring" && o.register_buffers; }

Result<Json> RunIoBench(const IoBenchOptions& o, const Observer& observer) {
  if (o.block_bytes == 0) return Status::InvalidArgument("bench io: block_bytes must be > 0");
  uint64_t block_bytes = RoundUp(o.block_bytes, kPageBytes);
  ScratchFile created;
  std::string path = o.file;
  ModelBlocks model;
  if (!o.model.empty()) {
    COLIBRI_ASSIGN_OR_RETURN(model, ModelBlocksOf(o.model));
    path = model.path;
    block_bytes = model.block_bytes;
  } else if (path.empty()) {
    const std::string name = "colibri-bench-io-" + std::to_string(::getpid()) + ".bin";
    created = ScratchFile((std::filesystem::path(o.dir) / name).string());
    path = created.path();
    COLIBRI_RETURN_IF_ERROR(CreateRandomFile(path, o.size_bytes, engine::DeriveSeed(o.seed, "io_bench_file"), observer));
  }
  std::error_code error;
  const uint64_t file_bytes = std::filesystem::file_size(path, error);
  if (error) return Status::NotFound(path + ": " + error.message());
  if (file_bytes < block_bytes) {
    return Status::InvalidArgument(path + ": " + std::to_string(file_bytes) + " bytes, smaller than one block (" +
                                   std::to_string(block_bytes) + " bytes)");
  }
  COLIBRI_ASSIGN_OR_RETURN(Measured m, Measure(path, block_bytes, model.offsets, o, observer));
  return ResultJson(o, path, file_bytes, !created.path().empty(), block_bytes, &m);
}

}  // namespace colibri::bench
