// Fitting host work (sim/host_work_fit.h): non-negative least squares on
// small problems, and a known host-work profile recovered from noisy
// synthetic batches within the noise.
#include "colibri/sim/host_work_fit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "colibri/sim/random.h"

namespace colibri::sim {
namespace {

TEST(HostWorkFitTest, NonNegativeLeastSquares) {
  // y = 2 + 3 x, exact.
  std::vector<std::vector<double>> a;
  std::vector<double> b;
  for (double x : {1.0, 2.0, 5.0, 9.0}) {
    a.push_back({1.0, x});
    b.push_back(2 + 3 * x);
  }
  auto fit = NonNegativeLeastSquares(a, b);
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_NEAR(fit.value()[0], 2.0, 1e-9);
  EXPECT_NEAR(fit.value()[1], 3.0, 1e-9);
  // y = 10 - x: the unconstrained slope is negative; NNLS keeps it at 0 and fits the mean.
  b.clear();
  for (double x : {1.0, 2.0, 5.0, 9.0}) b.push_back(10 - x);
  fit = NonNegativeLeastSquares(a, b);
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit.value()[1], 0.0);
  EXPECT_NEAR(fit.value()[0], (9 + 8 + 5 + 1) / 4.0, 1e-9);
  EXPECT_FALSE(NonNegativeLeastSquares({}, {}).ok());
  EXPECT_FALSE(NonNegativeLeastSquares({{1.0, NAN}}, {1.0}).ok());
}

TEST(HostWorkFitTest, RecoversAKnownProfileFromNoisyBatches) {
  HostWorkProfile truth;
  truth.present = true;
  truth.routing_fixed_ns = 4'000;
  truth.routing_ps_per_logit = 1'500;
  truth.scheduling_fixed_ns = 6'000;
  truth.scheduling_ps_per_expert = 300'000;
  truth.scheduling_ps_per_assignment = 20'000;
  truth.scheduling_ps_per_read = 2'500'000;
  truth.gather_fixed_ns = 800;
  truth.gather_ps_per_element = 150;
  truth.aggregation_fixed_ns = 1'000;
  truth.aggregation_ps_per_element = 400;
  Rng rng(42);
  auto noisy = [&](double ns) { return static_cast<engine::TimeNs>(ns * (1.0 + 0.04 * (rng.NextDouble() - 0.5))); };
  std::vector<HostWorkSample> samples;
  const uint32_t experts = 64, top_k = 4, hidden = 2048;
  for (uint64_t tokens : {1, 2, 4, 8, 16, 32, 64, 128, 256}) {
    for (uint32_t reads : {0u, 3u, 12u}) {
      HostWorkSample s;
      s.tokens = tokens;
      s.top_k = top_k;
      s.experts = experts;
      s.hidden = hidden;
      s.distinct = static_cast<uint32_t>(std::min<uint64_t>(experts, tokens * top_k));
      s.reads = std::min(reads, s.distinct);
      const double elements = static_cast<double>(tokens) * top_k * hidden;
      s.gate_ns = static_cast<engine::TimeNs>(1'000 + 50.0 * tokens);
      s.routing_ns = noisy(4'000 + 1.5 * tokens * experts);
      s.scheduling_ns = noisy(6'000 + 300.0 * s.distinct + 20.0 * tokens * top_k + 2'500.0 * s.reads +
                              (s.reads > 0 ? 50'000.0 : 0.0));
      s.gather_ns = noisy(800.0 * s.distinct + 0.15 * elements);
      s.aggregation_ns = noisy(1'000 + 0.4 * elements);
      s.use_for_gather = s.reads == 0;
      samples.push_back(s);
    }
  }
  auto fit = FitHostWork(samples);
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  const HostWorkProfile& h = fit.value().profile;
  auto near = [](double got, double want, double tolerance) { EXPECT_NEAR(got, want, tolerance * want); };
  near(static_cast<double>(h.routing_ps_per_logit), 1'500, 0.05);
  near(static_cast<double>(h.scheduling_ps_per_expert), 300'000, 0.05);
  near(static_cast<double>(h.scheduling_ps_per_read), 2'500'000, 0.10);
  near(static_cast<double>(h.scheduling_read_fixed_ns), 50'000, 0.10);
  near(static_cast<double>(h.gather_fixed_ns), 800, 0.05);
  near(static_cast<double>(h.gather_ps_per_element), 150, 0.05);
  near(static_cast<double>(h.aggregation_ps_per_element), 400, 0.05);
  near(static_cast<double>(h.aggregation_fixed_ns), 1'000, 0.25);  // small beside the per-element term
  EXPECT_LE(fit.value().scheduling.median, 0.02);
  EXPECT_LE(fit.value().aggregation.max, 0.05);
  EXPECT_EQ(fit.value().gather.batches, 9u) << "only the batches without reads";
  EXPECT_FALSE(FitHostWork({samples.front()}).ok()) << "too few batches";
}

}  // namespace
}  // namespace colibri::sim
