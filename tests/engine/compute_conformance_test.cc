// The ComputeBackend contract (compute_conformance.h) run against the real
// backends: CpuCompute on its fastest instruction-set path with one and two
// threads and on its scalar path with three (the oracle is the scalar path on
// one thread, so each differs from it in path or thread count), on the
// monotonic clock. Add a factory to kHarnesses to enroll another backend
// (CudaCompute runs the same contract in tests/cuda). CpuCompute's own accuracy and paths are
// tested in cpu_compute_test.cc.
#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "colibri/engine/backend_wrappers.h"
#include "colibri/engine/clock.h"
#include "colibri/engine/cpu_compute.h"
#include "compute_conformance.h"

namespace colibri::engine {
namespace {

using conformance::ComputeConformanceTest;
using conformance::ComputeHarness;
using conformance::ComputeHarnessFactory;

template <uint32_t kThreads, bool kScalar>
class CpuHarness final : public ComputeHarness {
 public:
  Result<std::unique_ptr<ComputeBackend>> Make() override {
    const std::optional<CpuIsa> isa = kScalar ? std::optional<CpuIsa>(CpuIsa::kScalar) : std::nullopt;
    COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<CpuCompute> compute, CpuCompute::Create(CpuComputeOptions{kThreads, isa}));
    return std::unique_ptr<ComputeBackend>(std::move(compute));
  }
  const Clock& clock() const override { return clock_; }

 private:
  MonotonicClock clock_;
};

template <uint32_t kThreads, bool kScalar>
std::unique_ptr<ComputeHarness> MakeCpuHarness() {
  return std::make_unique<CpuHarness<kThreads, kScalar>>();
}

// CpuCompute inside a ComputeWrapper that overrides nothing (backend_wrappers.h).
class WrappedCpuHarness final : public ComputeHarness {
 public:
  Result<std::unique_ptr<ComputeBackend>> Make() override {
    COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<ComputeBackend> compute, inner_.Make());
    return std::unique_ptr<ComputeBackend>(new OwningCompute(std::move(compute)));
  }
  const Clock& clock() const override { return inner_.clock(); }

 private:
  CpuHarness<2, false> inner_;
};

const ComputeHarnessFactory kHarnesses[] = {
    {"cpu_best_x1", &MakeCpuHarness<1, false>},
    {"cpu_best_x2", &MakeCpuHarness<2, false>},
    {"cpu_scalar_x3", &MakeCpuHarness<3, true>},
    {"cpu_wrapped", [] { return std::unique_ptr<ComputeHarness>(new WrappedCpuHarness()); }},
};

INSTANTIATE_TEST_SUITE_P(Backends, ComputeConformanceTest, ::testing::ValuesIn(kHarnesses),
                         conformance::ComputeHarnessName);

}  // namespace
}  // namespace colibri::engine
