#include "colibri/sim/machine_identity.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

namespace colibri::sim {
namespace {

// The ISA flags that change what the engine's CPU kernels can do.
constexpr const char* kKernelFlags[] = {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_bf16",
                                        "avx512_fp16", "avx_vnni", "amx_bf16", "amx_int8"};

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t start = 0;
  while (start < s.size() && std::isspace(static_cast<unsigned char>(s[start]))) ++start;
  return s.substr(start);
}

std::string ReadLine(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return Trim(line);
}

// The value of the first "key : value" line of /proc/cpuinfo with `key`.
std::string CpuInfo(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos || Trim(line.substr(0, colon)) != key) continue;
    return Trim(line.substr(colon + 1));
  }
  return "";
}

std::string KernelFlags() {
  std::istringstream words(CpuInfo("flags"));
  std::set<std::string> present;
  for (std::string word; words >> word;) present.insert(word);
  std::string out;
  for (const char* flag : kKernelFlags) {
    if (present.count(flag)) out += (out.empty() ? "" : " ") + std::string(flag);
  }
  return out;
}

uint64_t RamBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (in >> key) {
    if (key == "MemTotal:" && in >> kib) return kib * 1024;
    std::string rest;
    std::getline(in, rest);
  }
  return 0;
}

// "vda (rotational 0, virtio)" for the whole disk holding `path`.
std::string BlockDevice(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return "";
  const std::string dev = std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  std::error_code error;
  std::filesystem::path sys = std::filesystem::canonical("/sys/dev/block/" + dev, error);
  if (error) return "device " + dev + " (tmpfs, overlay or another file system without a block device)";
  if (std::filesystem::exists(sys / "partition")) sys = sys.parent_path();
  std::string out = sys.filename().string();
  const std::string rotational = ReadLine(sys / "queue" / "rotational");
  const std::string model = ReadLine(sys / "device" / "model");
  std::vector<std::string> details;
  if (!rotational.empty()) details.push_back("rotational " + rotational);
  if (!model.empty()) details.push_back(model);
  if (out.rfind("vd", 0) == 0) details.push_back("virtio");
  if (!details.empty()) {
    out += " (";
    for (size_t i = 0; i < details.size(); ++i) out += (i ? ", " : "") + details[i];
    out += ")";
  }
  return out;
}

std::string Describe(const MachineIdentity& m) {
  char ram[32];
  std::snprintf(ram, sizeof(ram), "%.1f GiB", static_cast<double>(m.ram_bytes) / (1ull << 30));
  return m.cpu_model + " (" + std::to_string(m.cores) + " cores, " + ram + (m.cpu_flags.empty() ? "" : ", " + m.cpu_flags) +
         ")";
}

}  // namespace

MachineIdentity ThisMachineIdentity(const std::string& path) {
  MachineIdentity m;
  m.cpu_model = CpuInfo("model name");
  m.cpu_flags = KernelFlags();
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  m.cores = cores > 0 ? static_cast<uint32_t>(cores) : 0;
  m.ram_bytes = RamBytes();
  struct utsname name {};
  if (::uname(&name) == 0) m.kernel = name.release;
  m.block_device = BlockDevice(path);
  return m;
}

std::string IdentityMismatch(const MachineIdentity& measured, const MachineIdentity& here) {
  if (measured.empty()) return "";
  const double ram_ratio = here.ram_bytes > 0 ? static_cast<double>(measured.ram_bytes) / here.ram_bytes : 0;
  const bool same = measured.cpu_model == here.cpu_model && measured.cpu_flags == here.cpu_flags &&
                    measured.cores == here.cores && std::abs(ram_ratio - 1.0) <= 0.05;
  if (same) return "";
  return "measured on " + Describe(measured) + " (" + measured.measured_on + "), this machine is " + Describe(here);
}

std::string CpuSlug(const std::string& cpu_model) {
  static const std::set<std::string> kDropped = {"processor", "cpu", "with", "radeon", "graphics"};
  std::string model = cpu_model;
  for (const char* mark : {"(R)", "(r)", "(TM)", "(tm)"}) {
    for (size_t at = model.find(mark); at != std::string::npos; at = model.find(mark)) model.erase(at, std::strlen(mark));
  }
  std::string slug;
  std::istringstream words(model);
  for (std::string word; words >> word;) {
    std::string lower;
    for (char c : word) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (kDropped.count(lower) || lower.find("-core") != std::string::npos || lower.find('@') != std::string::npos ||
        lower.find("ghz") != std::string::npos) {
      continue;
    }
    std::string clean;
    for (char c : lower) {
      if (std::isalnum(static_cast<unsigned char>(c))) clean += c;
    }
    if (clean.empty() || kDropped.count(clean)) continue;
    if (slug.size() + clean.size() + 1 > 32) break;
    slug += (slug.empty() ? "" : "-") + clean;
  }
  return slug.empty() ? "cpu" : slug;
}

}  // namespace colibri::sim
