// Hardware profiles: the built-in files parse and resolve, and bad files are
// refused with messages that name the file, the field and what was expected.
#include "colibri/sim/profiles.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "colibri/sim/sim_compute.h"
#include "colibri/sim/sim_event_loop.h"
#include "colibri/sim/sim_storage.h"
#include "colibri/sim/sim_transfer.h"

namespace colibri::sim {
namespace {

using Json = nlohmann::json;

HardwareCatalog BuiltInOrDie() {
  auto catalog = HardwareCatalog::BuiltIn();
  EXPECT_TRUE(catalog.ok()) << catalog.status().message();
  return std::move(catalog).value();
}

bool Contains(const std::vector<std::string>& items, const std::string& item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

// A valid NVMe profile file, to be broken one field at a time.
Json ValidNvme() {
  auto figure = [](uint64_t value) { return Json{{"value", value}, {"basis", "spec"}, {"source", "a datasheet"}}; };
  return Json{{"kind", "nvme"},
              {"id", "test-drive"},
              {"name", "Test drive"},
              {"channels", figure(8)},
              {"queue_depth", figure(64)},
              {"per_op_ns", figure(1000)},
              {"channel_read_bytes_per_s", figure(1'000'000'000)},
              {"read_bytes_per_s", figure(4'000'000'000)},
              {"read_latency_p50_ns", figure(10'000)},
              {"read_latency_p99_ns", figure(20'000)}};
}

// Expects `status` to be an InvalidArgument naming `origin` and containing every one of `parts`.
void ExpectRefused(const Status& status, const std::string& origin, const std::vector<std::string>& parts) {
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.message();
  EXPECT_TRUE(status.message().starts_with(origin + ": ")) << status.message();
  for (const std::string& part : parts) EXPECT_NE(status.message().find(part), std::string::npos) << status.message();
}

MachineOverrides Overrides(const char* nvme, const char* pcie, const char* compute) {
  MachineOverrides overrides;
  overrides.nvme = nvme;
  overrides.pcie = pcie;
  overrides.compute = compute;
  return overrides;
}

Status ParseNvme(const Json& doc) { return ParseNvmeProfile(doc.dump(), "x.json").status(); }

TEST(HardwareProfileTest, BuiltInCatalogHasTheRequiredComponentsAndMachines) {
  const HardwareCatalog catalog = BuiltInOrDie();
  for (const char* id : {"optane-p5800x", "samsung-pm9a3", "samsung-990pro", "sata-870evo", "phone-ufs", "local-virtio"}) {
    EXPECT_TRUE(Contains(catalog.NvmeIds(), id)) << id;
  }
  for (const char* id : {"pcie-gen3-x16", "pcie-gen4-x16", "pcie-gen5-x16", "none"}) {
    EXPECT_TRUE(Contains(catalog.PcieIds(), id)) << id;
  }
  for (const char* id : {"a100-40gb-sxm", "h100-sxm", "h200-sxm", "rtx4090", "cpu-local", "phone-soc"}) {
    EXPECT_TRUE(Contains(catalog.ComputeIds(), id)) << id;
  }
  for (const char* name : {"h100-p5800x-gen5", "h200-p5800x-gen5", "a100-pm9a3-gen4", "rtx4090-990pro-gen4",
                           "a100-sata-gen3", "cpu-local", "phone-bigmoe"}) {
    EXPECT_TRUE(Contains(catalog.MachineNames(), name)) << name;
  }
  const std::vector<std::string> names = catalog.MachineNames();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

TEST(HardwareProfileTest, EveryBuiltInFigureHasABasisSourceAndFileNamedAfterItsId) {
  const HardwareCatalog catalog = BuiltInOrDie();
  for (const ComponentInfo& c : catalog.Components()) {
    const std::string dir = ComponentKindName(c.kind);
    EXPECT_EQ(c.origin, "sim/profiles/" + dir + "/" + c.id + ".json");
    ASSERT_FALSE(c.parameters.empty()) << c.id;
    for (const Parameter& p : c.parameters) {
      EXPECT_EQ(p.figure.field, p.field) << c.id;
      EXPECT_FALSE(p.figure.source.empty()) << c.id << " " << p.field;
      if (p.figure.basis == Basis::kDerived || p.figure.basis == Basis::kAssumed) {
        EXPECT_FALSE(p.figure.note.empty()) << c.id << " " << p.field;
      }
    }
  }
  for (const std::string& name : catalog.MachineNames()) {
    EXPECT_EQ(catalog.MachineOrigin(name).value(), "sim/profiles/machines/" + name + ".json");
  }
}

TEST(HardwareProfileTest, EveryMachineResolvesToModellableParts) {
  const HardwareCatalog catalog = BuiltInOrDie();
  for (const std::string& name : catalog.MachineNames()) {
    auto resolved = catalog.Resolve(name);
    ASSERT_TRUE(resolved.ok()) << resolved.status().message();
    const ResolvedMachine& m = resolved.value();
    EXPECT_EQ(m.label, name);
    EXPECT_EQ(m.nvme.id, m.machine.nvme);
    EXPECT_EQ(m.pcie.id, m.machine.pcie);
    EXPECT_EQ(m.compute.id, m.machine.compute);
    EXPECT_GE(m.nvme.channels, 1u);
    EXPECT_GT(m.nvme.read_bytes_per_s, 0u);
    EXPECT_GE(m.nvme.read_latency.p99_ns, m.nvme.read_latency.p50_ns);
    EXPECT_FALSE(m.compute.peak_flops_per_s.empty());
    EXPECT_EQ(m.pcie.generation == 0, m.pcie.pinned_bytes_per_s == 0) << name;
  }
}

TEST(HardwareProfileTest, EveryBuiltInComponentBuildsItsModel) {
  const HardwareCatalog catalog = BuiltInOrDie();
  SimEventLoop loop;
  for (const std::string& id : catalog.NvmeIds()) {
    SimStorageOptions options;
    options.loop = &loop;
    options.file_bytes = uint64_t{1} << 30;
    auto storage = MakeSimStorage(*catalog.Nvme(id).value(), options);
    EXPECT_TRUE(storage.ok()) << id << ": " << storage.status().message();
  }
  for (const std::string& id : catalog.PcieIds()) {
    SimTransferOptions options;
    options.loop = &loop;
    auto transfer = MakeSimTransfer(*catalog.Pcie(id).value(), options);
    EXPECT_TRUE(transfer.ok()) << id << ": " << transfer.status().message();
  }
  for (const std::string& id : catalog.ComputeIds()) {
    SimComputeOptions options;
    options.loop = &loop;
    auto compute = MakeSimCompute(*catalog.Compute(id).value(), options);
    EXPECT_TRUE(compute.ok()) << id << ": " << compute.status().message();
  }
}

TEST(HardwareProfileTest, BuiltInFiguresMatchTheirSources) {
  const HardwareCatalog catalog = BuiltInOrDie();
  const NvmeProfile& pm9a3 = *catalog.Nvme("samsung-pm9a3").value();
  EXPECT_EQ(pm9a3.read_bytes_per_s, 6'500'000'000u);
  // QD1: occupancy + added median latency = the measured 68 us median.
  EXPECT_EQ(pm9a3.per_op_ns + static_cast<TimeNs>((4096 * 1'000'000'000ull + pm9a3.channel_read_bytes_per_s - 1) /
                                                  pm9a3.channel_read_bytes_per_s) +
                pm9a3.read_latency.p50_ns,
            68'000);
  const ComputeProfile& h100 = *catalog.Compute("h100-sxm").value();
  EXPECT_EQ(h100.peak_flops_per_s.at("bf16"), 989'400'000'000'000u);
  EXPECT_EQ(h100.kind, ComputeKind::kGpu);
  EXPECT_EQ(catalog.Compute("cpu-local").value()->kind, ComputeKind::kCpu);
  const PcieProfile& none = *catalog.Pcie("none").value();
  EXPECT_EQ(none.generation, 0u);
  EXPECT_EQ(none.per_copy_ns, 0);
}

TEST(HardwareProfileTest, OverridesReplaceOnePartAndAreChecked) {
  const HardwareCatalog catalog = BuiltInOrDie();
  auto resolved = catalog.Resolve("h100-p5800x-gen5", Overrides("samsung-990pro", "", ""));
  ASSERT_TRUE(resolved.ok()) << resolved.status().message();
  EXPECT_EQ(resolved->nvme.id, "samsung-990pro");
  EXPECT_EQ(resolved->machine.nvme, "samsung-990pro");
  EXPECT_EQ(resolved->pcie.id, "pcie-gen5-x16");
  EXPECT_EQ(resolved->compute.id, "h100-sxm");
  EXPECT_EQ(resolved->label, "h100-p5800x-gen5 (nvme=samsung-990pro)");

  auto both = catalog.Resolve("cpu-local", Overrides("", "pcie-gen4-x16", "rtx4090"));
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_EQ(both->label, "cpu-local (pcie=pcie-gen4-x16, compute=rtx4090)");

  auto unknown = catalog.Resolve("h100-p5800x-gen5", Overrides("", "", "tpu"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("unknown compute profile 'tpu'"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("h200-sxm"), std::string::npos) << "lists the known ids";

  auto no_machine = catalog.Resolve("cray-1");
  ASSERT_FALSE(no_machine.ok());
  EXPECT_EQ(no_machine.status().code(), StatusCode::kNotFound);
  EXPECT_NE(no_machine.status().message().find("phone-bigmoe"), std::string::npos);
}

TEST(HardwareProfileTest, ComponentLookupByIdOrKindQualifiedId) {
  const HardwareCatalog catalog = BuiltInOrDie();
  auto ufs = catalog.Component("phone-ufs");
  ASSERT_TRUE(ufs.ok());
  EXPECT_EQ(ufs->kind, ComponentKind::kNvme);
  auto cpu = catalog.Component("compute/cpu-local");
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(cpu->compute_kind, "cpu");
  EXPECT_FALSE(catalog.Component("nvme/cpu-local").ok());
  EXPECT_FALSE(catalog.Component("disk/phone-ufs").ok());
}

TEST(HardwareProfileTest, ValidFileParsesWithItsFigures) {
  auto parsed = ParseNvmeProfile(ValidNvme().dump(), "x.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->channels, 8u);
  EXPECT_EQ(parsed->read_latency.p99_ns, 20'000);
  ASSERT_EQ(parsed->figures.size(), 7u);
  EXPECT_EQ(parsed->figures[0].field, "channels");
  EXPECT_EQ(parsed->figures[0].basis, Basis::kSpec);
  EXPECT_EQ(parsed->figures[0].source, "a datasheet");
}

TEST(HardwareProfileTest, MissingFieldIsRefused) {
  Json doc = ValidNvme();
  doc.erase("queue_depth");
  ExpectRefused(ParseNvme(doc), "x.json", {"missing field queue_depth"});
  doc = ValidNvme();
  doc["channels"].erase("source");
  ExpectRefused(ParseNvme(doc), "x.json", {"missing field channels.source"});
}

TEST(HardwareProfileTest, WrongTypeIsRefused) {
  Json doc = ValidNvme();
  doc["read_bytes_per_s"] = 4'000'000'000;  // a bare number, not a figure object
  ExpectRefused(ParseNvme(doc), "x.json", {"field read_bytes_per_s:", "expected an object"});
  doc = ValidNvme();
  doc["read_bytes_per_s"]["value"] = "4 GB/s";
  ExpectRefused(ParseNvme(doc), "x.json", {"field read_bytes_per_s.value: expected a positive integer", "string"});
  doc = ValidNvme();
  doc["per_op_ns"]["value"] = 1.5;
  ExpectRefused(ParseNvme(doc), "x.json", {"field per_op_ns.value: expected a non-negative integer"});
  doc = ValidNvme();
  doc["name"] = 7;
  ExpectRefused(ParseNvme(doc), "x.json", {"field name: expected a non-empty string"});
}

TEST(HardwareProfileTest, NegativeAndOutOfRangeValuesAreRefused) {
  Json doc = ValidNvme();
  doc["read_bytes_per_s"]["value"] = -5;
  ExpectRefused(ParseNvme(doc), "x.json", {"field read_bytes_per_s.value: expected a positive integer, got number -5"});
  doc = ValidNvme();
  doc["channels"]["value"] = 0;
  ExpectRefused(ParseNvme(doc), "x.json", {"field channels.value: expected a positive integer"});
  doc = ValidNvme();
  doc["queue_depth"]["value"] = uint64_t{1} << 32;
  ExpectRefused(ParseNvme(doc), "x.json", {"field queue_depth.value", "below 2^32"});
  doc = ValidNvme();
  doc["read_latency_p99_ns"]["value"] = 9'000;
  ExpectRefused(ParseNvme(doc), "x.json", {"field read_latency_p99_ns.value", "at least read_latency_p50_ns"});
}

TEST(HardwareProfileTest, UnknownFieldsAndBadBasisAreRefused) {
  Json doc = ValidNvme();
  doc["chanels"] = doc["channels"];
  ExpectRefused(ParseNvme(doc), "x.json", {"unknown field chanels"});
  doc = ValidNvme();
  doc["channels"]["unit"] = "count";
  ExpectRefused(ParseNvme(doc), "x.json", {"unknown field channels.unit"});
  doc = ValidNvme();
  doc["channels"]["basis"] = "guessed";
  ExpectRefused(ParseNvme(doc), "x.json", {"field channels.basis: expected spec, measured, derived or assumed"});
  doc = ValidNvme();
  doc["channels"]["basis"] = "assumed";  // without a note
  ExpectRefused(ParseNvme(doc), "x.json", {"field channels.note"});
}

TEST(HardwareProfileTest, WrongKindAndBadJsonAreRefused) {
  ExpectRefused(ParsePcieProfile(ValidNvme().dump(), "x.json").status(), "x.json", {"field kind: expected \"pcie\""});
  ExpectRefused(ParseNvmeProfile("{\"kind\": \"nvme\",", "x.json").status(), "x.json", {"not valid JSON", "line 1"});
  ExpectRefused(ParseNvmeProfile("[1, 2]", "x.json").status(), "x.json", {"expected a JSON object"});
}

TEST(HardwareProfileTest, PcieGenerationZeroMeansNoLink) {
  auto figure = [](uint64_t value) {
    return Json{{"value", value}, {"basis", "assumed"}, {"source", "definition"}, {"note", "no link"}};
  };
  Json doc{{"kind", "pcie"},           {"id", "nolink"},           {"name", "No link"},
           {"generation", figure(0)},  {"lanes", figure(0)},       {"pinned_bytes_per_s", figure(0)},
           {"pageable_bytes_per_s", figure(0)}, {"per_copy_ns", figure(0)}, {"copy_engines", figure(1)}};
  ASSERT_TRUE(ParsePcieProfile(doc.dump(), "p.json").ok());
  // A measured host memcpy (calibrate's): one rate for pinned and pageable.
  doc["pinned_bytes_per_s"] = figure(1000);
  ExpectRefused(ParsePcieProfile(doc.dump(), "p.json").status(), "p.json",
                {"field pageable_bytes_per_s.value: expected 1000 (generation 0: a host memcpy has one rate)"});
  doc["pageable_bytes_per_s"] = figure(1000);
  doc["per_copy_ns"] = figure(500);
  ASSERT_TRUE(ParsePcieProfile(doc.dump(), "p.json").ok());
  doc["pinned_bytes_per_s"] = figure(0);
  doc["pageable_bytes_per_s"] = figure(0);
  ExpectRefused(ParsePcieProfile(doc.dump(), "p.json").status(), "p.json",
                {"field per_copy_ns.value: expected 0 (generation 0 without a host copy rate is free)"});
  doc["lanes"] = figure(4);
  ExpectRefused(ParsePcieProfile(doc.dump(), "p.json").status(), "p.json",
                {"field lanes.value: expected 0 (generation 0 is no link)"});
  doc["lanes"] = figure(0);
  doc["generation"] = figure(4);
  ExpectRefused(ParsePcieProfile(doc.dump(), "p.json").status(), "p.json", {"field lanes.value", "from 1 to 32"});
}

TEST(HardwareProfileTest, ComputePeakFlopsAreCheckedPerDtype) {
  Json doc = Json::parse(R"({"kind": "compute", "id": "npu", "name": "An NPU", "compute_kind": "gpu",
    "peak_flops_per_s": {"int4": {"value": 1, "basis": "spec", "source": "s"}},
    "memory_bytes_per_s": {"value": 1, "basis": "spec", "source": "s"},
    "launch_ns": {"value": 0, "basis": "spec", "source": "s"},
    "memory_bytes": {"value": 0, "basis": "spec", "source": "s"}})");
  ExpectRefused(ParseComputeProfile(doc.dump(), "c.json").status(), "c.json", {"unknown field peak_flops_per_s.int4"});
  doc["peak_flops_per_s"] = Json::object();
  ExpectRefused(ParseComputeProfile(doc.dump(), "c.json").status(), "c.json", {"field peak_flops_per_s"});
  doc["peak_flops_per_s"] = {{"int8", {{"value", 0}, {"basis", "spec"}, {"source", "s"}}}};
  ExpectRefused(ParseComputeProfile(doc.dump(), "c.json").status(), "c.json",
                {"field peak_flops_per_s.int8.value: expected a positive integer"});
  doc["peak_flops_per_s"]["int8"]["value"] = 5;
  auto parsed = ParseComputeProfile(doc.dump(), "c.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->peak_flops_per_s.at("int8"), 5u);
  EXPECT_EQ(parsed->figures[0].field, "peak_flops_per_s.int8");
}

class HardwareProfileFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("colibri-profiles-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const Json& doc) const {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << doc.dump(2);
    return path;
  }
  static Json Machine(const std::string& nvme) {
    return Json{{"kind", "machine"}, {"name", "my-box"}, {"description", "mine"},
                {"nvme", nvme},      {"pcie", "none"},   {"compute", "cpu-local"}};
  }
  std::filesystem::path dir_;
};

TEST_F(HardwareProfileFileTest, UserFilesAddComponentsAndMachinesInAnyOrder) {
  HardwareCatalog catalog = BuiltInOrDie();
  const std::string machine = Write("box.json", Machine("test-drive"));
  const std::string drive = Write("drive.json", ValidNvme());
  ASSERT_TRUE(catalog.AddFiles({machine, drive}).ok());
  auto resolved = catalog.Resolve("my-box");
  ASSERT_TRUE(resolved.ok()) << resolved.status().message();
  EXPECT_EQ(resolved->nvme.channels, 8u);
  EXPECT_EQ(catalog.Component("test-drive")->origin, drive);
}

TEST_F(HardwareProfileFileTest, MachineWithUnknownComponentIsRefused) {
  HardwareCatalog catalog = BuiltInOrDie();
  const std::string path = Write("box.json", Machine("floppy"));
  ExpectRefused(catalog.AddFile(path), path, {"field nvme: unknown nvme profile 'floppy'", "optane-p5800x"});
}

TEST_F(HardwareProfileFileTest, DuplicateIdsAndMissingFilesAreRefused) {
  HardwareCatalog catalog = BuiltInOrDie();
  Json doc = ValidNvme();
  doc["id"] = "optane-p5800x";
  const std::string path = Write("dup.json", doc);
  ExpectRefused(catalog.AddFile(path), path, {"already defined by sim/profiles/nvme/optane-p5800x.json"});
  doc["id"] = "h100-sxm";  // ids are unique across component kinds
  ExpectRefused(catalog.AddFile(Write("dup2.json", doc)), (dir_ / "dup2.json").string(), {"already defined"});
  const Status missing = catalog.AddFile((dir_ / "absent.json").string());
  EXPECT_EQ(missing.code(), StatusCode::kNotFound) << missing.message();
  doc = ValidNvme();
  doc["kind"] = "disk";
  ExpectRefused(catalog.AddFile(Write("kind.json", doc)), (dir_ / "kind.json").string(),
                {"field kind: expected nvme, pcie, compute or machine"});
}

TEST(HardwareProfileTest, ParametersOfListsEveryFieldWithItsFigure) {
  const HardwareCatalog catalog = BuiltInOrDie();
  const std::vector<Parameter> nvme = ParametersOf(*catalog.Nvme("optane-p5800x").value());
  ASSERT_EQ(nvme.size(), 7u);
  EXPECT_EQ(nvme[0].field, "channels");
  EXPECT_EQ(nvme[6].field, "read_latency_p99_ns");
  EXPECT_EQ(ParametersOf(*catalog.Pcie("pcie-gen5-x16").value()).size(), 6u);
  const std::vector<Parameter> compute = ParametersOf(*catalog.Compute("a100-40gb-sxm").value());
  ASSERT_EQ(compute.size(), 7u);  // four dtypes, bandwidth, launch, capacity
  EXPECT_EQ(compute[0].field, "peak_flops_per_s.fp32");
  EXPECT_EQ(compute[0].figure.basis, Basis::kSpec);
}

}  // namespace
}  // namespace colibri::sim
