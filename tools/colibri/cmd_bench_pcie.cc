// `colibri bench pcie`: host-to-device bandwidth for expert-sized copies on a
// CUDA GPU, three ways in the same run (docs/BENCHMARKS.md):
//   (a) ours: CudaTransfer::Copy from a pinned host pool (CreateHostPool) into
//       device pool slots, several copies in flight over the copy streams,
//       timed on engine::MonotonicClock from the first submit to the last
//       completion handed over by Poll;
//   (b) the reference: a plain synchronous cudaMemcpy from pageable
//       (malloc'd) memory, what code without a transfer backend does;
//   (c) the ceiling: a synchronous cudaMemcpy from pinned memory.
// Goal: (a) / (b) >= 0.9 at every size (ours must not be slower than a plain
// cudaMemcpy). Plus the latency of a small (4 KiB) copy, the profile's
// per_copy_ns. --profile-out DIR writes the figures as hardware profiles
// (hw_profile_out.h). Without a usable device the command fails with
// "no CUDA device: ..." (exit 2), as every other "cannot run here" does.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cli_common.h"
#include "colibri/engine/clock.h"
#include "colibri/replay/hw_backends.h"
#include "commands.h"
#include "hw_profile_out.h"
#include "latency_json.h"
#if COLIBRI_HAVE_CUDA
#include "colibri/cuda/bench_reference.h"
#include "colibri/cuda/cuda_transfer.h"
#endif

