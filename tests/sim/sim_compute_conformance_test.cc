// The ComputeBackend contract (tests/engine/compute_conformance.h) over
// SimCompute with compute profiles from the built-in catalog, keeping time on
// a SimEventLoop: a GPU (h200-sxm, device_memory) and a CPU (cpu-local).
// SimCompute only models time (reads_data = false): the suite's data checks
// give way, by that capability, to checks that it touches no data. Its
// modelled times by the roofline formula are tested in sim_compute_test.cc.
// FaultInjectionCompute (fault_injection.h) runs the same contract over
// SimCompute with no faults and with compute.fail at 1 in 10^9 (on, so
// every call draws; with this seed none fires).
#include <memory>
#include <string>
#include <utility>

#include "../engine/compute_conformance.h"
#include "colibri/sim/fault_injection.h"
#include "colibri/sim/profiles.h"
#include "colibri/sim/sim_compute.h"
#include "colibri/sim/sim_event_loop.h"

namespace colibri::sim {
namespace {

using engine::ComputeBackend;
using engine::conformance::ComputeConformanceTest;
using engine::conformance::ComputeHarness;
using engine::conformance::ComputeHarnessFactory;

// SimCompute with a catalog compute profile on its own simulated loop.
class SimHarness final : public ComputeHarness {
 public:
  explicit SimHarness(std::string compute_id) : compute_id_(std::move(compute_id)) {}

  Result<std::unique_ptr<ComputeBackend>> Make() override {
    COLIBRI_ASSIGN_OR_RETURN(const HardwareCatalog catalog, HardwareCatalog::BuiltIn());
    COLIBRI_ASSIGN_OR_RETURN(const ComputeProfile* profile, catalog.Compute(compute_id_));
    COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<SimCompute> compute, MakeSimCompute(*profile, SimComputeOptions{&loop_}));
    return std::unique_ptr<ComputeBackend>(std::move(compute));
  }
  const engine::Clock& clock() const override { return loop_; }

 private:
  std::string compute_id_;
  SimEventLoop loop_;
};

// SimCompute with a catalog profile inside a FaultInjectionCompute with `spec`.
class FaultHarness final : public ComputeHarness {
 public:
  FaultHarness(const char* spec, std::string compute_id) : spec_(spec), target_(std::move(compute_id)) {}

  Result<std::unique_ptr<ComputeBackend>> Make() override {
    COLIBRI_ASSIGN_OR_RETURN(const FaultSpec spec, ParseFaultSpec(spec_));
    COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<ComputeBackend> target, target_.Make());
    auto faults = std::make_unique<FaultInjectionCompute>(target.get(), spec, 42, &target_.clock(), &log_);
    return std::unique_ptr<ComputeBackend>(
        new engine::OwningCompute(std::move(target), std::move(faults)));
  }
  const engine::Clock& clock() const override { return target_.clock(); }

 private:
  const char* spec_;
  SimHarness target_;
  FaultLog log_;
};

const ComputeHarnessFactory kHarnesses[] = {
    {"sim_h200", [] { return std::unique_ptr<ComputeHarness>(new SimHarness("h200-sxm")); }},
    {"sim_cpu_local", [] { return std::unique_ptr<ComputeHarness>(new SimHarness("cpu-local")); }},
    {"fault_none_sim_h200", [] { return std::unique_ptr<ComputeHarness>(new FaultHarness("none", "h200-sxm")); }},
    {"fault_rare_sim_cpu_local",
     [] { return std::unique_ptr<ComputeHarness>(new FaultHarness("compute.fail=1/1000000000", "cpu-local")); }},
};

INSTANTIATE_TEST_SUITE_P(Sim, ComputeConformanceTest, ::testing::ValuesIn(kHarnesses),
                         engine::conformance::ComputeHarnessName);

}  // namespace
}  // namespace colibri::sim
