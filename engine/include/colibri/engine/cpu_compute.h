// CpuCompute: the CPU ComputeBackend and the reference oracle of every other
// backend (SwiGLU expert FFN and router gate GEMV, fp32 activations).
//
// Arithmetic contract, identical on every ISA path and every thread count
// (so the outputs are bit-identical; tests force each path):
//  - A dot product of a weight row (fp32, or bf16/fp16/int8 converted exactly
//    to fp32) with an fp32 vector accumulates in 16 fp32 lanes: element i goes
//    to lane i mod 16 with a fused multiply-add, in increasing i; a row whose
//    length is not a multiple of 16 is zero-padded to one. The lanes are then
//    summed in one fixed tree: lane[i] += lane[i + s] for s = 8, 4, 2, 1.
//  - int8 rows: the lane sum is multiplied by the row's fp32 scale.
//  - Gate GEMV: logit = bias + dot (one rounding after the sum).
//  - h = SiluF32(gate) x up per intermediate element (fp32_math.h; no libm),
//    then y = W_down h with the same dot product.
// The AVX2 path keeps the 16 lanes in two 8-lane registers, AVX-512 in one,
// the scalar path in an array; all use IEEE fma (std::fma on the scalar path).
// Assumes the default floating-point environment (round to nearest, no
// flush-to-zero / denormals-are-zero). NaN payloads may differ between paths.
//
// Work is split across threads by output rows (each output element is
// computed by exactly one thread, by the arithmetic above), so the thread
// count changes the speed only. Each thread walks its rows in register-sized
// groups (AVX-512: 6 rows x 4 tokens of accumulators; AVX2: 2 x 3); a group's
// weights are read from memory once per call, then reused from L1 by every
// block of tokens (columns in slices of 512, tokens in panels of 64), and the
// next group is prefetched meanwhile. Batch 1 is thus one streaming pass over
// the weights (GEMV); larger batches are GEMM-like.
//
// Thread-safety: as ComputeBackend, one caller at a time; CpuCompute owns a
// fixed pool of threads - 1 workers (the calling thread is the first worker).
// Ownership: borrows the expert blocks and vectors for the duration of a call.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "colibri/engine/compute.h"
#include "colibri/status.h"

namespace colibri::engine {

namespace cpu_kernels {
struct KernelSet;
}
class CpuWorkerPool;

// Instruction-set paths of the CPU kernels.
enum class CpuIsa : uint8_t {
  kScalar = 0,  // portable C++
  kAvx2 = 1,    // AVX2 + FMA + F16C
  kAvx512 = 2,  // AVX-512F (+ AVX2, FMA, F16C)
};

// "scalar", "avx2", "avx512".
const char* CpuIsaName(CpuIsa isa);
// Accepts the names above.
Result<CpuIsa> ParseCpuIsa(const std::string& name);
// Whether this CPU (and OS) can run `isa`.
bool CpuIsaSupported(CpuIsa isa);
// The fastest supported path.
CpuIsa BestCpuIsa();

struct CpuComputeOptions {
  uint32_t threads = 1;       // 1..256, including the calling thread
  std::optional<CpuIsa> isa;  // unset: BestCpuIsa(); set: that path (tests, benchmarks)
};

class CpuCompute final : public ComputeBackend {
 public:
  // Errors: threads out of range (InvalidArgument), an ISA this CPU cannot
  // run (Unsupported).
  static Result<std::unique_ptr<CpuCompute>> Create(const CpuComputeOptions& options = {});
  ~CpuCompute() override;
  CpuCompute(const CpuCompute&) = delete;
  CpuCompute& operator=(const CpuCompute&) = delete;

  // name: "cpu-scalar", "cpu-avx2" or "cpu-avx512".
  const ComputeCaps& caps() const override { return caps_; }
  // Errors: a null layout/block/vector or an empty shape (InvalidArgument).
  // y may alias x. tokens == 0 is a no-op.
  Status ExpertFfn(const ExpertView& expert, const float* x, size_t tokens, float* y) override;
  Status GateGemv(const float* weight, const float* bias, uint32_t experts, uint32_t hidden, const float* x,
                  size_t tokens, float* logits) override;

  CpuIsa isa() const;
  uint32_t threads() const;

 private:
  CpuCompute(const cpu_kernels::KernelSet* kernels, std::unique_ptr<CpuWorkerPool> pool);
  // Copies `tokens` rows of `cols` floats into padded_x_, each zero-padded to a multiple of 16.
  size_t PadActivations(const float* x, size_t tokens, uint32_t cols);

  const cpu_kernels::KernelSet* kernels_;
  std::unique_ptr<CpuWorkerPool> pool_;
  ComputeCaps caps_;
  // Scratch reused across calls (grows only): padded inputs, gate and up outputs.
  std::vector<float> padded_x_;
  std::vector<float> gate_;
  std::vector<float> up_;
};

}  // namespace colibri::engine
