#include "colibri/bench/compute_bench.h"

#include <unistd.h>

#include <string>

#include "colibri/bench/cpu_ffn.h"
#include "colibri/bench/cpu_info.h"
#include "colibri/bench/expert_set.h"
#include "colibri/bench/openblas_ffn.h"
#include "colibri/bench/stream_copy.h"

namespace colibri::bench {
namespace {

using engine::DType;

Status CheckOptions(const CpuComputeBenchOptions& o) {
  if (o.dtypes.empty() || o.batches.empty() || o.threads.empty()) {
    return Status::InvalidArgument("bench compute: dtypes, batches and threads must not be empty");
  }
  if (o.hidden == 0 || o.intermediate == 0) {
    return Status::InvalidArgument("bench compute: hidden and intermediate must be > 0");
  }
  if (!(o.seconds > 0) || o.repeats < 1) {
    return Status::InvalidArgument("bench compute: seconds and repeats must be > 0");
  }
  return Status::Ok();
}

Result<Json> CpuRow(const ExpertSet& set, uint32_t batch, uint32_t threads, const CpuComputeBenchOptions& o) {
  COLIBRI_ASSIGN_OR_RETURN(const CpuFfnTiming t, TimeCpuExpertFfn(set, batch, threads, o.isa, o.seconds, o.repeats));
  const double bytes_per_call = static_cast<double>(set.layout.payload_bytes) + 4.0 * batch * o.hidden;
  return Json{{"dtype", engine::DTypeName(set.layout.dtype)},
              {"batch", batch},
              {"threads", threads},
              {"isa", engine::CpuIsaName(t.isa)},
              {"experts_cycled", set.count},
              {"expert_payload_bytes", set.layout.payload_bytes},
              {"calls", t.best.calls},
              {"seconds", t.best.seconds},
              {"gflops", FfnFlopsPerCall(o.hidden, o.intermediate, batch) * t.best.calls_per_s() / 1e9},
              {"bytes_per_s", bytes_per_call * t.best.calls_per_s()}};
}

Result<Json> OpenBlasRow(const ExpertSet& set, uint32_t batch, uint32_t threads, const CpuComputeBenchOptions& o) {
  COLIBRI_ASSIGN_OR_RETURN(const CallWindow t, TimeOpenBlasFfn(set, batch, threads, o.seconds, o.repeats));
  return Json{{"batch", batch},
              {"threads", threads},
              {"calls", t.calls},
              {"seconds", t.seconds},
              {"gflops", FfnFlopsPerCall(o.hidden, o.intermediate, batch) * t.calls_per_s() / 1e9}};
}

const Json* FindOpenBlas(const Json& openblas, uint32_t batch, uint32_t threads) {
  for (const Json& row : openblas) {
    if (row["batch"] == batch && row["threads"] == threads) return &row;
  }
  return nullptr;
}

}  // namespace

Result<Json> RunCpuComputeBench(const CpuComputeBenchOptions& o, const Observer& observer) {
  COLIBRI_RETURN_IF_ERROR(CheckOptions(o));
  const uint64_t llc_bytes = LastLevelCacheBytes();
  const uint64_t working_set_bytes = o.working_set_bytes.value_or(BeyondCacheBytes(llc_bytes));
  if (const auto warning = OpenBlasFallbackWarning()) observer.Warn(*warning);
  const uint64_t steps = o.dtypes.size() + 2;
  uint64_t step = 0;
  observer.Progress(step++, steps);
  const StreamCopyTiming stream_copy = MeasureStreamCopy(working_set_bytes, o.seconds, o.repeats);
  const Json stream{{"array_bytes", stream_copy.array_bytes},
                    {"copies", stream_copy.copies},
                    {"seconds", stream_copy.seconds},
                    {"bytes_per_s", stream_copy.bytes_per_s()}};
  Json results = Json::array();
  for (DType dtype : o.dtypes) {
    observer.Progress(step++, steps);
    const ExpertSet set = MakeExpertSet(dtype, o.hidden, o.intermediate, working_set_bytes);
    for (uint32_t batch : o.batches) {
      for (uint32_t threads : o.threads) {
        COLIBRI_ASSIGN_OR_RETURN(Json row, CpuRow(set, batch, threads, o));
        results.push_back(std::move(row));
      }
    }
  }
  observer.Progress(step++, steps);
  Json openblas = Json::array();
  {
    const ExpertSet set = MakeExpertSet(DType::kFp32, o.hidden, o.intermediate, working_set_bytes);
    for (uint32_t batch : o.batches) {
      for (uint32_t threads : o.threads) {
        COLIBRI_ASSIGN_OR_RETURN(Json row, OpenBlasRow(set, batch, threads, o));
        openblas.push_back(std::move(row));
      }
    }
  }
  const double stream_bytes_per_s = stream["bytes_per_s"].get<double>();
  for (Json& row : results) {
    row["bandwidth_over_stream"] = row["bytes_per_s"].get<double>() / stream_bytes_per_s;
    const Json* reference = FindOpenBlas(openblas, row["batch"].get<uint32_t>(), row["threads"].get<uint32_t>());
    row["gflops_over_openblas"] = row["gflops"].get<double>() / (*reference)["gflops"].get<double>();
  }
  return Json{{"machine",
               {{"cpu", CpuModelName()},
                {"cores_online", sysconf(_SC_NPROCESSORS_ONLN)},
                {"llc_bytes", llc_bytes},
                {"best_isa", engine::CpuIsaName(engine::BestCpuIsa())}}},
              {"working_set_bytes", working_set_bytes},
              {"stream_copy_1_thread", stream},
              {"openblas_core", OpenBlasCoreName()},
              {"openblas_sgemm_fp32", openblas},
              {"results", results}};
}

}  // namespace colibri::bench
