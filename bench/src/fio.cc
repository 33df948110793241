#include "colibri/bench/fio.h"

#include <cstdio>
#include <cstdlib>

#include "colibri/bench/provenance.h"

namespace colibri::bench {

std::string FioCommand(const FioOptions& o) {
  return ShellQuote(o.fio) + " --name=colibri --filename=" + ShellQuote(o.path) +
         " --ioengine=io_uring --direct=1 --rw=randread --bs=" + std::to_string(o.block_bytes) +
         " --iodepth=" + std::to_string(o.queue_depth) + " --runtime=" + std::to_string(o.seconds) +
         " --time_based --percentile_list=50:90:99:99.9 --output-format=json" + (o.fixed_buffers ? " --fixedbufs" : "");
}

bool FioAvailable(const std::string& fio) {
  if (fio == "none") return false;
  return std::system(("command -v " + ShellQuote(fio) + " >/dev/null 2>&1").c_str()) == 0;
}

Result<Json> RunFio(const std::string& command) {
  std::FILE* pipe = ::popen((command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return Status::IoError("cannot run fio");
  std::string output;
  char chunk[4096];
  while (size_t n = std::fread(chunk, 1, sizeof(chunk), pipe)) output.append(chunk, n);
  const int rc = ::pclose(pipe);
  const size_t json_start = output.find('{');  // fio may print notes before the document
  if (rc != 0 || json_start == std::string::npos) {
    return Status::IoError("fio failed (exit status " + std::to_string(rc) + "): " + command);
  }
  const Json doc = Json::parse(output.substr(json_start), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.contains("jobs") || doc["jobs"].empty() || !doc["jobs"][0].contains("read")) {
    return Status::IoError("fio printed no job read figures: " + command);
  }
  return doc["jobs"][0]["read"];
}

Json FioLatencyJson(const Json& read) {
  const Json& percentiles = read["clat_ns"].value("percentile", Json::object());
  auto at = [&](const char* key) { return percentiles.contains(key) ? percentiles[key] : Json(nullptr); };
  return Json{{"p50", at("50.000000")},
              {"p90", at("90.000000")},
              {"p99", at("99.000000")},
              {"p999", at("99.900000")},
              {"max", read["clat_ns"].value("max", Json(nullptr))}};
}

}  // namespace colibri::bench
