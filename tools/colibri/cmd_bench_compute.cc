// `colibri bench compute`: CpuCompute's SwiGLU expert FFN per dtype, batch and
// thread count, against references measured in the same run
// (docs/BENCHMARKS.md): a one-thread STREAM-style copy for the effective
// bandwidth of memory-bound calls, and OpenBLAS sgemm (fp32) for GFLOP/s.
// Experts are cycled over a working set of distinct blocks larger than 4x the
// last-level cache, so weights come from DRAM.
//
// `--compute cuda`: CudaCompute's ExpertFfn per dtype and batch, the expert
// blocks in device memory (cycled over more than 4x the GPU's L2), timed as
// the engine calls it (x copied to the device and y back on every call),
// against cuBLAS GEMMs of the same shapes on device-resident data, measured in
// the same run (cuda/bench_reference.h; cuBLAS is loaded at run time, and
// missing it leaves the ratio null). --profile-out DIR writes the figures as
// hardware profiles (hw_profile_out.h). Without a usable device: "no CUDA
// device: ..." and exit 2.
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
#include "colibri/replay/hw_backends.h"
#include "commands.h"
#include "hw_profile_out.h"
#if COLIBRI_HAVE_CUDA
#include "colibri/cuda/bench_reference.h"
#include "colibri/cuda/cuda_compute.h"
#endif

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
  std::string compute = "cpu";       // cpu or cuda
  int cuda_device = 0;               // --compute cuda
  std::string profile_out;           // --compute cuda: write hardware profiles here
};

// --batch's default with --compute cuda (--compute cpu keeps the struct's).
constexpr const char* kCudaDefaultBatches = "1,8,64,256";

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

// ---- --compute cuda ----

struct CudaPlan {
  std::vector<DType> dtypes;
  std::vector<uint32_t> batches;
  std::string working_set;  // "auto" or a size
};

Result<CudaPlan> MakeCudaPlan(const BenchComputeFlags& f) {
  CudaPlan plan;
  COLIBRI_ASSIGN_OR_RETURN(std::vector<std::string> names, SplitList(f.dtypes, "--dtype"));
  for (const std::string& name : names) {
    COLIBRI_ASSIGN_OR_RETURN(DType dtype, engine::ParseDType(name));
    plan.dtypes.push_back(dtype);
  }
  COLIBRI_ASSIGN_OR_RETURN(plan.batches, ParseCounts(f.batches, "--batch", 65536));
  if (f.hidden == 0 || f.intermediate == 0) return Status::InvalidArgument("--hidden and --intermediate must be > 0");
  if (!(f.seconds > 0)) return Status::InvalidArgument("--seconds must be > 0");
  if (f.working_set != "auto") COLIBRI_RETURN_IF_ERROR(ParseSizeBytes(f.working_set).status());
  plan.working_set = f.working_set;
  return plan;
}

#if COLIBRI_HAVE_CUDA

constexpr double kCudaGoalRatio = 0.8;
constexpr uint32_t kCudaGoalMinBatch = 64;
constexpr const char* kCudaGoal =
    "ours / cuBLAS >= 0.8 at batch >= 64. Our kernels are written to match the CPU oracle bit for bit (fixed "
    "summation order, fp32 CUDA cores, no tensor cores), so they may fall short; the figures are reported as measured";
constexpr const char* kCudaTimingOurs =
    "CudaCompute::ExpertFfn as the engine calls it, host clock per call: x (pageable host memory) copied host to "
    "device, the gate/up and down kernels, y copied back, stream synchronised; the host<->device copies of x and y "
    "ARE included";
constexpr const char* kCudaTimingCublas =
    "cublasGemmEx gate, up (I x H times H x B) and down (H x I times I x B) in the weight dtype on device-resident "
    "data, cudaEvent timed over many FFNs; no SiLU, no int8 scales, no copies";
constexpr uint64_t kDeviceCopyBytes = uint64_t{256} << 20;

// `count` copies of one synthetic expert block (MakeExpertSet's values) in device memory.
struct DeviceExperts {
  ExpertLayout layout;
  uint64_t count = 0;
  cuda::DeviceBuffer blocks;

  ExpertView View(uint64_t i) const { return ExpertView{&layout, blocks.data() + (i % count) * layout.block_bytes}; }
};

Result<DeviceExperts> UploadExperts(int device, DType dtype, uint32_t hidden, uint32_t intermediate,
                                    uint64_t working_set_bytes) {
  const ExpertSet host = MakeExpertSet(dtype, hidden, intermediate, 0);  // one block
  DeviceExperts experts;
  experts.layout = host.layout;
  experts.count = working_set_bytes / host.layout.block_bytes + 1;
  COLIBRI_ASSIGN_OR_RETURN(experts.blocks, cuda::DeviceBuffer::Allocate(device, experts.count * host.layout.block_bytes));
  for (uint64_t i = 0; i < experts.count; ++i) {
    COLIBRI_RETURN_IF_ERROR(experts.blocks.Upload(i * host.layout.block_bytes, host.blocks.get(), host.layout.block_bytes));
  }
  return experts;
}

