#include "colibri/calibrate/host_work_runs.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>

#include "colibri/engine/clock.h"
#include "colibri/engine/cpu_compute.h"
#include "colibri/engine/local_engine.h"
#include "colibri/engine/model.h"
#include "colibri/sim/random.h"

namespace colibri::calibrate {
namespace {

constexpr uint32_t kLayers = 2;
constexpr uint32_t kIntermediate = 128;

// Seeded standard-normal inputs, tokens x hidden.
std::vector<float> Inputs(uint64_t seed, size_t tokens, uint32_t hidden) {
  sim::Rng rng(seed);
  std::vector<float> x(tokens * hidden);
  for (float& v : x) v = static_cast<float>(sim::StandardNormal(&rng));
  return x;
}

engine::TimeNs MedianNs(std::vector<engine::TimeNs> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The model directory, removed on destruction.
struct ScratchModel {
  std::string dir;
  ~ScratchModel() {
    std::error_code error;
    if (!dir.empty()) std::filesystem::remove_all(dir, error);
  }
};

// One layer batch as the fit takes it (gate_ns is filled in later);
// `submitted_ns` is the submission cost of the reads its scheduling step issued.
sim::HostWorkSample Sample(const HostWorkRunsOptions& o, uint32_t tokens, const engine::LayerBatchReport& report,
                           engine::TimeNs submitted_ns) {
  sim::HostWorkSample s;
  s.tokens = tokens;
  s.top_k = o.top_k;
  s.experts = o.experts;
  s.hidden = o.hidden;
  s.distinct = report.distinct_experts;
  s.reads = report.nvme_reads;
  const engine::StepTimes& t = report.step_ns;
  s.routing_ns = t.routing;
  s.scheduling_ns = std::max<engine::TimeNs>(0, t.scheduling - submitted_ns);
  s.aggregation_ns = t.aggregation;
  s.gather_ns = std::max<engine::TimeNs>(0, t.total - t.routing - t.scheduling - t.compute - t.host_to_device - t.aggregation);
  s.use_for_gather = report.nvme_reads == 0;
  return s;
}

}  // namespace

Result<HostWorkMeasurement> MeasureHostWork(const HostWorkRunsOptions& o) {
  if (o.tokens.empty() || o.threads.empty() || o.repeats == 0 || o.experts == 0 || o.top_k == 0 || o.top_k > o.experts || o.hidden == 0) {
    return Status::InvalidArgument("host work runs: tokens, threads, repeats, experts, top-k (<= experts) and hidden must be set");
  }
  ScratchModel model;
  model.dir = (std::filesystem::path(o.work_dir) / "colibri-calibrate-model").string();
  engine::ModelConfig shape;
  shape.dtype = engine::DType::kBf16;
  for (uint32_t l = 0; l < kLayers; ++l) shape.layer_ids.push_back(l);
  shape.experts = o.experts;
  shape.top_k = o.top_k;
  shape.hidden = o.hidden;
  shape.intermediate = kIntermediate;
  std::error_code error;
  std::filesystem::remove_all(model.dir, error);
  COLIBRI_ASSIGN_OR_RETURN(const engine::ModelConfig made, engine::SynthModel(shape, o.seed, model.dir));
  const uint64_t everything = uint64_t{kLayers} * o.experts * made.layout.block_bytes;
  // submitted_ns[n]: the submission of a burst of n reads, the i-th with i - 1 in flight.
  constexpr uint32_t kQueueDepth = 32;
  std::vector<engine::TimeNs> submitted_ns(kQueueDepth + 1, 0);
  for (uint32_t n = 1; n <= kQueueDepth; ++n) {
    submitted_ns[n] = submitted_ns[n - 1] + (o.read_submit_ns ? o.read_submit_ns(made.layout.block_bytes, n) : 0);
  }

  HostWorkMeasurement out;
  const size_t total = o.threads.size() * (2 * o.tokens.size() + 1);
  size_t done = 0;
  for (const uint32_t threads : o.threads) {
    if (threads == 0) return Status::InvalidArgument("host work runs: thread counts must be >= 1");
    HostWorkAtThreads run;
    run.threads = threads;
    // Two engines: everything resident (after the first batches), and no L2 (every expert read).
    for (const uint64_t l2_bytes : {everything, uint64_t{0}}) {
      engine::LocalEngineOptions options;
      options.model_dir = model.dir;
      options.storage = "auto";
      options.queue_depth = kQueueDepth;
      options.threads = threads;
      options.engine.l2_bytes = l2_bytes;
      COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<engine::LocalEngine> e, engine::LocalEngine::Open(options));
      if (l2_bytes > 0) {  // warm: make every expert resident before measuring
        const std::vector<float> x = Inputs(sim::DeriveSeed(o.seed, "host_work.warm"), 256, o.hidden);
        std::vector<float> y(x.size());
        for (uint32_t pass = 0; pass < 4; ++pass) {
          for (uint32_t layer = 0; layer < kLayers; ++layer) {
            COLIBRI_RETURN_IF_ERROR(e->moe->Forward(layer, x.data(), 256, y.data(), nullptr, nullptr));
          }
        }
      }
      for (uint32_t tokens : o.tokens) {
        for (uint32_t r = 0; r < o.repeats; ++r) {
          const std::vector<float> x = Inputs(
              sim::DeriveSeed(o.seed, "host_work." + std::to_string(tokens) + "." + std::to_string(r)), tokens, o.hidden);
          std::vector<float> y(x.size());
          for (uint32_t layer = 0; layer < kLayers; ++layer) {
            engine::LayerBatchReport report;
            COLIBRI_RETURN_IF_ERROR(e->moe->Forward(layer, x.data(), tokens, y.data(), &report, nullptr));
            // Without L2 every read goes to a staging slot: the scheduling step issues as many as there are slots.
            const uint64_t issued = std::min<uint64_t>({report.nvme_reads, options.engine.staging_slots, options.queue_depth});
            run.samples.push_back(Sample(o, tokens, report, submitted_ns[issued]));
          }
        }
        if (o.progress) o.progress(++done, total);
      }
    }
    out.runs.push_back(std::move(run));
  }
  // The gate GEMV alone, as the engine calls it, on a fresh CpuCompute per thread count.
  COLIBRI_ASSIGN_OR_RETURN(engine::Model opened, engine::OpenModel(model.dir, engine::ModelVerify::kAuto));
  engine::MonotonicClock clock;
  for (HostWorkAtThreads& run : out.runs) {
    COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<engine::CpuCompute> compute,
                             engine::CpuCompute::Create(engine::CpuComputeOptions{run.threads, std::nullopt}));
    sim::KernelTimes gate;
    gate.dtype = "fp32";
    gate.rows = o.experts;
    gate.hidden = o.hidden;
    gate.threads = run.threads;
    std::map<uint32_t, engine::TimeNs> gate_ns;
    for (uint32_t tokens : o.tokens) {
      const std::vector<float> x = Inputs(sim::DeriveSeed(o.seed, "gate_gemv." + std::to_string(tokens)), tokens, o.hidden);
      std::vector<float> logits(size_t{tokens} * o.experts);
      std::vector<engine::TimeNs> times;
      for (uint32_t r = 0; r < std::max<uint32_t>(o.repeats, 5); ++r) {
        const engine::TimeNs start = clock.Now();
        COLIBRI_RETURN_IF_ERROR(compute->GateGemv(opened.GateWeight(0), opened.GateBias(0), o.experts, o.hidden,
                                                  x.data(), tokens, logits.data()));
        times.push_back(clock.Now() - start);
      }
      const engine::TimeNs median = std::max<engine::TimeNs>(1, MedianNs(times));
      gate_ns[tokens] = median;
      gate.tokens.push_back(tokens);
      gate.ns.push_back(median);
    }
    out.gate.push_back(std::move(gate));
    for (sim::HostWorkSample& s : run.samples) s.gate_ns = gate_ns[static_cast<uint32_t>(s.tokens)];
    COLIBRI_ASSIGN_OR_RETURN(run.fit, sim::FitHostWork(run.samples));
    run.fit.profile.threads = run.threads;
    if (o.progress) o.progress(++done, total);
  }
  return out;
}

}  // namespace colibri::calibrate
