// Comparison of stored runs (docs/REPORTS.md): the data behind `colibri
// report compare` and `colibri report gate`, and every renderer (table,
// markdown, JSON, HTML) draws from it.
//
// For each run: percentiles of every distribution (step_latency_ns.<step>,
// request_latency_ns, ttft_ns, tpot_ns, queue_ns), throughput, hit rates per
// tier (decode-only and cumulative), bytes read per token, expert-load
// deviation per layer (traces/ stats' one definition) and its mean, and --
// against the baseline -- routing stability and deltas with the better value
// marked. For HTML, the latency CDF points of each distribution, the expert
// load matrix and the hit-rate series.
//
// Thread-safety: free functions; BuildComparison reads runs on up to 2
// threads. Errors: kNotFound (unknown run), kInvalidArgument (a run not
// complete, fewer than one run), the store's and the traces' errors.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "colibri/reports/run_store.h"
#include "colibri/reports/samples.h"
#include "colibri/reports/stability.h"
#include "colibri/status.h"

namespace colibri::reports {

struct CdfPoint {
  int64_t value_ns = 0;
  double fraction = 0;  // of samples <= value_ns
};

struct LayerLoad {
  double cv = 0, max_over_mean = 0, gini = 0;
  uint32_t unused = 0;
};

struct RunSummary {
  RunInfo info;
  std::map<std::string, Percentiles> distributions;
  std::map<std::string, std::vector<CdfPoint>> cdfs;        // HTML only (CompareOptions.cdf_points > 0)
  std::map<std::string, double> scalars;                     // as stored
  std::vector<TierCounters> tiers;
  std::vector<LayerLoad> load;                               // per MoE layer
  double load_cv_mean = 0, load_cv_max = 0, load_gini_mean = 0, load_max_over_mean_max = 0;
  std::vector<std::vector<uint64_t>> expert_load;            // HTML heat map
  std::vector<HitRatePoint> hit_rate;
  std::optional<RoutingStability> stability;                 // vs the baseline (unset for the baseline itself)
  std::string stability_note;                                // why stability is unset, when it is
  std::string trace_ending;  // replays: "complete" or how the torn trace ended (--allow-torn); else empty
  bool trace_torn() const { return !trace_ending.empty() && trace_ending != "complete"; }
};

// One compared quantity: its value per run, the delta against the baseline,
// and which run is best (lower or higher is better, per metric).
struct MetricRow {
  std::string group;     // "end to end", "step", "cache", "load", "routing"
  std::string key;       // e.g. "request_latency_ns.p99", "hit_pct_decode.l2"
  std::string unit;      // "ns", "%", "bytes", "1/s", ""
  bool lower_is_better = true;
  std::vector<std::optional<double>> values;  // per run, in Comparison.runs order; unset: not measured
  int best = -1;         // index of the best run, -1 when tied or not comparable
  bool low_confidence = false;  // a percentile from fewer than 100 samples in some run
};

struct Comparison {
  std::vector<RunSummary> runs;   // runs[baseline] is the baseline
  size_t baseline = 0;
  std::vector<MetricRow> rows;
};

struct CompareOptions {
  std::optional<int64_t> baseline_run_id;  // default: the first run given
  size_t cdf_points = 0;                   // > 0: fill RunSummary::cdfs (HTML)
  bool with_load_matrix = false;           // fill RunSummary::expert_load (HTML)
  bool stability = true;                   // compute routing stability vs the baseline
  uint32_t bootstrap_resamples = 0;        // > 0: P99 bootstrap intervals (rows "<dist>.p99_ci_low/high")
  uint64_t bootstrap_seed = 1;
};

Result<Comparison> BuildComparison(const RunStore& store, const std::vector<int64_t>& run_ids,
                                   const CompareOptions& options);

// Renderers. Table: aligned text for a terminal. Markdown: GitHub tables. JSON: a document
// {baseline, runs[], rows[]}. HTML: one self-contained file (inline CSS and SVG, no network).
std::string RenderTable(const Comparison& c);
std::string RenderMarkdown(const Comparison& c);
std::string RenderJson(const Comparison& c);
std::string RenderHtml(const Comparison& c);

// A value in its unit for people: "ns" as ns/us/ms/s, "bytes" as B/KiB/MiB/GiB, "%", "1/s".
std::string FormatValue(double value, const std::string& unit);

// "2026-11-29T18:41:31Z" for a Unix time in ms; empty when unix_ms <= 0 (not recorded).
std::string FormatUtcTime(int64_t unix_ms);

// The gate: does the candidate pass against the baseline?
struct GateOptions {
  std::string metric = "request_latency_ns";  // a distribution name
  double max_p99_regression_pct = 5.0;        // candidate P99 may exceed the baseline's by this much
  bool require_identical_routing = false;      // every (request, token, layer) top-k set identical
  std::optional<double> max_load_cv;           // the candidate's mean per-layer load CV at most this
};
struct GateResult {
  bool pass = true;
  std::vector<std::string> reasons;   // one line per failed check
  std::vector<std::string> checks;    // one line per check, passed or not
  double baseline_p99 = 0, candidate_p99 = 0, regression_pct = 0;
  std::optional<RoutingStability> stability;
};
Result<GateResult> RunGate(const RunStore& store, int64_t baseline, int64_t candidate, const GateOptions& options);
std::string GateJson(const GateResult& g);

}  // namespace colibri::reports
