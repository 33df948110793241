#include "colibri/bench/cpu_info.h"

#include <unistd.h>

#include <fstream>

namespace colibri::bench {

uint64_t LastLevelCacheBytes() {
  for (int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long bytes = sysconf(name);
    if (bytes > 0) return static_cast<uint64_t>(bytes);
  }
  std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index3/size");
  uint64_t kib = 0;
  return in >> kib ? kib * 1024 : 0;
}

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

}  // namespace colibri::bench
