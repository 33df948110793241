#include "colibri/bench/pcie_bench.h"

#include <algorithm>

#include "colibri/bench/host_to_device.h"
#include "colibri/bench/profile_out.h"
#include "colibri/replay/hw_backends.h"
#include "colibri/reports/latency_json.h"
#include "cuda_device.h"

namespace colibri::bench {

#if COLIBRI_HAVE_CUDA

namespace {

constexpr double kGoalRatio = 0.9;
constexpr const char* kGoal =
    "ours (CudaTransfer from a pinned host pool) / plain synchronous cudaMemcpy from pageable memory >= 0.9 at every "
    "size: our transfer path must not be slower than a plain cudaMemcpy";

Json RateJson(const CopyRate& rate, uint64_t bytes) {
  return Json{{"copies", rate.copies}, {"seconds", rate.seconds}, {"bytes_per_s", rate.bytes_per_s(bytes)}};
}

Json SizeJson(const HostToDeviceRates& r) {
  const uint64_t bytes = r.size_bytes;
  const double ours_over_pageable = r.cuda_transfer_pinned.bytes_per_s(bytes) / r.memcpy_pageable.bytes_per_s(bytes);
  return Json{{"size_bytes", bytes},
              {"cuda_transfer_pinned", RateJson(r.cuda_transfer_pinned, bytes)},
              {"memcpy_pageable", RateJson(r.memcpy_pageable, bytes)},
              {"memcpy_pinned", RateJson(r.memcpy_pinned, bytes)},
              {"ours_over_pageable", ours_over_pageable},
              {"ours_over_pinned", r.cuda_transfer_pinned.bytes_per_s(bytes) / r.memcpy_pinned.bytes_per_s(bytes)},
              {"goal_met", ours_over_pageable >= kGoalRatio}};
}

Json SmallCopyJson(const SmallCopyLatencies& s, uint32_t copies) {
  Json ours = reports::LatencyJson(s.cuda_transfer_ns);
  Json memcpy = reports::LatencyJson(s.memcpy_pinned_ns);
  return Json{{"bytes", s.bytes},
              {"copies", copies},
              {"cuda_transfer_ns", ours},
              {"memcpy_pinned_ns", memcpy},
              {"per_copy_ns", ours["p50"]}};
}

// The profile's figures: the rates at the largest size, the small copy's medians.
MeasuredPcie MeasuredOf(const PcieBenchOptions& o, const cuda::BenchDeviceInfo& info, const Json& results,
                        const Json& small) {
  const Json& largest = *std::max_element(results.begin(), results.end(), [](const Json& a, const Json& b) {
    return a["size_bytes"].get<uint64_t>() < b["size_bytes"].get<uint64_t>();
  });
  MeasuredPcie m;
  m.run = ProfileRunOn(info);
  m.rate_size_bytes = largest["size_bytes"].get<uint64_t>();
  m.pinned_bytes_per_s = static_cast<uint64_t>(largest["cuda_transfer_pinned"]["bytes_per_s"].get<double>());
  m.pageable_bytes_per_s = static_cast<uint64_t>(largest["memcpy_pageable"]["bytes_per_s"].get<double>());
  m.memcpy_pinned_bytes_per_s = static_cast<uint64_t>(largest["memcpy_pinned"]["bytes_per_s"].get<double>());
  m.sizes_bytes = o.sizes_bytes;
  m.small_copy_bytes = kSmallCopyBytes;
  m.per_copy_ns = small["cuda_transfer_ns"]["p50"].get<uint64_t>();
  m.memcpy_small_copy_ns = small["memcpy_pinned_ns"]["p50"].get<uint64_t>();
  m.copy_streams = o.copy_streams;
  m.in_flight = o.in_flight;
  m.async_engine_count = info.async_engine_count;
  m.generation = info.pcie_max_generation;
  m.lanes = info.pcie_max_lanes;
  m.current_generation = info.pcie_current_generation;
  m.current_lanes = info.pcie_current_lanes;
  return m;
}

Result<Json> RunOnDevice(const PcieBenchOptions& o, const Observer& observer) {
  COLIBRI_ASSIGN_OR_RETURN(const cuda::BenchDeviceInfo info, cuda::ProbeBenchDevice(o.cuda_device));
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<HostToDeviceBench> bench,
                           HostToDeviceBench::Create(o.cuda_device, o.copy_streams));
  const uint64_t steps = o.sizes_bytes.size() + 1;
  Json results = Json::array();
  bool goal_met = true;
  for (size_t i = 0; i < o.sizes_bytes.size(); ++i) {
    observer.Progress(i, steps);
    COLIBRI_ASSIGN_OR_RETURN(const HostToDeviceRates rates,
                             bench->MeasureSize(o.sizes_bytes[i], o.iterations, o.repeats, o.in_flight));
    Json row = SizeJson(rates);
    goal_met = goal_met && row["goal_met"].get<bool>();
    results.push_back(std::move(row));
  }
  observer.Progress(o.sizes_bytes.size(), steps);
  COLIBRI_ASSIGN_OR_RETURN(const SmallCopyLatencies latencies, bench->MeasureSmallCopies(o.small_copies));
  const Json small = SmallCopyJson(latencies, o.small_copies);
  Json doc{{"device", CudaDeviceJson(info, /*with_link=*/true)},
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
  if (!o.profile_out.empty()) {
    COLIBRI_ASSIGN_OR_RETURN(std::vector<std::string> written,
                             WritePcieProfiles(o.profile_out, MeasuredOf(o, info, results, small)));
    doc["profiles_written"] = written;
  }
  return doc;
}

}  // namespace

#endif  // COLIBRI_HAVE_CUDA

Result<Json> RunPcieBench(const PcieBenchOptions& o, const Observer& observer) {
  if (o.sizes_bytes.empty()) return Status::InvalidArgument("bench pcie: no copy sizes");
#if COLIBRI_HAVE_CUDA
  return RunOnDevice(o, observer);
#else
  (void)observer;
  COLIBRI_RETURN_IF_ERROR(replay::CudaUsable(o.cuda_device));  // "built without CUDA"
  return Status::Internal("bench pcie: unreachable without CUDA");
#endif
}

}  // namespace colibri::bench
