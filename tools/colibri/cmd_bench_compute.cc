// `colibri bench compute`: CpuCompute's SwiGLU expert FFN per dtype, batch and
// thread count, against references measured in the same run
// (docs/BENCHMARKS.md): a one-thread STREAM-style copy for the effective
// bandwidth of memory-bound calls, and OpenBLAS sgemm (fp32) for GFLOP/s.
// Experts are cycled over a working set of distinct blocks larger than 4x the
// last-level cache, so weights come from DRAM.
#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "cli_common.h"
#include "colibri/engine/cpu_compute.h"
#include "colibri/engine/dtype.h"
#include "colibri/engine/expert_layout.h"
#include "commands.h"

namespace colibri::cli {
namespace {

using engine::CpuCompute;
using engine::CpuIsa;
using engine::DType;
using engine::ExpertLayout;
using engine::ExpertView;

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
};

// Parsed flags.
struct BenchPlan {
  std::vector<DType> dtypes;
  std::vector<uint32_t> batches;
  std::vector<uint32_t> threads;
  std::optional<CpuIsa> isa;
  uint64_t llc_bytes = 0;
  uint64_t working_set_bytes = 0;
};

double NowS() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

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

// Last-level cache size from sysconf, else sysfs; 0 when unknown.
uint64_t LastLevelCacheBytes() {
  for (int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long bytes = sysconf(name);
    if (bytes > 0) return static_cast<uint64_t>(bytes);
  }
  std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index3/size");
  uint64_t kib = 0;
  return in >> kib ? kib * 1024 : 0;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

Result<BenchPlan> MakePlan(const BenchComputeFlags& f) {
  BenchPlan plan;
  COLIBRI_ASSIGN_OR_RETURN(std::vector<std::string> names, SplitList(f.dtypes, "--dtype"));
  for (const std::string& name : names) {
    COLIBRI_ASSIGN_OR_RETURN(DType dtype, engine::ParseDType(name));
    plan.dtypes.push_back(dtype);
  }
  COLIBRI_ASSIGN_OR_RETURN(plan.batches, ParseCounts(f.batches, "--batch", 65536));
  COLIBRI_ASSIGN_OR_RETURN(plan.threads, ParseCounts(f.threads, "--threads", 256));
  if (f.isa != "auto") {
    COLIBRI_ASSIGN_OR_RETURN(CpuIsa isa, engine::ParseCpuIsa(f.isa));
    plan.isa = isa;
  }
  if (f.hidden == 0 || f.intermediate == 0) return Status::InvalidArgument("--hidden and --intermediate must be > 0");
  if (!(f.seconds > 0)) return Status::InvalidArgument("--seconds must be > 0");
  plan.llc_bytes = LastLevelCacheBytes();
  if (f.working_set == "auto") {
    plan.working_set_bytes = 4 * std::max<uint64_t>(plan.llc_bytes, uint64_t{64} << 20);
  } else {
    COLIBRI_ASSIGN_OR_RETURN(plan.working_set_bytes, ParseSizeBytes(f.working_set));
  }
  return plan;
}

// 64-byte-aligned, zero-initialised bytes.
struct AlignedDelete {
  void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
};
using AlignedBytes = std::unique_ptr<std::byte[], AlignedDelete>;

AlignedBytes AllocateBytes(uint64_t bytes) {
  AlignedBytes buffer(new (std::align_val_t{64}) std::byte[bytes]);
  std::memset(buffer.get(), 0, bytes);  // commit the pages before timing
  return buffer;
}

// Deterministic values uniform in [-1, 1) (splitmix64).
class Values {
 public:
  float Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return static_cast<float>(static_cast<double>((z ^ (z >> 31)) >> 11) * 0x1p-52 - 1.0);
  }

 private:
  uint64_t state_ = 1;
};

// One rows x cols matrix of weights ~ U(-1, 1) / sqrt(cols) in the block's dtype.
void FillMatrix(const ExpertLayout& layout, std::byte* matrix, std::byte* scales, uint32_t rows, uint32_t cols,
                Values* values) {
  const float range = 1.0f / std::sqrt(static_cast<float>(cols));
  const uint64_t count = uint64_t{rows} * cols;
  for (uint64_t i = 0; i < count; ++i) {
    const float w = values->Next();
    uint16_t half = 0;
    switch (layout.dtype) {
      case DType::kFp32: {
        const float scaled = w * range;
        std::memcpy(matrix + 4 * i, &scaled, 4);
        break;
      }
      case DType::kBf16:
        half = engine::FloatToBf16(w * range);
        std::memcpy(matrix + 2 * i, &half, 2);
        break;
      case DType::kFp16:
        half = engine::FloatToFp16(w * range);
        std::memcpy(matrix + 2 * i, &half, 2);
        break;
      case DType::kInt8:
        matrix[i] = static_cast<std::byte>(static_cast<int8_t>(std::lround(w * 127)));
        break;
    }
  }
  if (layout.dtype != DType::kInt8) return;
  const float scale = range / 127;
  for (uint32_t r = 0; r < rows; ++r) std::memcpy(scales + 4 * uint64_t{r}, &scale, 4);
}

// `count` copies of one expert block, back to back.
struct ExpertSet {
  ExpertLayout layout;
  uint64_t count = 0;
  AlignedBytes blocks;

