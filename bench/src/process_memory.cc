#include "colibri/bench/process_memory.h"

#include <sys/resource.h>

#include <cstdlib>
#include <fstream>

namespace colibri::bench {

uint64_t PeakRssBytes() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;
}

uint64_t ProcStatusBytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    return std::strtoull(line.c_str() + field.size() + 1, nullptr, 10) * 1024;  // "VmHWM:   1234 kB"
  }
  return 0;
}

}  // namespace colibri::bench
