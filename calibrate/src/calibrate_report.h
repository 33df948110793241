// The profiles, report and raw file a calibration writes (calibrate.h).
// Private to colibri_calibrate. Thread-safety: free functions.
#pragma once

#include <string>

#include "colibri/calibrate/calibrate.h"
#include "colibri/sim/hardware.h"
#include "colibri/status.h"

namespace colibri::calibrate {

struct MeasuredProfiles {
  sim::MachineProfile machine;
  sim::NvmeProfile nvme;
  sim::PcieProfile pcie;
  sim::ComputeProfile compute;
};

// Every figure with its provenance. Errors: a measurement missing a value
// the profile needs (e.g. no dtype measured).
Result<MeasuredProfiles> BuildProfiles(const CalibrateReport& report, const CalibrateOptions& options);

// <name>.report.md: the fit errors per storage point (grid and channel
// models), the compute table, the host-work fit and the host copies.
std::string CalibrateMarkdown(const CalibrateReport& report);
// <name>.raw.ndjson: one JSON object per measurement.
std::string CalibrateRaw(const CalibrateReport& report);

}  // namespace colibri::calibrate
