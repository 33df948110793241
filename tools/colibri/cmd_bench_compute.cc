// `colibri bench compute`: expert FFN throughput against references measured
// in the same run (docs/BENCHMARKS.md). --compute cpu: CpuCompute against a
// STREAM-style copy and OpenBLAS (bench/compute_bench.h); --compute cuda:
// CudaCompute against cuBLAS (bench/cuda_compute_bench.h), --profile-out DIR
// writing the figures as hardware profiles. Without a usable device: "no
// CUDA device: ..." and exit 2. This file holds the flags, their parsing,
// the config echo and the printing.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli_common.h"
#include "colibri/bench/compute_bench.h"
#include "colibri/bench/cuda_compute_bench.h"
#include "colibri/engine/cpu_compute.h"
#include "colibri/engine/dtype.h"
#include "colibri/replay/hw_backends.h"
#include "commands.h"

namespace colibri::cli {
namespace {

using engine::DType;

struct BenchComputeFlags {
  std::string dtypes = "fp32,bf16,fp16,int8";
  uint32_t hidden = 2048;  // Qwen3-30B-A3B's expert
  uint32_t intermediate = 768;
  std::string batches = "1,64";
  std::string threads = "1,2";
  std::string isa = "auto";
  std::string working_set = "auto";  // bytes of expert blocks cycled; auto = 4 x LLC + one block
  double seconds = 0.3;              // per repeat
  int repeats = 5;
  bool json = false;
  std::string compute = "cpu";       // cpu or cuda
  int cuda_device = 0;               // --compute cuda
  std::string profile_out;           // --compute cuda: write hardware profiles here
};

// --batch's default with --compute cuda (--compute cpu keeps the struct's).
constexpr const char* kCudaDefaultBatches = "1,8,64,256";

Result<std::vector<uint32_t>> ParseCounts(const std::string& text, const std::string& flag, uint32_t max) {
  COLIBRI_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitList(text, flag));
  std::vector<uint32_t> counts;
  for (const std::string& part : parts) {
    char* end = nullptr;
    const unsigned long value = std::strtoul(part.c_str(), &end, 10);
    if (end == part.c_str() || *end != '\0' || value == 0 || value > max) {
      return Status::InvalidArgument(flag + ": '" + part + "' is not an integer in [1, " + std::to_string(max) + "]");
    }
    counts.push_back(static_cast<uint32_t>(value));
  }
  return counts;
}

// The flags both paths share: dtypes, batches, shape, duration, working set.
struct CommonPlan {
  std::vector<DType> dtypes;
  std::vector<uint32_t> batches;
  std::optional<uint64_t> working_set_bytes;
};

// --dtype and --batch (checked first).
Result<CommonPlan> ParseLists(const BenchComputeFlags& f) {
  CommonPlan plan;
  COLIBRI_ASSIGN_OR_RETURN(std::vector<std::string> names, SplitList(f.dtypes, "--dtype"));
  for (const std::string& name : names) {
    COLIBRI_ASSIGN_OR_RETURN(DType dtype, engine::ParseDType(name));
    plan.dtypes.push_back(dtype);
  }
  COLIBRI_ASSIGN_OR_RETURN(plan.batches, ParseCounts(f.batches, "--batch", 65536));
  return plan;
}

// --hidden, --intermediate, --seconds and --working-set (checked last), then
// everything shared copied into the options of either path.
template <typename Options>
Status FinishShared(const BenchComputeFlags& f, CommonPlan plan, Options* o) {
  if (f.hidden == 0 || f.intermediate == 0) return Status::InvalidArgument("--hidden and --intermediate must be > 0");
  if (!(f.seconds > 0)) return Status::InvalidArgument("--seconds must be > 0");
  if (f.working_set != "auto") {
    COLIBRI_ASSIGN_OR_RETURN(uint64_t bytes, ParseSizeBytes(f.working_set));
    plan.working_set_bytes = bytes;
  }
  o->dtypes = std::move(plan.dtypes);
  o->batches = std::move(plan.batches);
  o->working_set_bytes = plan.working_set_bytes;
  o->hidden = f.hidden;
  o->intermediate = f.intermediate;
  o->seconds = f.seconds;
  o->repeats = f.repeats;
  return Status::Ok();
}

Result<bench::CpuComputeBenchOptions> CpuOptions(const BenchComputeFlags& f) {
  COLIBRI_ASSIGN_OR_RETURN(CommonPlan plan, ParseLists(f));
  bench::CpuComputeBenchOptions o;
  COLIBRI_ASSIGN_OR_RETURN(o.threads, ParseCounts(f.threads, "--threads", 256));
  if (f.isa != "auto") {
    COLIBRI_ASSIGN_OR_RETURN(engine::CpuIsa isa, engine::ParseCpuIsa(f.isa));
    o.isa = isa;
  }
  COLIBRI_RETURN_IF_ERROR(FinishShared(f, std::move(plan), &o));
  return o;
}

Result<bench::CudaComputeBenchOptions> CudaOptions(const BenchComputeFlags& f) {
  COLIBRI_ASSIGN_OR_RETURN(CommonPlan plan, ParseLists(f));
  bench::CudaComputeBenchOptions o;
  COLIBRI_RETURN_IF_ERROR(FinishShared(f, std::move(plan), &o));
  o.cuda_device = f.cuda_device;
  o.profile_out = f.profile_out;
  return o;
}

Result<Json> BenchCompute(const BenchComputeFlags& f, Progress* progress) {
  COLIBRI_ASSIGN_OR_RETURN(const bench::CpuComputeBenchOptions o, CpuOptions(f));
  const Json config{{"dtype", f.dtypes},           {"hidden", f.hidden},
                    {"intermediate", f.intermediate}, {"batch", f.batches},
                    {"threads", f.threads},        {"isa", f.isa},
                    {"working_set", f.working_set}, {"seconds", f.seconds},
                    {"repeats", f.repeats}};
  return WithConfig(config, bench::RunCpuComputeBench(o, StderrObserver(progress)));
}

Result<Json> BenchComputeCuda(const BenchComputeFlags& f, Progress* progress) {
  COLIBRI_ASSIGN_OR_RETURN(const bench::CudaComputeBenchOptions o, CudaOptions(f));
  COLIBRI_RETURN_IF_ERROR(replay::CudaUsable(f.cuda_device).WithPrefix("bench compute --compute cuda"));
  const Json config{{"compute", "cuda"},       {"dtype", f.dtypes},
                    {"hidden", f.hidden},      {"intermediate", f.intermediate},
                    {"batch", f.batches},      {"working_set", f.working_set},
                    {"seconds", f.seconds},    {"repeats", f.repeats},
                    {"cuda_device", f.cuda_device}};
  return WithConfig(config, bench::RunCudaComputeBench(o, StderrObserver(progress)));
}

void PrintHuman(const Json& r) {
  const Json& stream = r["stream_copy_1_thread"];
  std::printf("STREAM copy, 1 thread: %.2f GB/s (2 arrays of %.0f MiB)\n", stream["bytes_per_s"].get<double>() / 1e9,
              stream["array_bytes"].get<double>() / 1048576.0);
  std::printf("%-5s %6s %7s %7s %9s %9s %10s %12s\n", "dtype", "batch", "threads", "isa", "GFLOP/s", "GB/s",
              "vs stream", "vs openblas");
  for (const Json& row : r["results"]) {
    std::printf("%-5s %6u %7u %7s %9.1f %9.2f %9.2fx %11.2fx\n", row["dtype"].get<std::string>().c_str(),
                row["batch"].get<uint32_t>(), row["threads"].get<uint32_t>(), row["isa"].get<std::string>().c_str(),
                row["gflops"].get<double>(), row["bytes_per_s"].get<double>() / 1e9,
                row["bandwidth_over_stream"].get<double>(), row["gflops_over_openblas"].get<double>());
  }
  for (const Json& row : r["openblas_sgemm_fp32"]) {
    std::printf("openblas sgemm fp32 (%s kernels): batch %u, %u thread(s): %.1f GFLOP/s\n",
                r["openblas_core"].get<std::string>().c_str(), row["batch"].get<uint32_t>(),
                row["threads"].get<uint32_t>(), row["gflops"].get<double>());
  }
}

void PrintCudaHuman(const Json& r) {
  const Json& d = r["device"];
  std::printf("CUDA device %d: %s (PCI %s), L2 %.0f MiB; experts cycled over %.0f MiB of device memory\n",
              d["ordinal"].get<int>(), d["name"].get<std::string>().c_str(), d["pci_bus_id"].get<std::string>().c_str(),
              d["l2_cache_bytes"].get<double>() / 1048576.0, r["working_set_bytes"].get<double>() / 1048576.0);
  std::printf("device memory (device-to-device copy): %.1f GB/s\n", r["device_copy"]["bytes_per_s"].get<double>() / 1e9);
  std::printf("ours:   %s\ncuBLAS: %s\n", r["timing"]["ours"].get<std::string>().c_str(),
              r["timing"]["cublas"].get<std::string>().c_str());
  const Json& cublas = r["cublas"];
  if (!cublas["available"].get<bool>()) {
    std::printf("cuBLAS unavailable (%s): no ratio\n", cublas["note"].get<std::string>().c_str());
  }
  std::printf("%-5s %6s %12s %12s %11s %5s\n", "dtype", "batch", "ours GFLOP/s", "cuBLAS", "ours/cuBLAS", "goal");
  for (const Json& row : r["results"]) {
    char reference[32] = "-";
    char ratio[32] = "-";
    if (!row["cublas"].is_null()) std::snprintf(reference, sizeof(reference), "%.1f", row["cublas"]["gflops"].get<double>());
    if (!row["ratio_over_cublas"].is_null()) {
      std::snprintf(ratio, sizeof(ratio), "%.3fx", row["ratio_over_cublas"].get<double>());
    }
    const char* goal = row["goal_met"].is_null() ? "-" : (row["goal_met"].get<bool>() ? "met" : "NOT");
    std::printf("%-5s %6u %12.1f %12s %11s %5s\n", row["dtype"].get<std::string>().c_str(), row["batch"].get<uint32_t>(),
                row["gflops"].get<double>(), reference, ratio, goal);
    if (row.contains("cublas_note") && cublas["available"].get<bool>()) {
      std::printf("      cuBLAS: %s\n", row["cublas_note"].get<std::string>().c_str());
    }
  }
  std::printf("goal: %s\n", r["goal"].get<std::string>().c_str());
  PrintProfilesWritten(r["profiles_written"]);
}

}  // namespace

