// The host memory model (host_memory.h) by hand-computed figures: a demand
// that fits costs nothing; one that does not faults the layers' share of the
// shortfall back at the drive's lone small-read time. The machine file's
// host_memory fields: parsing, round trip, and errors naming the field. The
// built-in phone: its read grid reproduces iobench-ceiling.md, and the
// captures' demand fits its RAM.
#include "colibri/sim/host_memory.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "colibri/sim/profile_json.h"
#include "colibri/sim/profiles.h"
#include "colibri/sim/read_grid.h"

namespace colibri::sim {
namespace {

using Json = nlohmann::json;
constexpr uint64_t kMiB = 1 << 20;

// One channel at 4.096 GB/s behind a link of the same rate, 500 ns added
// latency, no jitter: a lone 8 KiB read takes 8192 / 4.096 GB/s = 2,000 ns
// (channel and link alike) + 500 ns = 2,500 ns.
NvmeProfile Drive() {
  NvmeProfile p;
  p.id = "test-drive";
  p.channels = 1;
  p.queue_depth = 8;
  p.per_op_ns = 0;
  p.channel_read_bytes_per_s = 4'096'000'000;
  p.read_bytes_per_s = 4'096'000'000;
  p.read_latency = {500, 500};
  return p;
}

HostMemoryProfile Memory(uint64_t available_bytes, uint64_t fault_read_bytes = 8192) {
  HostMemoryProfile m;
  m.present = true;
  m.ram_bytes = uint64_t{1} << 34;
  m.available_bytes = available_bytes;
  m.fault_read_bytes = fault_read_bytes;
  return m;
}

HostMemoryModel Model(const HostMemoryProfile& memory, const NvmeProfile& drive = Drive()) {
  auto model = HostMemoryModel::Make("test", memory, drive, 1);
  EXPECT_TRUE(model.ok()) << model.status().message();
  return std::move(model).value();
}

// 10 MiB of expert cache, two layers of 1 and 3 MiB of dense weights.
HostMemoryDemand Demand() {
  HostMemoryDemand d;
  d.expert_cache_bytes = 10 * kMiB;
  d.layer_dense_bytes = 4 * kMiB;
  return d;
}

TEST(HostMemoryTest, ADemandThatFitsFaultsNothing) {
  const HostMemoryModel model = Model(Memory(14 * kMiB));
  EXPECT_EQ(model.FaultNs(), 2'500);
  EXPECT_EQ(model.ShortfallBytes(Demand()), 0u);
  const LayerFaults f = model.Faults(Demand(), 3 * kMiB);
  EXPECT_EQ(f.faults, 0u);
  EXPECT_EQ(f.faulted_bytes, 0u);
  EXPECT_EQ(f.fault_ns, 0);
}

TEST(HostMemoryTest, TheShortfallIsFaultedBackAtTheLoneSmallReadTime) {
  // 14 MiB of demand, 12 MiB available: 2 MiB short, shared 1 : 3 by the layers.
  const HostMemoryModel model = Model(Memory(12 * kMiB));
  EXPECT_EQ(model.ShortfallBytes(Demand()), 2 * kMiB);
  const LayerFaults small = model.Faults(Demand(), 1 * kMiB);
  EXPECT_EQ(small.faults, 64u);  // 512 KiB / 8 KiB
  EXPECT_EQ(small.faulted_bytes, 512 * 1024u);
  EXPECT_EQ(small.fault_ns, 64 * 2'500);
  const LayerFaults large = model.Faults(Demand(), 3 * kMiB);
  EXPECT_EQ(large.faults, 192u);  // 1.5 MiB / 8 KiB
  EXPECT_EQ(large.fault_ns, 192 * 2'500);

  // The KV cache and the other mapped weights count in the demand: 1 MiB more is 3 MiB short.
  HostMemoryDemand more = Demand();
  more.kv_cache_bytes = 512 * 1024;
  more.other_dense_bytes = 512 * 1024;
  EXPECT_EQ(model.Faults(more, 1 * kMiB).faults, 96u);  // 3 MiB x 1/4 / 8 KiB

  // A shortfall beyond the dense weights faults all of them (each page once per pass), no more.
  const HostMemoryModel tight = Model(Memory(8 * kMiB));
  EXPECT_EQ(tight.ShortfallBytes(Demand()), 6 * kMiB);
  EXPECT_EQ(tight.Faults(Demand(), 1 * kMiB).faults, 128u);
  EXPECT_EQ(tight.Faults(Demand(), 3 * kMiB).faults, 384u);

  // A share that is not a whole number of fault reads rounds up to whole faults.
  HostMemoryDemand odd = Demand();
  odd.expert_cache_bytes += 1000;  // 2 MiB + 1,000 bytes short
  EXPECT_EQ(model.Faults(odd, 1 * kMiB).faults, 65u);  // ceil((524,288 + 250) / 8,192)
}

TEST(HostMemoryTest, AFaultTakesTheReadGridsLoneReadWhenTheDriveHasOne) {
  NvmeProfile drive = Drive();
  drive.read_grid.quantiles = {0.0, 1.0};
  drive.read_grid.points = {ReadGridPoint{8192, 1, 10, 100'000'000, {81'920, 81'920}},
                            ReadGridPoint{8192, 4, 10, 200'000'000, {163'840, 163'840}}};
  drive.read_grid.figure = Figure{"read_grid", Basis::kMeasured, "test", ""};
  EXPECT_EQ(Model(Memory(12 * kMiB), drive).FaultNs(), 81'920);
}

TEST(HostMemoryTest, MakeRefusesAnAbsentProfileOrPartialPages) {
  HostMemoryProfile absent;
  auto a = HostMemoryModel::Make("m", absent, Drive(), 1);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("machine 'm': no host_memory"), std::string::npos);
  auto b = HostMemoryModel::Make("m", Memory(kMiB, 1000), Drive(), 1);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("host_memory.fault_read_bytes 1000"), std::string::npos) << b.status().message();
}

// A valid machine file with host_memory, to be broken one field at a time.
Json MachineDoc() {
  auto figure = [](uint64_t value, const char* basis) {
    return Json{{"value", value}, {"basis", basis}, {"source", "a state dump"}, {"note", "how"}};
  };
  return Json{{"kind", "machine"},
              {"name", "test-phone"},
              {"description", "a test"},
              {"nvme", "phone-ufs"},
              {"pcie", "none"},
              {"compute", "phone-soc"},
              {"host_memory",
               {{"ram_bytes", figure(12'000'000'000, "measured")},
                {"available_bytes", figure(6'000'000'000, "derived")},
                {"fault_read_bytes", figure(131072, "assumed")}}}};
}

void ExpectRefused(const Json& doc, const std::vector<std::string>& parts) {
  auto parsed = ParseMachineProfile(doc.dump(), "m.json");
  ASSERT_FALSE(parsed.ok()) << doc.dump();
  EXPECT_TRUE(parsed.status().message().starts_with("m.json: ")) << parsed.status().message();
  for (const std::string& part : parts) {
    EXPECT_NE(parsed.status().message().find(part), std::string::npos) << parsed.status().message();
  }
}

TEST(HostMemoryProfileTest, ParsesEachFieldAsAFigureAndRoundTrips) {
  auto parsed = ParseMachineProfile(MachineDoc().dump(), "m.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const HostMemoryProfile& m = parsed.value().host_memory;
  EXPECT_TRUE(m.present);
  EXPECT_EQ(m.ram_bytes, 12'000'000'000u);
  EXPECT_EQ(m.available_bytes, 6'000'000'000u);
  EXPECT_EQ(m.fault_read_bytes, 131072u);
  const std::vector<Parameter> parameters = ParametersOf(m);
  ASSERT_EQ(parameters.size(), 3u);
  EXPECT_EQ(parameters[1].field, "host_memory.available_bytes");
  EXPECT_EQ(parameters[1].figure.basis, Basis::kDerived);
  EXPECT_EQ(parameters[2].figure.basis, Basis::kAssumed);
  EXPECT_EQ(parameters[2].figure.note, "how");

  auto text = MachineProfileJson(parsed.value());
  ASSERT_TRUE(text.ok()) << text.status().message();
  auto back = ParseMachineProfile(text.value(), "back.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back.value().host_memory.available_bytes, m.available_bytes);
  EXPECT_EQ(back.value().host_memory.fault_read_bytes, m.fault_read_bytes);
  EXPECT_EQ(ParametersOf(back.value().host_memory)[0].figure.source, "a state dump");

  Json without = MachineDoc();
  without.erase("host_memory");
  auto plain = ParseMachineProfile(without.dump(), "m.json");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain.value().host_memory.present);
  EXPECT_TRUE(ParametersOf(plain.value().host_memory).empty());
}

TEST(HostMemoryProfileTest, BadFieldsAreRefusedNamingTheField) {
  Json doc = MachineDoc();
  doc["host_memory"]["available_bytes"]["value"] = 13'000'000'000;
  ExpectRefused(doc, {"field host_memory.available_bytes.value", "at most host_memory.ram_bytes"});
  doc = MachineDoc();
  doc["host_memory"]["fault_read_bytes"]["value"] = 5000;
  ExpectRefused(doc, {"field host_memory.fault_read_bytes.value", "multiple of 4096"});
  doc = MachineDoc();
  doc["host_memory"]["fault_read_bytes"]["value"] = 0;
  ExpectRefused(doc, {"field host_memory.fault_read_bytes.value"});
  doc = MachineDoc();
  doc["host_memory"].erase("ram_bytes");
  ExpectRefused(doc, {"missing field host_memory.ram_bytes"});
  doc = MachineDoc();
  doc["host_memory"]["swap_bytes"] = doc["host_memory"]["ram_bytes"];
  ExpectRefused(doc, {"unknown field host_memory.swap_bytes"});
  doc = MachineDoc();
  doc["host_memory"]["available_bytes"].erase("note");
  ExpectRefused(doc, {"field host_memory.available_bytes.note"});
  doc = MachineDoc();
  doc["host_memory"]["ram_bytes"].erase("source");
  ExpectRefused(doc, {"missing field host_memory.ram_bytes.source"});
  doc = MachineDoc();
  doc["host_memory"]["ram_bytes"] = 12;
  ExpectRefused(doc, {"field host_memory.ram_bytes", "expected an object"});
}

TEST(HostMemoryProfileTest, ThePhonesReadGridReproducesItsMeasuredCurve) {
  auto catalog = HardwareCatalog::BuiltIn();
  ASSERT_TRUE(catalog.ok()) << catalog.status().message();
  const NvmeProfile& cold = *catalog.value().Nvme("phone-ufs").value();
  ASSERT_FALSE(cold.read_grid.empty());
  // iobench-ceiling.md, cold device: 4 MiB at 1 and 2 lanes, 1 MiB and 128 KiB at 8 lanes (MiB/s).
  const std::tuple<uint64_t, uint32_t, double> rows[] = {
      {4 * kMiB, 1, 1809.9}, {4 * kMiB, 2, 2459.8}, {1 * kMiB, 8, 2251.4}, {128 * 1024, 8, 1858.8}};
  for (const auto& [bytes, lanes, mib_per_s] : rows) {
    auto reads = SimulateClosedLoopReads(cold, bytes, lanes, 2000, 7);
    ASSERT_TRUE(reads.ok()) << reads.status().message();
    EXPECT_NEAR(static_cast<double>(reads.value().bytes_per_s) / kMiB, mib_per_s, mib_per_s * 0.02)
        << bytes << " bytes at " << lanes << " lanes";
  }
}

TEST(HostMemoryProfileTest, TheCapturesDemandFitsThePhoneAndAFaultIsA128KiBRead) {
  auto catalog = HardwareCatalog::BuiltIn();
  ASSERT_TRUE(catalog.ok()) << catalog.status().message();
  auto phone = catalog.value().Resolve("phone-bigmoe");
  ASSERT_TRUE(phone.ok()) << phone.status().message();
  const ResolvedMachine& m = phone.value();
  ASSERT_TRUE(m.machine.host_memory.present);
  const HostMemoryModel model = Model(m.machine.host_memory, m.nvme);
  // The warm drive's lone 128 KiB read: its grid's depth-1 point.
  TimeNs lone = 0;
  for (const ReadGridPoint& p : m.nvme.read_grid.points) {
    if (p.read_bytes == 128 * 1024 && p.queue_depth == 1) lone = p.latency_ns[0];
  }
  EXPECT_GT(lone, 0);
  EXPECT_EQ(model.FaultNs(), lone);
  // Qwen3-30B-A3B as captured: a 4,000 MiB cache, 541 MiB of layers' dense weights, 410 MiB of
  // embeddings and LM head, 157 positions of KV cache (48 layers x 98,304 bytes): fits.
  HostMemoryDemand qwen;
  qwen.expert_cache_bytes = 4000 * kMiB;
  qwen.layer_dense_bytes = 567'263'232;
  qwen.other_dense_bytes = 430'289'060;
  qwen.kv_cache_bytes = 157 * 98'304;
  EXPECT_EQ(model.ShortfallBytes(qwen), 0u);
  // With a 5,500 MiB cache it does not: the 152,111,268 bytes beyond 6,628,042,752 are faulted back,
  // in 128 KiB faults, shared by the 48 layers (of 11,817,984 dense bytes each).
  qwen.expert_cache_bytes = 5500 * kMiB;
  const uint64_t shortfall = qwen.total() - 6'628'042'752;
  EXPECT_EQ(shortfall, 152'111'268u);
  EXPECT_EQ(model.ShortfallBytes(qwen), shortfall);
  const LayerFaults layer = model.Faults(qwen, 567'263'232 / 48);
  EXPECT_EQ(layer.faults, 25u);  // ceil(ceil(152,111,268 / 48) / 131,072)
  EXPECT_EQ(layer.fault_ns, 25 * lone);
  // With 6,000 MiB the shortfall exceeds the dense weights: every page of them, every pass.
  qwen.expert_cache_bytes = 6000 * kMiB;
  EXPECT_GT(model.ShortfallBytes(qwen), 567'263'232u);
  EXPECT_EQ(model.Faults(qwen, 567'263'232 / 48).faults, 91u);  // ceil(11,817,984 / 131,072)
}

}  // namespace
}  // namespace colibri::sim
