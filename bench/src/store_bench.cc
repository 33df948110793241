#include "colibri/bench/store_bench.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include "colibri/bench/call_timing.h"
#include "colibri/bench/files.h"
#include "colibri/bench/process_memory.h"
#include "colibri/reports/compare.h"
#include "colibri/reports/latency_json.h"
#include "colibri/reports/samples.h"
#include "synthetic_runs.h"

namespace colibri::bench {
namespace {

// Stores one run (BeginRun + FinishRun), timed; its id goes to *run_id.
Result<double> TimeStore(reports::RunStore* store, const reports::RunResults& results, const StoreBenchOptions& o,
                         int run, int64_t* run_id) {
  reports::RunInfo info;
  info.kind = "bench";
  info.label = "bench-" + std::to_string(run);
  info.routing_path = info.routing_digest = "bench";  // the same for every run: stability is "identical"
  info.config_json = Json{{"samples", o.samples}, {"seed", o.seed}, {"run", run}}.dump();
  info.hardware_json = "{}";
  info.seed = o.seed;
  info.started_at_ms = reports::NowUnixMs();
  if (o.stamp_run) o.stamp_run(&info);
  const double start = SteadyNowS();
  COLIBRI_ASSIGN_OR_RETURN(*run_id, store->BeginRun(info));
  COLIBRI_RETURN_IF_ERROR(store->FinishRun(*run_id, results, reports::NowUnixMs()));
  return SteadyNowS() - start;
}

using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

Result<File> OpenFile(const std::string& path, const char* mode) {
  File file(std::fopen(path.c_str(), mode), &std::fclose);
  if (file == nullptr) return Status::IoError(path + ": " + std::strerror(errno));
  return file;
}

// Reference write: every distribution's raw samples to `path` (name length,
// name, count, int64 values) and fsync, timed.
Result<double> TimeRawWrite(const std::string& path, const reports::RunResults& results) {
  const double start = SteadyNowS();
  COLIBRI_ASSIGN_OR_RETURN(File file, OpenFile(path, "wb"));
  for (const auto& [name, samples] : results.distributions) {
    const uint32_t name_bytes = static_cast<uint32_t>(name.size());
    const std::vector<int64_t>& raw = samples.raw();
    const uint64_t count = raw.size();
    if (std::fwrite(&name_bytes, sizeof(name_bytes), 1, file.get()) != 1 ||
        std::fwrite(name.data(), 1, name_bytes, file.get()) != name_bytes ||
        std::fwrite(&count, sizeof(count), 1, file.get()) != 1 ||
        std::fwrite(raw.data(), sizeof(int64_t), count, file.get()) != count) {
      return Status::IoError(path + ": write failed: " + std::strerror(errno));
    }
  }
  if (std::fflush(file.get()) != 0 || ::fsync(::fileno(file.get())) != 0 || std::fclose(file.release()) != 0) {
    return Status::IoError(path + ": " + std::strerror(errno));
  }
  return SteadyNowS() - start;
}

constexpr std::array<double, 4> kRankedPct = {50, 90, 99, 99.9};
using Ranked = std::array<int64_t, kRankedPct.size()>;  // P50, P90, P99, P99.9
using RankedRun = std::map<std::string, Ranked>;         // by distribution name

bool ReadExact(std::FILE* file, void* into, size_t bytes) { return std::fread(into, 1, bytes, file) == bytes; }

// Reference compare of one run: its raw file read back, each distribution sorted in full.
Result<RankedRun> RankRawFile(const std::string& path) {
  COLIBRI_ASSIGN_OR_RETURN(File file, OpenFile(path, "rb"));
  RankedRun ranked;
  uint32_t name_bytes = 0;
  while (ReadExact(file.get(), &name_bytes, sizeof(name_bytes))) {
    std::string name(name_bytes, '\0');
    uint64_t count = 0;
    if (!ReadExact(file.get(), name.data(), name_bytes) || !ReadExact(file.get(), &count, sizeof(count))) {
      return Status::IoError(path + ": truncated");
    }
    std::vector<int64_t> values(count);
    if (!ReadExact(file.get(), values.data(), count * sizeof(int64_t))) return Status::IoError(path + ": truncated");
    std::sort(values.begin(), values.end());
    Ranked& r = ranked[name];
    for (size_t i = 0; i < kRankedPct.size(); ++i) r[i] = values[reports::NearestRankOf(count, kRankedPct[i]) - 1];
  }
  return ranked;
}

Result<std::vector<RankedRun>> RankRawFiles(const std::vector<std::string>& paths) {
  std::vector<RankedRun> ranked;
  for (const std::string& path : paths) {
    COLIBRI_ASSIGN_OR_RETURN(RankedRun run, RankRawFile(path));
    ranked.push_back(std::move(run));
  }
  return ranked;
}

// The compare's percentiles must be the reference's, exactly (nearest rank on the raw samples).
Status CheckPercentiles(const reports::Comparison& c, const std::vector<RankedRun>& reference) {
  for (size_t run = 0; run < reference.size(); ++run) {
    const std::map<std::string, reports::Percentiles>& stored = c.runs.at(run).distributions;
    const std::string id = "run " + std::to_string(c.runs[run].info.run_id);
    if (stored.size() != reference[run].size()) {
      return Status::Corruption(id + ": the compare has " + std::to_string(stored.size()) +
                                " distributions, the reference " + std::to_string(reference[run].size()));
    }
    for (const auto& [name, ranked] : reference[run]) {
      const auto it = stored.find(name);
      const reports::Percentiles* p = it == stored.end() ? nullptr : &it->second;
      if (p == nullptr || p->from_histogram || Ranked{p->p50, p->p90, p->p99, p->p999} != ranked) {
        return Status::Corruption(id + ", " + name +
                                  ": the compare's percentiles differ from the reference's (a full sort)");
      }
    }
  }
  return Status::Ok();
}

// The benchmark's files: the database (and its -wal and -shm) and the reference files.
struct BenchFiles {
  std::string db;
  std::vector<std::string> raw;
  bool keep_db = false;
  ~BenchFiles() {
    for (const std::string& path : raw) std::filesystem::remove(path);
    if (keep_db) return;
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix);
  }
};

Json SpreadJson(const std::vector<double>& seconds) {
  return Json{{"min", *std::min_element(seconds.begin(), seconds.end())},
              {"median", reports::Median(seconds)},
              {"max", *std::max_element(seconds.begin(), seconds.end())}};
}

// What the store phase measured.
struct Stored {
  std::vector<int64_t> run_ids;
  std::vector<double> store_s, raw_write_s;
  uint64_t samples = 0;  // every raw sample stored, all runs
  Json first_run_percentiles = Json::object();
};

// Generates, stores and writes the reference file of one run at a time.
Status StoreRuns(const StoreBenchOptions& o, reports::RunStore* store, BenchFiles* files, Stored* out,
                 const Observer& observer) {
  for (int run = 0; run < o.runs; ++run) {
    observer.Progress(static_cast<uint64_t>(run), static_cast<uint64_t>(o.runs) + 1);
    const reports::RunResults results = SyntheticRun(o.samples, o.seed, run);
    int64_t run_id = 0;
    COLIBRI_ASSIGN_OR_RETURN(const double store_s, TimeStore(store, results, o, run, &run_id));
    files->raw.push_back(files->db + ".raw" + std::to_string(run));
    COLIBRI_ASSIGN_OR_RETURN(const double raw_write_s, TimeRawWrite(files->raw.back(), results));
    out->run_ids.push_back(run_id);
    out->store_s.push_back(store_s);
    out->raw_write_s.push_back(raw_write_s);
    for (const auto& [name, samples] : results.distributions) {
      out->samples += samples.count();
      if (run == 0) out->first_run_percentiles[name] = reports::PercentilesJson(samples.Summarize());
    }
  }
  return Status::Ok();
}

// A database path in `dir` that names no file yet (process id and clock).
Result<std::string> FreshDbPath(const std::string& dir) {
  if (!std::filesystem::is_directory(dir)) return Status::NotFound(dir + ": no such directory (--dir)");
  const auto unique = std::chrono::steady_clock::now().time_since_epoch().count();
  const std::string name = "colibri-bench-store-" + std::to_string(::getpid()) + "-" + std::to_string(unique) + ".db";
  const std::string path = (std::filesystem::path(dir) / name).string();
  if (std::filesystem::exists(path)) return Status::InvalidArgument(path + " already exists");
  return path;
}

}  // namespace

