// CudaCompute (colibri/cuda/cuda_compute.h): argument checks, device scratch
// memory and the host-side sequence of copies and kernel launches.
#include "colibri/cuda/cuda_compute.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "colibri/cuda/cuda_transfer.h"
#include "colibri/engine/dtype.h"
#include "cuda_status.h"
#include "expert_kernels.h"

namespace colibri::cuda {
namespace {

using detail::CudaErrorText;
using detail::CudaFailure;
using detail::UseDevice;

using engine::DType;
using engine::ExpertLayout;
using engine::ExpertView;

static_assert(static_cast<int>(detail::WeightType::kFp32) == static_cast<int>(DType::kFp32));
static_assert(static_cast<int>(detail::WeightType::kBf16) == static_cast<int>(DType::kBf16));
static_assert(static_cast<int>(detail::WeightType::kFp16) == static_cast<int>(DType::kFp16));
static_assert(static_cast<int>(detail::WeightType::kInt8) == static_cast<int>(DType::kInt8));

constexpr uint64_t kScratchAlignment = 256;   // each array of a call starts on this
constexpr uint64_t kScratchGranule = 1 << 20;  // the scratch buffer grows in these

uint64_t RoundUp(uint64_t value, uint64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// Bytes of a rows x cols fp32 array, rounded up to kScratchAlignment; nullopt
// past 2^60 bytes (so that sums of a few of them cannot overflow).
std::optional<uint64_t> ArrayBytes(uint64_t rows, uint64_t cols) {
  constexpr uint64_t kMaxBytes = uint64_t{1} << 60;
  if (rows != 0 && cols > kMaxBytes / 4 / rows) return std::nullopt;
  return RoundUp(rows * cols * 4, kScratchAlignment);
}

Status TooLarge(const char* what, uint64_t rows, uint64_t cols) {
  return Status::InvalidArgument(std::string(what) + " of " + std::to_string(rows) + " x " + std::to_string(cols) +
                                 " floats is too large");
}

// One past the last byte of the block the kernels read, after checking that
// every matrix and scale array is aligned to its element; nullopt when not.
std::optional<uint64_t> BlockExtent(const ExpertLayout& layout) {
  const uint64_t element = engine::DTypeBytes(layout.dtype);
  const uint64_t elements = uint64_t{layout.hidden} * layout.intermediate;  // < 2^64
  if (elements > (uint64_t{1} << 60) / element) return std::nullopt;
  const uint64_t matrix = elements * element;
  uint64_t extent = 0;
  for (uint64_t offset : {layout.gate_offset, layout.up_offset, layout.down_offset}) {
    if (offset % element != 0 || offset > (uint64_t{1} << 62)) return std::nullopt;
    extent = std::max(extent, offset + matrix);
  }
  if (layout.dtype != DType::kInt8) return extent;
  const struct {
    uint64_t offset;
    uint64_t rows;
  } scales[] = {{layout.gate_scales_offset, layout.intermediate},
                {layout.up_scales_offset, layout.intermediate},
                {layout.down_scales_offset, layout.hidden}};
  for (const auto& s : scales) {
    if (s.offset % 4 != 0 || s.offset > (uint64_t{1} << 62)) return std::nullopt;
    extent = std::max(extent, s.offset + 4 * s.rows);
  }
  return extent;
}

detail::DeviceMatrix ExpertMatrix(const ExpertView& expert, uint64_t offset, uint64_t scales_offset, uint32_t rows,
                                  uint32_t cols) {
  detail::DeviceMatrix m;
  m.type = static_cast<detail::WeightType>(expert.layout->dtype);
  m.data = expert.block + offset;
  m.scales = expert.layout->dtype == DType::kInt8 ? reinterpret_cast<const float*>(expert.block + scales_offset)
                                                  : nullptr;
  m.rows = rows;
  m.cols = cols;
  return m;
}

}  // namespace

Result<std::unique_ptr<CudaCompute>> CudaCompute::Create(int device, CudaComputeOptions options) {
  COLIBRI_RETURN_IF_ERROR(OpenCudaDevice(device));
  std::unique_ptr<CudaCompute> compute(new CudaCompute(device, options));
  cudaStream_t stream = nullptr;
  const cudaError_t error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (error != cudaSuccess) return CudaFailure("cudaStreamCreateWithFlags", error);
  compute->stream_ = stream;
  return compute;
}

CudaCompute::CudaCompute(int device, CudaComputeOptions options) : device_(device), options_(options) {}

CudaCompute::~CudaCompute() {
  // A destructor cannot report: every call already waited for its own work
  // (Finish), so this wait only covers a call that failed mid-way.
  cudaSetDevice(device_);
  if (stream_ != nullptr) {
    (void)cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
    cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  }
  if (scratch_ != nullptr) cudaFree(scratch_);
  for (const auto& [key, gate] : gates_) cudaFree(gate.weight);  // one allocation: weight, then bias
  cudaGetLastError();
}

Result<CudaCompute::DeviceGate> CudaCompute::KeptGate(const GateKey& key) {
  if (auto it = gates_.find(key); it != gates_.end()) return it->second;
  const uint64_t weight_bytes = uint64_t{key.experts} * key.hidden * sizeof(float);
  const uint64_t bias_bytes = key.bias != nullptr ? uint64_t{key.experts} * sizeof(float) : 0;
  const uint64_t bytes = weight_bytes + RoundUp(bias_bytes, kScratchAlignment);
  COLIBRI_ASSIGN_OR_RETURN(void* const memory, detail::DeviceMalloc(device_, bytes, "a router's gate weights"));
  DeviceGate gate{static_cast<float*>(memory), nullptr};
  if (bias_bytes > 0) gate.bias = reinterpret_cast<float*>(static_cast<std::byte*>(memory) + weight_bytes);
  cudaError_t error = cudaSuccess;
  // On the backend's stream (a non-blocking one): the kernels that read the gate are ordered after the upload.
  const auto stream = static_cast<cudaStream_t>(stream_);
  if (error == cudaSuccess) {
    error = cudaMemcpyAsync(gate.weight, key.weight, weight_bytes, cudaMemcpyHostToDevice, stream);
  }
  if (error == cudaSuccess && bias_bytes > 0) {
    error = cudaMemcpyAsync(gate.bias, key.bias, bias_bytes, cudaMemcpyHostToDevice, stream);
  }
  if (error == cudaSuccess) error = cudaStreamSynchronize(stream);  // the host arguments may go once we return
  if (error != cudaSuccess) {
    cudaFree(memory);
    return CudaFailure("upload of a gate's weights", error);
  }
  gate_bytes_ += bytes;
  gates_.emplace(key, gate);
  return gate;
}

Status CudaCompute::ReserveScratch(uint64_t bytes) {
  if (bytes <= scratch_bytes_) return Status::Ok();
  const uint64_t want = RoundUp(bytes, kScratchGranule);
  // Nothing may still use the old buffer. A failed wait means earlier work
  // faulted: report it rather than free memory a kernel may still touch.
  COLIBRI_RETURN_IF_ERROR(Finish("wait before growing the compute scratch"));
  if (scratch_ != nullptr) {
    const cudaError_t error = cudaFree(scratch_);
    scratch_ = nullptr;
    scratch_bytes_ = 0;
    if (error != cudaSuccess) return CudaFailure("cudaFree of the compute scratch", error);
  }
  COLIBRI_ASSIGN_OR_RETURN(scratch_, detail::DeviceMalloc(device_, want, "compute scratch"));
  scratch_bytes_ = want;
  return Status::Ok();
}

Status CudaCompute::CheckDeviceBlock(const ExpertView& expert) const {
  const std::optional<uint64_t> extent = BlockExtent(*expert.layout);
  if (!extent) return Status::InvalidArgument("expert layout has misaligned or out-of-range offsets");
  if (reinterpret_cast<uintptr_t>(expert.block) % 4 != 0) {
    return Status::InvalidArgument("expert block is not 4-byte aligned");
  }
  for (const std::byte* p : {expert.block, expert.block + (*extent - 1)}) {
    cudaPointerAttributes attributes{};
    const cudaError_t error = cudaPointerGetAttributes(&attributes, p);
    if (error != cudaSuccess) {
      cudaGetLastError();
      return Status::InvalidArgument("expert block is not device memory: " + CudaErrorText(error));
    }
    const bool ours = attributes.type == cudaMemoryTypeDevice && attributes.device == device_;
    if (!ours && attributes.type != cudaMemoryTypeManaged) {
      return Status::InvalidArgument("expert block (" + std::to_string(*extent) +
                                     " bytes) is not in memory of CUDA device " + std::to_string(device_) +
                                     ": copy it to the L1 pool first");
    }
  }
  return Status::Ok();
}

Status CudaCompute::Finish(const char* what) {
  const cudaError_t error = cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  return error == cudaSuccess ? Status::Ok() : CudaFailure(what, error);
}

Status CudaCompute::ExpertFfn(const ExpertView& expert, const float* x, size_t tokens, float* y) {
  COLIBRI_RETURN_IF_ERROR(engine::ValidateExpertView(expert));
  COLIBRI_RETURN_IF_ERROR(engine::ValidateComputeVectors(x, tokens, y));
  if (tokens == 0) return Status::Ok();
  const ExpertLayout& layout = *expert.layout;
  const uint32_t hidden = layout.hidden;
  const uint32_t intermediate = layout.intermediate;
  const std::optional<uint64_t> x_bytes = ArrayBytes(tokens, hidden);  // x and y
  const std::optional<uint64_t> h_bytes = ArrayBytes(tokens, intermediate);
  if (!x_bytes || !h_bytes) return TooLarge("expert FFN batch", tokens, std::max(hidden, intermediate));
  COLIBRI_RETURN_IF_ERROR(UseDevice(device_));
  COLIBRI_RETURN_IF_ERROR(CheckDeviceBlock(expert));
  COLIBRI_RETURN_IF_ERROR(ReserveScratch(2 * *x_bytes + *h_bytes));
  auto* const base = static_cast<std::byte*>(scratch_);
  auto* const dx = reinterpret_cast<float*>(base);
  auto* const dh = reinterpret_cast<float*>(base + *x_bytes);
  auto* const dy = reinterpret_cast<float*>(base + *x_bytes + *h_bytes);
  const size_t io_bytes = tokens * hidden * sizeof(float);
  const auto stream = static_cast<cudaStream_t>(stream_);
  const detail::DeviceMatrix gate =
      ExpertMatrix(expert, layout.gate_offset, layout.gate_scales_offset, intermediate, hidden);
  const detail::DeviceMatrix up = ExpertMatrix(expert, layout.up_offset, layout.up_scales_offset, intermediate, hidden);
  const detail::DeviceMatrix down =
      ExpertMatrix(expert, layout.down_offset, layout.down_scales_offset, hidden, intermediate);

  cudaError_t error = cudaMemcpyAsync(dx, x, io_bytes, cudaMemcpyHostToDevice, stream);
  if (error == cudaSuccess) error = detail::LaunchGateUpSilu(gate, up, dx, tokens, dh, stream);
  if (error == cudaSuccess) error = detail::LaunchDotRows(down, dh, tokens, nullptr, dy, stream);
  if (error != cudaSuccess) {
    (void)Finish("expert FFN (after a failed enqueue)");  // leaves nothing of this call in flight
    return CudaFailure("expert FFN enqueue", error);
  }
  // A stream that failed runs no further work, so a kernel fault leaves y untouched.
  error = cudaMemcpyAsync(y, dy, io_bytes, cudaMemcpyDeviceToHost, stream);
  const Status finished = Finish("expert FFN");
  if (error != cudaSuccess) return CudaFailure("expert FFN copy of y to the host", error);
  return finished;
}

Status CudaCompute::GateGemv(const float* weight, const float* bias, uint32_t experts, uint32_t hidden,
                             const float* x, size_t tokens, float* logits) {
  if (weight == nullptr || experts == 0 || hidden == 0) {
    return Status::InvalidArgument("gate weight is null or empty (" + std::to_string(experts) + " x " +
                                   std::to_string(hidden) + ")");
  }
  COLIBRI_RETURN_IF_ERROR(engine::ValidateComputeVectors(x, tokens, logits));
  if (tokens == 0) return Status::Ok();
  const std::optional<uint64_t> w_bytes = ArrayBytes(experts, hidden);
  const std::optional<uint64_t> b_bytes = ArrayBytes(1, experts);
  const std::optional<uint64_t> x_bytes = ArrayBytes(tokens, hidden);
  const std::optional<uint64_t> l_bytes = ArrayBytes(tokens, experts);
  if (!w_bytes || !b_bytes || !x_bytes || !l_bytes) return TooLarge("gate GEMV batch", tokens, hidden);
  COLIBRI_RETURN_IF_ERROR(UseDevice(device_));
  const bool keep = options_.keep_gate_weights;
  const uint64_t uploaded_bytes = keep ? 0 : *w_bytes + *b_bytes;  // the weights' share of the scratch
  COLIBRI_RETURN_IF_ERROR(ReserveScratch(uploaded_bytes + *x_bytes + *l_bytes));
  auto* const base = static_cast<std::byte*>(scratch_);
  DeviceGate gate{reinterpret_cast<float*>(base), bias != nullptr ? reinterpret_cast<float*>(base + *w_bytes) : nullptr};
  if (keep) {
    COLIBRI_ASSIGN_OR_RETURN(gate, KeptGate(GateKey{weight, bias, experts, hidden}));
  }
  auto* const dx = reinterpret_cast<float*>(base + uploaded_bytes);
  auto* const dl = reinterpret_cast<float*>(base + uploaded_bytes + *x_bytes);
  const auto stream = static_cast<cudaStream_t>(stream_);
  const detail::DeviceMatrix m{detail::WeightType::kFp32, gate.weight, nullptr, experts, hidden};

  cudaError_t error = cudaSuccess;
  if (!keep) {
    error = cudaMemcpyAsync(gate.weight, weight, uint64_t{experts} * hidden * sizeof(float), cudaMemcpyHostToDevice,
                            stream);
    if (error == cudaSuccess && bias != nullptr) {
      error = cudaMemcpyAsync(gate.bias, bias, uint64_t{experts} * sizeof(float), cudaMemcpyHostToDevice, stream);
    }
  }
  if (error == cudaSuccess) {
    error = cudaMemcpyAsync(dx, x, tokens * hidden * sizeof(float), cudaMemcpyHostToDevice, stream);
  }
  if (error == cudaSuccess) error = detail::LaunchDotRows(m, dx, tokens, gate.bias, dl, stream);
  if (error != cudaSuccess) {
    (void)Finish("gate GEMV (after a failed enqueue)");
    return CudaFailure("gate GEMV enqueue", error);
  }
  error = cudaMemcpyAsync(logits, dl, tokens * experts * sizeof(float), cudaMemcpyDeviceToHost, stream);
  const Status finished = Finish("gate GEMV");
  if (error != cudaSuccess) return CudaFailure("gate GEMV copy of the logits to the host", error);
  return finished;
}

}  // namespace colibri::cuda
