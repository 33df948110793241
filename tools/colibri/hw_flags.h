// The backend selection flags shared by `colibri run` and `colibri replay`:
// --transfer, --compute (cpu, cuda, auto; replay adds its modelled "sim"),
// --cuda-device and --copy-streams (replay/hw_backends.h says what each name
// makes and what "auto" picks).
#pragma once

#include <string>
#include <vector>

#include "cli_common.h"
#include "colibri/replay/hw_backends.h"

namespace colibri::cli {

struct HwFlags {
  std::string transfer = "auto";
  std::string compute = "auto";
  int cuda_device = 0;
  uint32_t copy_streams = 2;
};

// Adds the flags to `command`, --transfer and --compute limited to `names`.
void AddHwFlags(CLI::App* command, HwFlags* flags, const std::vector<std::string>& names);
// Replaces "auto" in --transfer and --compute by what it picks on this machine.
void ResolveHwFlags(HwFlags* flags);
replay::HwBackendOptions ToHwBackendOptions(const HwFlags& flags, uint32_t threads);
// {transfer, compute, cuda_device, copy_streams}.
Json HwJson(const HwFlags& flags);

}  // namespace colibri::cli
