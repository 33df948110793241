// The TransferBackend contract (tests/engine/transfer_conformance.h) over
// SimTransfer with PCIe profiles from the built-in catalog, keeping time on a
// SimEventLoop: a Gen5 link (pinned copies), a Gen3 link (pageable copies),
// the "none" link of CPU machines (device_is_host, copies cost nothing) and a
// Gen4 link given two copy engines, so copies complete out of submission
// order. SimTransfer moves no bytes (delivers_data = false): the suite's data
// checks are skipped by that capability. What only SimTransfer promises, copies
// on one copy engine completing in submission order, is tested below.
// FaultInjectionTransfer (fault_injection.h) runs the same contract over
// SimTransfer with no faults and with transfer.fail and transfer.oom at 1 in
// 10^9 (on, so every copy takes the wrapper's own path; with this seed none
// fires).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../engine/transfer_conformance.h"
#include "colibri/sim/fault_injection.h"
#include "colibri/sim/profiles.h"
#include "colibri/sim/sim_event_loop.h"
#include "colibri/sim/sim_transfer.h"

namespace colibri::sim {
namespace {

using engine::TransferBackend;
using engine::TransferCompletion;
using engine::conformance::TransferConformanceTest;
using engine::conformance::TransferHarness;
using engine::conformance::TransferHarnessFactory;

// A PCIe profile of the built-in catalog; `copy_engines` > 0 replaces its engine count.
Result<PcieProfile> CatalogLink(const std::string& id, uint32_t copy_engines = 0) {
  COLIBRI_ASSIGN_OR_RETURN(const HardwareCatalog catalog, HardwareCatalog::BuiltIn());
  COLIBRI_ASSIGN_OR_RETURN(const PcieProfile* profile, catalog.Pcie(id));
  PcieProfile link = *profile;
  if (copy_engines > 0) link.copy_engines = copy_engines;
  return link;
}

// SimTransfer over a catalog link on its own simulated loop. The model
// schedules no events, so time passes by moving the loop's clock on.
class SimHarness final : public TransferHarness {
 public:
  SimHarness(std::string pcie_id, bool pinned, uint32_t copy_engines = 0)
      : pcie_id_(std::move(pcie_id)), pinned_(pinned), copy_engines_(copy_engines) {}

  Result<std::unique_ptr<TransferBackend>> Make() override {
    COLIBRI_ASSIGN_OR_RETURN(const PcieProfile link, CatalogLink(pcie_id_, copy_engines_));
    SimTransferOptions options;
    options.loop = &loop_;
    options.pinned = pinned_;
    COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<SimTransfer> transfer, MakeSimTransfer(link, options));
    return std::unique_ptr<TransferBackend>(std::move(transfer));
  }
  const engine::Clock& clock() const override { return loop_; }
  void LetTimePass() override { loop_.WaitUntil(loop_.Now() + 1'000); }

 private:
  std::string pcie_id_;
  bool pinned_;
  uint32_t copy_engines_;
  SimEventLoop loop_;
};

// SimTransfer over a catalog link inside a FaultInjectionTransfer with `spec`.
class FaultHarness final : public TransferHarness {
 public:
  FaultHarness(const char* spec, std::string pcie_id, uint32_t copy_engines)
      : spec_(spec), target_(std::move(pcie_id), true, copy_engines) {}

  Result<std::unique_ptr<TransferBackend>> Make() override {
    COLIBRI_ASSIGN_OR_RETURN(const FaultSpec spec, ParseFaultSpec(spec_));
    COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<TransferBackend> target, target_.Make());
    auto faults = std::make_unique<FaultInjectionTransfer>(target.get(), spec, 42, &target_.clock(), &log_);
    return std::unique_ptr<TransferBackend>(
        new engine::OwningTransfer(std::move(target), std::move(faults)));
  }
  const engine::Clock& clock() const override { return target_.clock(); }
  void LetTimePass() override { target_.LetTimePass(); }

 private:
  const char* spec_;
  SimHarness target_;
  FaultLog log_;
};

const TransferHarnessFactory kHarnesses[] = {
    {"sim_gen5_pinned", [] { return std::unique_ptr<TransferHarness>(new SimHarness("pcie-gen5-x16", true)); }},
    {"sim_gen3_pageable", [] { return std::unique_ptr<TransferHarness>(new SimHarness("pcie-gen3-x16", false)); }},
    {"sim_no_link", [] { return std::unique_ptr<TransferHarness>(new SimHarness("none", true)); }},
    {"sim_gen4_two_engines",
     [] { return std::unique_ptr<TransferHarness>(new SimHarness("pcie-gen4-x16", true, 2)); }},
    {"fault_none_sim_gen5",
     [] { return std::unique_ptr<TransferHarness>(new FaultHarness("none", "pcie-gen5-x16", 0)); }},
    {"fault_rare_sim_gen4_two_engines", [] {
       return std::unique_ptr<TransferHarness>(
           new FaultHarness("transfer.fail=1/1000000000,transfer.oom=1/1000000000", "pcie-gen4-x16", 2));
     }},
};

INSTANTIATE_TEST_SUITE_P(Sim, TransferConformanceTest, ::testing::ValuesIn(kHarnesses),
                         engine::conformance::TransferHarnessName);

// SimTransfer's own promise beyond the contract: copies on one copy engine
// serialise, so on every catalog link (one engine each) copies complete in
// submission order, each when the one before it ends, even when a later copy
// is smaller.
TEST(SimTransferOrderTest, OneCopyEngineCompletesInSubmissionOrder) {
  for (const char* id : {"none", "pcie-gen3-x16", "pcie-gen4-x16", "pcie-gen5-x16"}) {
    SCOPED_TRACE(id);
    auto link = CatalogLink(id);
    ASSERT_TRUE(link.ok()) << link.status().message();
    ASSERT_EQ(link.value().copy_engines, 1u);
    SimEventLoop loop;
    SimTransferOptions options;
    options.loop = &loop;
    auto made = MakeSimTransfer(link.value(), options);
    ASSERT_TRUE(made.ok()) << made.status().message();
    SimTransfer& transfer = *made.value();
    std::byte memory[2] = {};
    const uint64_t sizes[] = {1 << 20, 4096, 1 << 16, 1, 3 << 20};
    for (uint64_t i = 0; i < std::size(sizes); ++i) {
      ASSERT_TRUE(transfer.Copy(&memory[0], &memory[1], sizes[i], 10 + i).ok());
    }
    std::vector<TransferCompletion> done;
    while (transfer.outstanding() > 0) ASSERT_TRUE(transfer.Poll(true, &done).ok());
    ASSERT_EQ(done.size(), std::size(sizes));
    engine::TimeNs end_ns = 0;
    for (uint64_t i = 0; i < std::size(sizes); ++i) {
      EXPECT_EQ(done[i].tag, 10 + i);
      end_ns += transfer.CopyNs(sizes[i]);
      EXPECT_EQ(done[i].complete_ns, end_ns) << "copy " << i;
    }
  }
}

}  // namespace
}  // namespace colibri::sim
