// Hardware profiles written back as profile files (the inverse of
// profiles.h's parsers): what `colibri calibrate` writes, and what a round
// trip test reads back. Every numeric parameter is written with its figure
// (profile.figures, by field name); the measured tables and a machine's
// host work and identity when present. The text is pretty-printed JSON
// ending in a newline.
//
// Errors: InvalidArgument naming the profile and field when a parameter has
// no figure with a source (the parsers would refuse the file).
// Thread-safety: free functions.
#pragma once

#include <string>

#include "colibri/sim/hardware.h"
#include "colibri/status.h"

namespace colibri::sim {

Result<std::string> NvmeProfileJson(const NvmeProfile& profile);
Result<std::string> PcieProfileJson(const PcieProfile& profile);
Result<std::string> ComputeProfileJson(const ComputeProfile& profile);
Result<std::string> MachineProfileJson(const MachineProfile& profile);

}  // namespace colibri::sim