  ExpertView View(uint64_t i) const { return ExpertView{&layout, blocks.get() + (i % count) * layout.block_bytes}; }
};

ExpertSet MakeExpertSet(DType dtype, uint32_t hidden, uint32_t intermediate, uint64_t working_set_bytes) {
  ExpertSet set;
  set.layout = ExpertLayout::Make(dtype, hidden, intermediate);
  set.count = working_set_bytes / set.layout.block_bytes + 1;
  set.blocks = AllocateBytes(set.count * set.layout.block_bytes);
  const ExpertLayout& l = set.layout;
  std::byte* first = set.blocks.get();
  Values values;
  FillMatrix(l, first + l.gate_offset, first + l.gate_scales_offset, intermediate, hidden, &values);
  FillMatrix(l, first + l.up_offset, first + l.up_scales_offset, intermediate, hidden, &values);
  FillMatrix(l, first + l.down_offset, first + l.down_scales_offset, hidden, intermediate, &values);
  for (uint64_t i = 1; i < set.count; ++i) std::memcpy(first + i * l.block_bytes, first, l.block_bytes);
  return set;
}

struct Timing {
  uint64_t calls = 0;
  double seconds = 0;
  double per_s() const { return calls / seconds; }
};

// Best (most calls per second) of `repeats` windows of `seconds`, each
// running `call(i)` with i counting on across windows.
template <typename Call>
Result<Timing> BestRate(double seconds, int repeats, Call call) {
  Timing best;
  uint64_t i = 0;
  for (int r = 0; r < repeats; ++r) {
    Timing t;
    const double start = NowS();
    do {
      COLIBRI_RETURN_IF_ERROR(call(i++));
      ++t.calls;
      t.seconds = NowS() - start;
    } while (t.seconds < seconds);
    if (best.calls == 0 || t.per_s() > best.per_s()) best = t;
  }
  return best;
}

// STREAM "copy" (a[i] = b[i]), one thread, counted as bytes read + written.
// Kept a plain loop: the compiler would otherwise call memcpy (non-temporal stores).
#if defined(__clang__)
#define COLIBRI_PLAIN_LOOP __attribute__((noinline, no_builtin("memcpy")))
#else
#define COLIBRI_PLAIN_LOOP __attribute__((noinline, optimize("no-tree-loop-distribute-patterns")))
#endif
COLIBRI_PLAIN_LOOP void StreamCopy(float* __restrict a, const float* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] = b[i];
}

Result<Json> MeasureStreamCopy(uint64_t working_set_bytes, double seconds, int repeats) {
  const size_t n = working_set_bytes / 2 / sizeof(float);
  AlignedBytes a = AllocateBytes(n * sizeof(float));
  AlignedBytes b = AllocateBytes(n * sizeof(float));
  float* dst = reinterpret_cast<float*>(a.get());
  const float* src = reinterpret_cast<const float*>(b.get());
  COLIBRI_ASSIGN_OR_RETURN(Timing t, BestRate(seconds, repeats, [&](uint64_t) {
                             StreamCopy(dst, src, n);
                             return Status::Ok();
                           }));
  return Json{{"array_bytes", n * sizeof(float)},
              {"copies", t.calls},
              {"seconds", t.seconds},
              {"bytes_per_s", 2.0 * n * sizeof(float) * t.per_s()}};
}

double FlopsPerCall(uint32_t hidden, uint32_t intermediate, uint32_t batch) {
  return 2.0 * 3.0 * hidden * intermediate * batch;
}

