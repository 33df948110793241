// `colibri bench store`: the SQLite run store (docs/RUNS.md) against the
// targets "storing a run of 10 million step latencies takes < 10 s and a
// compare of 10 such runs < 5 s" (the defaults: --runs 10 --samples 10000000;
// other sizes report the same targets for reference).
//
// Each run's results resemble a replay's: --samples raw step latencies over
// the 8 steps "step_latency_ns.<step>" (log-normal around each step's median,
// one in a thousand a 5-50x stall; seeded, different per run), 1000 request
// latencies with their TTFT and TPOT, a 48 x 128 expert load matrix, cache
// tiers, a hit-rate series and a few scalars. Generating them is not timed;
// one run is held in memory at a time. Timed: storing each run (BeginRun +
// FinishRun, one fresh database in --dir, removed unless --keep), then
// BuildComparison over all runs (routing stability on: every run names the
// same routing digest) plus RenderTable.
//
// Reference, in the same process: each run's raw samples written to a flat
// file (fwrite of the int64 arrays + fsync: the floor of a store that keeps
// them uncompressed; the store compresses them, so it may beat it), and a
// compare that reads those files back and ranks each distribution by a full
// std::sort on one thread (BuildComparison reads on two), nearest rank. Its
// P50/P90/P99/P99.9 must equal the compare's for every run and distribution,
// else exit 1. The store target is met when the slowest run is under it. The
// reference files are always removed; nothing else is stored anywhere.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "cli_common.h"
#include "colibri/reports/compare.h"
#include "colibri/reports/run_recording.h"
#include "colibri/reports/run_store.h"
#include "colibri/sim/random.h"
#include "commands.h"
#include "latency_json.h"
#include "run_storage.h"

namespace colibri::cli {
namespace {

struct BenchStoreFlags {
  int runs = 10;
  uint64_t samples = 10'000'000;
  std::string dir = std::filesystem::temp_directory_path().string();
  uint64_t seed = 1;
  bool keep = false;
  bool json = false;
};

constexpr double kStoreTargetS = 10;
constexpr double kCompareTargetS = 5;

struct StepShape {
  const char* name;
  double median_ns;
  double sigma;  // of the log
};
// Roughly a replay's steps on an H100 with a Gen5 NVMe drive.
constexpr std::array<StepShape, 8> kSteps = {{{"routing", 3e3, 0.3},
                                              {"scheduling", 1.5e3, 0.4},
                                              {"nvme_read", 90e3, 0.6},
                                              {"host_to_device", 40e3, 0.4},
                                              {"compute", 30e3, 0.25},
                                              {"aggregation", 5e3, 0.3},
                                              {"dense", 20e3, 0.2},
                                              {"layer_batch", 180e3, 0.5}}};
constexpr uint64_t kRequests = 1000;
constexpr size_t kMoeLayers = 48;
constexpr size_t kExperts = 128;
constexpr uint64_t kDistinctExpertsPerBatch = 16;
constexpr uint64_t kExpertBytes = 9'437'184;  // 9 MiB

// The seeded draws of the synthetic runs: the project's generator (sim::Rng, seeded per run by
// sim::DeriveSeed), uniforms in (0, 1) and Box-Muller normals.
class Draws {
 public:
  explicit Draws(uint64_t seed) : rng_(seed) {}
  double Uniform() { return rng_.NextDouble() + 0x1.0p-54; }  // in (0, 1): never log(0)
  double Normal() { return std::sqrt(-2 * std::log(Uniform())) * std::cos(2 * std::numbers::pi * Uniform()); }

