#include "hw_flags.h"

#include <algorithm>

namespace colibri::cli {

void AddHwFlags(CLI::App* command, HwFlags* flags, const std::vector<std::string>& names) {
  const bool sim = std::find(names.begin(), names.end(), "sim") != names.end();
  const std::string help = std::string(sim ? "sim: modelled on the machine profile; " : "") +
                           "auto: cuda when a usable CUDA device is present (and this colibri was built with CUDA), "
                           "else cpu";
  command->add_option("--transfer", flags->transfer, "Host-to-device backend; " + help)
      ->check(CLI::IsMember(names))
      ->capture_default_str();
  command->add_option("--compute", flags->compute, "Expert FFN and router backend; " + help)
      ->check(CLI::IsMember(names))
      ->capture_default_str();
  command->add_option("--cuda-device", flags->cuda_device, "CUDA device ordinal (--transfer/--compute cuda)")
      ->check(CLI::Range(0, 1023))
      ->capture_default_str();
  command->add_option("--copy-streams", flags->copy_streams, "CUDA copy streams (--transfer cuda)")
      ->check(CLI::Range(1u, 16u))
      ->capture_default_str();
}

void ResolveHwFlags(HwFlags* flags) {
  const replay::HwBackendNames names = replay::ResolveHwBackends(flags->transfer, flags->compute, flags->cuda_device);
  flags->transfer = names.transfer;
  flags->compute = names.compute;
}

Json HwJson(const HwFlags& flags) {
  return Json{{"transfer", flags.transfer},
              {"compute", flags.compute},
              {"cuda_device", flags.cuda_device},
              {"copy_streams", flags.copy_streams}};
}

}  // namespace colibri::cli
