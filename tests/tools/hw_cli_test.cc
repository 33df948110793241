// `colibri hw list|show` run as a process: the built-in machines and
// components, user files, and exit code 2 for unknown names and bad files.
#include <gtest/gtest.h>

#include <map>

#include "cli_test_util.h"

namespace colibri::cli {
namespace {

using Json = nlohmann::json;
using cli_testing::Outcome;
using traces::testing::TempDir;
using traces::testing::WriteFileBytes;

class HwCliTest : public ::testing::Test {
 protected:
  Outcome Colibri(const std::string& args) const { return cli_testing::RunColibri(args, dir_.path()); }
  TempDir dir_;
};

TEST_F(HwCliTest, ListHasTheRequiredMachinesWithTheirComponentIds) {
  const Outcome run = Colibri("hw list --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json doc = run.json();
  const std::map<std::string, std::vector<std::string>> expected = {
      {"h100-p5800x-gen5", {"optane-p5800x", "pcie-gen5-x16", "h100-sxm"}},
      {"h200-p5800x-gen5", {"optane-p5800x", "pcie-gen5-x16", "h200-sxm"}},
      {"a100-pm9a3-gen4", {"samsung-pm9a3", "pcie-gen4-x16", "a100-40gb-sxm"}},
      {"rtx4090-990pro-gen4", {"samsung-990pro", "pcie-gen4-x16", "rtx4090"}},
      {"a100-sata-gen3", {"sata-870evo", "pcie-gen3-x16", "a100-40gb-sxm"}},
      {"cpu-local", {"local-virtio", "none", "cpu-local"}},
      {"phone-bigmoe", {"phone-ufs-warm", "none", "phone-soc"}}};
  std::map<std::string, Json> machines;
  for (const Json& m : doc["machines"]) machines[m["name"].get<std::string>()] = m;
  for (const auto& [name, parts] : expected) {
    ASSERT_TRUE(machines.count(name)) << name;
    const Json& m = machines[name];
    EXPECT_EQ(m["nvme"], parts[0]) << name;
    EXPECT_EQ(m["pcie"], parts[1]) << name;
    EXPECT_EQ(m["compute"], parts[2]) << name;
    EXPECT_FALSE(m["description"].get<std::string>().empty());
  }
  std::map<std::string, std::string> kinds;
  for (const Json& c : doc["components"]) {
    kinds[c["id"].get<std::string>()] = c["kind"].get<std::string>();
    ASSERT_FALSE(c["parameters"].empty()) << c.dump();
    for (const auto& [field, figure] : c["parameters"].items()) {
      EXPECT_TRUE(figure.contains("value") && figure.contains("basis")) << field;
    }
  }
  EXPECT_EQ(kinds["phone-ufs"], "nvme");
  EXPECT_EQ(kinds["none"], "pcie");
  EXPECT_EQ(kinds["h200-sxm"], "compute");

  const Outcome human = Colibri("hw list");
  ASSERT_EQ(human.exit_code, 0) << human.err;
  EXPECT_NE(human.out.find("h100-p5800x-gen5"), std::string::npos);
  EXPECT_NE(human.out.find("optane-p5800x"), std::string::npos);
}

TEST_F(HwCliTest, ShowMachinePrintsItsComponentsWithEveryFigure) {
  const Outcome run = Colibri("hw show h100-p5800x-gen5 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json doc = run.json();
  EXPECT_EQ(doc["kind"], "machine");
  EXPECT_EQ(doc["name"], "h100-p5800x-gen5");
  EXPECT_EQ(doc["nvme"]["id"], "optane-p5800x");
  EXPECT_EQ(doc["pcie"]["id"], "pcie-gen5-x16");
  EXPECT_EQ(doc["compute"]["id"], "h100-sxm");
  const Json& figure = doc["nvme"]["parameters"]["read_bytes_per_s"];
  for (const char* key : {"value", "basis", "source", "note"}) EXPECT_TRUE(figure.contains(key)) << key;
  EXPECT_EQ(doc["compute"]["parameters"]["peak_flops_per_s.bf16"]["basis"], "spec");

  const Outcome human = Colibri("hw show h100-p5800x-gen5");
  ASSERT_EQ(human.exit_code, 0) << human.err;
  EXPECT_NE(human.out.find("source: ../shared/design/HARDWARE.md"), std::string::npos) << human.out;
}

TEST_F(HwCliTest, ShowMachinePrintsItsHostMemory) {
  const Outcome run = Colibri("hw show phone-bigmoe --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json doc = run.json();
  const Json& available = doc["host_memory"]["host_memory.available_bytes"];
  EXPECT_EQ(available["value"], 6628042752u);
  EXPECT_EQ(available["basis"], "derived");
  EXPECT_NE(available["source"].get<std::string>().find("qwen.state"), std::string::npos);
  EXPECT_FALSE(Colibri("hw show h100-p5800x-gen5 --json").json().contains("host_memory"));
  const Outcome human = Colibri("hw show phone-bigmoe");
  ASSERT_EQ(human.exit_code, 0) << human.err;
  EXPECT_NE(human.out.find("host_memory.fault_read_bytes"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("128 KiB"), std::string::npos) << human.out;
}

TEST_F(HwCliTest, ShowComponentByIdOrQualifiedId) {
  const Outcome ufs = Colibri("hw show phone-ufs --json");
  ASSERT_EQ(ufs.exit_code, 0) << ufs.err;
  EXPECT_EQ(ufs.json()["kind"], "nvme");
  EXPECT_EQ(ufs.json()["parameters"]["read_bytes_per_s"]["basis"], "measured");
  // cpu-local is both a machine and a compute id: the machine wins unless qualified.
  EXPECT_EQ(Colibri("hw show cpu-local --json").json()["kind"], "machine");
  const Outcome cpu = Colibri("hw show compute/cpu-local --json");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  EXPECT_EQ(cpu.json()["compute_kind"], "cpu");
  EXPECT_EQ(Colibri("hw show pcie-gen4-x16").exit_code, 0);
}

TEST_F(HwCliTest, UnknownNameExitsTwoListingTheValidNames) {
  const Outcome run = Colibri("hw show cray-1 --json");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(run.out.empty()) << run.out;
  EXPECT_NE(run.err.find("unknown machine or component 'cray-1'"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("a100-pm9a3-gen4"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("samsung-990pro"), std::string::npos) << run.err;
  EXPECT_EQ(Colibri("hw show").exit_code, 2);
  EXPECT_EQ(Colibri("hw").exit_code, 2);
}

TEST_F(HwCliTest, HwFileAddsUserProfilesAndBadFilesExitTwo) {
  const std::string machine = dir_.File("box.json");
  WriteFileBytes(machine, R"({"kind": "machine", "name": "my-box", "description": "a 990 PRO behind an H200",
    "nvme": "samsung-990pro", "pcie": "pcie-gen5-x16", "compute": "h200-sxm"})");
  const Outcome run = Colibri("hw show --hw-file " + machine + " my-box --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.json()["origin"], machine);
  EXPECT_EQ(run.json()["nvme"]["id"], "samsung-990pro");
  const Outcome listed = Colibri("hw list --json --hw-file " + machine);
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_EQ(listed.json()["machines"].size(), 8u);

  const std::string bad = dir_.File("bad.json");
  WriteFileBytes(bad, R"({"kind": "machine", "name": "bad-box", "description": "d",
    "nvme": "floppy", "pcie": "none", "compute": "cpu-local"})");
  const Outcome refused = Colibri("hw list --hw-file " + bad);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find(bad + ": field nvme: unknown nvme profile 'floppy'"), std::string::npos) << refused.err;
  EXPECT_EQ(Colibri("hw list --hw-file " + dir_.File("absent.json")).exit_code, 2);
}

}  // namespace
}  // namespace colibri::cli