 private:
  sim::Rng rng_;
};

// `n` latencies around median_ns: log-normal, and one in a thousand a stall 5-50x longer.
reports::Samples DrawSamples(Draws* rng, uint64_t n, double median_ns, double sigma) {
  std::vector<int64_t> values(n);
  for (int64_t& v : values) {
    const double stall = rng->Uniform() < 1e-3 ? 5 + 45 * rng->Uniform() : 1;
    v = static_cast<int64_t>(median_ns * std::exp(sigma * rng->Normal()) * stall);
  }
  return reports::Samples::FromRaw(std::move(values));
}

// Selections per expert: about even, each within 0.25-1.75x of the mean.
std::vector<std::vector<uint64_t>> DrawExpertLoad(Draws* rng, uint64_t batches) {
  const double mean = static_cast<double>(batches * kDistinctExpertsPerBatch) / kExperts;
  std::vector<std::vector<uint64_t>> load(kMoeLayers, std::vector<uint64_t>(kExperts));
  for (std::vector<uint64_t>& layer : load) {
    for (uint64_t& count : layer) count = static_cast<uint64_t>(mean * (0.25 + 1.5 * rng->Uniform()));
  }
  return load;
}

// What a replay of `batches` layer batches of `batch_ns` also records: cache
// tiers, the hit-rate series, the expert load and the scalars.
void AddRunFigures(Draws* rng, uint64_t batches, double batch_ns, reports::RunResults* r) {
  const double hit = 0.6 + 0.1 * rng->Uniform();
  const uint64_t lookups = batches * kDistinctExpertsPerBatch;
  const uint64_t served = static_cast<uint64_t>(static_cast<double>(lookups) * hit);
  const uint64_t l1_hits = served / 4;
  const uint64_t read_bytes = (lookups - served) * kExpertBytes;
  r->tiers = reports::TiersOf(reports::CacheOutcome{lookups, served, lookups / 2, served / 2, lookups, l1_hits,
                                                    l1_hits / 2, lookups - l1_hits, served - l1_hits,
                                                    (served - l1_hits) / 2, read_bytes});
  reports::HitRateSeries series;
  for (uint64_t b = 1; b <= batches; ++b) {
    const uint64_t seen = b * kDistinctExpertsPerBatch;
    series.Add(b, static_cast<int64_t>(static_cast<double>(b) * batch_ns), seen,
               static_cast<uint64_t>(static_cast<double>(seen) * hit));
  }
  r->hit_rate = series.points();
  r->expert_load = DrawExpertLoad(rng, batches);
  const double elapsed_ns = static_cast<double>(batches) * batch_ns;
  const double tokens = static_cast<double>(batches) / kMoeLayers;
  r->scalars = {{"elapsed_ns", elapsed_ns},
                {"tokens_per_s", elapsed_ns > 0 ? tokens / (elapsed_ns / 1e9) : 0},
                {"read_bytes_per_token", tokens > 0 ? static_cast<double>(read_bytes) / tokens : 0},
                {"routing_decisions", static_cast<double>(batches)}};
}

// Run `run`'s results: `samples` step latencies in all, one layer batch per 8 of them.
reports::RunResults SyntheticRun(uint64_t samples, uint64_t seed, int run) {
  Draws rng(sim::DeriveSeed(seed, "bench-store-run-" + std::to_string(run)));
  const double drift = 1 + 0.02 * run;  // later runs a little slower, so the percentiles differ
  reports::RunResults r;
  for (size_t i = 0; i < kSteps.size(); ++i) {
    const uint64_t n = samples / kSteps.size() + (i < samples % kSteps.size() ? 1 : 0);
    r.distributions[std::string("step_latency_ns.") + kSteps[i].name] =
        DrawSamples(&rng, n, kSteps[i].median_ns * drift, kSteps[i].sigma);
  }
  r.distributions["request_latency_ns"] = DrawSamples(&rng, kRequests, 4e9 * drift, 0.5);
  r.distributions["ttft_ns"] = DrawSamples(&rng, kRequests, 150e6 * drift, 0.4);
  r.distributions["tpot_ns"] = DrawSamples(&rng, kRequests, 30e6 * drift, 0.3);
  AddRunFigures(&rng, samples / kSteps.size(), kSteps.back().median_ns * drift, &r);
  return r;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Stores one run (BeginRun + FinishRun), timed; its id goes to *run_id.
Result<double> TimeStore(reports::RunStore* store, const reports::RunResults& results, const BenchStoreFlags& f,
                         int run, int64_t* run_id) {
  reports::RunInfo info;
  info.kind = "bench";
  info.label = "bench-" + std::to_string(run);
  info.routing_path = info.routing_digest = "bench";  // the same for every run: stability is "identical"
  info.config_json = Json{{"samples", f.samples}, {"seed", f.seed}, {"run", run}}.dump();
  info.hardware_json = "{}";
  info.seed = f.seed;
  StampRun({}, &info);  // no argv: a benchmark run is not re-run on its own
  const auto start = std::chrono::steady_clock::now();
  COLIBRI_ASSIGN_OR_RETURN(*run_id, store->BeginRun(info));
  COLIBRI_RETURN_IF_ERROR(store->FinishRun(*run_id, results, NowUnixMs()));
  return SecondsSince(start);
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
  const auto start = std::chrono::steady_clock::now();
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
  return SecondsSince(start);
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

uint64_t FileBytes(const std::string& path) {
  std::error_code error;
  const uint64_t bytes = std::filesystem::file_size(path, error);
  return error ? 0 : bytes;
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
              {"median", Median(seconds)},
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
Status StoreRuns(const BenchStoreFlags& f, reports::RunStore* store, BenchFiles* files, Stored* out,
                 Progress* progress) {
  for (int run = 0; run < f.runs; ++run) {
    progress->Update(static_cast<uint64_t>(run), static_cast<uint64_t>(f.runs) + 1);
    const reports::RunResults results = SyntheticRun(f.samples, f.seed, run);
    int64_t run_id = 0;
    COLIBRI_ASSIGN_OR_RETURN(const double store_s, TimeStore(store, results, f, run, &run_id));
    files->raw.push_back(files->db + ".raw" + std::to_string(run));
    COLIBRI_ASSIGN_OR_RETURN(const double raw_write_s, TimeRawWrite(files->raw.back(), results));
    out->run_ids.push_back(run_id);
    out->store_s.push_back(store_s);
    out->raw_write_s.push_back(raw_write_s);
    for (const auto& [name, samples] : results.distributions) {
      out->samples += samples.count();
      if (run == 0) out->first_run_percentiles[name] = PercentilesJson(samples.Summarize());
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

Result<Json> BenchStore(const BenchStoreFlags& f) {
  BenchFiles files;
  files.keep_db = f.keep;
  COLIBRI_ASSIGN_OR_RETURN(files.db, FreshDbPath(f.dir));
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<reports::RunStore> store, reports::RunStore::Open(files.db));
  Progress progress("bench store");
  Stored stored;
  COLIBRI_RETURN_IF_ERROR(StoreRuns(f, store.get(), &files, &stored, &progress));
  const uint64_t db_bytes = FileBytes(files.db) + FileBytes(files.db + "-wal");

  progress.Update(static_cast<uint64_t>(f.runs), static_cast<uint64_t>(f.runs) + 1);
  auto start = std::chrono::steady_clock::now();
  COLIBRI_ASSIGN_OR_RETURN(const reports::Comparison comparison,
                           reports::BuildComparison(*store, stored.run_ids, reports::CompareOptions{}));
  const std::string table = reports::RenderTable(comparison);
  const double compare_s = SecondsSince(start);

  start = std::chrono::steady_clock::now();
  COLIBRI_ASSIGN_OR_RETURN(const std::vector<RankedRun> reference, RankRawFiles(files.raw));
  const double raw_compare_s = SecondsSince(start);
  progress.Done();
  COLIBRI_RETURN_IF_ERROR(CheckPercentiles(comparison, reference));

  Json store_s = SpreadJson(stored.store_s);
  store_s["per_run"] = stored.store_s;
  const Json raw_write_s = SpreadJson(stored.raw_write_s);
  return Json{{"runs", f.runs},
              {"samples_per_run", f.samples},
              {"store_s", store_s},
              {"compare_s", compare_s},
              {"compare_table_bytes", table.size()},
              {"db_path", files.db},
              {"kept", f.keep},
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
              {"seed", f.seed},
              {"peak_rss_bytes", PeakRssBytes()}};
}

const char* Verdict(bool ok) { return ok ? "met" : "MISSED"; }

void PrintHuman(const Json& r) {
  const Json& store = r["store_s"];
  const Json& raw = r["reference"]["raw_write_s"];
  const Json& targets = r["targets"];
  std::printf("store        %d runs x %" PRIu64 " samples: median %.3f s per run (min %.3f, max %.3f); "
              "target < %.0f s: %s\n",
              r["runs"].get<int>(), r["samples_per_run"].get<uint64_t>(), store["median"].get<double>(),
              store["min"].get<double>(), store["max"].get<double>(), targets["store_s"].get<double>(),
              Verdict(targets["store_ok"].get<bool>()));
  std::printf("raw write    median %.3f s per run (min %.3f, max %.3f), fwrite + fsync; store / raw write %.2fx\n",
              raw["median"].get<double>(), raw["min"].get<double>(), raw["max"].get<double>(),
              r["ratios"]["store_vs_raw_write"].get<double>());
  std::printf("compare      %.3f s for %d runs (BuildComparison + RenderTable); target < %.0f s: %s\n",
              r["compare_s"].get<double>(), r["runs"].get<int>(), targets["compare_s"].get<double>(),
              Verdict(targets["compare_ok"].get<bool>()));
  std::printf("raw compare  %.3f s (read back + full std::sort); compare / raw compare %.2fx\n",
              r["reference"]["raw_compare_s"].get<double>(), r["ratios"]["compare_vs_raw_compare"].get<double>());
  const std::string fate = r["kept"].get<bool>() ? "kept: " + r["db_path"].get<std::string>() : "removed";
  std::printf("database     %.1f MiB, %.3f bytes per sample (%" PRIu64 " samples), %s\n",
              r["db_bytes"].get<uint64_t>() / 1048576.0, r["bytes_per_sample"].get<double>(),
              r["stored_samples"].get<uint64_t>(), fate.c_str());
  std::printf("percentiles  P50/P90/P99/P99.9 of every run and distribution equal the reference's\n");
  std::printf("peak RSS     %.1f MiB\n", r["peak_rss_bytes"].get<uint64_t>() / 1048576.0);
}

}  // namespace

void AddBenchStoreCommand(CLI::App* bench, int* exit_code) {
  auto f = std::make_shared<BenchStoreFlags>();
  CLI::App* cmd = bench->add_subcommand(
      "store", "Run store: storing runs of raw step latencies and comparing them, against a raw-file reference");
  cmd->add_option("--runs", f->runs, "Runs to store and compare")->check(CLI::Range(1, 10000))->capture_default_str();
  cmd->add_option("--samples", f->samples, "Raw step latencies per run (over 8 steps)")
      ->check(CLI::Range(uint64_t{8}, uint64_t{1} << 32))
      ->capture_default_str();
  cmd->add_option("--dir", f->dir, "Directory for the database and the reference files")->capture_default_str();
  cmd->add_option("--seed", f->seed, "Seed of the synthetic latencies")->capture_default_str();
  cmd->add_flag("--keep", f->keep, "Keep the database");
  cmd->add_flag("--json", f->json, "Print the result as JSON on stdout");
  cmd->callback([f, exit_code] { *exit_code = Emit(BenchStore(*f), f->json, &PrintHuman); });
}

}  // namespace colibri::cli