void AddBenchComputeCommand(CLI::App* bench, int* exit_code) {
  auto flags = std::make_shared<BenchComputeFlags>();
  CLI::App* cmd = bench->add_subcommand(
      "compute", "Expert FFN throughput: CPU vs STREAM copy and OpenBLAS, or (--compute cuda) GPU vs cuBLAS");
  cmd->add_option("--dtype", flags->dtypes, "Weight dtypes (comma list of fp32, bf16, fp16, int8)")
      ->capture_default_str();
  cmd->add_option("--hidden", flags->hidden, "Hidden size H")->capture_default_str();
  cmd->add_option("--intermediate", flags->intermediate, "Expert intermediate size I")->capture_default_str();
  CLI::Option* batch = cmd->add_option("--batch", flags->batches,
                                       std::string("Tokens per expert call (comma list; --compute cuda: default ") +
                                           kCudaDefaultBatches + ")")
                           ->capture_default_str();
  CLI::Option* threads =
      cmd->add_option("--threads", flags->threads, "CpuCompute / OpenBLAS threads (comma list)")->capture_default_str();
  CLI::Option* isa = cmd->add_option("--isa", flags->isa, "CPU path: auto, scalar, avx2, avx512")->capture_default_str();
  cmd->add_option("--working-set", flags->working_set,
                  "Bytes of distinct expert blocks cycled (and of the STREAM arrays); auto = 4 x last-level cache "
                  "(--compute cuda: 4 x the GPU's L2, at least 256 MiB)")
      ->capture_default_str();
  cmd->add_option("--seconds", flags->seconds, "Seconds per repeat of each measurement")->capture_default_str();
  cmd->add_option("--repeats", flags->repeats, "Repeats per measurement (best is reported)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--compute", flags->compute,
                  "cpu: CpuCompute vs OpenBLAS; cuda: CudaCompute vs cuBLAS on CUDA device --cuda-device")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  CLI::Option* device =
      cmd->add_option("--cuda-device", flags->cuda_device, "CUDA device ordinal (--compute cuda)")
          ->check(CLI::Range(0, 1023))
          ->capture_default_str();
  CLI::Option* profile_out = cmd->add_option(
      "--profile-out", flags->profile_out,
      "--compute cuda: write the figures as hardware profiles into this directory (compute and machine files)");
  cmd->add_flag("--json", flags->json, "Print the result as JSON on stdout");
  cmd->callback([flags, exit_code, batch, threads, isa, device, profile_out] {
    if (flags->compute == "cuda") {
      if (threads->count() > 0 || isa->count() > 0) {
        *exit_code = Fail(Status::InvalidArgument("--threads and --isa apply to --compute cpu only"));
        return;
      }
      if (batch->count() == 0) flags->batches = kCudaDefaultBatches;
      Progress progress("bench compute");
      auto result = BenchComputeCuda(*flags, &progress);
      progress.Done();
      if (result.ok()) SayProfilesWritten(result.value()["profiles_written"]);
      *exit_code = Emit(result, flags->json, &PrintCudaHuman);
      return;
    }
    if (device->count() > 0 || profile_out->count() > 0) {
      *exit_code = Fail(Status::InvalidArgument("--cuda-device and --profile-out apply to --compute cuda only"));
      return;
    }
    Progress progress("bench compute");
    auto result = BenchCompute(*flags, &progress);
    progress.Done();
    *exit_code = Emit(result, flags->json, &PrintHuman);
  });
}

}  // namespace colibri::cli
