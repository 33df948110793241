// The --faults flag of `colibri replay` and `colibri run` (a fault spec,
// sim/fault_spec.h, seeded by the command's --seed) and the faults object of
// their results: {spec, injected, by_kind} and the line the text output
// prints. Errors: a malformed spec, named by --faults and its byte offset.
#pragma once

#include <string>
#include <vector>

#include "cli_common.h"
#include "colibri/sim/fault_injection.h"
#include "colibri/sim/fault_spec.h"

namespace colibri::cli {

// Adds --faults (default "none") and --read-retries (0..16, default 2:
// engine::EngineOptions::read_retries) to `command`.
void AddFaultsFlag(CLI::App* command, std::string* spec, uint32_t* read_retries);
Result<sim::FaultSpec> ParseFaultsFlag(const std::string& spec);
// {spec, injected, by_kind}: the count per kind, every kind, in the spec's order.
Json FaultsJson(const sim::FaultSpec& spec, const std::vector<sim::InjectedFault>& faults);
// "faults (SPEC): N injected: KIND n, ..., R reads retried" for a result with a spec; nothing for "none".
void PrintFaultsLine(const Json& faults, uint64_t read_retries);

}  // namespace colibri::cli
