// `colibri bench store`: the SQLite run store (docs/RUNS.md) against the
// targets "storing a run of 10 million step latencies takes < 10 s and a
// compare of 10 such runs < 5 s" (the defaults: --runs 10 --samples 10000000),
// with a raw-file reference in the same process whose percentiles must equal
// the compare's, else exit 1. The measurement is bench/store_bench.h; this
// file holds the flags and the printing.
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli_common.h"
#include "colibri/bench/store_bench.h"
#include "commands.h"
#include "run_storage.h"

namespace colibri::cli {
namespace {

struct BenchStoreFlags {
  bench::StoreBenchOptions options;
  bool json = false;
};

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
  bench::StoreBenchOptions& o = f->options;
  o.dir = std::filesystem::temp_directory_path().string();
  // No argv: a benchmark run is not re-run on its own.
  o.stamp_run = [](reports::RunInfo* info) { StampRun({}, info); };
  CLI::App* cmd = bench->add_subcommand(
      "store", "Run store: storing runs of raw step latencies and comparing them, against a raw-file reference");
  cmd->add_option("--runs", o.runs, "Runs to store and compare")->check(CLI::Range(1, 10000))->capture_default_str();
  cmd->add_option("--samples", o.samples, "Raw step latencies per run (over 8 steps)")
      ->check(CLI::Range(uint64_t{8}, uint64_t{1} << 32))
      ->capture_default_str();
  cmd->add_option("--dir", o.dir, "Directory for the database and the reference files")->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the synthetic latencies")->capture_default_str();
  cmd->add_flag("--keep", o.keep, "Keep the database");
  cmd->add_flag("--json", f->json, "Print the result as JSON on stdout");
  cmd->callback([f, exit_code] {
    Progress progress("bench store");
    auto result = bench::RunStoreBench(f->options, StderrObserver(&progress));
    progress.Done();
    *exit_code = Emit(result, f->json, &PrintHuman);
  });
}

}  // namespace colibri::cli