Result<Json> MeasureCudaFfn(cuda::CudaCompute* compute, const DeviceExperts& experts, uint32_t batch,
                            const BenchComputeFlags& f) {
  Values values;
  std::vector<float> x(size_t{batch} * f.hidden);
  for (float& v : x) v = values.Next();
  std::vector<float> y(x.size());
  COLIBRI_RETURN_IF_ERROR(compute->ExpertFfn(experts.View(0), x.data(), batch, y.data()));  // warm-up, scratch
  COLIBRI_ASSIGN_OR_RETURN(Timing t, BestRate(f.seconds, f.repeats, [&](uint64_t i) {
                             return compute->ExpertFfn(experts.View(i), x.data(), batch, y.data());
                           }));
  const double flops = FlopsPerCall(f.hidden, f.intermediate, batch) * t.per_s();
  const double bytes_per_call = static_cast<double>(experts.layout.payload_bytes) + 8.0 * batch * f.hidden;
  return Json{{"dtype", engine::DTypeName(experts.layout.dtype)},
              {"batch", batch},
              {"experts_cycled", experts.count},
              {"expert_payload_bytes", experts.layout.payload_bytes},
              {"calls", t.calls},
              {"seconds", t.seconds},
              {"flops_per_s", flops},
              {"gflops", flops / 1e9},
              {"bytes_per_s", bytes_per_call * t.per_s()}};
}

// The cuBLAS figures of one row, or null with a note.
Result<Json> MeasureCublasFfn(cuda::CublasFfnReference* cublas, DType dtype, uint32_t batch, uint64_t weight_sets,
                              const BenchComputeFlags& f, std::string* note) {
  if (!cublas->available()) {
    *note = cublas->unavailable_reason();
    return Json(nullptr);
  }
  auto timing = cublas->TimeFfn(dtype, f.hidden, f.intermediate, batch, static_cast<uint32_t>(weight_sets), f.seconds,
                                f.repeats);
  if (!timing.ok() && timing.status().code() == StatusCode::kUnsupported) {
    *note = timing.status().message();
    return Json(nullptr);
  }
  if (!timing.ok()) return timing.status();
  const double flops = FlopsPerCall(f.hidden, f.intermediate, batch) / timing.value().seconds_per_ffn();
  return Json{{"gemm", cuda::CublasFfnReference::Describe(dtype)},
              {"ffns", timing.value().ffns},
              {"seconds", timing.value().seconds},
              {"flops_per_s", flops},
              {"gflops", flops / 1e9}};
}

