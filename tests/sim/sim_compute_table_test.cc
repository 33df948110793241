// SimCompute's measured tables (sim_compute.h) and SimHostWork
// (sim_host_work.h), by hand-computed figures; the tables' profile-file round
// trip and errors.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "colibri/sim/profile_json.h"
#include "colibri/sim/profiles.h"
#include "colibri/sim/sim_compute.h"
#include "colibri/sim/sim_event_loop.h"
#include "colibri/sim/sim_host_work.h"

namespace colibri::sim {
namespace {

using engine::DType;
using engine::ExpertLayout;
using engine::TimeNs;
using Json = nlohmann::json;

// A CPU measured at bf16, H 2048 x I 1024, 1 and 2 threads; the gate at 64 x 2048.
ComputeProfile MeasuredCpu() {
  ComputeProfile p;
  p.id = "measured-cpu";
  p.name = "a measured CPU";
  p.kind = ComputeKind::kCpu;
  p.peak_flops_per_s = {{"fp32", 100'000'000'000}, {"bf16", 100'000'000'000}};
  p.memory_bytes_per_s = 20'000'000'000;
  p.launch_ns = 1'000;
  p.memory_bytes = 1 << 30;
  p.ffn_table.figure = Figure{"ffn_table", Basis::kMeasured, "the test", ""};
  p.ffn_table.entries = {{"bf16", 1024, 2048, 1, {1, 4, 16}, {800'000, 1'000'000, 4'000'000}},
                         {"bf16", 1024, 2048, 2, {1, 16}, {500'000, 2'000'000}}};
  p.gate_table.figure = Figure{"gate_table", Basis::kMeasured, "the test", ""};
  p.gate_table.entries = {{"fp32", 64, 2048, 1, {1, 8}, {20'000, 60'000}}};
  return p;
}

class SimComputeTableTest : public ::testing::Test {
 protected:
  std::unique_ptr<SimCompute> Make(const ComputeProfile& profile, uint32_t threads) {
    auto compute = MakeSimCompute(profile, SimComputeOptions{&loop_, nullptr, threads});
    EXPECT_TRUE(compute.ok()) << compute.status().message();
    return compute.ok() ? std::move(compute).value() : nullptr;
  }
  SimEventLoop loop_;
};

TEST_F(SimComputeTableTest, MeasuredTimesInterpolateInTokens) {
  auto one = Make(MeasuredCpu(), 1);
  const ExpertLayout layout = ExpertLayout::Make(DType::kBf16, 2048, 1024);
  EXPECT_EQ(one->ExpertFfnNs(layout, 1).value(), 800'000);
  EXPECT_EQ(one->ExpertFfnNs(layout, 2).value(), 866'667);    // 1/3 of the way from 1 to 4
  EXPECT_EQ(one->ExpertFfnNs(layout, 16).value(), 4'000'000);
  EXPECT_EQ(one->ExpertFfnNs(layout, 32).value(), 8'000'000);  // the last segment, extended: 250 us per token
  auto two = Make(MeasuredCpu(), 2);
  EXPECT_EQ(two->ExpertFfnNs(layout, 1).value(), 500'000) << "the 2-thread column";
  EXPECT_EQ(two->ExpertFfnNs(layout, 6).value(), 1'000'000);
  EXPECT_EQ(one->GateGemvNs(64, 2048, 4).value(), 37'143);  // 20 us + 40 us x 3 / 7
}

TEST_F(SimComputeTableTest, UnmeasuredShapesScaleTheNearestMeasuredOne) {
  auto one = Make(MeasuredCpu(), 1);
  // H 4096 x I 1024 is twice the measured shape: twice its time.
  EXPECT_EQ(one->ExpertFfnNs(ExpertLayout::Make(DType::kBf16, 4096, 1024), 1).value(), 1'600'000);
  EXPECT_EQ(one->ExpertFfnNs(ExpertLayout::Make(DType::kBf16, 2048, 512), 4).value(), 500'000);
  EXPECT_EQ(one->GateGemvNs(128, 2048, 1).value(), 40'000);
}

TEST_F(SimComputeTableTest, DtypesWithoutATableUseTheRooflineAndThreadsMustBeMeasured) {
  auto one = Make(MeasuredCpu(), 1);
  // fp32 is not in the table: the roofline (1000 + bytes / 20 GB/s).
  const ExpertLayout fp32 = ExpertLayout::Make(DType::kFp32, 2048, 1024);
  const uint64_t bytes = 3ull * 2048 * 1024 * 4 + 4 * (2 * 2048 + 2 * 1024);
  EXPECT_EQ(one->ExpertFfnNs(fp32, 1).value(), 1'000 + static_cast<TimeNs>((bytes * 1'000'000'000 + 19'999'999'999) /
                                                                             20'000'000'000));
  auto four = Make(MeasuredCpu(), 4);
  auto refused = four->ExpertFfnNs(ExpertLayout::Make(DType::kBf16, 2048, 1024), 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(refused.status().message().find("at 1, 2 thread(s)"), std::string::npos) << refused.status().message();
  EXPECT_FALSE(MakeSimCompute(MeasuredCpu(), SimComputeOptions{&loop_, nullptr, 0}).ok());
}

TEST_F(SimComputeTableTest, HostWorkByHand) {
  auto compute = Make(MeasuredCpu(), 1);
  HostWorkProfile h;
  h.present = true;
  h.routing_fixed_ns = 1'000;
  h.routing_ps_per_logit = 500;          // 0.5 ns per token x expert
  h.scheduling_fixed_ns = 2'000;
  h.scheduling_ps_per_expert = 100'000;  // 100 ns per expert
  h.scheduling_ps_per_assignment = 10'000;
  h.scheduling_ps_per_read = 3'000'000;  // 3 us per read submitted
  h.gather_fixed_ns = 300;
  h.gather_ps_per_element = 250;
  h.aggregation_fixed_ns = 100;
  h.aggregation_ps_per_element = 125;
  EXPECT_FALSE(SimHostWork::Make(HostWorkProfile{}, compute.get()).ok()) << "no host work";
  auto made = SimHostWork::Make(h, compute.get());
  ASSERT_TRUE(made.ok()) << made.status().message();
  const SimHostWork& w = *made.value();
  // 4 tokens x 64 experts: 1 us + 256 x 0.5 ns, the whole step; less the
  // gate's 37,143 ns (the table) when the compute model charged it: not below 0.
  EXPECT_EQ(w.RoutingNs(4, 64, 2048, /*gate_charged=*/false), 1'000 + 128);
  EXPECT_EQ(w.RoutingNs(4, 64, 2048, /*gate_charged=*/true), 0);
  EXPECT_EQ(w.RoutingNs(0, 64, 2048, false), 0);
  // 8 experts, 4 x 4 assignments, 2 reads: 2000 + 800 + 160 + 6000, + 700 once for reading.
  EXPECT_EQ(w.SchedulingNs(4, 4, 8, 2), 8'960);
  h.scheduling_read_fixed_ns = 700;
  auto with_read_fixed = SimHostWork::Make(h, compute.get());
  ASSERT_TRUE(with_read_fixed.ok());
  EXPECT_EQ(with_read_fixed.value()->SchedulingNs(4, 4, 8, 2), 8'960 + 700);
  EXPECT_EQ(with_read_fixed.value()->SchedulingNs(4, 4, 8, 0), 2'000 + 800 + 160);
  EXPECT_EQ(w.GatherNs(3, 2048), 300 + 1'536);
  EXPECT_EQ(w.AggregationNs(4, 4, 2048), 100 + 4'096);
}

TEST(ComputeTableProfileTest, RoundTripAndErrors) {
  ComputeProfile p = MeasuredCpu();
  for (const char* field : {"peak_flops_per_s.fp32", "peak_flops_per_s.bf16", "memory_bytes_per_s", "launch_ns",
                            "memory_bytes"}) {
    p.figures.push_back(Figure{field, Basis::kMeasured, "the test", ""});
  }
  auto text = ComputeProfileJson(p);
  ASSERT_TRUE(text.ok()) << text.status().message();
  auto back = ParseComputeProfile(text.value(), "c.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back.value().ffn_table.entries.size(), 2u);
  EXPECT_EQ(back.value().ffn_table.entries[0].ns, p.ffn_table.entries[0].ns);
  EXPECT_EQ(back.value().ffn_table.entries[1].threads, 2u);
  EXPECT_EQ(back.value().gate_table.entries[0].rows, 64u);
  EXPECT_EQ(back.value().peak_flops_per_s, p.peak_flops_per_s);

  const Json good = Json::parse(text.value());
  auto refused = [&](Json doc, const std::string& part) {
    auto parsed = ParseComputeProfile(doc.dump(), "bad.json");
    ASSERT_FALSE(parsed.ok()) << part;
    EXPECT_NE(parsed.status().message().find("bad.json: "), std::string::npos) << parsed.status().message();
    EXPECT_NE(parsed.status().message().find(part), std::string::npos) << parsed.status().message();
  };
  Json doc = good;
  doc["ffn_table"]["entries"][0]["tokens"] = Json{4, 1, 16};
  refused(doc, "ffn_table.entries[0].tokens[1]");
  doc = good;
  doc["ffn_table"]["entries"][0]["ns"] = Json{1, 2};
  refused(doc, "ffn_table.entries[0].ns");
  doc = good;
  doc["ffn_table"]["entries"][1]["threads"] = 1;
  refused(doc, "one entry per shape");
  doc = good;
  doc["ffn_table"]["entries"][0]["dtype"] = "fp8";
  refused(doc, "ffn_table.entries[0].dtype");
  doc = good;
  doc["gate_table"]["entries"][0]["dtype"] = "fp32";
  refused(doc, "unknown field gate_table.entries[0].dtype");
}

// A machine profile with the given name and no measured parts.
MachineProfile TestMachine(const std::string& name) {
  MachineProfile m;
  m.name = name;
  m.description = "a test";
  m.nvme = "n";
  m.pcie = "p";
  m.compute = "c";
  return m;
}

TEST(HostWorkProfileTest, MachineRoundTripAndErrors) {
  MachineProfile m = TestMachine("measured-test-20261201");
  HostWorkProfile h;
  h.present = true;
  h.scheduling_fixed_ns = 1234;
  h.gather_ps_per_element = 99;
  h.figure = Figure{"host_work", Basis::kMeasured, "the test", ""};
  m.host_work = {h};
  m.identity = MachineIdentity{"AMD EPYC 9R14", "avx2 avx512f", 2, 24ull << 30, "6.1.0", "vda", "2026-12-01", "abc"};
  auto text = MachineProfileJson(m);
  ASSERT_TRUE(text.ok());
  auto back = ParseMachineProfile(text.value(), "m.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back.value().host_work.size(), 1u);
  EXPECT_TRUE(back.value().host_work[0].present);
  EXPECT_EQ(back.value().host_work[0].threads, 0u) << "a single entry without threads fits any count";
  EXPECT_EQ(back.value().host_work[0].scheduling_fixed_ns, 1234);
  EXPECT_EQ(back.value().host_work[0].gather_ps_per_element, 99u);
  EXPECT_EQ(back.value().identity.cpu_model, "AMD EPYC 9R14");
  EXPECT_EQ(back.value().identity.ram_bytes, 24ull << 30);
  Json doc = Json::parse(text.value());
  doc["host_work"].erase("aggregation_fixed_ns");
  auto parsed = ParseMachineProfile(doc.dump(), "bad.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("host_work.aggregation_fixed_ns"), std::string::npos)
      << parsed.status().message();
  doc = Json::parse(text.value());
  doc["identity"]["cores"] = 0;
  parsed = ParseMachineProfile(doc.dump(), "bad.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("identity.cores"), std::string::npos) << parsed.status().message();
}

// One host_work entry per thread count: written as an array, read back in
// order; an entry without threads, a repeated count or a bad count refused.
TEST(HostWorkProfileTest, OneEntryPerThreadCount) {
  MachineProfile m = TestMachine("measured-test-20261202");
  HostWorkProfile one;
  one.present = true;
  one.threads = 1;
  one.routing_fixed_ns = 400;
  one.figure = Figure{"host_work", Basis::kMeasured, "the test", ""};
  HostWorkProfile two = one;
  two.threads = 2;
  two.routing_fixed_ns = 73'000;
  m.host_work = {one, two};
  auto text = MachineProfileJson(m);
  ASSERT_TRUE(text.ok());
  auto back = ParseMachineProfile(text.value(), "m.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back.value().host_work.size(), 2u);
  EXPECT_EQ(back.value().host_work[1].threads, 2u);
  EXPECT_EQ(back.value().host_work[1].routing_fixed_ns, 73'000);

  auto at = HostWorkAtThreads(back.value().host_work, 2);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(at.value().routing_fixed_ns, 73'000);
  at = HostWorkAtThreads(back.value().host_work, 3);
  ASSERT_FALSE(at.ok());
  EXPECT_NE(at.status().message().find("measured at 1, 2 compute thread(s), not at the 3"), std::string::npos)
      << at.status().message();
  EXPECT_FALSE(HostWorkAtThreads({}, 1).ok());
  HostWorkProfile any = one;
  any.threads = 0;
  at = HostWorkAtThreads({two, any}, 1);
  ASSERT_TRUE(at.ok()) << "an entry that did not record its count fits any";
  EXPECT_EQ(at.value().routing_fixed_ns, 400);

  auto refused = [](const Json& doc, const std::string& expected) {
    auto parsed = ParseMachineProfile(doc.dump(), "bad.json");
    ASSERT_FALSE(parsed.ok()) << expected;
    EXPECT_NE(parsed.status().message().find(expected), std::string::npos) << parsed.status().message();
  };
  const Json good = Json::parse(text.value());
  ASSERT_TRUE(good["host_work"].is_array());
  Json doc = good;
  doc["host_work"][1].erase("threads");
  refused(doc, "missing field host_work[1].threads");
  doc = good;
  doc["host_work"][1]["threads"] = 1;
  refused(doc, "host_work[1].threads: expected one entry per thread count");
  doc = good;
  doc["host_work"][0]["threads"] = 0;
  refused(doc, "host_work[0].threads");
  doc = good;
  doc["host_work"] = Json::array();
  refused(doc, "field host_work: expected an object, or a non-empty array");
  doc = good;
  doc["host_work"][0]["threds"] = 1;
  refused(doc, "unknown field host_work[0].threds");
}

}  // namespace
}  // namespace colibri::sim
