// `colibri bench trace`: trace read and import throughput, measured on one
// core against a raw-read reference in the same run (docs/BENCHMARKS.md; the
// measurement is bench/trace_bench.h), and the `bench` subcommands' registration.
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli_common.h"
#include "colibri/bench/trace_bench.h"
#include "commands.h"

namespace colibri::cli {
namespace {

struct BenchTraceFlags {
  bench::TraceBenchOptions options;
  bool json = false;
};

Result<Json> BenchTrace(const bench::TraceBenchOptions& o, Progress* progress) {
  const Json config{{"model_config", o.model_config},
                    {"selections", o.selections},
                    {"csv_rows", o.csv_rows},
                    {"real_csv", o.real_csv},
                    {"dir", o.dir},
                    {"repeats", o.repeats},
                    {"seed", o.seed}};
  return WithConfig(config, bench::RunTraceBench(o, StderrObserver(progress)));
}

void PrintHuman(const Json& r) {
  auto line = [](const char* what, const Json& j) {
    std::printf("%-28s %8.1f M selections/s  %.3f bytes/selection\n", what, j["selections_per_s"].get<double>() / 1e6,
                j["bytes_per_selection"].get<double>());
  };
  line("read native (uncompressed)", r["read_native"]);
  line("read via libprotobuf (ref)", r["read_libprotobuf_reference"]);
  std::printf("%-28s %8.2fx\n", "reader / libprotobuf", r["read_libprotobuf_reference"]["reader_over_reference"].get<double>());
  line("read native (zstd blocks)", r["read_zstd"]);
  const Json& synthetic = r["import_bmoe_csv_synthetic"];
  std::printf("%-28s %8.2f M rows/s (%" PRIu64 " rows)\n", "import bmoe-csv (synthetic)",
              synthetic["rows_per_s"].get<double>() / 1e6, synthetic["rows"].get<uint64_t>());
  if (!synthetic["python_csv_reference"].is_null()) {
    std::printf("%-28s %8.2f M rows/s, import is %.2fx faster\n", "python csv split (ref)",
                synthetic["python_csv_reference"]["rows_per_s"].get<double>() / 1e6,
                synthetic["import_over_reference"].get<double>());
  }
  if (!r["import_bmoe_csv_real"].is_null()) {
    std::printf("%-28s %8.2f M rows/s (%" PRIu64 " rows)\n", "import bmoe-csv (real qwen)",
                r["import_bmoe_csv_real"]["rows_per_s"].get<double>() / 1e6,
                r["import_bmoe_csv_real"]["rows"].get<uint64_t>());
  }
  std::printf("peak RSS %.1f MiB\n", r["peak_rss_bytes"].get<uint64_t>() / 1048576.0);
}

void AddBenchTrace(CLI::App* bench, int* exit_code) {
  auto flags = std::make_shared<BenchTraceFlags>();
  bench::TraceBenchOptions& o = flags->options;
  o.model_config = "../shared/data/model-configs/qwen3/config.json";
  o.real_csv = "../shared/data/bigmoe-route-traces/qwen.route.csv";
  o.dir = std::filesystem::temp_directory_path().string();
  CLI::App* cmd = bench->add_subcommand("trace", "Trace read and bmoe-csv import throughput (one core)");
  cmd->add_option("--model-config", o.model_config, "config.json giving the synthetic trace's shape")
      ->capture_default_str();
  cmd->add_option("--selections", o.selections, "Selections in the synthetic trace")->capture_default_str();
  cmd->add_option("--csv-rows", o.csv_rows, "Rows of the synthetic bmoe CSV to import")->capture_default_str();
  cmd->add_option("--real-csv", o.real_csv, "A real bmoe route CSV to import too (skipped when absent)")
      ->capture_default_str();
  cmd->add_option("--dir", o.dir, "Directory for the temporary files")->capture_default_str();
  cmd->add_option("--repeats", o.repeats, "Runs per measurement (best is reported)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the synthetic trace")->capture_default_str();
  cmd->add_flag("--json", flags->json, "Print the result as JSON on stdout");
  cmd->callback([flags, exit_code] {
    Progress progress("bench trace");
    auto result = BenchTrace(flags->options, &progress);
    progress.Done();
    *exit_code = Emit(result, flags->json, &PrintHuman);
  });
}

}  // namespace

void AddBenchCommands(CLI::App* bench, int* exit_code) {
  AddBenchTrace(bench, exit_code);
  AddBenchIoCommand(bench, exit_code);
  AddBenchComputeCommand(bench, exit_code);
  AddBenchPcieCommand(bench, exit_code);
  AddBenchReplayCommand(bench, exit_code);
  AddBenchStoreCommand(bench, exit_code);
}

}  // namespace colibri::cli