Result<Json> RunBenchComputeCuda(const BenchComputeFlags& f, const CudaPlan& plan, Progress* progress) {
  COLIBRI_ASSIGN_OR_RETURN(const cuda::BenchDeviceInfo info, cuda::ProbeBenchDevice(f.cuda_device));
  uint64_t working_set_bytes = 4 * std::max<uint64_t>(info.l2_cache_bytes, uint64_t{64} << 20);
  if (plan.working_set != "auto") {
    COLIBRI_ASSIGN_OR_RETURN(working_set_bytes, ParseSizeBytes(plan.working_set));
  }
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaCompute> compute, cuda::CudaCompute::Create(f.cuda_device));
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CublasFfnReference> cublas,
                           cuda::CublasFfnReference::Create(f.cuda_device));
  // Where cuBLAS came from (or every place tried), on stderr: the device check's log shows it.
  if (cublas->available()) {
    std::fprintf(stderr, "cuBLAS: %s (version %d)\n", cublas->library().c_str(), cublas->version());
  } else {
    std::fprintf(stderr, "cuBLAS: %s\n", cublas->unavailable_reason().c_str());
  }
  const uint64_t steps = plan.dtypes.size() + 1;
  uint64_t step = 0;
  progress->Update(step++, steps);
  COLIBRI_ASSIGN_OR_RETURN(const cuda::DeviceCopyTiming copy,
                           cuda::MeasureDeviceCopy(f.cuda_device, kDeviceCopyBytes, 20, f.repeats));
  Json results = Json::array();
  for (DType dtype : plan.dtypes) {
    progress->Update(step++, steps);
    COLIBRI_ASSIGN_OR_RETURN(const DeviceExperts experts,
                             UploadExperts(f.cuda_device, dtype, f.hidden, f.intermediate, working_set_bytes));
    for (uint32_t batch : plan.batches) {
      COLIBRI_ASSIGN_OR_RETURN(Json row, MeasureCudaFfn(compute.get(), experts, batch, f));
      std::string note;
      COLIBRI_ASSIGN_OR_RETURN(Json reference, MeasureCublasFfn(cublas.get(), dtype, batch, experts.count, f, &note));
      row["cublas"] = reference;
      row["ratio_over_cublas"] = nullptr;
      row["goal_applies"] = batch >= kCudaGoalMinBatch;
      row["goal_met"] = nullptr;
      if (!reference.is_null()) {
        const double ratio = row["flops_per_s"].get<double>() / reference["flops_per_s"].get<double>();
        row["ratio_over_cublas"] = ratio;
        if (batch >= kCudaGoalMinBatch) row["goal_met"] = ratio >= kCudaGoalRatio;
      } else {
        row["cublas_note"] = note;
      }
      results.push_back(std::move(row));
    }
  }
  Json doc{{"config",
            {{"compute", "cuda"},
             {"dtype", f.dtypes},
             {"hidden", f.hidden},
             {"intermediate", f.intermediate},
             {"batch", f.batches},
             {"working_set", f.working_set},
             {"seconds", f.seconds},
             {"repeats", f.repeats},
             {"cuda_device", f.cuda_device}}},
           {"device",
            {{"ordinal", info.device.ordinal},
             {"name", info.device.name},
             {"pci_bus_id", info.device.pci_bus_id},
             {"compute_capability",
              std::to_string(info.device.compute_major) + "." + std::to_string(info.device.compute_minor)},
             {"memory_bytes", info.device.total_memory_bytes},
             {"multiprocessors", info.device.multiprocessors},
             {"l2_cache_bytes", info.l2_cache_bytes},
             {"runtime_version", info.runtime_version},
             {"driver_version", info.driver_version}}},
           {"working_set_bytes", working_set_bytes},
           {"timing_includes_host_device_copies", true},
           {"timing", {{"ours", kCudaTimingOurs}, {"cublas", kCudaTimingCublas}}},
           {"int8_note",
            "ours: int8 weights with per-row fp32 scales, fp32 activations and accumulation; cuBLAS: int8 weights and "
            "int8 activations, int32 accumulation (CUBLAS_COMPUTE_32I): the same shapes and weight bytes"},
           {"cublas",
            {{"available", cublas->available()},
             {"library", cublas->available() ? Json(cublas->library()) : Json(nullptr)},
             {"version", cublas->version() > 0 ? Json(cublas->version()) : Json(nullptr)},
             {"note", cublas->available() ? Json(nullptr) : Json(cublas->unavailable_reason())}}},
           {"device_copy",
            {{"bytes", copy.bytes},
             {"copies", copy.copies},
             {"seconds", copy.seconds},
             {"bytes_per_s", copy.bytes_per_s()},
             {"note", "device-to-device cudaMemcpy, bytes read plus bytes written per second"}}},
           {"goal", kCudaGoal},
           {"results", results},
           {"profiles_written", nullptr}};
  if (!f.profile_out.empty()) {
    MeasuredCompute m;
    m.run = ProfileRun{CommandLine(), UtcNow(), info.device.name, info.device.ordinal, info.device.pci_bus_id};
    m.hidden = f.hidden;
    m.intermediate = f.intermediate;
    m.batches = f.batches;
    for (DType dtype : plan.dtypes) {
      MeasuredCompute::Peak peak{engine::DTypeName(dtype), 0, 0};
      for (const Json& row : results) {
        const auto flops = static_cast<uint64_t>(row["flops_per_s"].get<double>());
        if (row["dtype"] == peak.dtype && flops > peak.flops_per_s) {
          peak.flops_per_s = flops;
          peak.batch = row["batch"].get<uint32_t>();
        }
      }
      m.peaks.push_back(peak);
    }
    m.memory_bytes_per_s = static_cast<uint64_t>(copy.bytes_per_s());
    m.device_copy_bytes = copy.bytes;
    m.memory_bytes = info.device.total_memory_bytes;
    COLIBRI_ASSIGN_OR_RETURN(std::vector<std::string> written, WriteComputeProfiles(f.profile_out, m));
    doc["profiles_written"] = written;
  }
  return doc;
}

#endif  // COLIBRI_HAVE_CUDA

Result<Json> BenchComputeCuda(const BenchComputeFlags& f, Progress* progress) {
  COLIBRI_ASSIGN_OR_RETURN(const CudaPlan plan, MakeCudaPlan(f));
  COLIBRI_RETURN_IF_ERROR(replay::CudaUsable(f.cuda_device).WithPrefix("bench compute --compute cuda"));
#if COLIBRI_HAVE_CUDA
  return RunBenchComputeCuda(f, plan, progress);
#else
  (void)plan;
  (void)progress;
  return Status::Internal("bench compute: unreachable without CUDA");
#endif
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
  if (r["profiles_written"].is_array()) {
    for (const Json& path : r["profiles_written"]) std::printf("profile: %s\n", path.get<std::string>().c_str());
  }
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
