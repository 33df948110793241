// SimCompute: the modelled compute device, a ComputeBackend that keeps time
// on an EventLoop and never touches inputs, weights or outputs (caps: name
// "sim", reads_data = false, device_memory = the profile is a GPU).
//
// Roofline per kernel: launch_ns + max(ceil(flops x 1e9 / peak[dtype]),
// ceil(bytes x 1e9 / memory_bytes_per_s)), integer ns, where peak is the
// profile's peak_flops_per_s for the weight dtype's name (engine DTypeName).
//  Expert FFN (SwiGLU) of T tokens, hidden H, intermediate I:
//   flops = 2 x 3 x H x I x T (three matrix products, 2 flops per MAC);
//   bytes = weights 3 x H x I x DTypeBytes (+ int8 scales 4 x (2I + H); the
//           block's alignment padding is not read) + activations
//           4 x T x (2H + 2I) (x read, y written, the fp32 intermediate
//           silu(gate) x up written and read back).
//  Gate GEMV of T tokens, E experts, hidden H (fp32 weights, peak "fp32"):
//   flops = 2 x E x H x T; bytes = 4 x (E x H + T x H + T x E) (weights, x, logits).
//  Attention over a KV cache (AttentionNs; the caller counts the bytes and
//   FLOPs from the layer's shape and the context): max(flops / peak "fp32",
//   kv bytes / memory_bytes_per_s), no launch of its own (it is part of the
//   layer's dense pass, which pays launch_ns once).
// Measured tables (profile.ffn_table, gate_table, from `colibri calibrate`)
// replace the roofline for the dtypes and thread counts they hold: the cost
// of a call is the entry's median at that token count, linear between the
// measured token counts, extrapolated past the last along its last segment
// (proportionally when only one count was measured), at least 1 ns. The entry
// is the one of the call's dtype and SimComputeOptions::threads with the
// call's shape (hidden x intermediate; gate: experts x hidden); for a shape
// not measured, the measured shape nearest in log(rows x hidden), its times
// scaled by (rows x hidden) / (its rows x hidden): both the weight bytes a
// memory-bound call streams and the MACs a compute-bound one does scale so.
// A table that holds the dtype but not the thread count is an error naming
// the measured counts; a dtype the table lacks falls back to the roofline.
// A call moves the loop's clock by its cost (WaitUntil(Now() + cost)): the
// engine thread waits for its kernels. A call with 0 tokens costs nothing.
//
// Ownership: borrows the loop and the event log (they must outlive the
// backend). Thread-safety: none; the loop's thread calls it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "colibri/engine/compute.h"
#include "colibri/engine/event_loop.h"
#include "colibri/engine/expert_layout.h"
#include "colibri/sim/event_log.h"
#include "colibri/sim/hardware.h"
#include "colibri/status.h"

namespace colibri::sim {

struct SimComputeOptions {
  engine::EventLoop* loop = nullptr;  // required; borrowed
  EventLog* event_log = nullptr;      // optional; one kCompute / kGate entry per kernel, at its end
  uint32_t threads = 1;               // the measured tables' thread column (ignored by the roofline)
};

struct SimComputeCounters {
  uint64_t kernels = 0;      // expert FFNs and gate GEMVs modelled
  engine::TimeNs busy_ns = 0;  // their modelled time, summed
};

class SimCompute final : public engine::ComputeBackend {
 public:
  const engine::ComputeCaps& caps() const override { return caps_; }
  const SimComputeCounters& counters() const { return counters_; }

  // Errors: InvalidArgument for a null layout or an empty shape (hidden or
  // intermediate 0); Unsupported (naming the profile and dtype) when the
  // profile has no peak for the weight dtype.
  Status ExpertFfn(const engine::ExpertView& expert, const float* x, size_t tokens, float* y) override;
  // Errors: InvalidArgument for an empty gate (experts or hidden 0);
  // Unsupported when the profile has no "fp32" peak.
  Status GateGemv(const float* weight, const float* bias, uint32_t experts, uint32_t hidden, const float* x,
                  size_t tokens, float* logits) override;

  // Modelled durations (the formulas above), for tests and offline figures.
  Result<engine::TimeNs> ExpertFfnNs(const engine::ExpertLayout& layout, size_t tokens) const;
  Result<engine::TimeNs> GateGemvNs(uint32_t experts, uint32_t hidden, size_t tokens) const;
  // The non-MoE part of a layer as one memory-bound pass over `bytes`:
  // launch_ns + ceil(bytes x 1e9 / memory_bytes_per_s).
  engine::TimeNs DenseLayerNs(uint64_t bytes) const;
  // Attention reading `kv_bytes` of KV cache and doing `flops` (the header's
  // formula). Errors: Unsupported when the profile has no "fp32" peak.
  Result<engine::TimeNs> AttentionNs(uint64_t kv_bytes, uint64_t flops) const;

 private:
  friend Result<std::unique_ptr<SimCompute>> MakeSimCompute(const ComputeProfile&, const SimComputeOptions&);
  SimCompute(const ComputeProfile& profile, const SimComputeOptions& options);
  Result<engine::TimeNs> RooflineNs(const char* dtype, uint64_t flops, uint64_t bytes) const;
  // The measured table's cost, or nullopt when `table` holds no entry of `dtype`.
  Result<std::optional<engine::TimeNs>> TableNs(const KernelTable& table, const char* what, const std::string& dtype,
                                                uint32_t rows, uint32_t hidden, size_t tokens) const;
  // Moves the clock by `cost_ns` and counts the kernel.
  void Run(EventKind kind, size_t tokens, engine::TimeNs cost_ns);
  // ExpertFfnNs, remembered per token count for the last layout costed (the
  // engine's experts share one layout): no map lookup or division per kernel.
  Result<engine::TimeNs> MemoExpertFfnNs(const engine::ExpertLayout& layout, size_t tokens);

  const ComputeProfile profile_;
  const SimComputeOptions options_;
  engine::ComputeCaps caps_;
  SimComputeCounters counters_;
  struct FfnMemo {
    engine::DType dtype = engine::DType::kFp32;
    uint32_t hidden = 0;
    uint32_t intermediate = 0;
    std::vector<engine::TimeNs> ns;  // [tokens]; 0: not computed yet (a kernel always costs >= 1 ns)
  };
  FfnMemo ffn_memo_;
};

// Errors: InvalidArgument for a missing loop, or a profile with
// memory_bytes_per_s 0, a peak of 0 or a negative launch_ns, naming the profile.
Result<std::unique_ptr<SimCompute>> MakeSimCompute(const ComputeProfile& profile, const SimComputeOptions& options);

}  // namespace colibri::sim
