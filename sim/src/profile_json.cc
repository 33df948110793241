#include "colibri/sim/profile_json.h"

#include <utility>
#include <vector>

#include "colibri/sim/profiles.h"
#include "profile_reader.h"
#include "profile_tables.h"

namespace colibri::sim {
namespace {

using profile_internal::Json;

// {"value", "basis", "source", "note"} of each parameter, at its field path
// (a "." in the field nests: peak_flops_per_s.bf16).
Status AddParameters(const std::string& what, const std::vector<Parameter>& parameters, Json* doc) {
  for (const Parameter& p : parameters) {
    if (p.figure.source.empty()) {
      return Status::InvalidArgument(what + ": parameter " + p.field + " has no figure with a source");
    }
    Json figure{{"value", p.value}};
    profile_internal::AddProvenance(p.figure, &figure);
    const size_t dot = p.field.find('.');
    if (dot == std::string::npos) {
      (*doc)[p.field] = std::move(figure);
    } else {
      (*doc)[p.field.substr(0, dot)][p.field.substr(dot + 1)] = std::move(figure);
    }
  }
  return Status::Ok();
}

Json Header(const char* kind, const std::string& id, const std::string& name) {
  return Json{{"kind", kind}, {"id", id}, {"name", name}};
}

std::string Text(const Json& doc) { return doc.dump(2) + "\n"; }

}  // namespace

Result<std::string> NvmeProfileJson(const NvmeProfile& profile) {
  Json doc = Header("nvme", profile.id, profile.name);
  COLIBRI_RETURN_IF_ERROR(AddParameters("nvme profile '" + profile.id + "'", ParametersOf(profile), &doc));
  if (!profile.read_grid.empty()) doc["read_grid"] = profile_internal::ReadGridJson(profile.read_grid);
  return Text(doc);
}

Result<std::string> PcieProfileJson(const PcieProfile& profile) {
  Json doc = Header("pcie", profile.id, profile.name);
  COLIBRI_RETURN_IF_ERROR(AddParameters("pcie profile '" + profile.id + "'", ParametersOf(profile), &doc));
  return Text(doc);
}

Result<std::string> ComputeProfileJson(const ComputeProfile& profile) {
  Json doc = Header("compute", profile.id, profile.name);
  doc["compute_kind"] = profile.kind == ComputeKind::kGpu ? "gpu" : "cpu";
  COLIBRI_RETURN_IF_ERROR(AddParameters("compute profile '" + profile.id + "'", ParametersOf(profile), &doc));
  if (!profile.ffn_table.empty()) doc["ffn_table"] = profile_internal::KernelTableJson(profile.ffn_table, false);
  if (!profile.gate_table.empty()) doc["gate_table"] = profile_internal::KernelTableJson(profile.gate_table, true);
  return Text(doc);
}

Result<std::string> MachineProfileJson(const MachineProfile& profile) {
  Json doc{{"kind", "machine"},        {"name", profile.name}, {"description", profile.description},
           {"nvme", profile.nvme},     {"pcie", profile.pcie}, {"compute", profile.compute}};
  if (!profile.host_work.empty()) doc["host_work"] = profile_internal::HostWorkJson(profile.host_work);
  COLIBRI_RETURN_IF_ERROR(
      AddParameters("machine '" + profile.name + "'", ParametersOf(profile.host_memory), &doc));
  if (!profile.identity.empty()) doc["identity"] = profile_internal::MachineIdentityJson(profile.identity);
  return Text(doc);
}

}  // namespace colibri::sim
