// `colibri bench io`: all-miss expert streaming from storage. Random
// block-aligned reads of whole expert blocks with O_DIRECT, kept at a fixed
// queue depth for a fixed time, through a StorageBackend (uring or pread);
// fio with the same file, block size and queue depth in the same run as the
// reference (docs/BENCHMARKS.md). With --model DIR the file is the model's
// experts.bin, the reads are its expert blocks, and the engine itself also
// streams them in the all-miss configuration (L1 = L2 = 0, one staging slot
// per queue slot) while computing them: layer batches of random routing.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cli_common.h"
#include "colibri/engine/clock.h"
#include "colibri/engine/local_engine.h"
#include "colibri/engine/storage.h"
#include "commands.h"
#include "latency_json.h"

namespace colibri::cli {
namespace {

constexpr uint64_t kPageBytes = 4096;

struct BenchIoFlags {
  std::string model;                    // a model directory: read its experts.bin's expert blocks
  uint32_t batch_tokens = 64;           // --model: tokens per layer batch of the engine run
  uint32_t threads = 2;                 // --model: CPU compute threads of the engine run
  std::string file;                     // empty: create a temporary file of size_bytes in dir
  uint64_t size_bytes = 2ull << 30;
  std::string dir = std::filesystem::temp_directory_path().string();
  uint64_t block_bytes = 3059712;       // Qwen3-30B-A3B's Q4_K_M expert; rounded up to 4 KiB
  uint32_t queue_depth = 32;
  uint32_t seconds = 5;
  std::string backend = "uring";
  bool register_buffers = true;         // io_uring registered buffers (READ_FIXED); fio gets --fixedbufs to match
  std::string fio = "fio";              // the fio binary; "none" skips the reference
  int repeats = 1;
  uint64_t seed = 1;
  bool json = false;
};

uint64_t RoundUp(uint64_t value, uint64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// A file created for the benchmark, removed when the benchmark ends.
struct TempFile {
  ~TempFile() {
    if (!path.empty()) std::filesystem::remove(path);
  }
  std::string path;
};

// Writes `bytes` of pseudo-random data (not zeros: no sparse file, nothing a
// device could compress) to `path`, syncs it and drops it from the page cache.
Status CreateDataFile(const std::string& path, uint64_t bytes, uint64_t seed, Progress* progress) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IoError(path + ": cannot create: " + std::strerror(errno));
  std::vector<uint64_t> chunk((8u << 20) / sizeof(uint64_t));
  std::mt19937_64 rng(seed);
  Status status;
  for (uint64_t written = 0; written < bytes && status.ok();) {
    for (uint64_t& word : chunk) word = rng();
    const uint64_t n = std::min<uint64_t>(bytes - written, chunk.size() * sizeof(uint64_t));
    if (::write(fd, chunk.data(), n) != static_cast<ssize_t>(n)) status = Status::IoError(path + ": write failed");
    written += n;
    progress->Update(written, bytes);
  }
  if (status.ok() && ::fsync(fd) != 0) status = Status::IoError(path + ": fsync failed");
  if (status.ok()) ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  return status;
}

struct ColibriRun {
  uint64_t reads = 0;
  uint64_t read_bytes = 0;
  uint64_t queue_full_events = 0;
  double elapsed_s = 0;
  std::vector<int64_t> latencies_ns;
  std::string backend;
  bool direct_io = false;
  std::string warning;
  double read_bytes_per_s() const { return static_cast<double>(read_bytes) / elapsed_s; }
};

// queue_depth buffers of one block each, in one page-aligned arena (registered with io_uring).
struct BlockBuffers {
  BlockBuffers(uint32_t count, uint64_t block_bytes)
      : arena(static_cast<char*>(std::aligned_alloc(kPageBytes, count * block_bytes)), &std::free) {
    for (uint32_t i = 0; i < count; ++i) pointers.push_back(arena.get() + i * block_bytes);
  }
  std::unique_ptr<char, decltype(&std::free)> arena;
  std::vector<void*> pointers;
};

// Keeps queue_depth random whole-block reads in flight for `seconds`, then drains.
// `offsets`: where the blocks start (a model's expert offsets), or empty for every block-aligned offset.
Result<ColibriRun> RunColibri(const std::string& path, uint64_t file_bytes, uint64_t block_bytes,
                              const std::vector<uint64_t>& offsets, const BenchIoFlags& f, uint64_t seed) {
  engine::MonotonicClock clock;
  BlockBuffers buffers(f.queue_depth, block_bytes);
  engine::StorageOptions options;
  options.clock = &clock;
  options.queue_depth = f.queue_depth;
  options.direct_io = true;
  if (f.register_buffers) {
    options.registered_buffers = buffers.pointers;
    options.registered_buffer_bytes = block_bytes;
  }
  auto opened =
      f.backend == "uring" ? engine::OpenUringStorage(path, options) : engine::OpenPreadStorage(path, options);
  if (!opened.ok()) return opened.status();
  engine::StorageBackend& storage = *opened.value();

  std::mt19937_64 rng(seed);
  const uint64_t blocks = offsets.empty() ? file_bytes / block_bytes : offsets.size();
  auto submit = [&](uint64_t slot) {
    const uint64_t block = rng() % blocks;
    const uint64_t offset = offsets.empty() ? block * block_bytes : offsets[block];
    return storage.Submit({offset, block_bytes, buffers.pointers[slot], slot});
  };
  ColibriRun run;
  const engine::TimeNs start_ns = clock.Now();
  const engine::TimeNs deadline_ns = start_ns + static_cast<engine::TimeNs>(f.seconds) * 1'000'000'000;
  for (uint32_t slot = 0; slot < f.queue_depth; ++slot) COLIBRI_RETURN_IF_ERROR(submit(slot));
  std::vector<engine::ReadCompletion> done;
  while (storage.outstanding() > 0) {
    done.clear();
    COLIBRI_RETURN_IF_ERROR(storage.Poll(true, &done));
    const bool more = clock.Now() < deadline_ns;
    for (const engine::ReadCompletion& c : done) {
      if (!c.status.ok()) return c.status;
      run.latencies_ns.push_back(c.complete_ns - c.submit_ns);
      if (more) COLIBRI_RETURN_IF_ERROR(submit(c.tag));
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

struct EngineRun {
  uint64_t read_bytes = 0;
  uint64_t reads = 0;
  uint64_t registered_reads = 0;
  uint64_t layer_batches = 0;
  uint64_t distinct_experts = 0;
  engine::TimeNs compute_ns = 0;
  double elapsed_s = 0;
  double read_bytes_per_s() const { return static_cast<double>(read_bytes) / elapsed_s; }
};

// Random routing for one layer batch: each token's top_k distinct experts, weights 1/k.
void RandomRouting(std::mt19937_64& rng, uint32_t experts, uint32_t k, size_t tokens, std::vector<uint32_t>* ids,
                   std::vector<float>* weights) {
  ids->clear();
  weights->assign(tokens * k, 1.0f / static_cast<float>(k));
  for (size_t t = 0; t < tokens; ++t) {
    while (ids->size() < (t + 1) * k) {
      const auto id = static_cast<uint32_t>(rng() % experts);
      if (std::find(ids->begin() + static_cast<std::ptrdiff_t>(t * k), ids->end(), id) == ids->end()) ids->push_back(id);
    }
  }
}

// The engine in the all-miss configuration for `seconds`: layer batches of
// random routing, every expert read from storage into a staging slot and computed.
Result<EngineRun> RunEngine(const BenchIoFlags& f, uint64_t seed) {
  engine::LocalEngineOptions options;
  options.model_dir = f.model;
  options.storage = f.backend;
  options.queue_depth = f.queue_depth;
  options.threads = f.threads;
  options.engine.staging_slots = f.queue_depth;
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<engine::LocalEngine> e, engine::LocalEngine::Open(options));
  if (f.backend == "uring" && !f.register_buffers) COLIBRI_RETURN_IF_ERROR(e->storage->RegisterBuffers({}));
  const engine::EngineModel& m = e->moe->model();
  std::vector<float> hidden(static_cast<size_t>(f.batch_tokens) * m.layout.hidden, 0.5f), out(hidden.size());
  std::vector<uint32_t> ids;
  std::vector<float> weights;
  std::mt19937_64 rng(seed);
  EngineRun run;
  const engine::TimeNs start_ns = e->loop.Now();
  const engine::TimeNs deadline_ns = start_ns + static_cast<engine::TimeNs>(f.seconds) * 1'000'000'000;
  for (uint32_t layer = 0; e->loop.Now() < deadline_ns; layer = (layer + 1) % m.moe_layers) {
    RandomRouting(rng, m.experts, m.top_k, f.batch_tokens, &ids, &weights);
    engine::LayerBatchReport report;
    COLIBRI_RETURN_IF_ERROR(e->moe->Execute(layer, hidden.data(), {f.batch_tokens, ids.data(), weights.data()},
                                            out.data(), &report));
    ++run.layer_batches;
    run.distinct_experts += report.distinct_experts;
    run.compute_ns += report.step_ns.compute;
  }
  run.elapsed_s = static_cast<double>(e->loop.Now() - start_ns) / 1e9;
  run.read_bytes = e->storage->counters().read_bytes;
  run.reads = e->storage->counters().reads;
  run.registered_reads = e->storage->counters().registered_reads;
  return run;
}

std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Like for like: fio registers its buffers exactly when colibri does.
bool UsesRegisteredBuffers(const BenchIoFlags& f) { return f.backend == "uring" && f.register_buffers; }

std::string FioCommand(const std::string& fio, const std::string& path, uint64_t block_bytes, const BenchIoFlags& f) {
  return ShellQuote(fio) + " --name=colibri --filename=" + ShellQuote(path) +
         " --ioengine=io_uring --direct=1 --rw=randread --bs=" + std::to_string(block_bytes) +
         " --iodepth=" + std::to_string(f.queue_depth) + " --runtime=" + std::to_string(f.seconds) +
         " --time_based --percentile_list=50:90:99:99.9 --output-format=json" +
         (UsesRegisteredBuffers(f) ? " --fixedbufs" : "");
}

// Runs fio and returns its job's read section (bw_bytes, iops, clat_ns, ...).
Result<Json> RunFio(const std::string& command) {
  std::FILE* pipe = ::popen((command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return Status::IoError("cannot run fio");
  std::string output;
  char chunk[4096];
  while (size_t n = std::fread(chunk, 1, sizeof(chunk), pipe)) output.append(chunk, n);
  const int rc = ::pclose(pipe);
  const size_t json_start = output.find('{');  // fio may print notes before the document
  if (rc != 0 || json_start == std::string::npos) {
    return Status::IoError("fio failed (exit status " + std::to_string(rc) + "): " + command);
  }
  const Json doc = Json::parse(output.substr(json_start), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.contains("jobs") || doc["jobs"].empty() || !doc["jobs"][0].contains("read")) {
    return Status::IoError("fio printed no job read figures: " + command);
  }
  return doc["jobs"][0]["read"];
}

// fio's completion latency percentiles, renamed like ours (null where fio gave none).
Json FioLatencyJson(const Json& read) {
  const Json& percentiles = read["clat_ns"].value("percentile", Json::object());
  auto at = [&](const char* key) { return percentiles.contains(key) ? percentiles[key] : Json(nullptr); };
  return Json{{"p50", at("50.000000")},
              {"p90", at("90.000000")},
              {"p99", at("99.000000")},
              {"p999", at("99.900000")},
              {"max", read["clat_ns"].value("max", Json(nullptr))}};
}

struct Measured {
  std::optional<EngineRun> engine_best;  // with --model
  std::vector<double> engine_runs_bytes_per_s;
  ColibriRun best;
  std::vector<double> runs_bytes_per_s;
  Json fio_best = nullptr;  // fio's read section of its best run
  std::vector<double> fio_runs_bytes_per_s;
  std::string fio_note;  // why there is no fio figure
};

bool FioAvailable(const std::string& fio) {
  if (fio == "none") return false;
  return std::system(("command -v " + ShellQuote(fio) + " >/dev/null 2>&1").c_str()) == 0;
}

// `repeats` rounds of colibri (storage, then the engine with --model) then
// fio (interleaved, so drift hits all); the best of each.
Result<Measured> Measure(const std::string& path, uint64_t file_bytes, uint64_t block_bytes,
                         const std::vector<uint64_t>& offsets, const BenchIoFlags& f, Progress* progress) {
  Measured m;
  const bool fio = FioAvailable(f.fio);
  if (!fio) m.fio_note = f.fio == "none" ? "skipped (--fio none)" : "'" + f.fio + "' not found";
  const int steps = f.model.empty() ? 2 : 3;
  for (int round = 0; round < f.repeats; ++round) {
    progress->Update(steps * round + 1, steps * f.repeats);
    COLIBRI_ASSIGN_OR_RETURN(ColibriRun run, RunColibri(path, file_bytes, block_bytes, offsets, f, f.seed + round));
    m.runs_bytes_per_s.push_back(run.read_bytes_per_s());
    if (round == 0 || run.read_bytes_per_s() > m.best.read_bytes_per_s()) m.best = std::move(run);
    if (!f.model.empty()) {
      progress->Update(steps * round + 2, steps * f.repeats);
      COLIBRI_ASSIGN_OR_RETURN(EngineRun engine_run, RunEngine(f, f.seed + round));
      m.engine_runs_bytes_per_s.push_back(engine_run.read_bytes_per_s());
      if (!m.engine_best || engine_run.read_bytes_per_s() > m.engine_best->read_bytes_per_s()) m.engine_best = engine_run;
    }
    if (!fio) continue;
    progress->Update(steps * round + steps, steps * f.repeats);
    COLIBRI_ASSIGN_OR_RETURN(Json read, RunFio(FioCommand(f.fio, path, block_bytes, f)));
    const double bw = read.value("bw_bytes", 0.0);
    m.fio_runs_bytes_per_s.push_back(bw);
    if (m.fio_best.is_null() || bw > m.fio_best.value("bw_bytes", 0.0)) m.fio_best = read;
  }
  return m;
}

Json ConfigJson(const BenchIoFlags& f) {
  return Json{{"model", f.model},
              {"batch_tokens", f.batch_tokens},
              {"threads", f.threads},
              {"file", f.file},
              {"size_bytes", f.size_bytes},
              {"dir", f.dir},
              {"block_bytes", f.block_bytes},
              {"queue_depth", f.queue_depth},
              {"seconds", f.seconds},
              {"backend", f.backend},
              {"register_buffers", f.register_buffers},
              {"fio", f.fio},
              {"repeats", f.repeats},
              {"seed", f.seed}};
}

Json ResultJson(const BenchIoFlags& f, const std::string& path, uint64_t file_bytes, bool created, uint64_t block_bytes,
                Measured* m) {
  ColibriRun& best = m->best;
  Json fio = nullptr;
  Json ratio = nullptr;
  if (!m->fio_best.is_null()) {
    const double fio_bw = m->fio_best.value("bw_bytes", 0.0);
    fio = Json{{"command", FioCommand(f.fio, path, block_bytes, f)},
               {"read_bytes_per_s", fio_bw},
               {"iops", m->fio_best.value("iops", 0.0)},
               {"completion_latency_ns", FioLatencyJson(m->fio_best)},
               {"runs_read_bytes_per_s", m->fio_runs_bytes_per_s}};
    if (fio_bw > 0) ratio = best.read_bytes_per_s() / fio_bw;
  }
  Json engine = nullptr;
  if (m->engine_best) {
    const EngineRun& e = *m->engine_best;
    engine = Json{{"read_bytes_per_s", e.read_bytes_per_s()},
                  {"read_bytes", e.read_bytes},
                  {"reads", e.reads},
                  {"registered_reads", e.registered_reads},
                  {"layer_batches", e.layer_batches},
                  {"experts_per_batch", static_cast<double>(e.distinct_experts) / static_cast<double>(e.layer_batches)},
                  {"compute_s", static_cast<double>(e.compute_ns) / 1e9},
                  {"elapsed_s", e.elapsed_s},
                  {"runs_read_bytes_per_s", m->engine_runs_bytes_per_s},
                  {"over_fio", fio.is_null() ? Json(nullptr) : Json(e.read_bytes_per_s() / fio["read_bytes_per_s"].get<double>())}};
  }
  return Json{{"config", ConfigJson(f)},
              {"file", path},
              {"file_bytes", file_bytes},
              {"created_file", created},
              {"backend", best.backend},
              {"direct_io", best.direct_io},
              {"registered_buffers", UsesRegisteredBuffers(f)},
              {"warning", best.warning.empty() ? Json(nullptr) : Json(best.warning)},
              {"block_bytes", block_bytes},
              {"queue_depth", f.queue_depth},
              {"reads", best.reads},
              {"read_bytes", best.read_bytes},
              {"elapsed_s", best.elapsed_s},
              {"read_bytes_per_s", best.read_bytes_per_s()},
              {"queue_full_events", best.queue_full_events},
              {"read_latency_ns", LatencyJson(best.latencies_ns)},
              {"runs_read_bytes_per_s", m->runs_bytes_per_s},
              {"fio", fio},
              {"fio_note", m->fio_note.empty() ? Json(nullptr) : Json(m->fio_note)},
              {"colibri_over_fio", ratio},
              {"engine", engine}};
}

// The model's experts file, expert block size and every expert's offset.
struct ModelBlocks {
  std::string path;
  uint64_t block_bytes = 0;
  std::vector<uint64_t> offsets;
};

Result<ModelBlocks> ModelBlocksOf(const std::string& dir) {
  COLIBRI_ASSIGN_OR_RETURN(engine::Model model, engine::OpenModel(dir, /*verify_checksums=*/false));
  ModelBlocks blocks{model.experts_path(), model.config().layout.block_bytes, {}};
  for (uint32_t layer = 0; layer < model.config().layers(); ++layer) {
    for (uint32_t e = 0; e < model.config().experts; ++e) blocks.offsets.push_back(model.ExpertOffset(layer, e));
  }
  return blocks;
}

Result<Json> BenchIo(const BenchIoFlags& f, Progress* progress) {
  if (f.block_bytes == 0) return Status::InvalidArgument("--block-bytes must be > 0");
  uint64_t block_bytes = RoundUp(f.block_bytes, kPageBytes);
  TempFile created;
  std::string path = f.file;
  ModelBlocks model;
  if (!f.model.empty()) {
    COLIBRI_ASSIGN_OR_RETURN(model, ModelBlocksOf(f.model));
    path = model.path;
    block_bytes = model.block_bytes;
  } else if (path.empty()) {
    const std::string name = "colibri-bench-io-" + std::to_string(::getpid()) + ".bin";
    created.path = (std::filesystem::path(f.dir) / name).string();
    path = created.path;
    COLIBRI_RETURN_IF_ERROR(CreateDataFile(path, f.size_bytes, f.seed, progress));
  }
  std::error_code error;
  const uint64_t file_bytes = std::filesystem::file_size(path, error);
  if (error) return Status::NotFound(path + ": " + error.message());
  if (file_bytes < block_bytes) {
    return Status::InvalidArgument(path + ": " + std::to_string(file_bytes) + " bytes, smaller than one block (" +
                                   std::to_string(block_bytes) + " bytes)");
  }
  COLIBRI_ASSIGN_OR_RETURN(Measured m, Measure(path, file_bytes, block_bytes, model.offsets, f, progress));
  return ResultJson(f, path, file_bytes, !created.path.empty(), block_bytes, &m);
}

// The engine's all-miss streaming (with --model).
void PrintEngineHuman(const Json& e) {
  if (e.is_null()) return;
  std::printf("%-10s %9.1f MiB/s  %llu layer batches, %.1f experts each, compute %.2f s of %.2f s",
              "engine", e["read_bytes_per_s"].get<double>() / 1048576.0,
              static_cast<unsigned long long>(e["layer_batches"].get<uint64_t>()), e["experts_per_batch"].get<double>(),
              e["compute_s"].get<double>(), e["elapsed_s"].get<double>());
  if (!e["over_fio"].is_null()) std::printf("  engine / fio %.3f", e["over_fio"].get<double>());
  std::printf("\n");
}

void PrintHuman(const Json& r) {
  const Json& lat = r["read_latency_ns"];
  std::printf("%s, %s, %s, block %llu bytes, queue depth %u, %llu reads\n", r["backend"].get<std::string>().c_str(),
              r["direct_io"].get<bool>() ? "O_DIRECT" : "buffered",
              r["registered_buffers"].get<bool>() ? "registered buffers" : "unregistered buffers",
              static_cast<unsigned long long>(r["block_bytes"].get<uint64_t>()), r["queue_depth"].get<uint32_t>(),
              static_cast<unsigned long long>(r["reads"].get<uint64_t>()));
  std::printf("%-10s %9.1f MiB/s  latency p50 %.2f ms  p99 %.2f ms  p99.9 %.2f ms  max %.2f ms\n", "colibri",
              r["read_bytes_per_s"].get<double>() / 1048576.0, lat["p50"].get<double>() / 1e6,
              lat["p99"].get<double>() / 1e6, lat["p999"].get<double>() / 1e6, lat["max"].get<double>() / 1e6);
  if (r["fio"].is_null()) {
    std::printf("fio: %s\n", r["fio_note"].get<std::string>().c_str());
    return;
  }
  const Json& fio_lat = r["fio"]["completion_latency_ns"];
  auto ms = [](const Json& ns) { return ns.is_null() ? NAN : ns.get<double>() / 1e6; };
  std::printf("%-10s %9.1f MiB/s  latency p50 %.2f ms  p99 %.2f ms  p99.9 %.2f ms  max %.2f ms (completion)\n", "fio",
              r["fio"]["read_bytes_per_s"].get<double>() / 1048576.0, ms(fio_lat["p50"]), ms(fio_lat["p99"]),
              ms(fio_lat["p999"]), ms(fio_lat["max"]));
  std::printf("colibri / fio %.3f\n", r["colibri_over_fio"].get<double>());
  PrintEngineHuman(r["engine"]);
}

}  // namespace

void AddBenchIoCommand(CLI::App* bench, int* exit_code) {
  auto flags = std::make_shared<BenchIoFlags>();
  CLI::App* cmd = bench->add_subcommand(
      "io", "All-miss expert streaming: random whole-block O_DIRECT reads at a queue depth, against fio");
  CLI::Option* model = cmd->add_option("--model", flags->model,
                                       "Model directory: read its experts.bin's expert blocks, and stream them "
                                       "through the engine too (L1 = L2 = 0)");
  cmd->add_option("--batch-tokens", flags->batch_tokens, "With --model: tokens per layer batch (random routing)")
      ->check(CLI::Range(1u, 65536u))
      ->capture_default_str();
  cmd->add_option("--threads", flags->threads, "With --model: CPU compute threads")
      ->check(CLI::Range(1u, 256u))
      ->capture_default_str();
  CLI::Option* file = cmd->add_option("--file", flags->file, "File to read (default: create one of --size in --dir)")
                          ->excludes(model)
                          ->capture_default_str();
  cmd->add_option("--size", flags->size_bytes, "Size of the file to create when --file is not given")
      ->transform(SizeValidator())
      ->excludes(file)
      ->excludes(model)
      ->capture_default_str();
  cmd->add_option("--dir", flags->dir, "Directory for the created file")->capture_default_str();
  cmd->add_option("--block-bytes", flags->block_bytes, "Bytes per read, rounded up to 4 KiB (default: one "
                  "Qwen3-30B-A3B Q4_K_M expert; with --model: its expert block)")
      ->transform(SizeValidator())
      ->excludes(model)
      ->capture_default_str();
  cmd->add_option("--queue-depth", flags->queue_depth, "Reads in flight")
      ->check(CLI::Range(1u, 32768u))
      ->capture_default_str();
  cmd->add_option("--seconds", flags->seconds, "Duration of each run")
      ->check(CLI::Range(1u, 3600u))
      ->capture_default_str();
  cmd->add_option("--backend", flags->backend, "Storage backend")
      ->check(CLI::IsMember({"uring", "pread"}))
      ->capture_default_str();
  cmd->add_option("--register-buffers", flags->register_buffers,
                  "Register the read buffers with io_uring (READ_FIXED; fio then runs with --fixedbufs)")
      ->capture_default_str();
  cmd->add_option("--fio", flags->fio, "fio binary for the reference run, or 'none'")->capture_default_str();
  cmd->add_option("--repeats", flags->repeats, "Rounds of colibri then fio (the best of each is reported)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Seed of the file's data and the read offsets")->capture_default_str();
  cmd->add_flag("--json", flags->json, "Print the result as JSON on stdout");
  cmd->callback([flags, exit_code] {
    Progress progress("bench io");
    auto result = BenchIo(*flags, &progress);
    progress.Done();
    if (result.ok() && !result.value()["warning"].is_null()) {
      std::fprintf(stderr, "colibri: warning: %s\n", result.value()["warning"].get<std::string>().c_str());
    }
    *exit_code = Emit(result, flags->json, &PrintHuman);
  });
}

}  // namespace colibri::cli
