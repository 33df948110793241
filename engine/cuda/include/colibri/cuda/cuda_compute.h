// CudaCompute: the engine's ComputeBackend on a CUDA GPU (SwiGLU expert FFN
// and router gate GEMV, fp32 activations; the contract is in
// colibri/engine/compute.h and tests/engine/compute_conformance.h). Exposes no
// CUDA types.
//
// ExpertFfn: the expert block must be in device memory (the L1 pool, see
// CudaTransfer::DeviceAddress); x and y are host memory. Per call: x is copied
// to a device scratch buffer (grown as needed, never shrunk), one kernel
// computes h = silu(W_gate x) * (W_up x) for every intermediate row, a second
// y = W_down h, y is copied back and the call waits for the stream. bf16, fp16
// and int8 weights are converted to fp32 inside the kernels (int8: the dot
// product's sum x the row's fp32 scale, as CpuCompute).
// GateGemv: weight, bias, x and logits are host memory. By default the
// weight (E x H fp32) and bias are uploaded with every call, a PCIe copy of
// E x H x 4 bytes (e.g. 7 MiB for 256 x 7168) per call. With
// CudaComputeOptions::keep_gate_weights (what the engine's runs use: a
// model's router weights never change) the first call with a given (weight,
// bias, experts, hidden) uploads them to device memory kept until the backend
// is destroyed, and later calls with the same arguments reuse that copy
// (E x H x 4 bytes of device memory per router, e.g. 448 MiB for DeepSeek-V3's
// 61 x 256 x 7168); the caller must then not change a matrix it passed.
//
// Why own kernels and not cuBLAS: the engine's contract is that every backend
// of one dtype gives bit-identical outputs (compute.h), and the CPU oracle
// fixes its summation order (cpu_compute.h: 16 fma lanes by column mod 16, in
// increasing column order, then a fixed tree). cuBLAS picks its reduction
// order (and split-K) by shape and GPU, so its results differ from the CPU's
// and may differ between GPUs and versions; it would also add a large
// dependency. These kernels reproduce CpuCompute operation for operation
// (expert_kernels.h): 16 threads of a half-warp hold the 16 lanes, a
// fixed-order shuffle tree sums them, exp/SiLU follow ExpF32's operation
// sequence with explicit round-to-nearest intrinsics, no atomics, no fast
// math. They favour exactness over speed (no tensor cores, weights re-read
// per tile of 8 tokens).
//
// Expected agreement with CpuCompute: BIT-IDENTICAL for every dtype (fp32,
// bf16, fp16, int8): the weights convert exactly to fp32 on both sides, and
// every rounding happens in the same operation in the same order. Should a
// toolchain break that (e.g. a flag that enables fast math or flush to zero),
// the outputs would still be two fixed-order fp32 evaluations of the same
// exact products, each with error below (n/16 + 4) u sum|w x| per dot product
// of length n (u = 2^-24): about 3e-5 relative to sum|w x| for n = 7168,
// typically far less (errors of random sign grow like sqrt(n)). The gate
// feeds SiLU (relative condition number below 2 where it matters) and the
// product, so y differs by at most a few times that. The tests therefore
// accept |y_gpu - y_cpu| <= 1e-4 x max|y_cpu| for every dtype (the same for
// int8: its scales are applied once per row, exactly as on the CPU, and for
// the gate GEMV's logits) and, separately, count the elements that are not
// bit-identical, which must be none.
//
// Errors are Status values, never crashes, and a failed call writes no output:
// as CpuCompute for bad arguments (a view without layout or block, an empty
// shape, null vectors with tokens > 0: kInvalidArgument; an unknown dtype:
// kUnsupported); a block that is not device memory of this device, or not
// 4-byte aligned: kInvalidArgument (checked with cudaPointerGetAttributes at
// the block's first and last payload byte, a few microseconds per call);
// scratch memory the device cannot allocate: kInvalidArgument; other CUDA
// failures: kInternal. A kernel fault (e.g. a block shorter than its layout)
// is a sticky CUDA error: the device is unusable by this process afterwards.
// Thread-safety: as ComputeBackend, one caller at a time; each call makes
// the backend's device current on the calling thread.
// Ownership: owns its stream, scratch memory and kept gate weights; borrows the expert blocks and
// vectors for the duration of a call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include "colibri/engine/compute.h"
#include "colibri/engine/expert_layout.h"
#include "colibri/status.h"

namespace colibri::cuda {

struct CudaComputeOptions {
  bool keep_gate_weights = false;  // see GateGemv in the file comment
};

class CudaCompute final : public engine::ComputeBackend {
 public:
  // A backend on CUDA device `device`. Errors: those of OpenCudaDevice
  // (cuda_transfer.h: kNotFound "no CUDA device: <why>" without a device or
  // driver), kInternal when its stream cannot be made.
  static Result<std::unique_ptr<CudaCompute>> Create(int device = 0, CudaComputeOptions options = {});
  ~CudaCompute() override;
  CudaCompute(const CudaCompute&) = delete;
  CudaCompute& operator=(const CudaCompute&) = delete;

  // name "cuda", device_memory = true, reads_data = true.
  const engine::ComputeCaps& caps() const override { return caps_; }
  // expert.block: device memory; x, y: host, tokens x H fp32 (y may alias x).
  // tokens == 0 is a no-op.
  Status ExpertFfn(const engine::ExpertView& expert, const float* x, size_t tokens, float* y) override;
  // Every pointer is host memory; bias may be null. tokens == 0 is a no-op.
  Status GateGemv(const float* weight, const float* bias, uint32_t experts, uint32_t hidden, const float* x,
                  size_t tokens, float* logits) override;

  int device() const { return device_; }
  // Bytes of device scratch memory held (grows with the largest call).
  uint64_t scratch_bytes() const { return scratch_bytes_; }
  // Bytes of device memory holding kept gate weights (keep_gate_weights).
  uint64_t gate_bytes() const { return gate_bytes_; }

 private:
  // A gate's weights (and bias) in device memory, by the host arguments they came from.
  struct GateKey {
    const float* weight;
    const float* bias;
    uint32_t experts;
    uint32_t hidden;
    auto operator<=>(const GateKey&) const = default;
  };
  struct DeviceGate {
    float* weight = nullptr;
    float* bias = nullptr;  // null when the gate has none
  };

  CudaCompute(int device, CudaComputeOptions options);
  // The device copy of a gate, uploaded on first use. Errors: out of device memory, CUDA failures.
  Result<DeviceGate> KeptGate(const GateKey& key);
  // Makes the scratch buffer at least `bytes` long.
  Status ReserveScratch(uint64_t bytes);
  // Checks that the block of `expert` is device memory this backend can read.
  Status CheckDeviceBlock(const engine::ExpertView& expert) const;
  // Waits for the stream; the first error of the call, if any.
  Status Finish(const char* what);

  int device_;
  engine::ComputeCaps caps_{"cuda", /*device_memory=*/true, /*reads_data=*/true};
  void* stream_ = nullptr;   // cudaStream_t
  void* scratch_ = nullptr;  // device memory
  uint64_t scratch_bytes_ = 0;
  CudaComputeOptions options_;
  std::map<GateKey, DeviceGate> gates_;  // keep_gate_weights
  uint64_t gate_bytes_ = 0;
};

}  // namespace colibri::cuda
