// A report kept whole in a stored run: `colibri fidelity` stores its
// renderings (JSON, markdown, HTML with the CDF overlays) in the "fidelity"
// run that links every real run and replay, and `colibri report fidelity RUN`
// prints one of them from the store.
// Thread-safety: as RunStore's reads. Errors: the run is missing (kNotFound),
// not a fidelity run, not complete, or stored without that rendering
// (kInvalidArgument, naming the run and what to do).
#pragma once

#include <cstdint>
#include <string>

#include "colibri/reports/run_store.h"
#include "colibri/status.h"

namespace colibri::reports {

// The run text each format is kept under: "json" -> "report_json",
// "md" -> "report_md", "html" -> "report_html"; empty for other formats.
std::string StoredReportText(const std::string& format);

// The stored rendering of fidelity run `run_id` in `format` (json, md, html).
Result<std::string> StoredFidelityReport(const RunStore& store, int64_t run_id, const std::string& format);

}  // namespace colibri::reports
