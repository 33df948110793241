// `colibri bench io`: all-miss expert streaming from storage. Random
// block-aligned reads of whole expert blocks with O_DIRECT, kept at a fixed
// queue depth for a fixed time, through a StorageBackend (uring or pread);
// fio with the same file, block size and queue depth in the same run as the
// reference (docs/BENCHMARKS.md).
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
#include <random>
#include <string>
#include <vector>

#include "cli_common.h"
#include "colibri/engine/clock.h"
#include "colibri/engine/storage.h"
#include "commands.h"

namespace colibri::cli {
namespace {

constexpr uint64_t kPageBytes = 4096;

struct BenchIoFlags {
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

struct LatencyPercentiles {
  int64_t p50 = 0, p90 = 0, p99 = 0, p999 = 0, max = 0;
};

// Nearest-rank percentiles; sorts `samples`.
LatencyPercentiles Percentiles(std::vector<int64_t>* samples) {
  std::sort(samples->begin(), samples->end());
  auto rank = [&](double p) {
    const auto index = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(samples->size())));
    return (*samples)[std::clamp<size_t>(index, 1, samples->size()) - 1];
  };
  return {rank(50), rank(90), rank(99), rank(99.9), samples->back()};
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
Result<ColibriRun> RunColibri(const std::string& path, uint64_t file_bytes, uint64_t block_bytes,
                              const BenchIoFlags& f, uint64_t seed) {
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
  const uint64_t blocks = file_bytes / block_bytes;
  auto submit = [&](uint64_t slot) {
    return storage.Submit({rng() % blocks * block_bytes, block_bytes, buffers.pointers[slot], slot});
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

Json LatencyJson(const LatencyPercentiles& p) {
  return Json{{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"p999", p.p999}, {"max", p.max}};
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

// `repeats` rounds of colibri then fio (interleaved, so drift hits both); the best of each.
Result<Measured> Measure(const std::string& path, uint64_t file_bytes, uint64_t block_bytes, const BenchIoFlags& f,
                         Progress* progress) {
  Measured m;
  const bool fio = FioAvailable(f.fio);
  if (!fio) m.fio_note = f.fio == "none" ? "skipped (--fio none)" : "'" + f.fio + "' not found";
  for (int round = 0; round < f.repeats; ++round) {
    progress->Update(2 * round + 1, 2 * f.repeats);
    COLIBRI_ASSIGN_OR_RETURN(ColibriRun run, RunColibri(path, file_bytes, block_bytes, f, f.seed + round));
    m.runs_bytes_per_s.push_back(run.read_bytes_per_s());
    if (round == 0 || run.read_bytes_per_s() > m.best.read_bytes_per_s()) m.best = std::move(run);
    if (!fio) continue;
    progress->Update(2 * round + 2, 2 * f.repeats);
    COLIBRI_ASSIGN_OR_RETURN(Json read, RunFio(FioCommand(f.fio, path, block_bytes, f)));
    const double bw = read.value("bw_bytes", 0.0);
    m.fio_runs_bytes_per_s.push_back(bw);
    if (m.fio_best.is_null() || bw > m.fio_best.value("bw_bytes", 0.0)) m.fio_best = read;
  }
  return m;
}

Json ConfigJson(const BenchIoFlags& f) {
  return Json{{"file", f.file},
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
              {"read_latency_ns", LatencyJson(Percentiles(&best.latencies_ns))},
              {"runs_read_bytes_per_s", m->runs_bytes_per_s},
              {"fio", fio},
              {"fio_note", m->fio_note.empty() ? Json(nullptr) : Json(m->fio_note)},
              {"colibri_over_fio", ratio}};
}

Result<Json> BenchIo(const BenchIoFlags& f, Progress* progress) {
  if (f.block_bytes == 0) return Status::InvalidArgument("--block-bytes must be > 0");
  const uint64_t block_bytes = RoundUp(f.block_bytes, kPageBytes);
  TempFile created;
  std::string path = f.file;
  if (path.empty()) {
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
  COLIBRI_ASSIGN_OR_RETURN(Measured m, Measure(path, file_bytes, block_bytes, f, progress));
  return ResultJson(f, path, file_bytes, !created.path.empty(), block_bytes, &m);
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
}

}  // namespace

void AddBenchIoCommand(CLI::App* bench, int* exit_code) {
  auto flags = std::make_shared<BenchIoFlags>();
  CLI::App* cmd = bench->add_subcommand(
      "io", "All-miss expert streaming: random whole-block O_DIRECT reads at a queue depth, against fio");
  CLI::Option* file = cmd->add_option("--file", flags->file, "File to read (default: create one of --size in --dir)")
                          ->capture_default_str();
  cmd->add_option("--size", flags->size_bytes, "Size of the file to create when --file is not given")
      ->transform(SizeValidator())
      ->excludes(file)
      ->capture_default_str();
  cmd->add_option("--dir", flags->dir, "Directory for the created file")->capture_default_str();
  cmd->add_option("--block-bytes", flags->block_bytes, "Bytes per read, rounded up to 4 KiB (default: one "
                  "Qwen3-30B-A3B Q4_K_M expert)")
      ->transform(SizeValidator())
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
