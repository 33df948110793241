#include "colibri/engine/cpu_compute.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <cstring>

#include "cpu_compute_kernels.h"
#include "cpu_compute_pool.h"

namespace colibri::engine {
namespace {

using cpu_kernels::Activations;
using cpu_kernels::Matrix;
using cpu_kernels::Output;
using cpu_kernels::PaddedLength;

constexpr uint32_t kMaxThreads = 256;
constexpr CpuIsa kAllIsas[] = {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512};

const cpu_kernels::KernelSet& KernelsFor(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx2:
      return cpu_kernels::Avx2Kernels();
    case CpuIsa::kAvx512:
      return cpu_kernels::Avx512Kernels();
    case CpuIsa::kScalar:
      break;
  }
  return cpu_kernels::ScalarKernels();
}

const char* CapsName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx2:
      return "cpu-avx2";
    case CpuIsa::kAvx512:
      return "cpu-avx512";
    case CpuIsa::kScalar:
      break;
  }
  return "cpu-scalar";
}

struct RowRange {
  uint32_t begin = 0;
  uint32_t end = 0;
};

// Part `part` of `parts` contiguous ranges covering [0, rows); every boundary
// but the last is a multiple of kLanes (whole SiLU chunks, no shared cache lines).
RowRange PartRows(uint32_t part, uint32_t parts, uint32_t rows) {
  const uint64_t per_part = PaddedLength((uint64_t{rows} + parts - 1) / parts);
  RowRange range;
  range.begin = static_cast<uint32_t>(std::min<uint64_t>(part * per_part, rows));
  range.end = static_cast<uint32_t>(std::min<uint64_t>(range.begin + per_part, rows));
  return range;
}

Matrix ExpertMatrix(const ExpertView& expert, uint64_t offset, uint64_t scales_offset, uint32_t cols) {
  Matrix m;
  m.dtype = expert.layout->dtype;
  m.data = expert.block + offset;
  m.scales = expert.layout->dtype == DType::kInt8 ? expert.block + scales_offset : nullptr;
  m.cols = cols;
  return m;
}

}  // namespace

Status ValidateComputeVectors(const float* x, size_t tokens, const float* out) {
  if (tokens > 0 && (x == nullptr || out == nullptr)) return Status::InvalidArgument("null input or output vector");
  return Status::Ok();
}

Status ValidateExpertView(const ExpertView& expert) {
  if (expert.layout == nullptr || expert.block == nullptr) {
    return Status::InvalidArgument("expert view without layout or block");
  }
  const ExpertLayout& layout = *expert.layout;
  if (layout.hidden == 0 || layout.intermediate == 0) {
    return Status::InvalidArgument("expert shape " + std::to_string(layout.hidden) + " x " +
                                   std::to_string(layout.intermediate) + " is empty");
  }
  if (DTypeBytes(layout.dtype) == 0) return Status::Unsupported("expert dtype " + std::to_string(int(layout.dtype)));
  return Status::Ok();
}

const char* CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar:
      return "scalar";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

Result<CpuIsa> ParseCpuIsa(const std::string& name) {
  for (CpuIsa isa : kAllIsas) {
    if (name == CpuIsaName(isa)) return isa;
  }
  return Status::InvalidArgument("unknown CPU path '" + name + "' (expected scalar, avx2 or avx512)");
}

#if defined(__x86_64__) || defined(__i386__)
// F16C from CPUID leaf 1, ECX bit 29 (clang's __builtin_cpu_supports lacks "f16c").
bool HasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}
#endif

bool CpuIsaSupported(CpuIsa isa) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && HasF16c();
  switch (isa) {
    case CpuIsa::kScalar:
      return true;
    case CpuIsa::kAvx2:
      return avx2;
    case CpuIsa::kAvx512:
      return avx2 && __builtin_cpu_supports("avx512f");
  }
  return false;
#else
  return isa == CpuIsa::kScalar;
#endif
}

CpuIsa BestCpuIsa() {
  for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2}) {
    if (CpuIsaSupported(isa)) return isa;
  }
  return CpuIsa::kScalar;
}

Result<std::unique_ptr<CpuCompute>> CpuCompute::Create(const CpuComputeOptions& options) {
  if (options.threads < 1 || options.threads > kMaxThreads) {
    return Status::InvalidArgument("CpuCompute threads " + std::to_string(options.threads) + " not in [1, " +
                                   std::to_string(kMaxThreads) + "]");
  }
  const CpuIsa isa = options.isa.value_or(BestCpuIsa());
  if (!CpuIsaSupported(isa)) {
    return Status::Unsupported(std::string("this CPU cannot run the ") + CpuIsaName(isa) + " path");
  }
  return std::unique_ptr<CpuCompute>(
      new CpuCompute(&KernelsFor(isa), std::make_unique<CpuWorkerPool>(options.threads)));
}

