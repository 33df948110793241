#include "colibri/sim/sim_compute.h"

#include <algorithm>
#include <string>

#include "model_time.h"

namespace colibri::sim {
namespace {

using model_internal::DurationNs;

constexpr uint64_t kFp32Bytes = 4;

Status CheckProfile(const ComputeProfile& p) {
  const std::string name = "compute profile '" + p.id + "'";
  if (p.memory_bytes_per_s == 0) return Status::InvalidArgument(name + ": memory_bytes_per_s must be > 0");
  if (p.launch_ns < 0) return Status::InvalidArgument(name + ": launch_ns must be >= 0");
  for (const auto& [dtype, peak] : p.peak_flops_per_s) {
    if (peak == 0) return Status::InvalidArgument(name + ": peak_flops_per_s." + dtype + " must be > 0");
  }
  return Status::Ok();
}

// The bytes an expert FFN reads and writes (see sim_compute.h).
uint64_t ExpertFfnBytes(const engine::ExpertLayout& layout, uint64_t tokens) {
  const uint64_t h = layout.hidden;
  const uint64_t i = layout.intermediate;
  uint64_t weights = 3 * h * i * engine::DTypeBytes(layout.dtype);
  if (layout.dtype == engine::DType::kInt8) weights += kFp32Bytes * (2 * i + h);
  return weights + kFp32Bytes * tokens * (2 * h + 2 * i);
}

}  // namespace

SimCompute::SimCompute(const ComputeProfile& profile, const SimComputeOptions& options)
    : profile_(profile), options_(options) {
  caps_.name = "sim";
  caps_.device_memory = profile.kind == ComputeKind::kGpu;
  caps_.reads_data = false;
}

Result<engine::TimeNs> SimCompute::RooflineNs(const char* dtype, uint64_t flops, uint64_t bytes) const {
  const auto peak = profile_.peak_flops_per_s.find(dtype);
  if (peak == profile_.peak_flops_per_s.end()) {
    return Status::Unsupported("compute profile '" + profile_.id + "' has no peak_flops_per_s for dtype " + dtype);
  }
  return profile_.launch_ns + std::max(DurationNs(flops, peak->second), DurationNs(bytes, profile_.memory_bytes_per_s));
}

Result<engine::TimeNs> SimCompute::ExpertFfnNs(const engine::ExpertLayout& layout, size_t tokens) const {
  if (tokens == 0) return engine::TimeNs{0};
  const uint64_t flops = 2 * layout.MacsPerToken() * tokens;
  return RooflineNs(engine::DTypeName(layout.dtype), flops, ExpertFfnBytes(layout, tokens));
}

Result<engine::TimeNs> SimCompute::GateGemvNs(uint32_t experts, uint32_t hidden, size_t tokens) const {
  if (tokens == 0) return engine::TimeNs{0};
  const uint64_t e = experts;
  const uint64_t h = hidden;
  const uint64_t t = tokens;
  return RooflineNs("fp32", 2 * e * h * t, kFp32Bytes * (e * h + t * h + t * e));
}

engine::TimeNs SimCompute::DenseLayerNs(uint64_t bytes) const {
  return profile_.launch_ns + DurationNs(bytes, profile_.memory_bytes_per_s);
}

void SimCompute::Run(EventKind kind, size_t tokens, engine::TimeNs cost_ns) {
  if (tokens == 0) return;
  const engine::TimeNs end_ns = options_.loop->Now() + cost_ns;
  options_.loop->WaitUntil(end_ns);
  ++counters_.kernels;
  counters_.busy_ns += cost_ns;
  if (options_.event_log != nullptr) {
    options_.event_log->Append(end_ns - cost_ns, end_ns, kind, tokens, static_cast<uint64_t>(cost_ns));
  }
}

Result<engine::TimeNs> SimCompute::MemoExpertFfnNs(const engine::ExpertLayout& layout, size_t tokens) {
  constexpr size_t kMaxMemoTokens = 4096;
  if (tokens >= kMaxMemoTokens) return ExpertFfnNs(layout, tokens);
  FfnMemo& m = ffn_memo_;
  if (m.dtype != layout.dtype || m.hidden != layout.hidden || m.intermediate != layout.intermediate) {
    m = FfnMemo{layout.dtype, layout.hidden, layout.intermediate, {}};
  }
  if (m.ns.size() <= tokens) m.ns.resize(tokens + 1, 0);
  if (m.ns[tokens] == 0) {
    COLIBRI_ASSIGN_OR_RETURN(m.ns[tokens], ExpertFfnNs(layout, tokens));  // errors are not remembered
  }
  return m.ns[tokens];
}

Status SimCompute::ExpertFfn(const engine::ExpertView& expert, const float*, size_t tokens, float*) {
  if (expert.layout == nullptr) return Status::InvalidArgument("sim compute: expert view without a layout");
  if (expert.layout->hidden == 0 || expert.layout->intermediate == 0) {
    return Status::InvalidArgument("sim compute: expert shape " + std::to_string(expert.layout->hidden) + " x " +
                                   std::to_string(expert.layout->intermediate) + " is empty");
  }
  COLIBRI_ASSIGN_OR_RETURN(const engine::TimeNs cost_ns, MemoExpertFfnNs(*expert.layout, tokens));
  Run(EventKind::kCompute, tokens, cost_ns);
  return Status::Ok();
}

Status SimCompute::GateGemv(const float*, const float*, uint32_t experts, uint32_t hidden, const float*, size_t tokens,
                            float*) {
  if (experts == 0 || hidden == 0) {
    return Status::InvalidArgument("sim compute: gate " + std::to_string(experts) + " x " + std::to_string(hidden) +
                                   " is empty");
  }
  COLIBRI_ASSIGN_OR_RETURN(const engine::TimeNs cost_ns, GateGemvNs(experts, hidden, tokens));
  Run(EventKind::kGate, tokens, cost_ns);
  return Status::Ok();
}

Result<std::unique_ptr<SimCompute>> MakeSimCompute(const ComputeProfile& profile, const SimComputeOptions& options) {
  if (options.loop == nullptr) return Status::InvalidArgument("sim compute: SimComputeOptions::loop is required");
  COLIBRI_RETURN_IF_ERROR(CheckProfile(profile));
  return std::unique_ptr<SimCompute>(new SimCompute(profile, options));
}

}  // namespace colibri::sim
