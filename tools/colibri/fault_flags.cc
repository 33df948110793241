#include "fault_flags.h"

#include <cstdio>

namespace colibri::cli {

void AddFaultsFlag(CLI::App* command, std::string* spec, uint32_t* read_retries) {
  command->add_option("--read-retries", *read_retries,
                      "Times a read that failed transiently (I/O error, block digest mismatch) is read again")
      ->check(CLI::Range(0u, 16u))
      ->capture_default_str();
  command->add_option("--faults", *spec,
                      "Faults to inject, seeded by --seed (docs/RELIABILITY.md), e.g. "
                      "storage.eio=1/500,storage.spike=1/200:5ms")
      ->capture_default_str();
}

Result<sim::FaultSpec> ParseFaultsFlag(const std::string& spec) {
  auto parsed = sim::ParseFaultSpec(spec);
  if (!parsed.ok()) return parsed.status().WithPrefix("--faults");
  return parsed;
}

Json FaultsJson(const sim::FaultSpec& spec, const std::vector<sim::InjectedFault>& faults) {
  Json by_kind = Json::object();
  for (size_t k = 0; k < sim::kFaultKindCount; ++k) by_kind[sim::FaultKindName(static_cast<sim::FaultKind>(k))] = 0;
  for (const sim::InjectedFault& f : faults) by_kind[f.kind] = by_kind[f.kind].get<uint64_t>() + 1;
  return Json{{"spec", sim::FormatFaultSpec(spec)}, {"injected", faults.size()}, {"by_kind", by_kind}};
}

void PrintFaultsLine(const Json& faults, uint64_t read_retries) {
  if (faults["spec"] == "none") return;
  std::string kinds;
  for (const auto& [kind, count] : faults["by_kind"].items()) {
    if (count.get<uint64_t>() > 0) kinds += (kinds.empty() ? "" : ", ") + kind + " " + std::to_string(count.get<uint64_t>());
  }
  std::printf("faults (%s): %llu injected%s%s, %llu reads retried\n", faults["spec"].get<std::string>().c_str(),
              static_cast<unsigned long long>(faults["injected"].get<uint64_t>()), kinds.empty() ? "" : ": ",
              kinds.c_str(), static_cast<unsigned long long>(read_retries));
}

}  // namespace colibri::cli