Result<Json> MeasureCpuCompute(const ExpertSet& set, uint32_t batch, uint32_t threads, const BenchPlan& plan,
                               const BenchComputeFlags& f) {
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<CpuCompute> compute,
                           CpuCompute::Create(engine::CpuComputeOptions{threads, plan.isa}));
  Values values;
  std::vector<float> x(size_t{batch} * f.hidden);
  for (float& v : x) v = values.Next();
  std::vector<float> y(x.size());
  COLIBRI_ASSIGN_OR_RETURN(Timing t, BestRate(f.seconds, f.repeats, [&](uint64_t i) {
                             return compute->ExpertFfn(set.View(i), x.data(), batch, y.data());
                           }));
  const double bytes_per_call = static_cast<double>(set.layout.payload_bytes) + 4.0 * batch * f.hidden;
  return Json{{"dtype", engine::DTypeName(set.layout.dtype)},
              {"batch", batch},
              {"threads", threads},
              {"isa", engine::CpuIsaName(compute->isa())},
              {"experts_cycled", set.count},
              {"expert_payload_bytes", set.layout.payload_bytes},
              {"calls", t.calls},
              {"seconds", t.seconds},
              {"gflops", FlopsPerCall(f.hidden, f.intermediate, batch) * t.per_s() / 1e9},
              {"bytes_per_s", bytes_per_call * t.per_s()}};
}

// The FFN of one fp32 expert with OpenBLAS: X W_gate^T and X W_up^T (batch x I),
// SiLU(gate) x up with libm expf, then H W_down^T (batch x H).
struct OpenBlasFfn {
  int hidden, intermediate, batch;
  std::vector<float> x, gate, up, y;

  OpenBlasFfn(uint32_t h, uint32_t i, uint32_t b)
      : hidden(static_cast<int>(h)),
        intermediate(static_cast<int>(i)),
        batch(static_cast<int>(b)),
        x(size_t{b} * h),
        gate(size_t{b} * i),
        up(gate.size()),
        y(x.size()) {
    Values values;
    for (float& v : x) v = values.Next();
  }

  void Run(const ExpertView& e) {
    const ExpertLayout& l = *e.layout;
    Gemm(x.data(), e.block + l.gate_offset, intermediate, hidden, gate.data());
    Gemm(x.data(), e.block + l.up_offset, intermediate, hidden, up.data());
    for (size_t j = 0; j < gate.size(); ++j) gate[j] = gate[j] / (1.0f + std::exp(-gate[j])) * up[j];
    Gemm(gate.data(), e.block + l.down_offset, hidden, intermediate, y.data());
  }

  // out (batch x rows) = in (batch x cols) W^T, W rows x cols row-major.
  void Gemm(const float* in, const std::byte* w, int rows, int cols, float* out) const {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, rows, cols, 1.0f, in, cols,
                reinterpret_cast<const float*>(w), cols, 0.0f, out, rows);
  }
};

Result<Json> MeasureOpenBlas(const ExpertSet& set, uint32_t batch, uint32_t threads, const BenchComputeFlags& f) {
  openblas_set_num_threads(static_cast<int>(threads));
  OpenBlasFfn ffn(f.hidden, f.intermediate, batch);
  COLIBRI_ASSIGN_OR_RETURN(Timing t, BestRate(f.seconds, f.repeats, [&](uint64_t i) {
                             ffn.Run(set.View(i));
                             return Status::Ok();
                           }));
  return Json{{"batch", batch},
              {"threads", threads},
              {"calls", t.calls},
              {"seconds", t.seconds},
              {"gflops", FlopsPerCall(f.hidden, f.intermediate, batch) * t.per_s() / 1e9}};
}

const Json* FindOpenBlas(const Json& openblas, uint32_t batch, uint32_t threads) {
  for (const Json& row : openblas) {
    if (row["batch"] == batch && row["threads"] == threads) return &row;
  }
  return nullptr;
}