namespace colibri::cli {
namespace {

// Default copy sizes: real expert blocks, small to large.
//   2.5 MiB  Qwen3-30B-A3B (H 2048, I 768: 4.7 M weights) at ~4 bits with scales (a Q4_K expert is 2.9 MiB)
//   9 MiB    the same expert in bf16 (3 x 2048 x 768 x 2 bytes)
//   21 MiB   DeepSeek-V3 / R1 (H 7168, I 2048: 44 M weights) at 4 bits
//   42 MiB   the same expert in fp8, as released (44,040,192 bytes = 42 MiB, "44 MB")
constexpr const char* kDefaultSizes = "2.5MiB,9MiB,21MiB,42MiB";

struct BenchPcieFlags {
  std::string sizes = kDefaultSizes;
  uint32_t iterations = 50;     // copies per size, method and repeat
  int repeats = 3;              // best of
  int cuda_device = 0;
  uint32_t copy_streams = 2;    // CudaTransfer streams (the engine's default)
  uint32_t in_flight = 8;       // CudaTransfer copies in flight
  uint32_t small_copies = 200;  // 4 KiB copies for the latency
  std::string profile_out;
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

#if COLIBRI_HAVE_CUDA

using cuda::CudaTransfer;
using engine::TimeNs;

constexpr uint64_t kSmallCopyBytes = 4096;  // the per-copy latency's copy

uint64_t RoundUp(uint64_t value, uint64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

struct RateTiming {
  uint64_t copies = 0;
  double seconds = 0;
  double bytes_per_s(uint64_t bytes) const { return seconds > 0 ? static_cast<double>(bytes) * copies / seconds : 0; }
};

Json RateJson(const RateTiming& t, uint64_t bytes) {
  return Json{{"copies", t.copies}, {"seconds", t.seconds}, {"bytes_per_s", t.bytes_per_s(bytes)}};
}

// (a): `copies` copies of `bytes` through the transfer, `in_flight` at a time,
// each in its own host and device slot (the tag is the slot); a completed
// copy's slot takes the next one. First submit to last hand-over.
Result<RateTiming> TimeTransferCopies(CudaTransfer* transfer, const engine::SlabPool& host,
                                      const engine::SlabPool& device, uint64_t bytes, uint32_t copies,
                                      const engine::Clock& clock) {
  const uint32_t slots = std::min(host.slot_count(), device.slot_count());
  std::vector<engine::TransferCompletion> done;
  uint32_t submitted = 0;
  uint32_t completed = 0;
  const TimeNs start = clock.Now();
  TimeNs last = start;
  for (uint32_t slot = 0; slot < slots && submitted < copies; ++slot, ++submitted) {
    COLIBRI_RETURN_IF_ERROR(transfer->Copy(device.SlotData(slot), host.SlotData(slot), bytes, slot));
  }
  while (completed < copies) {
    if (transfer->outstanding() == 0) return Status::Internal("bench pcie: copies lost in flight");
    done.clear();
    COLIBRI_RETURN_IF_ERROR(transfer->Poll(/*wait=*/true, &done));
    for (const engine::TransferCompletion& c : done) {
      COLIBRI_RETURN_IF_ERROR(c.status);
      ++completed;
      last = std::max(last, c.complete_ns);
      if (submitted < copies) {
        const auto slot = static_cast<uint32_t>(c.tag);
        COLIBRI_RETURN_IF_ERROR(transfer->Copy(device.SlotData(slot), host.SlotData(slot), bytes, slot));
        ++submitted;
      }
    }
  }
  return RateTiming{copies, static_cast<double>(last - start) / 1e9};
}

// (b) and (c): synchronous cudaMemcpy calls, summed.
Result<RateTiming> TimeMemcpy(int device, std::byte* dst, const std::byte* src, uint64_t bytes, uint32_t copies,
                              const engine::Clock& clock) {
  COLIBRI_ASSIGN_OR_RETURN(std::vector<TimeNs> durations,
                           cuda::TimeMemcpyHostToDevice(device, dst, src, bytes, copies, clock));
  TimeNs total = 0;
  for (TimeNs d : durations) total += d;
  return RateTiming{copies, static_cast<double>(total) / 1e9};
}

void KeepBest(const RateTiming& t, uint64_t bytes, RateTiming* best) {
  if (best->copies == 0 || t.bytes_per_s(bytes) > best->bytes_per_s(bytes)) *best = t;
}

constexpr double kGoalRatio = 0.9;
constexpr const char* kGoal =
    "ours (CudaTransfer from a pinned host pool) / plain synchronous cudaMemcpy from pageable memory >= 0.9 at every "
    "size: our transfer path must not be slower than a plain cudaMemcpy";

Result<Json> MeasureSize(CudaTransfer* transfer, const BenchPcieFlags& f, uint64_t bytes,
                         const engine::Clock& clock) {
  const uint64_t slot_bytes = RoundUp(bytes, engine::kPoolAlignmentBytes);
  COLIBRI_ASSIGN_OR_RETURN(auto host, transfer->CreateHostPool(uint64_t{f.in_flight} * slot_bytes, slot_bytes));
  COLIBRI_ASSIGN_OR_RETURN(auto device, transfer->CreateDevicePool(uint64_t{f.in_flight} * slot_bytes, slot_bytes));
  std::memset(host->base(), 0x5a, host->total_bytes());
  std::unique_ptr<std::byte[]> pageable(new std::byte[bytes]);
  std::memset(pageable.get(), 0x5a, bytes);  // commit the pages before timing
  // Warm-up: each path once over every slot it uses.
  COLIBRI_RETURN_IF_ERROR(TimeTransferCopies(transfer, *host, *device, bytes, f.in_flight, clock).status());
  COLIBRI_RETURN_IF_ERROR(TimeMemcpy(f.cuda_device, device->SlotData(0), pageable.get(), bytes, 2, clock).status());
  COLIBRI_RETURN_IF_ERROR(TimeMemcpy(f.cuda_device, device->SlotData(0), host->SlotData(0), bytes, 2, clock).status());
  RateTiming ours, plain, pinned;
  for (int r = 0; r < f.repeats; ++r) {  // interleaved, so drift hits the three alike
    COLIBRI_ASSIGN_OR_RETURN(RateTiming a, TimeTransferCopies(transfer, *host, *device, bytes, f.iterations, clock));
    COLIBRI_ASSIGN_OR_RETURN(RateTiming b,
                             TimeMemcpy(f.cuda_device, device->SlotData(0), pageable.get(), bytes, f.iterations, clock));
    COLIBRI_ASSIGN_OR_RETURN(RateTiming c,
                             TimeMemcpy(f.cuda_device, device->SlotData(0), host->SlotData(0), bytes, f.iterations, clock));
    KeepBest(a, bytes, &ours);
    KeepBest(b, bytes, &plain);
    KeepBest(c, bytes, &pinned);
  }
  const double ours_over_pageable = ours.bytes_per_s(bytes) / plain.bytes_per_s(bytes);
  return Json{{"size_bytes", bytes},
              {"cuda_transfer_pinned", RateJson(ours, bytes)},
              {"memcpy_pageable", RateJson(plain, bytes)},
              {"memcpy_pinned", RateJson(pinned, bytes)},
              {"ours_over_pageable", ours_over_pageable},
              {"ours_over_pinned", ours.bytes_per_s(bytes) / pinned.bytes_per_s(bytes)},
              {"goal_met", ours_over_pageable >= kGoalRatio}};
}

// 4 KiB copies one at a time: through CudaTransfer (Copy to hand-over) and as
// synchronous cudaMemcpy from pinned memory.
Result<Json> MeasureSmallCopy(CudaTransfer* transfer, const BenchPcieFlags& f, const engine::Clock& clock) {
  COLIBRI_ASSIGN_OR_RETURN(auto host, transfer->CreateHostPool(kSmallCopyBytes, kSmallCopyBytes));
  COLIBRI_ASSIGN_OR_RETURN(auto device, transfer->CreateDevicePool(kSmallCopyBytes, kSmallCopyBytes));
  std::memset(host->base(), 0x5a, kSmallCopyBytes);
  std::vector<int64_t> ours;
  std::vector<engine::TransferCompletion> done;
  const uint32_t warm_up = 10;
  for (uint32_t i = 0; i < warm_up + f.small_copies; ++i) {
    COLIBRI_RETURN_IF_ERROR(transfer->Copy(device->SlotData(0), host->SlotData(0), kSmallCopyBytes, i));
    done.clear();
    while (done.empty()) COLIBRI_RETURN_IF_ERROR(transfer->Poll(/*wait=*/true, &done));
    COLIBRI_RETURN_IF_ERROR(done[0].status);
    if (i >= warm_up) ours.push_back(done[0].complete_ns - done[0].submit_ns);
  }
  COLIBRI_RETURN_IF_ERROR(
      cuda::TimeMemcpyHostToDevice(f.cuda_device, device->SlotData(0), host->SlotData(0), kSmallCopyBytes, warm_up, clock)
          .status());
  COLIBRI_ASSIGN_OR_RETURN(std::vector<TimeNs> memcpy_ns,
                           cuda::TimeMemcpyHostToDevice(f.cuda_device, device->SlotData(0), host->SlotData(0),
                                                        kSmallCopyBytes, f.small_copies, clock));
  Json ours_json = LatencyJson(ours);
  Json memcpy_json = LatencyJson(std::vector<int64_t>(memcpy_ns.begin(), memcpy_ns.end()));
  return Json{{"bytes", kSmallCopyBytes},
              {"copies", f.small_copies},
              {"cuda_transfer_ns", ours_json},
              {"memcpy_pinned_ns", memcpy_json},
              {"per_copy_ns", ours_json["p50"]}};
}

Json DeviceJson(const cuda::BenchDeviceInfo& info) {
  auto optional = [](const std::optional<uint32_t>& v) { return v ? Json(*v) : Json(nullptr); };
  return Json{{"ordinal", info.device.ordinal},
              {"name", info.device.name},
              {"pci_bus_id", info.device.pci_bus_id},
              {"compute_capability", std::to_string(info.device.compute_major) + "." +
                                         std::to_string(info.device.compute_minor)},
              {"memory_bytes", info.device.total_memory_bytes},
              {"multiprocessors", info.device.multiprocessors},
              {"l2_cache_bytes", info.l2_cache_bytes},
              {"async_engine_count", info.async_engine_count},
              {"runtime_version", info.runtime_version},
              {"driver_version", info.driver_version},
              {"pcie_nvml",
               {{"max_generation", optional(info.pcie_max_generation)},
                {"max_lanes", optional(info.pcie_max_lanes)},
                {"current_generation", optional(info.pcie_current_generation)},
                {"current_lanes", optional(info.pcie_current_lanes)}}}};
}

Result<Json> RunBenchPcie(const BenchPcieFlags& f, const std::vector<uint64_t>& sizes, Progress* progress) {
  COLIBRI_ASSIGN_OR_RETURN(const cuda::BenchDeviceInfo info, cuda::ProbeBenchDevice(f.cuda_device));
  engine::MonotonicClock clock;
  COLIBRI_ASSIGN_OR_RETURN(auto transfer, CudaTransfer::Create(f.cuda_device, &clock, f.copy_streams));
  const uint64_t steps = sizes.size() + 1;
  Json results = Json::array();
  bool goal_met = true;
  for (size_t i = 0; i < sizes.size(); ++i) {
    progress->Update(i, steps);
    COLIBRI_ASSIGN_OR_RETURN(Json row, MeasureSize(transfer.get(), f, sizes[i], clock));
    goal_met = goal_met && row["goal_met"].get<bool>();
    results.push_back(std::move(row));
  }
  progress->Update(sizes.size(), steps);
  COLIBRI_ASSIGN_OR_RETURN(Json small, MeasureSmallCopy(transfer.get(), f, clock));
  Json doc{{"config",
            {{"sizes", f.sizes},
             {"iterations", f.iterations},
             {"repeats", f.repeats},
             {"cuda_device", f.cuda_device},
             {"copy_streams", f.copy_streams},
             {"in_flight", f.in_flight},
             {"small_copies", f.small_copies}}},
           {"device", DeviceJson(info)},
           {"method",
            {{"cuda_transfer_pinned",
              "CudaTransfer::Copy from a pinned host pool into device pool slots, in_flight copies over copy_streams "
              "streams, engine::MonotonicClock from the first submit to the last completion handed over by Poll"},
             {"memcpy_pageable", "synchronous cudaMemcpy from malloc'd (touched) host memory, summed per call"},
             {"memcpy_pinned", "synchronous cudaMemcpy from the same pinned pool, summed per call (the ceiling)"},
             {"best_of", "each rate is the best of `repeats` runs of `iterations` copies, after a warm-up"}}},
           {"goal", kGoal},
           {"goal_met", goal_met},
           {"results", results},
           {"small_copy", small},
           {"profiles_written", nullptr}};
  if (!f.profile_out.empty()) {
    const Json& largest = *std::max_element(results.begin(), results.end(), [](const Json& a, const Json& b) {
      return a["size_bytes"].get<uint64_t>() < b["size_bytes"].get<uint64_t>();
    });
    MeasuredPcie m;
    m.run = ProfileRun{CommandLine(), UtcNow(), info.device.name, info.device.ordinal, info.device.pci_bus_id};
    m.rate_size_bytes = largest["size_bytes"].get<uint64_t>();
    m.pinned_bytes_per_s = static_cast<uint64_t>(largest["cuda_transfer_pinned"]["bytes_per_s"].get<double>());
    m.pageable_bytes_per_s = static_cast<uint64_t>(largest["memcpy_pageable"]["bytes_per_s"].get<double>());
    m.memcpy_pinned_bytes_per_s = static_cast<uint64_t>(largest["memcpy_pinned"]["bytes_per_s"].get<double>());
    m.sizes_bytes = sizes;
    m.small_copy_bytes = kSmallCopyBytes;
    m.per_copy_ns = small["cuda_transfer_ns"]["p50"].get<uint64_t>();
    m.memcpy_small_copy_ns = small["memcpy_pinned_ns"]["p50"].get<uint64_t>();
    m.copy_streams = f.copy_streams;
    m.in_flight = f.in_flight;
    m.async_engine_count = info.async_engine_count;
    m.generation = info.pcie_max_generation;
    m.lanes = info.pcie_max_lanes;
    m.current_generation = info.pcie_current_generation;
    m.current_lanes = info.pcie_current_lanes;
    COLIBRI_ASSIGN_OR_RETURN(std::vector<std::string> written, WritePcieProfiles(f.profile_out, m));
    doc["profiles_written"] = written;
  }
  return doc;
}

#endif  // COLIBRI_HAVE_CUDA

Result<Json> BenchPcie(const BenchPcieFlags& f, Progress* progress) {
  COLIBRI_ASSIGN_OR_RETURN(const std::vector<uint64_t> sizes, ParseSizes(f.sizes));
  COLIBRI_RETURN_IF_ERROR(replay::CudaUsable(f.cuda_device).WithPrefix("bench pcie"));
#if COLIBRI_HAVE_CUDA
  return RunBenchPcie(f, sizes, progress);
#else
  (void)progress;
  return Status::Internal("bench pcie: unreachable without CUDA");
#endif
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
  if (r["profiles_written"].is_array()) {
    for (const Json& path : r["profiles_written"]) std::printf("profile: %s\n", path.get<std::string>().c_str());
  }
}

}  // namespace

void AddBenchPcieCommand(CLI::App* bench, int* exit_code) {
  auto flags = std::make_shared<BenchPcieFlags>();
  CLI::App* cmd = bench->add_subcommand(
      "pcie", "Host-to-device copy bandwidth on a CUDA GPU: CudaTransfer vs cudaMemcpy (pageable, pinned)");
  cmd->add_option("--sizes", flags->sizes, "Copy sizes (comma list; B, KiB, MiB, GiB; fractions allowed)")
      ->capture_default_str();
  cmd->add_option("--iterations", flags->iterations, "Copies per size, method and repeat")
      ->check(CLI::Range(1u, 1000000u))
      ->capture_default_str();
  cmd->add_option("--repeats", flags->repeats, "Repeats per measurement (best is reported)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--cuda-device", flags->cuda_device, "CUDA device ordinal")
      ->check(CLI::Range(0, 1023))
      ->capture_default_str();
  cmd->add_option("--copy-streams", flags->copy_streams, "CudaTransfer copy streams")
      ->check(CLI::Range(1u, 16u))
      ->capture_default_str();
  cmd->add_option("--in-flight", flags->in_flight, "CudaTransfer copies in flight (host and device slots per size)")
      ->check(CLI::Range(1u, 256u))
      ->capture_default_str();
  cmd->add_option("--small-copies", flags->small_copies, "4 KiB copies timed one at a time for the per-copy latency")
      ->check(CLI::Range(1u, 1000000u))
      ->capture_default_str();
  cmd->add_option("--profile-out", flags->profile_out,
                  "Write the figures as hardware profiles into this directory (pcie and machine files)");
  cmd->add_flag("--json", flags->json, "Print the result as JSON on stdout");
  cmd->callback([flags, exit_code] {
    Progress progress("bench pcie");
    auto result = BenchPcie(*flags, &progress);
    progress.Done();
    *exit_code = Emit(result, flags->json, &PrintHuman);
  });
}

}  // namespace colibri::cli
