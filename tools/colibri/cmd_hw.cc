// `colibri hw list|show`: the hardware profiles of the modelled machines
// (docs/HARDWARE_PROFILES.md), built in or added with --hw-file.
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include <utility>

#include "cli_common.h"
#include "colibri/sim/profiles.h"
#include "commands.h"

namespace colibri::cli {
namespace {

struct HwFlags {
  std::vector<std::string> hw_files;
  std::string name;
  bool json = false;
};

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

Result<sim::HardwareCatalog> LoadCatalog(const std::vector<std::string>& hw_files) {
  COLIBRI_ASSIGN_OR_RETURN(sim::HardwareCatalog catalog, sim::HardwareCatalog::BuiltIn());
  COLIBRI_RETURN_IF_ERROR(catalog.AddFiles(hw_files));
  return catalog;
}

// Parameters as {field: {value, basis[, source, note]}}; `full` adds the source and note.
Json ParametersJson(const std::vector<sim::Parameter>& list, bool full) {
  Json parameters = Json::object();
  for (const sim::Parameter& p : list) {
    Json figure{{"value", p.value}, {"basis", sim::BasisName(p.figure.basis)}};
    if (full) {
      figure["source"] = p.figure.source;
      figure["note"] = p.figure.note;
    }
    parameters[p.field] = figure;
  }
  return parameters;
}

// A component as JSON; `full` adds each figure's source and note.
Json ComponentJson(const sim::ComponentInfo& info, bool full) {
  const Json parameters = ParametersJson(info.parameters, full);
  Json out{{"id", info.id}, {"kind", sim::ComponentKindName(info.kind)}, {"name", info.name}, {"origin", info.origin}};
  if (!info.compute_kind.empty()) out["compute_kind"] = info.compute_kind;
  out["parameters"] = parameters;
  return out;
}

Result<Json> MachineJson(const sim::HardwareCatalog& catalog, const std::string& name) {
  COLIBRI_ASSIGN_OR_RETURN(const sim::MachineProfile* m, catalog.Machine(name));
  COLIBRI_ASSIGN_OR_RETURN(std::string origin, catalog.MachineOrigin(name));
  Json out{{"name", m->name}, {"description", m->description}, {"origin", origin},
           {"nvme", m->nvme},  {"pcie", m->pcie},               {"compute", m->compute}};
  if (m->host_memory.present) out["host_memory"] = ParametersJson(sim::ParametersOf(m->host_memory), true);
  return out;
}

Result<Json> HwList(const HwFlags& flags) {
  COLIBRI_ASSIGN_OR_RETURN(sim::HardwareCatalog catalog, LoadCatalog(flags.hw_files));
  Json machines = Json::array();
  for (const std::string& name : catalog.MachineNames()) {
    COLIBRI_ASSIGN_OR_RETURN(Json machine, MachineJson(catalog, name));
    machines.push_back(std::move(machine));
  }
  Json components = Json::array();
  for (const sim::ComponentInfo& info : catalog.Components()) components.push_back(ComponentJson(info, false));
  return Json{{"machines", machines}, {"components", components}};
}

// A machine with its three components in full, or one component by id.
Result<Json> HwShow(const HwFlags& flags) {
  COLIBRI_ASSIGN_OR_RETURN(sim::HardwareCatalog catalog, LoadCatalog(flags.hw_files));
  if (catalog.Machine(flags.name).ok()) {
    COLIBRI_ASSIGN_OR_RETURN(Json machine, MachineJson(catalog, flags.name));
    Json out{{"kind", "machine"}};
    for (const auto& [key, value] : machine.items()) {
      if (key == "nvme" || key == "pcie" || key == "compute") {
        COLIBRI_ASSIGN_OR_RETURN(sim::ComponentInfo info, catalog.Component(key + "/" + value.get<std::string>()));
        out[key] = ComponentJson(info, true);
      } else {
        out[key] = value;
      }
    }
    return out;
  }
  auto component = catalog.Component(flags.name);
  if (component.ok()) return ComponentJson(component.value(), true);
  std::vector<std::string> ids;
  for (const sim::ComponentInfo& info : catalog.Components()) ids.push_back(info.id);
  return Status::NotFound("unknown machine or component '" + flags.name + "' (machines: " +
                          Join(catalog.MachineNames()) + "; components: " + Join(ids) + "; write nvme/ID, pcie/ID or compute/ID for a component "
                          "whose id is also a machine's name)");
}

// ---- Human output

// A parameter's value in its unit, from the field name's suffix.
std::string FormatValue(const std::string& field, uint64_t value) {
  char text[64];
  const double v = static_cast<double>(value);
  if (field.ends_with("_bytes_per_s")) {
    if (v >= 1e12) std::snprintf(text, sizeof(text), "%.2f TB/s", v / 1e12);
    else if (v >= 1e9) std::snprintf(text, sizeof(text), "%.2f GB/s", v / 1e9);
    else std::snprintf(text, sizeof(text), "%.0f MB/s", v / 1e6);
  } else if (field.starts_with("peak_flops_per_s.")) {
    std::snprintf(text, sizeof(text), v >= 1e12 ? "%.1f TFLOP/s" : "%.0f GFLOP/s", v >= 1e12 ? v / 1e12 : v / 1e9);
  } else if (field.ends_with("_ns")) {
    if (v >= 1e6) std::snprintf(text, sizeof(text), "%.2f ms", v / 1e6);
    else if (v >= 1e3) std::snprintf(text, sizeof(text), "%.1f us", v / 1e3);
    else std::snprintf(text, sizeof(text), "%" PRIu64 " ns", value);
  } else if (field == "memory_bytes") {
    if (value == 0) return "unknown";
    std::snprintf(text, sizeof(text), "%.1f GiB", v / 1073741824.0);
  } else if (field.ends_with("_bytes")) {
    if (v >= 1073741824.0) std::snprintf(text, sizeof(text), "%.2f GiB", v / 1073741824.0);
    else std::snprintf(text, sizeof(text), "%.0f KiB", v / 1024.0);
  } else {
    std::snprintf(text, sizeof(text), "%" PRIu64, value);
  }
  return text;
}

// "7.20 GB/s [a]": the value and its basis's initial.
std::string Short(const std::string& field, const Json& figure) {
  return FormatValue(field, figure["value"].get<uint64_t>()) + " [" + figure["basis"].get<std::string>().substr(0, 1) +
         "]";
}

void PrintListHuman(const Json& doc) {
  std::printf("machines:\n  %-22s %-15s %-15s %-15s %s\n", "NAME", "NVME", "PCIE", "COMPUTE", "DESCRIPTION");
  for (const Json& m : doc["machines"]) {
    std::printf("  %-22s %-15s %-15s %-15s %s\n", m["name"].get<std::string>().c_str(),
                m["nvme"].get<std::string>().c_str(), m["pcie"].get<std::string>().c_str(),
                m["compute"].get<std::string>().c_str(), m["description"].get<std::string>().c_str());
  }
  // The figures worth a column, with short labels.
  static const std::map<std::string, std::vector<std::pair<std::string, std::string>>> kKeyFields = {
      {"nvme", {{"read_bytes_per_s", "read"}, {"channels", "ch"}, {"read_latency_p50_ns", "p50"}}},
      {"pcie", {{"pinned_bytes_per_s", "pinned"}, {"per_copy_ns", "per copy"}}},
      {"compute", {{"peak_flops_per_s.bf16", "bf16"}, {"peak_flops_per_s.fp32", "fp32"}, {"memory_bytes_per_s", "mem"}}}};
  std::printf("\ncomponents (basis: [s]pec, [m]easured, [d]erived, [a]ssumed; hw show ID for all figures):\n");
  std::printf("  %-8s %-15s %-62s %s\n", "KIND", "ID", "KEY FIGURES", "NAME");
  for (const Json& c : doc["components"]) {
    std::string figures;
    for (const auto& [field, label] : kKeyFields.at(c["kind"].get<std::string>())) {
      if (!c["parameters"].contains(field)) continue;
      figures += (figures.empty() ? "" : ", ") + label + " " + Short(field, c["parameters"][field]);
    }
    std::printf("  %-8s %-15s %-62s %s\n", c["kind"].get<std::string>().c_str(), c["id"].get<std::string>().c_str(),
                figures.c_str(), c["name"].get<std::string>().c_str());
  }
}

// Each figure of `parameters` (ParametersJson, full): value, basis, source, note.
void PrintParametersHuman(const Json& parameters) {
  for (const auto& [field, figure] : parameters.items()) {
    std::printf("  %-26s %-16s %s\n", field.c_str(), FormatValue(field, figure["value"].get<uint64_t>()).c_str(),
                figure["basis"].get<std::string>().c_str());
    std::printf("      source: %s\n", figure["source"].get<std::string>().c_str());
    if (!figure["note"].get<std::string>().empty()) {
      std::printf("      note: %s\n", figure["note"].get<std::string>().c_str());
    }
  }
}

void PrintComponentHuman(const Json& c) {
  std::printf("%s %s: %s\n  file: %s\n", c["kind"].get<std::string>().c_str(), c["id"].get<std::string>().c_str(),
              c["name"].get<std::string>().c_str(), c["origin"].get<std::string>().c_str());
  if (c.contains("compute_kind")) std::printf("  compute_kind: %s\n", c["compute_kind"].get<std::string>().c_str());
  PrintParametersHuman(c["parameters"]);
}

void PrintShowHuman(const Json& doc) {
  if (doc["kind"] != "machine") return PrintComponentHuman(doc);
  std::printf("machine %s: %s\n  file: %s\n", doc["name"].get<std::string>().c_str(),
              doc["description"].get<std::string>().c_str(), doc["origin"].get<std::string>().c_str());
  if (doc.contains("host_memory")) {
    std::printf("  host memory (docs/HARDWARE_PROFILES.md, \"Host memory\"):\n");
    PrintParametersHuman(doc["host_memory"]);
  }
  for (const char* part : {"nvme", "pcie", "compute"}) {
    std::printf("\n");
    PrintComponentHuman(doc[part]);
  }
}

void AddHwFileFlag(CLI::App* cmd, HwFlags* flags) {
  cmd->add_option("--hw-file", flags->hw_files,
                  "A hardware profile file to add to the built-in ones (repeatable; see docs/HARDWARE_PROFILES.md)")
      ->allow_extra_args(false);
  cmd->add_flag("--json", flags->json, "Print the result as JSON on stdout");
}

}  // namespace

void AddHwCommand(CLI::App* app, int* exit_code) {
  CLI::App* hw = app->add_subcommand("hw", "List and show the hardware profiles of modelled machines");
  hw->require_subcommand(1);

  auto list_flags = std::make_shared<HwFlags>();
  CLI::App* list = hw->add_subcommand("list", "Machines and components, with each figure's basis");
  AddHwFileFlag(list, list_flags.get());
  list->callback([list_flags, exit_code] { *exit_code = Emit(HwList(*list_flags), list_flags->json, &PrintListHuman); });

  auto show_flags = std::make_shared<HwFlags>();
  CLI::App* show = hw->add_subcommand("show", "One machine with its components, or one component: every figure's "
                                              "value, basis, source and note");
  show->add_option("name", show_flags->name, "A machine name or a component id (nvme/ID, pcie/ID, compute/ID)")
      ->required();
  AddHwFileFlag(show, show_flags.get());
  show->callback([show_flags, exit_code] { *exit_code = Emit(HwShow(*show_flags), show_flags->json, &PrintShowHuman); });
}

}  // namespace colibri::cli
