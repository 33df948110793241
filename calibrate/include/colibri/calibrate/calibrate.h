// `colibri calibrate`: measures this machine through the engine's own
// backends and writes a measured machine profile (docs/HARDWARE_PROFILES.md,
// "Measured profiles"; docs/FIDELITY.md has how well it predicts):
//  - storage: random O_DIRECT reads over a grid of read sizes x queue depths
//    on a file on --dir's file system (storage_grid.h) -> the nvme profile's
//    read_grid, with the channel model fitted beside it;
//  - CPU compute: CpuCompute's expert FFN per dtype x shape x tokens x
//    threads (compute_tables.h) -> the compute profile's ffn_table, and the
//    gate GEMV -> its gate_table;
//  - the engine's own work per layer batch, on a synthetic model
//    (host_work_runs.h) -> the machine's host_work;
//  - host copies (host_copy.h) -> a generation-0 pcie profile;
//  - this machine's identity -> the machine's identity.
// Files under out_dir: <name>.json (the machine), <name>-nvme.json,
// <name>-host.json (pcie), <name>-cpu.json (compute): every *.json is a
// profile `--hw-file` loads; the raw measurements and fit errors go to
// <name>.report.md and <name>.raw.ndjson. The name is
// measured-<cpu>-<yyyymmdd> (sim::CpuSlug), never a built-in name. Every
// figure's source says "measured by colibri calibrate on <CPU>, <date>,
// commit <commit>".
//
// Ownership: writes out_dir and a scratch file and model under the storage
// directory (removed). Thread-safety: one call at a time (it times the
// machine). Errors: Status values; too little space on --dir refuses before
// anything is written.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "colibri/calibrate/compute_tables.h"
#include "colibri/calibrate/host_copy.h"
#include "colibri/calibrate/host_work_runs.h"
#include "colibri/calibrate/storage_grid.h"
#include "colibri/sim/hardware.h"
#include "colibri/status.h"

namespace colibri::calibrate {

struct CalibrateOptions {
  std::string out_dir;             // -o: created when missing
  std::string dir = ".";           // --dir: the file system whose storage is measured
  std::string model_dir;           // --model: measure this model's expert shape and router
  std::string like_config;         // --like: a Hugging Face config.json's shape instead
  bool quick = false;              // a smaller grid (under 2 minutes here)
  std::vector<uint32_t> threads;   // CPU thread counts to measure; empty: 1 and every core
  uint64_t seed = 1;
  std::string tool_version, git_commit;
  std::string measured_on;         // "2026-12-01"; empty: today (UTC)
  // (stage, done, total) while measuring; may be empty.
  std::function<void(const std::string&, size_t, size_t)> progress;
};

struct CalibrateReport {
  std::string machine_name;
  std::vector<std::string> files;  // every file written, in order
  std::vector<std::string> warnings;
  sim::MachineIdentity identity;
  StorageGrid storage;
  ComputeTables compute;
  HostWorkMeasurement host_work;
  HostCopies host_copies;
};

Result<CalibrateReport> Calibrate(const CalibrateOptions& options);

// The report as JSON (`colibri calibrate --json`): the files, the machine,
// the warnings and every fit error.
std::string CalibrateReportJson(const CalibrateReport& report);

}  // namespace colibri::calibrate
