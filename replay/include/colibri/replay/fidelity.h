// The fidelity harness (`colibri fidelity`, docs/FIDELITY.md): how well a
// machine profile predicts this machine's real engine. For each
// configuration of a grid it runs the real engine (RunLocal: io_uring +
// CpuCompute, the `colibri run` path) `repeats` times on a synthetic model,
// recording its routing; replays the first recording on the profile with the
// same configuration (RunReplay on modelled storage, transfer and compute);
// and compares, for every step of the layer batch and end to end, P50/P90/P99
// measured vs predicted as signed errors with the measured runs' own spread
// beside them (the noise floor), the Kolmogorov-Smirnov distance of the
// distributions and the layer-batch-by-layer-batch correlation.
//
// Definitions: error = (predicted - median of the measured runs) / that
// median; noise floor = (largest - smallest measured) / their median. Targets
// (checked, never asserted in tests): layer_batch P50, tokens/s, TTFT and TPOT
// P50 within max(5%, noise floor), their P99 within max(10%, noise floor),
// every step's P50 within max(10%, noise floor).
//
// The drive's drift: for every configuration that reads, a storage probe
// (storage_drift.h: one expert block at min(queue depth, 4) on the model's
// experts.bin) before the first real run and after the last, against the
// profile's drive, so a report says how much of an nvme_read error is the
// drive having changed since calibration rather than the model. Reported,
// never folded into the targets.
//
// Its inputs are disjoint from calibration's: calibrate's engine runs are
// synthetic micro-workloads (one layer batch shape at a time, everything
// resident or nothing); these are whole workloads with caches below and above
// the token cycle, queue depths, request counts and prefetch.
//
// Ownership: the report is a plain value; the options borrow the store.
// Thread-safety: one call at a time per work_dir. Errors: Status values from
// making the models, the runs and the replays, naming the configuration.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "colibri/replay/storage_drift.h"
#include "colibri/reports/run_store.h"
#include "colibri/sim/profiles.h"
#include "colibri/status.h"

namespace colibri::replay {

// One configuration of the grid.
struct FidelityCase {
  std::string name;
  std::string dtype = "bf16";        // the synthetic model's weights: bf16 or int8
  double l2_over_token_cycle = 0.5;  // L2 budget / the token cycle T; <= 0: every expert resident
  uint32_t queue_depth = 32;
  uint32_t requests = 4;
  uint32_t prefill_tokens = 16;
  uint32_t decode_passes = 32;
  uint32_t threads = 2;
  std::string prefetch = "none";     // none or coact
};

// The model the grid runs on.
struct FidelityModel {
  uint32_t layers = 8, experts = 64, top_k = 4, hidden = 2048, intermediate = 1024;
};

// "quick": 12 configurations on a small model and short runs (the CI smoke
// test); "full": the same 12 on the shape the issue measured (8 layers x 64
// experts, top-4, H 2048, I 1024) with longer runs. Errors: another name.
Result<std::vector<FidelityCase>> FidelityGrid(const std::string& grid);
Result<FidelityModel> FidelityModelFor(const std::string& grid);

struct FidelityOptions {
  std::string grid = "quick";
  std::string work_dir;               // models and recordings (created; models are reused)
  sim::ResolvedMachine machine;       // the profile under test
  uint32_t repeats = 2;               // real runs per configuration (>= 2 for a noise floor)
  uint64_t seed = 1;
  bool probe_storage = true;          // the storage probes around each configuration's real runs
  reports::RunStore* store = nullptr; // optional, borrowed: every run and replay, and the report, stored
  std::string tool_version, git_commit;  // for stored runs
  // Called before each run or replay: (done, total, what); may be empty.
  std::function<void(size_t, size_t, const std::string&)> progress;
};

// One statistic, measured (each run) and predicted.
struct StatComparison {
  std::vector<double> measured;       // one per real run
  double measured_median = 0;
  double predicted = 0;
  std::optional<double> error;        // (predicted - median) / median
  std::optional<double> noise_floor;  // (max - min) / median of the measured runs
};

struct DistributionComparison {
  std::string name;                   // a step, "ttft_ns", "tpot_ns", "request_latency_ns"
  StatComparison p50, p90, p99;
  double ks_distance = 0;             // predicted vs every measured sample pooled
  std::vector<int64_t> measured_samples, predicted_samples;  // for CDF overlays (first run's and the replay's)
};

struct FidelityCaseResult {
  FidelityCase config;
  uint64_t l2_bytes = 0;
  std::vector<DistributionComparison> steps;  // routing ... aggregation, layer_batch
  DistributionComparison ttft, tpot, request_latency;
  StatComparison tokens_per_s;
  std::optional<double> layer_batch_correlation;  // Pearson, batch by batch (first run vs the replay)
  std::vector<int64_t> measured_run_ids;  // when stored
  int64_t predicted_run_id = 0;
  std::vector<std::string> misses;        // the targets this configuration misses, as sentences
  // The storage probes before the first real run and after the last; empty
  // when everything is resident (nothing is read).
  std::vector<StorageDrift> storage_drift;
};

struct FidelityReport {
  std::string grid;
  std::string machine;                 // the profile's label
  FidelityModel model;
  uint32_t repeats = 0;
  std::vector<FidelityCaseResult> cases;
  std::vector<std::string> warnings;   // e.g. the profile was measured on another machine
  int64_t report_run_id = 0;           // the stored "fidelity" run linking them all
};

Result<FidelityReport> RunFidelity(const FidelityOptions& options);

// Renderings (fidelity_report.cc): the JSON document `colibri fidelity
// --json` prints, a markdown report (per configuration: every statistic with
// its error and noise floor) and a self-contained HTML page with
// predicted-over-measured CDF overlays per step.
std::string FidelityJson(const FidelityReport& report);
std::string FidelityMarkdown(const FidelityReport& report);
std::string FidelityHtml(const FidelityReport& report);

}  // namespace colibri::replay
