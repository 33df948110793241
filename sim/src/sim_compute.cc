#include "colibri/sim/sim_compute.h"

#include <algorithm>
#include <cmath>
#include <vector>
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

Result<std::optional<engine::TimeNs>> SimCompute::TableNs(const KernelTable& table, const char* what,
                                                          const std::string& dtype, uint32_t rows, uint32_t hidden,
                                                          size_t tokens) const {
  const KernelTimes* best = nullptr;
  double best_distance = 0;
  std::vector<uint32_t> threads_measured;
  const double size = static_cast<double>(rows) * hidden;
  for (const KernelTimes& k : table.entries) {
    if (k.dtype != dtype) continue;
    if (k.threads != options_.threads) {
      if (std::find(threads_measured.begin(), threads_measured.end(), k.threads) == threads_measured.end()) {
        threads_measured.push_back(k.threads);
      }
      continue;
    }
    const double distance = std::abs(std::log(static_cast<double>(k.rows) * k.hidden / size));
    if (best == nullptr || distance < best_distance) {
      best = &k;
      best_distance = distance;
    }
  }
  if (best == nullptr && threads_measured.empty()) return std::optional<engine::TimeNs>();
  if (best == nullptr) {
    std::sort(threads_measured.begin(), threads_measured.end());
    std::string counts;
    for (uint32_t t : threads_measured) counts += (counts.empty() ? "" : ", ") + std::to_string(t);
    return Status::Unsupported("compute profile '" + profile_.id + "' measured " + what + " " + dtype + " at " + counts +
                               " thread(s), not at the " + std::to_string(options_.threads) + " this run models");
  }
  const std::vector<uint32_t>& t = best->tokens;
  const std::vector<engine::TimeNs>& ns = best->ns;
  const double x = static_cast<double>(tokens);
  double cost = 0;
  if (t.size() == 1) {
    cost = static_cast<double>(ns[0]) * x / t[0];
  } else {
    // The segment holding x, or the first or last one to extrapolate along.
    size_t i = static_cast<size_t>(std::upper_bound(t.begin(), t.end(), static_cast<uint32_t>(std::min<size_t>(tokens, UINT32_MAX))) -
                                   t.begin());
    i = std::clamp<size_t>(i, 1, t.size() - 1);
    const double slope = static_cast<double>(ns[i] - ns[i - 1]) / (t[i] - t[i - 1]);
    cost = static_cast<double>(ns[i - 1]) + slope * (x - t[i - 1]);
  }
  cost *= size / (static_cast<double>(best->rows) * best->hidden);
  return std::optional<engine::TimeNs>(std::max<engine::TimeNs>(1, static_cast<engine::TimeNs>(std::llround(cost))));
}

Result<engine::TimeNs> SimCompute::ExpertFfnNs(const engine::ExpertLayout& layout, size_t tokens) const {
  if (tokens == 0) return engine::TimeNs{0};
  const char* dtype = engine::DTypeName(layout.dtype);
  COLIBRI_ASSIGN_OR_RETURN(const std::optional<engine::TimeNs> measured,
                           TableNs(profile_.ffn_table, "expert FFNs", dtype, layout.intermediate, layout.hidden, tokens));
  if (measured) return *measured;
  const uint64_t flops = 2 * layout.MacsPerToken() * tokens;
  return RooflineNs(dtype, flops, ExpertFfnBytes(layout, tokens));
}

Result<engine::TimeNs> SimCompute::GateGemvNs(uint32_t experts, uint32_t hidden, size_t tokens) const {
  if (tokens == 0) return engine::TimeNs{0};
  COLIBRI_ASSIGN_OR_RETURN(const std::optional<engine::TimeNs> measured,
                           TableNs(profile_.gate_table, "gate GEMVs", "fp32", experts, hidden, tokens));
  if (measured) return *measured;
  const uint64_t e = experts;
  const uint64_t h = hidden;
  const uint64_t t = tokens;
  return RooflineNs("fp32", 2 * e * h * t, kFp32Bytes * (e * h + t * h + t * e));
}

engine::TimeNs SimCompute::DenseLayerNs(uint64_t bytes) const {
  return profile_.launch_ns + DurationNs(bytes, profile_.memory_bytes_per_s);
}

Result<engine::TimeNs> SimCompute::AttentionNs(uint64_t kv_bytes, uint64_t flops) const {
  if (kv_bytes == 0 && flops == 0) return engine::TimeNs{0};
  COLIBRI_ASSIGN_OR_RETURN(const engine::TimeNs roofline, RooflineNs("fp32", flops, kv_bytes));
  return roofline - profile_.launch_ns;
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
  if (options.threads == 0) return Status::InvalidArgument("sim compute: SimComputeOptions::threads must be >= 1");
  COLIBRI_RETURN_IF_ERROR(CheckProfile(profile));
  return std::unique_ptr<SimCompute>(new SimCompute(profile, options));
}

}  // namespace colibri::sim
