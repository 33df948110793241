#include "colibri/reports/stored_report.h"

namespace colibri::reports {

std::string StoredReportText(const std::string& format) {
  if (format == "json") return "report_json";
  if (format == "md") return "report_md";
  if (format == "html") return "report_html";
  return "";
}

Result<std::string> StoredFidelityReport(const RunStore& store, int64_t run_id, const std::string& format) {
  const std::string key = StoredReportText(format);
  if (key.empty()) return Status::InvalidArgument("--format " + format + ": expected json, md or html");
  COLIBRI_ASSIGN_OR_RETURN(const RunInfo info, store.Info(run_id));
  const std::string run = "run " + std::to_string(run_id) + " in " + store.path();
  if (info.kind != "fidelity") {
    return Status::InvalidArgument(run + " is a " + info.kind + " run, not a fidelity run (colibri runs list shows kinds)");
  }
  if (info.status != "complete") return Status::InvalidArgument(run + " is " + info.status + ", not complete");
  COLIBRI_ASSIGN_OR_RETURN(const RunResults results, store.Results(run_id, /*with_samples=*/false));
  const auto text = results.texts.find(key);
  if (text == results.texts.end()) {
    return Status::InvalidArgument(run + " holds no " + format + " rendering (stored by an older colibri: run colibri "
                                   "fidelity again)");
  }
  return text->second;
}

}  // namespace colibri::reports
