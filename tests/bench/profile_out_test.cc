// The `--profile-out` writer of the GPU benchmarks (profile_out.h), without
// a GPU: measured numbers in, profile files out that parse with the sim's
// parsers, carry the measured values and provenance, and resolve as a
// machine in the catalog together with the built-in NVMe drive.
#include "colibri/bench/profile_out.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "../traces/test_util.h"

namespace colibri::bench {
namespace {

sim::HardwareCatalog BuiltIn() {
  auto catalog = sim::HardwareCatalog::BuiltIn();
  EXPECT_TRUE(catalog.ok()) << catalog.status().message();
  return std::move(catalog).value();
}

ProfileRun H200Run() {
  return ProfileRun{"colibri bench pcie --json --profile-out out/profiles", "2026-12-01T10:00:00Z", "NVIDIA H200", 0,
                    "00000000:19:00.0"};
}

MeasuredPcie SamplePcie() {
  MeasuredPcie m;
  m.run = H200Run();
  m.rate_size_bytes = 42ull << 20;
  m.pinned_bytes_per_s = 53'000'000'000;
  m.pageable_bytes_per_s = 21'000'000'000;
  m.memcpy_pinned_bytes_per_s = 54'000'000'000;
  m.sizes_bytes = {2621440, 9ull << 20, 21ull << 20, 42ull << 20};
  m.per_copy_ns = 9000;
  m.memcpy_small_copy_ns = 7000;
  m.copy_streams = 2;
  m.in_flight = 8;
  m.async_engine_count = 3;
  m.generation = 5;
  m.lanes = 16;
  m.current_generation = 1;
  m.current_lanes = 16;
  return m;
}

MeasuredCompute SampleCompute() {
  MeasuredCompute m;
  m.run = H200Run();
  m.run.command = "colibri bench compute --compute cuda --json --profile-out out/profiles";
  m.hidden = 2048;
  m.intermediate = 768;
  m.batches = "1,8,64,256";
  m.peaks = {{"fp32", 4'000'000'000'000, 256}, {"bf16", 3'500'000'000'000, 256}, {"int8", 3'000'000'000'000, 64}};
  m.memory_bytes_per_s = 4'000'000'000'000;
  m.device_copy_bytes = 256ull << 20;
  m.memory_bytes = 150'000'000'000;
  return m;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

const sim::Figure* FigureOf(const std::vector<sim::Figure>& figures, const std::string& field) {
  for (const sim::Figure& f : figures) {
    if (f.field == field) return &f;
  }
  return nullptr;
}

TEST(HwProfileOutTest, NamesFromTheDeviceName) {
  EXPECT_EQ(DeviceSlug("NVIDIA H200"), "h200");
  EXPECT_EQ(DeviceSlug("NVIDIA H100 80GB HBM3"), "h100-80gb-hbm3");
  EXPECT_EQ(DeviceSlug("NVIDIA GeForce RTX 4090"), "geforce-rtx-4090");
  EXPECT_EQ(DeviceSlug("  "), "gpu");
  EXPECT_EQ(MeasuredPcieId("NVIDIA H200"), "measured-h200-pcie");
  EXPECT_EQ(MeasuredComputeId("NVIDIA H200"), "measured-h200-compute");
  EXPECT_EQ(MeasuredMachineName("NVIDIA H200"), "measured-h200");
  EXPECT_EQ(MeasuredMachineName("NVIDIA H200 NVL"), "measured-h200");
  EXPECT_EQ(MeasuredMachineName("NVIDIA A100-SXM4-40GB"), "measured-a100-sxm4-40gb");
  EXPECT_EQ(ClosestBuiltInMachine("NVIDIA H200"), "h200-p5800x-gen5");
  EXPECT_EQ(ClosestBuiltInMachine("NVIDIA A100-SXM4-40GB"), "a100-pm9a3-gen4");
  EXPECT_EQ(ClosestBuiltInMachine("Some Future GPU"), "h200-p5800x-gen5");
}

TEST(HwProfileOutTest, PcieProfileParsesWithTheMeasuredFigures) {
  const sim::HardwareCatalog catalog = BuiltIn();
  auto doc = PcieProfileJson(SamplePcie(), catalog);
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  auto parsed = sim::ParsePcieProfile(doc.value().dump(2), "pcie.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const sim::PcieProfile& p = parsed.value();
  EXPECT_EQ(p.id, "measured-h200-pcie");
  EXPECT_EQ(p.generation, 5u);
  EXPECT_EQ(p.lanes, 16u);
  EXPECT_EQ(p.pinned_bytes_per_s, 53'000'000'000u);
  EXPECT_EQ(p.pageable_bytes_per_s, 21'000'000'000u);
  EXPECT_EQ(p.per_copy_ns, 9000);
  EXPECT_EQ(p.copy_engines, 1u);  // the aggregate rate of all streams: one engine (see the note)
  for (const char* field : {"generation", "lanes", "pinned_bytes_per_s", "pageable_bytes_per_s", "per_copy_ns"}) {
    const sim::Figure* figure = FigureOf(p.figures, field);
    ASSERT_NE(figure, nullptr) << field;
    EXPECT_EQ(figure->basis, sim::Basis::kMeasured) << field;
    EXPECT_NE(figure->source.find("colibri bench pcie --json --profile-out out/profiles"), std::string::npos) << field;
    EXPECT_NE(figure->source.find("2026-12-01T10:00:00Z"), std::string::npos) << field;
    EXPECT_NE(figure->source.find("NVIDIA H200"), std::string::npos) << field;
  }
  EXPECT_NE(FigureOf(p.figures, "pinned_bytes_per_s")->note.find("42 MiB"), std::string::npos);
  const sim::Figure* engines = FigureOf(p.figures, "copy_engines");
  ASSERT_NE(engines, nullptr);
  EXPECT_EQ(engines->basis, sim::Basis::kDerived);
  EXPECT_NE(engines->note.find("asyncEngineCount = 3"), std::string::npos);
}

TEST(HwProfileOutTest, WithoutNvmlTheLinkIsAssumedFromTheClosestBuiltIn) {
  MeasuredPcie m = SamplePcie();
  m.generation.reset();
  m.lanes.reset();
  auto doc = PcieProfileJson(m, BuiltIn());
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  auto parsed = sim::ParsePcieProfile(doc.value().dump(), "pcie.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed.value().generation, 5u);  // pcie-gen5-x16 of h200-p5800x-gen5
  EXPECT_EQ(parsed.value().lanes, 16u);
  const sim::Figure* generation = FigureOf(parsed.value().figures, "generation");
  ASSERT_NE(generation, nullptr);
  EXPECT_EQ(generation->basis, sim::Basis::kAssumed);
  EXPECT_NE(generation->note.find("NVML"), std::string::npos);
}

TEST(HwProfileOutTest, ZeroRatesAreRefused) {
  MeasuredPcie m = SamplePcie();
  m.pageable_bytes_per_s = 0;
  EXPECT_EQ(PcieProfileJson(m, BuiltIn()).status().code(), StatusCode::kInvalidArgument);
  MeasuredCompute c = SampleCompute();
  c.peaks.clear();
  EXPECT_EQ(ComputeProfileJson(c, BuiltIn()).status().code(), StatusCode::kInvalidArgument);
}

TEST(HwProfileOutTest, ComputeProfileMeasuresPeaksAndCopiesTheRest) {
  const sim::HardwareCatalog catalog = BuiltIn();
  auto doc = ComputeProfileJson(SampleCompute(), catalog);
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  auto parsed = sim::ParseComputeProfile(doc.value().dump(2), "compute.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const sim::ComputeProfile& p = parsed.value();
  EXPECT_EQ(p.id, "measured-h200-compute");
  EXPECT_EQ(p.kind, sim::ComputeKind::kGpu);
  EXPECT_EQ(p.peak_flops_per_s.size(), 3u);  // only the dtypes measured
  EXPECT_EQ(p.peak_flops_per_s.at("fp32"), 4'000'000'000'000u);
  EXPECT_EQ(p.peak_flops_per_s.at("int8"), 3'000'000'000'000u);
  EXPECT_EQ(p.memory_bytes_per_s, 4'000'000'000'000u);
  EXPECT_EQ(p.memory_bytes, 150'000'000'000u);
  EXPECT_EQ(FigureOf(p.figures, "peak_flops_per_s.fp32")->basis, sim::Basis::kMeasured);
  EXPECT_NE(FigureOf(p.figures, "peak_flops_per_s.int8")->note.find("batch 64"), std::string::npos);
  // launch_ns is not measured: h200-sxm's figure with its basis and source kept.
  auto h200 = catalog.Compute("h200-sxm");
  ASSERT_TRUE(h200.ok());
  EXPECT_EQ(p.launch_ns, h200.value()->launch_ns);
  const sim::Figure* launch = FigureOf(p.figures, "launch_ns");
  const sim::Figure* original = FigureOf(h200.value()->figures, "launch_ns");
  ASSERT_NE(launch, nullptr);
  ASSERT_NE(original, nullptr);
  EXPECT_EQ(launch->basis, original->basis);
  EXPECT_EQ(launch->source, original->source);
  EXPECT_NE(launch->note.find("h200-sxm"), std::string::npos);

  // Without the measured bandwidth and capacity, those are copied as well.
  MeasuredCompute bare = SampleCompute();
  bare.memory_bytes_per_s.reset();
  bare.memory_bytes = 0;
  auto copied = ComputeProfileJson(bare, catalog);
  ASSERT_TRUE(copied.ok()) << copied.status().message();
  auto reparsed = sim::ParseComputeProfile(copied.value().dump(), "compute.json");
  ASSERT_TRUE(reparsed.ok()) << reparsed.status().message();
  EXPECT_EQ(reparsed.value().memory_bytes_per_s, h200.value()->memory_bytes_per_s);
  EXPECT_EQ(reparsed.value().memory_bytes, h200.value()->memory_bytes);
  EXPECT_EQ(FigureOf(reparsed.value().figures, "memory_bytes_per_s")->basis, sim::Basis::kSpec);
}

TEST(HwProfileOutTest, FilesLoadAsAMachineWithTheBuiltInDrive) {
  traces::testing::TempDir dir;
  const std::string out = dir.File("profiles");
  // bench pcie alone: the machine takes h200-sxm for compute.
  auto pcie_files = WritePcieProfiles(out, SamplePcie());
  ASSERT_TRUE(pcie_files.ok()) << pcie_files.status().message();
  ASSERT_EQ(pcie_files.value().size(), 2u);
  EXPECT_EQ(pcie_files.value()[1], out + "/measured-h200.json");
  {
    sim::HardwareCatalog catalog = BuiltIn();
    ASSERT_TRUE(catalog.AddFiles(pcie_files.value()).ok());
    auto machine = catalog.Resolve("measured-h200");
    ASSERT_TRUE(machine.ok()) << machine.status().message();
    EXPECT_EQ(machine.value().pcie.id, "measured-h200-pcie");
    EXPECT_EQ(machine.value().compute.id, "h200-sxm");
    EXPECT_EQ(machine.value().nvme.id, "optane-p5800x");
  }
  // Then bench compute: the machine file now names both measured parts.
  auto compute_files = WriteComputeProfiles(out, SampleCompute());
  ASSERT_TRUE(compute_files.ok()) << compute_files.status().message();
  auto parsed = sim::ParseMachineProfile(ReadFile(out + "/measured-h200.json"), "measured-h200.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed.value().pcie, "measured-h200-pcie");
  EXPECT_EQ(parsed.value().compute, "measured-h200-compute");
  EXPECT_EQ(parsed.value().nvme, "optane-p5800x");
  sim::HardwareCatalog catalog = BuiltIn();
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(out)) files.push_back(entry.path().string());
  EXPECT_EQ(files.size(), 3u);
  ASSERT_TRUE(catalog.AddFiles(files).ok());
  auto machine = catalog.Resolve("measured-h200");
  ASSERT_TRUE(machine.ok()) << machine.status().message();
  EXPECT_EQ(machine.value().pcie.pinned_bytes_per_s, 53'000'000'000u);
  EXPECT_EQ(machine.value().compute.peak_flops_per_s.at("bf16"), 3'500'000'000'000u);
}

}  // namespace
}  // namespace colibri::bench
