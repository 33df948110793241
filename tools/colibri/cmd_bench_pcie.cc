// `colibri bench pcie`: host-to-device bandwidth for expert-sized copies on a
// CUDA GPU, ours (CudaTransfer from a pinned pool) against a plain cudaMemcpy
// from pageable and from pinned memory (docs/BENCHMARKS.md; the measurement
// is bench/pcie_bench.h). --profile-out DIR writes the figures as hardware
// profiles. Without a usable device the command fails with "no CUDA device:
// ..." (exit 2), as every other "cannot run here" does. This file holds the
// flags, the size parsing, the config echo and the printing.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cli_common.h"
#include "colibri/bench/pcie_bench.h"
#include "colibri/replay/hw_backends.h"
#include "commands.h"

namespace colibri::cli {
namespace {

// Default copy sizes: real expert blocks, small to large.
//   2.5 MiB  Qwen3-30B-A3B (H 2048, I 768: 4.7 M weights) at ~4 bits with scales (a Q4_K expert is 2.9 MiB)
//   9 MiB    the same expert in bf16 (3 x 2048 x 768 x 2 bytes)
//   21 MiB   DeepSeek-V3 / R1 (H 7168, I 2048: 44 M weights) at 4 bits
//   42 MiB   the same expert in fp8, as released (44,040,192 bytes = 42 MiB, "44 MB")
constexpr const char* kDefaultSizes = "2.5MiB,9MiB,21MiB,42MiB";

struct BenchPcieFlags {
  bench::PcieBenchOptions options;  // everything but the sizes
  std::string sizes = kDefaultSizes;
  bool json = false;
};

// "<number>[.<fraction>][unit]": unit B (or none), K/KiB, M/MiB, G/GiB, all
// binary (K = 2^10); the result must be a whole number of bytes, 1 B to 16 GiB.
Result<uint64_t> ParseCopySize(const std::string& text) {
  size_t i = 0;
  bool dot = false;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || (text[i] == '.' && !dot))) {
    dot = dot || text[i] == '.';
    ++i;
  }
  const std::string number = text.substr(0, i);
  const std::string unit = text.substr(i);
  uint64_t multiplier = 0;
  for (const auto& [name, value] : {std::pair<const char*, uint64_t>{"", 1}, {"B", 1}, {"K", 1ull << 10},
                                    {"KiB", 1ull << 10}, {"M", 1ull << 20}, {"MiB", 1ull << 20},
                                    {"G", 1ull << 30}, {"GiB", 1ull << 30}}) {
    if (unit == name) multiplier = value;
  }
  const bool has_digit = std::any_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!has_digit || multiplier == 0) {
    return Status::InvalidArgument("--sizes: '" + text + "' is not a size (e.g. 4096, 64KiB, 2.5MiB, 1GiB)");
  }
  const double bytes = std::strtod(number.c_str(), nullptr) * static_cast<double>(multiplier);
  if (!(bytes >= 1) || bytes > static_cast<double>(16ull << 30) || std::fabs(bytes - std::round(bytes)) > 1e-6) {
    return Status::InvalidArgument("--sizes: '" + text + "' is not a whole number of bytes in [1 B, 16 GiB]");
  }
  return static_cast<uint64_t>(std::llround(bytes));
}

Result<std::vector<uint64_t>> ParseSizes(const std::string& text) {
  COLIBRI_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitList(text, "--sizes"));
  std::vector<uint64_t> sizes;
  for (const std::string& part : parts) {
    COLIBRI_ASSIGN_OR_RETURN(uint64_t size, ParseCopySize(part));
    sizes.push_back(size);
  }
  return sizes;
}

Result<Json> BenchPcie(const BenchPcieFlags& f, Progress* progress) {
  bench::PcieBenchOptions o = f.options;
  COLIBRI_ASSIGN_OR_RETURN(o.sizes_bytes, ParseSizes(f.sizes));
  COLIBRI_RETURN_IF_ERROR(replay::CudaUsable(o.cuda_device).WithPrefix("bench pcie"));
  const Json config{{"sizes", f.sizes},
                    {"iterations", o.iterations},
                    {"repeats", o.repeats},
                    {"cuda_device", o.cuda_device},
                    {"copy_streams", o.copy_streams},
                    {"in_flight", o.in_flight},
                    {"small_copies", o.small_copies}};
  return WithConfig(config, bench::RunPcieBench(o, StderrObserver(progress)));
}

std::string GiBs(const Json& rate) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f", rate["bytes_per_s"].get<double>() / 1e9);
  return text;
}