// OpenBLAS builds that predate a CPU fall back to old kernels (Debian 12's
// 0.3.21 runs the project VM's family 6 model 207 Xeon as "Prescott", SSE3
// only), which makes a weak reference.
void WarnIfOpenBlasFellBack() {
  const std::string core = openblas_get_corename();
  if (!engine::CpuIsaSupported(CpuIsa::kAvx2)) return;
  for (const char* old : {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Sandybridge"}) {
    if (core == old) {
      std::fprintf(stderr,
                   "colibri: warning: OpenBLAS chose its '%s' kernels on a CPU with AVX2: the sgemm reference is weak; "
                   "rerun with OPENBLAS_CORETYPE=Haswell (AVX2) or SkylakeX (AVX-512)\n",
                   core.c_str());
    }
  }
}

Result<Json> BenchCompute(const BenchComputeFlags& f, Progress* progress) {
  COLIBRI_ASSIGN_OR_RETURN(BenchPlan plan, MakePlan(f));
  WarnIfOpenBlasFellBack();
  const uint64_t steps = plan.dtypes.size() + 2;
  uint64_t step = 0;
  progress->Update(step++, steps);
  COLIBRI_ASSIGN_OR_RETURN(Json stream, MeasureStreamCopy(plan.working_set_bytes, f.seconds, f.repeats));
  Json results = Json::array();
  for (DType dtype : plan.dtypes) {
    progress->Update(step++, steps);
    const ExpertSet set = MakeExpertSet(dtype, f.hidden, f.intermediate, plan.working_set_bytes);
    for (uint32_t batch : plan.batches) {
      for (uint32_t threads : plan.threads) {
        COLIBRI_ASSIGN_OR_RETURN(Json row, MeasureCpuCompute(set, batch, threads, plan, f));
        results.push_back(std::move(row));
      }
    }
  }
  progress->Update(step++, steps);
  Json openblas = Json::array();
  {
    const ExpertSet set = MakeExpertSet(DType::kFp32, f.hidden, f.intermediate, plan.working_set_bytes);
    for (uint32_t batch : plan.batches) {
      for (uint32_t threads : plan.threads) {
        COLIBRI_ASSIGN_OR_RETURN(Json row, MeasureOpenBlas(set, batch, threads, f));
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
  return Json{{"config",
               {{"dtype", f.dtypes},
                {"hidden", f.hidden},
                {"intermediate", f.intermediate},
                {"batch", f.batches},
                {"threads", f.threads},
                {"isa", f.isa},
                {"working_set", f.working_set},
                {"seconds", f.seconds},
                {"repeats", f.repeats}}},
              {"machine",
               {{"cpu", CpuModel()},
                {"cores_online", sysconf(_SC_NPROCESSORS_ONLN)},
                {"llc_bytes", plan.llc_bytes},
                {"best_isa", engine::CpuIsaName(engine::BestCpuIsa())}}},
              {"working_set_bytes", plan.working_set_bytes},
              {"stream_copy_1_thread", stream},
              {"openblas_core", openblas_get_corename()},
              {"openblas_sgemm_fp32", openblas},
              {"results", results}};
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

}  // namespace

void AddBenchComputeCommand(CLI::App* bench, int* exit_code) {
  auto flags = std::make_shared<BenchComputeFlags>();
  CLI::App* cmd = bench->add_subcommand("compute", "CPU expert FFN bandwidth and GFLOP/s vs STREAM copy and OpenBLAS");
  cmd->add_option("--dtype", flags->dtypes, "Weight dtypes (comma list of fp32, bf16, fp16, int8)")
      ->capture_default_str();
  cmd->add_option("--hidden", flags->hidden, "Hidden size H")->capture_default_str();
  cmd->add_option("--intermediate", flags->intermediate, "Expert intermediate size I")->capture_default_str();
  cmd->add_option("--batch", flags->batches, "Tokens per expert call (comma list)")->capture_default_str();
  cmd->add_option("--threads", flags->threads, "CpuCompute / OpenBLAS threads (comma list)")->capture_default_str();
  cmd->add_option("--isa", flags->isa, "CPU path: auto, scalar, avx2, avx512")->capture_default_str();
  cmd->add_option("--working-set", flags->working_set,
                  "Bytes of distinct expert blocks cycled (and of the STREAM arrays); auto = 4 x last-level cache")
      ->capture_default_str();
  cmd->add_option("--seconds", flags->seconds, "Seconds per repeat of each measurement")->capture_default_str();
  cmd->add_option("--repeats", flags->repeats, "Repeats per measurement (best is reported)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "Print the result as JSON on stdout");
  cmd->callback([flags, exit_code] {
    Progress progress("bench compute");
    auto result = BenchCompute(*flags, &progress);
    progress.Done();
    *exit_code = Emit(result, flags->json, &PrintHuman);
  });
}

}  // namespace colibri::cli
