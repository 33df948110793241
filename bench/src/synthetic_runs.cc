#include "synthetic_runs.h"

#include <array>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "colibri/reports/run_recording.h"
#include "colibri/sim/random.h"

namespace colibri::bench {
namespace {

struct StepShape {
  const char* name;
  double median_ns;
  double sigma;  // of the log
};
// Roughly a replay's steps on an H100 with a Gen5 NVMe drive.
constexpr std::array<StepShape, 8> kSteps = {{{"routing", 3e3, 0.3},
                                              {"scheduling", 1.5e3, 0.4},
                                              {"nvme_read", 90e3, 0.6},
                                              {"host_to_device", 40e3, 0.4},
                                              {"compute", 30e3, 0.25},
                                              {"aggregation", 5e3, 0.3},
                                              {"dense", 20e3, 0.2},
                                              {"layer_batch", 180e3, 0.5}}};
constexpr uint64_t kRequests = 1000;
constexpr size_t kMoeLayers = 48;
constexpr size_t kExperts = 128;
constexpr uint64_t kDistinctExpertsPerBatch = 16;
constexpr uint64_t kExpertBytes = 9'437'184;  // 9 MiB

// The seeded draws of the synthetic runs: the project's generator (sim::Rng, seeded per run by
// sim::DeriveSeed), uniforms in (0, 1) and Box-Muller normals.
class Draws {
 public:
  explicit Draws(uint64_t seed) : rng_(seed) {}
  double Uniform() { return rng_.NextDouble() + 0x1.0p-54; }  // in (0, 1): never log(0)
  double Normal() { return std::sqrt(-2 * std::log(Uniform())) * std::cos(2 * std::numbers::pi * Uniform()); }

 private:
  sim::Rng rng_;
};

// `n` latencies around median_ns: log-normal, and one in a thousand a stall 5-50x longer.
reports::Samples DrawSamples(Draws* rng, uint64_t n, double median_ns, double sigma) {
  std::vector<int64_t> values(n);
  for (int64_t& v : values) {
    const double stall = rng->Uniform() < 1e-3 ? 5 + 45 * rng->Uniform() : 1;
    v = static_cast<int64_t>(median_ns * std::exp(sigma * rng->Normal()) * stall);
  }
  return reports::Samples::FromRaw(std::move(values));
}

// Selections per expert: about even, each within 0.25-1.75x of the mean.
std::vector<std::vector<uint64_t>> DrawExpertLoad(Draws* rng, uint64_t batches) {
  const double mean = static_cast<double>(batches * kDistinctExpertsPerBatch) / kExperts;
  std::vector<std::vector<uint64_t>> load(kMoeLayers, std::vector<uint64_t>(kExperts));
  for (std::vector<uint64_t>& layer : load) {
    for (uint64_t& count : layer) count = static_cast<uint64_t>(mean * (0.25 + 1.5 * rng->Uniform()));
  }
  return load;
}

// What a replay of `batches` layer batches of `batch_ns` also records: cache
// tiers, the hit-rate series, the expert load and the scalars.
void AddRunFigures(Draws* rng, uint64_t batches, double batch_ns, reports::RunResults* r) {
  const double hit = 0.6 + 0.1 * rng->Uniform();
  const uint64_t lookups = batches * kDistinctExpertsPerBatch;
  const uint64_t served = static_cast<uint64_t>(static_cast<double>(lookups) * hit);
  const uint64_t l1_hits = served / 4;
  const uint64_t read_bytes = (lookups - served) * kExpertBytes;
  r->tiers = reports::TiersOf(reports::CacheOutcome{lookups, served, lookups / 2, served / 2, lookups, l1_hits,
                                                    l1_hits / 2, lookups - l1_hits, served - l1_hits,
                                                    (served - l1_hits) / 2, read_bytes});
  reports::HitRateSeries series;
  for (uint64_t b = 1; b <= batches; ++b) {
    const uint64_t seen = b * kDistinctExpertsPerBatch;
    series.Add(b, static_cast<int64_t>(static_cast<double>(b) * batch_ns), seen,
               static_cast<uint64_t>(static_cast<double>(seen) * hit));
  }
  r->hit_rate = series.points();
  r->expert_load = DrawExpertLoad(rng, batches);
  const double elapsed_ns = static_cast<double>(batches) * batch_ns;
  const double tokens = static_cast<double>(batches) / kMoeLayers;
  r->scalars = {{"elapsed_ns", elapsed_ns},
                {"tokens_per_s", elapsed_ns > 0 ? tokens / (elapsed_ns / 1e9) : 0},
                {"read_bytes_per_token", tokens > 0 ? static_cast<double>(read_bytes) / tokens : 0},
                {"routing_decisions", static_cast<double>(batches)}};
}

}  // namespace

// Run `run`'s results: `samples` step latencies in all, one layer batch per 8 of them.
reports::RunResults SyntheticRun(uint64_t samples, uint64_t seed, int run) {
  Draws rng(sim::DeriveSeed(seed, "bench-store-run-" + std::to_string(run)));
  const double drift = 1 + 0.02 * run;  // later runs a little slower, so the percentiles differ
  reports::RunResults r;
  for (size_t i = 0; i < kSteps.size(); ++i) {
    const uint64_t n = samples / kSteps.size() + (i < samples % kSteps.size() ? 1 : 0);
    r.distributions[std::string("step_latency_ns.") + kSteps[i].name] =
        DrawSamples(&rng, n, kSteps[i].median_ns * drift, kSteps[i].sigma);
  }
  r.distributions["request_latency_ns"] = DrawSamples(&rng, kRequests, 4e9 * drift, 0.5);
  r.distributions["ttft_ns"] = DrawSamples(&rng, kRequests, 150e6 * drift, 0.4);
  r.distributions["tpot_ns"] = DrawSamples(&rng, kRequests, 30e6 * drift, 0.3);
  AddRunFigures(&rng, samples / kSteps.size(), kSteps.back().median_ns * drift, &r);
  return r;
}

}  // namespace colibri::bench