void PrintHuman(const Json& r) {
  const Json& d = r["device"];
  const Json& link = d["pcie_nvml"];
  std::printf("CUDA device %d: %s (PCI %s), asyncEngineCount %d", d["ordinal"].get<int>(),
              d["name"].get<std::string>().c_str(), d["pci_bus_id"].get<std::string>().c_str(),
              d["async_engine_count"].get<int>());
  if (!link["max_generation"].is_null() && !link["max_lanes"].is_null()) {
    std::printf(", PCIe gen %u x%u (NVML max)", link["max_generation"].get<uint32_t>(), link["max_lanes"].get<uint32_t>());
  }
  const Json& c = r["config"];
  std::printf("\nhost to device, best of %d x %u copies per size; ours: CudaTransfer, %u stream(s), %u in flight\n",
              c["repeats"].get<int>(), c["iterations"].get<uint32_t>(), c["copy_streams"].get<uint32_t>(),
              c["in_flight"].get<uint32_t>());
  std::printf("%10s %10s %14s %12s %14s %12s %5s\n", "size", "ours GB/s", "pageable GB/s", "pinned GB/s",
              "ours/pageable", "ours/pinned", "goal");
  for (const Json& row : r["results"]) {
    std::printf("%6.2f MiB %10s %14s %12s %13.2fx %11.2fx %5s\n",
                row["size_bytes"].get<uint64_t>() / 1048576.0, GiBs(row["cuda_transfer_pinned"]).c_str(),
                GiBs(row["memcpy_pageable"]).c_str(), GiBs(row["memcpy_pinned"]).c_str(),
                row["ours_over_pageable"].get<double>(), row["ours_over_pinned"].get<double>(),
                row["goal_met"].get<bool>() ? "met" : "NOT");
  }
  std::printf("goal: %s: %s\n", r["goal"].get<std::string>().c_str(), r["goal_met"].get<bool>() ? "met" : "NOT met");
  const Json& s = r["small_copy"];
  std::printf("%llu-byte copy latency: CudaTransfer p50 %.1f us (p99 %.1f us), cudaMemcpy pinned p50 %.1f us "
              "(p99 %.1f us); per_copy_ns = %llu\n",
              static_cast<unsigned long long>(s["bytes"].get<uint64_t>()),
              s["cuda_transfer_ns"]["p50"].get<double>() / 1e3, s["cuda_transfer_ns"]["p99"].get<double>() / 1e3,
              s["memcpy_pinned_ns"]["p50"].get<double>() / 1e3, s["memcpy_pinned_ns"]["p99"].get<double>() / 1e3,
              static_cast<unsigned long long>(s["per_copy_ns"].get<uint64_t>()));
  PrintProfilesWritten(r["profiles_written"]);
}

}  // namespace

void AddBenchPcieCommand(CLI::App* bench, int* exit_code) {
  auto flags = std::make_shared<BenchPcieFlags>();
  bench::PcieBenchOptions& o = flags->options;
  CLI::App* cmd = bench->add_subcommand(
      "pcie", "Host-to-device copy bandwidth on a CUDA GPU: CudaTransfer vs cudaMemcpy (pageable, pinned)");
  cmd->add_option("--sizes", flags->sizes, "Copy sizes (comma list; B, KiB, MiB, GiB; fractions allowed)")
      ->capture_default_str();
  cmd->add_option("--iterations", o.iterations, "Copies per size, method and repeat")
      ->check(CLI::Range(1u, 1000000u))
      ->capture_default_str();
  cmd->add_option("--repeats", o.repeats, "Repeats per measurement (best is reported)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--cuda-device", o.cuda_device, "CUDA device ordinal")
      ->check(CLI::Range(0, 1023))
      ->capture_default_str();
  cmd->add_option("--copy-streams", o.copy_streams, "CudaTransfer copy streams")
      ->check(CLI::Range(1u, 16u))
      ->capture_default_str();
  cmd->add_option("--in-flight", o.in_flight, "CudaTransfer copies in flight (host and device slots per size)")
      ->check(CLI::Range(1u, 256u))
      ->capture_default_str();
  cmd->add_option("--small-copies", o.small_copies, "4 KiB copies timed one at a time for the per-copy latency")
      ->check(CLI::Range(1u, 1000000u))
      ->capture_default_str();
  cmd->add_option("--profile-out", o.profile_out,
                  "Write the figures as hardware profiles into this directory (pcie and machine files)");
  cmd->add_flag("--json", flags->json, "Print the result as JSON on stdout");
  cmd->callback([flags, exit_code] {
    Progress progress("bench pcie");
    auto result = BenchPcie(*flags, &progress);
    progress.Done();
    if (result.ok()) SayProfilesWritten(result.value()["profiles_written"]);
    *exit_code = Emit(result, flags->json, &PrintHuman);
  });
}

}  // namespace colibri::cli