CpuCompute::CpuCompute(const cpu_kernels::KernelSet* kernels, std::unique_ptr<CpuWorkerPool> pool)
    : kernels_(kernels), pool_(std::move(pool)) {
  caps_.name = CapsName(kernels_->isa);
  caps_.device_memory = false;
}

CpuCompute::~CpuCompute() = default;

CpuIsa CpuCompute::isa() const { return kernels_->isa; }
uint32_t CpuCompute::threads() const { return pool_->threads(); }

size_t CpuCompute::PadActivations(const float* x, size_t tokens, uint32_t cols) {
  const size_t stride = PaddedLength(cols);
  padded_x_.resize(tokens * stride);
  for (size_t t = 0; t < tokens; ++t) {
    float* row = padded_x_.data() + t * stride;
    std::memcpy(row, x + t * cols, sizeof(float) * cols);
    std::fill(row + cols, row + stride, 0.0f);
  }
  return stride;
}

Status CpuCompute::ExpertFfn(const ExpertView& expert, const float* x, size_t tokens, float* y) {
  COLIBRI_RETURN_IF_ERROR(ValidateExpertView(expert));
  COLIBRI_RETURN_IF_ERROR(ValidateComputeVectors(x, tokens, y));
  if (tokens == 0) return Status::Ok();
  const ExpertLayout& layout = *expert.layout;
  const uint32_t hidden = layout.hidden;
  const uint32_t intermediate = layout.intermediate;
  const size_t x_stride = PadActivations(x, tokens, hidden);
  const Activations xs{padded_x_.data(), x_stride, tokens};
  const size_t h_stride = PaddedLength(intermediate);
  gate_.resize(tokens * h_stride);
  up_.resize(tokens * h_stride);
  for (size_t t = 0; t < tokens; ++t) {  // padding columns stay 0: SiLU(0) x 0 = 0 feeds W_down's padding
    std::fill(gate_.begin() + t * h_stride + intermediate, gate_.begin() + (t + 1) * h_stride, 0.0f);
    std::fill(up_.begin() + t * h_stride + intermediate, up_.begin() + (t + 1) * h_stride, 0.0f);
  }
  const Matrix gate = ExpertMatrix(expert, layout.gate_offset, layout.gate_scales_offset, hidden);
  const Matrix up = ExpertMatrix(expert, layout.up_offset, layout.up_scales_offset, hidden);
  const Matrix down = ExpertMatrix(expert, layout.down_offset, layout.down_scales_offset, intermediate);
  const uint32_t parts = threads();
  auto gate_up_silu = [&](uint32_t part) {
    const RowRange rows = PartRows(part, parts, intermediate);
    if (rows.begin == rows.end) return;
    kernels_->dot_rows(gate, rows.begin, rows.end, xs, Output{gate_.data(), h_stride});
    kernels_->dot_rows(up, rows.begin, rows.end, xs, Output{up_.data(), h_stride});
    const size_t count = PaddedLength(rows.end) - rows.begin;
    for (size_t t = 0; t < tokens; ++t) {
      kernels_->silu_mul(gate_.data() + t * h_stride + rows.begin, up_.data() + t * h_stride + rows.begin, count);
    }
  };
  pool_->Run(gate_up_silu);
  const Activations hs{gate_.data(), h_stride, tokens};
  auto down_rows = [&](uint32_t part) {
    const RowRange rows = PartRows(part, parts, hidden);
    if (rows.begin != rows.end) kernels_->dot_rows(down, rows.begin, rows.end, hs, Output{y, hidden});
  };
  pool_->Run(down_rows);
  return Status::Ok();
}

Status CpuCompute::GateGemv(const float* weight, const float* bias, uint32_t experts, uint32_t hidden, const float* x,
                            size_t tokens, float* logits) {
  if (weight == nullptr || experts == 0 || hidden == 0) {
    return Status::InvalidArgument("gate weight is null or empty (" + std::to_string(experts) + " x " +
                                   std::to_string(hidden) + ")");
  }
  COLIBRI_RETURN_IF_ERROR(ValidateComputeVectors(x, tokens, logits));
  if (tokens == 0) return Status::Ok();
  const size_t x_stride = PadActivations(x, tokens, hidden);
  const Activations xs{padded_x_.data(), x_stride, tokens};
  const Matrix m{DType::kFp32, reinterpret_cast<const std::byte*>(weight), nullptr, hidden};
  const uint32_t parts = threads();
  auto expert_rows = [&](uint32_t part) {
    const RowRange rows = PartRows(part, parts, experts);
    if (rows.begin == rows.end) return;
    kernels_->dot_rows(m, rows.begin, rows.end, xs, Output{logits, experts});
    if (bias == nullptr) return;
    for (size_t t = 0; t < tokens; ++t) {
      for (uint32_t e = rows.begin; e < rows.end; ++e) logits[t * experts + e] = bias[e] + logits[t * experts + e];
    }
  };
  pool_->Run(expert_rows);
  return Status::Ok();
}

}  // namespace colibri::engine
