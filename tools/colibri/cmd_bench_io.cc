// `colibri bench io`: all-miss expert streaming from storage, against fio
// (docs/BENCHMARKS.md). The measurement is bench/io_bench.h; this file holds
// the flags, the config echo and the printing.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli_common.h"
#include "colibri/bench/io_bench.h"
#include "colibri/engine/storage.h"
#include "commands.h"

namespace colibri::cli {
namespace {

struct BenchIoFlags {
  bench::IoBenchOptions options;
  bool json = false;
};

Json ConfigJson(const bench::IoBenchOptions& o) {
  return Json{{"model", o.model},
              {"batch_tokens", o.batch_tokens},
              {"threads", o.threads},
              {"file", o.file},
              {"size_bytes", o.size_bytes},
              {"dir", o.dir},
              {"block_bytes", o.block_bytes},
              {"queue_depth", o.queue_depth},
              {"seconds", o.seconds},
              {"backend", o.backend},
              {"register_buffers", o.register_buffers},
              {"fio", o.fio},
              {"repeats", o.repeats},
              {"seed", o.seed}};
}

Result<Json> BenchIo(const bench::IoBenchOptions& o, Progress* progress) {
  if (o.block_bytes == 0) return Status::InvalidArgument("--block-bytes must be > 0");
  return WithConfig(ConfigJson(o), bench::RunIoBench(o, StderrObserver(progress)));
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
  bench::IoBenchOptions& o = flags->options;
  o.dir = std::filesystem::temp_directory_path().string();
  CLI::App* cmd = bench->add_subcommand(
      "io", "All-miss expert streaming: random whole-block O_DIRECT reads at a queue depth, against fio");
  CLI::Option* model = cmd->add_option("--model", o.model,
                                       "Model directory: read its experts.bin's expert blocks, and stream them "
                                       "through the engine too (L1 = L2 = 0)");
  cmd->add_option("--batch-tokens", o.batch_tokens, "With --model: tokens per layer batch (random routing)")
      ->check(CLI::Range(1u, 65536u))
      ->capture_default_str();
  cmd->add_option("--threads", o.threads, "With --model: CPU compute threads")
      ->check(CLI::Range(1u, 256u))
      ->capture_default_str();
  CLI::Option* file = cmd->add_option("--file", o.file, "File to read (default: create one of --size in --dir)")
                          ->excludes(model)
                          ->capture_default_str();
  cmd->add_option("--size", o.size_bytes, "Size of the file to create when --file is not given")
      ->transform(SizeValidator())
      ->excludes(file)
      ->excludes(model)
      ->capture_default_str();
  cmd->add_option("--dir", o.dir, "Directory for the created file")->capture_default_str();
  cmd->add_option("--block-bytes", o.block_bytes, "Bytes per read, rounded up to 4 KiB (default: one "
                  "Qwen3-30B-A3B Q4_K_M expert; with --model: its expert block)")
      ->transform(SizeValidator())
      ->excludes(model)
      ->capture_default_str();
  cmd->add_option("--queue-depth", o.queue_depth, "Reads in flight")
      ->check(CLI::Range(1u, engine::kMaxStorageQueueDepth))
      ->capture_default_str();
  cmd->add_option("--seconds", o.seconds, "Duration of each run")
      ->check(CLI::Range(1u, 3600u))
      ->capture_default_str();
  cmd->add_option("--backend", o.backend, "Storage backend")
      ->check(CLI::IsMember({"uring", "pread"}))
      ->capture_default_str();
  cmd->add_option("--register-buffers", o.register_buffers,
                  "Register the read buffers with io_uring (READ_FIXED; fio then runs with --fixedbufs)")
      ->capture_default_str();
  cmd->add_option("--fio", o.fio, "fio binary for the reference run, or 'none'")->capture_default_str();
  cmd->add_option("--repeats", o.repeats, "Rounds of colibri then fio (the best of each is reported)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the file's data and the read offsets")->capture_default_str();
  cmd->add_flag("--json", flags->json, "Print the result as JSON on stdout");
  cmd->callback([flags, exit_code] {
    Progress progress("bench io");
    auto result = BenchIo(flags->options, &progress);
    progress.Done();
    if (result.ok() && !result.value()["warning"].is_null()) {
      std::fprintf(stderr, "colibri: warning: %s\n", result.value()["warning"].get<std::string>().c_str());
    }
    *exit_code = Emit(result, flags->json, &PrintHuman);
  });
}

}  // namespace colibri::cli
