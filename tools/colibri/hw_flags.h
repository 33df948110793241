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
// {transfer, compute, cuda_device, copy_streams}.
Json HwJson(const HwFlags& flags);

// Copies the flags into a run's options: any struct with the fields transfer,
// compute, cuda_device and copy_streams (replay::ReplayConfig, replay::LocalRunOptions).
template <typename RunOptions>
void CopyHwFlags(const HwFlags& flags, RunOptions* options) {
  options->transfer = flags.transfer;
  options->compute = flags.compute;
  options->cuda_device = flags.cuda_device;
  options->copy_streams = flags.copy_streams;
}

}  // namespace colibri::cli