Result<Json> RunStoreBench(const StoreBenchOptions& o, const Observer& observer) {
  BenchFiles files;
  files.keep_db = o.keep;
  COLIBRI_ASSIGN_OR_RETURN(files.db, FreshDbPath(o.dir));
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<reports::RunStore> store, reports::RunStore::Open(files.db));
  Stored stored;
  COLIBRI_RETURN_IF_ERROR(StoreRuns(o, store.get(), &files, &stored, observer));
  const uint64_t db_bytes = FileBytes(files.db) + FileBytes(files.db + "-wal");

  observer.Progress(static_cast<uint64_t>(o.runs), static_cast<uint64_t>(o.runs) + 1);
  double start = SteadyNowS();
  COLIBRI_ASSIGN_OR_RETURN(const reports::Comparison comparison,
                           reports::BuildComparison(*store, stored.run_ids, reports::CompareOptions{}));
  const std::string table = reports::RenderTable(comparison);
  const double compare_s = SteadyNowS() - start;

  start = SteadyNowS();
  COLIBRI_ASSIGN_OR_RETURN(const std::vector<RankedRun> reference, RankRawFiles(files.raw));
  const double raw_compare_s = SteadyNowS() - start;
  observer.ProgressDone();
  COLIBRI_RETURN_IF_ERROR(CheckPercentiles(comparison, reference));

  Json store_s = SpreadJson(stored.store_s);
  store_s["per_run"] = stored.store_s;
  const Json raw_write_s = SpreadJson(stored.raw_write_s);
  return Json{{"runs", o.runs},
              {"samples_per_run", o.samples},
              {"store_s", store_s},
              {"compare_s", compare_s},
              {"compare_table_bytes", table.size()},
              {"db_path", files.db},
              {"kept", o.keep},
              {"db_bytes", db_bytes},
              {"stored_samples", stored.samples},
              {"bytes_per_sample", static_cast<double>(db_bytes) / static_cast<double>(stored.samples)},
              {"reference", {{"raw_write_s", raw_write_s}, {"raw_compare_s", raw_compare_s}}},
              {"ratios",
               {{"store_vs_raw_write", store_s["median"].get<double>() / raw_write_s["median"].get<double>()},
                {"compare_vs_raw_compare", compare_s / raw_compare_s}}},
              {"targets",
               {{"store_s", kStoreTargetS},
                {"compare_s", kCompareTargetS},
                {"store_ok", store_s["max"].get<double>() < kStoreTargetS},
                {"compare_ok", compare_s < kCompareTargetS}}},
              {"percentiles_match", true},
              {"first_run_percentiles", stored.first_run_percentiles},
              {"seed", o.seed},
              {"peak_rss_bytes", PeakRssBytes()}};
}

}  // namespace colibri::bench
