// Renderings of a fidelity report (colibri/replay/fidelity.h): JSON,
// markdown and an HTML page of CDF overlays (reports/curves_html.h).
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "colibri/replay/fidelity.h"
#include "colibri/reports/compare.h"
#include "colibri/reports/curves_html.h"
#include "colibri/reports/distribution_compare.h"

namespace colibri::replay {
namespace {

using Json = nlohmann::json;

Json Optional(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

Json StatJson(const StatComparison& s) {
  return Json{{"measured", s.measured},
              {"measured_median", s.measured_median},
              {"predicted", s.predicted},
              {"error", Optional(s.error)},
              {"noise_floor", Optional(s.noise_floor)}};
}

Json DistributionJson(const DistributionComparison& d) {
  return Json{{"p50", StatJson(d.p50)},
              {"p90", StatJson(d.p90)},
              {"p99", StatJson(d.p99)},
              {"ks_distance", d.ks_distance},
              {"measured_samples", d.measured_samples.size()},
              {"predicted_samples", d.predicted_samples.size()}};
}

std::string Pct(const std::optional<double>& v) {
  if (!v) return "n/a";
  char text[32];
  std::snprintf(text, sizeof(text), "%+.1f%%", *v * 100);
  return text;
}

std::string Abs(const std::optional<double>& v) {
  if (!v) return "n/a";
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f%%", *v * 100);
  return text;
}

std::string Row(const std::string& what, const StatComparison& s, bool time) {
  const std::string unit = time ? "ns" : "1/s";
  return "| " + what + " | " + reports::FormatValue(s.measured_median, unit) + " | " +
         reports::FormatValue(s.predicted, unit) + " | " + Pct(s.error) + " | " + Abs(s.noise_floor) + " |\n";
}

Json DriftJson(const std::vector<StorageDrift>& probes) {
  Json out = Json::array();
  for (const StorageDrift& d : probes) {
    out.push_back(Json{{"read_bytes", d.read_bytes},
                       {"queue_depth", d.queue_depth},
                       {"reads", d.reads},
                       {"measured_p50_ns", d.measured_p50_ns},
                       {"profile_p50_ns", d.profile_p50_ns},
                       {"measured_bytes_per_s", d.measured_bytes_per_s},
                       {"profile_bytes_per_s", d.profile_bytes_per_s},
                       {"drift", d.drift}});
  }
  return out;
}

// "+45.1% / +60.3%": the probes' drifts, before / after the real runs; "-" without probes.
std::string DriftCell(const std::vector<StorageDrift>& probes) {
  if (probes.empty()) return "-";
  std::string cell;
  for (const StorageDrift& d : probes) cell += (cell.empty() ? "" : " / ") + Pct(d.drift);
  return cell;
}

void DistributionRows(const DistributionComparison& d, std::string* out) {
  *out += Row(d.name + " P50", d.p50, true);
  *out += Row(d.name + " P90", d.p90, true);
  *out += Row(d.name + " P99", d.p99, true);
}

}  // namespace

std::string FidelityJson(const FidelityReport& r) {
  Json cases = Json::array();
  for (const FidelityCaseResult& c : r.cases) {
    Json steps = Json::object();
    for (const DistributionComparison& d : c.steps) steps[d.name] = DistributionJson(d);
    cases.push_back(Json{{"name", c.config.name},
                         {"dtype", c.config.dtype},
                         {"l2_over_token_cycle", c.config.l2_over_token_cycle},
                         {"l2_bytes", c.l2_bytes},
                         {"queue_depth", c.config.queue_depth},
                         {"requests", c.config.requests},
                         {"prefill_tokens", c.config.prefill_tokens},
                         {"decode_passes", c.config.decode_passes},
                         {"threads", c.config.threads},
                         {"prefetch", c.config.prefetch},
                         {"steps", steps},
                         {"tokens_per_s", StatJson(c.tokens_per_s)},
                         {"ttft_ns", DistributionJson(c.ttft)},
                         {"tpot_ns", DistributionJson(c.tpot)},
                         {"request_latency_ns", DistributionJson(c.request_latency)},
                         {"layer_batch_correlation", Optional(c.layer_batch_correlation)},
                         {"measured_run_ids", c.measured_run_ids},
                         {"predicted_run_id", c.predicted_run_id},
                         {"misses", c.misses},
                         {"storage_drift", DriftJson(c.storage_drift)}});
  }
  size_t met = 0;
  for (const FidelityCaseResult& c : r.cases) met += c.misses.empty();
  return Json{{"grid", r.grid},
              {"machine", r.machine},
              {"model",
               {{"layers", r.model.layers},
                {"experts", r.model.experts},
                {"top_k", r.model.top_k},
                {"hidden", r.model.hidden},
                {"intermediate", r.model.intermediate}}},
              {"repeats", r.repeats},
              {"error_definition", "(predicted - median of the measured runs) / that median"},
              {"noise_floor_definition", "(largest - smallest measured) / their median"},
              {"storage_drift_definition",
               "(profile p50 - measured p50) / measured p50 of one expert block's reads at min(queue depth, 4), "
               "probed before the first real run and after the last"},
              {"cases", cases},
              {"cases_meeting_every_target", met},
              {"warnings", r.warnings},
              {"report_run_id", r.report_run_id}}
      .dump(2);
}

std::string FidelityMarkdown(const FidelityReport& r) {
  std::string out = "# Fidelity: " + r.machine + " against this machine's engine\n\n";
  char model[200];
  std::snprintf(model, sizeof(model),
                "Grid `%s`: synthetic model %u layers x %u experts, top-%u, H %u, I %u; %u real runs per "
                "configuration.\n\n",
                r.grid.c_str(), r.model.layers, r.model.experts, r.model.top_k, r.model.hidden, r.model.intermediate,
                r.repeats);
  out += model;
  out += "Error = (predicted - median of the measured runs) / that median; noise = (largest - smallest measured) / "
         "their median.\n\n";
  for (const std::string& w : r.warnings) out += "> warning: " + w + "\n\n";
  out += "Disk drift = (profile - measured) / measured P50 of one expert block's reads at min(queue depth, 4) on the "
         "model's file, probed before the first real run / after the last: the part of an nvme_read error that is "
         "the drive having changed since calibration.\n\n";
  out += "| configuration | layer_batch P50 | layer_batch P99 | tokens/s | TTFT P50 | TPOT P50 | KS (layer_batch) | "
         "corr | disk drift | targets |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
  for (const FidelityCaseResult& c : r.cases) {
    const DistributionComparison& lb = c.steps.back();
    char ks[32];
    std::snprintf(ks, sizeof(ks), "%.2f", lb.ks_distance);
    char corr[32] = "n/a";
    if (c.layer_batch_correlation) std::snprintf(corr, sizeof(corr), "%.2f", *c.layer_batch_correlation);
    out += "| " + c.config.name + " | " + Pct(lb.p50.error) + " | " + Pct(lb.p99.error) + " | " +
           Pct(c.tokens_per_s.error) + " | " + Pct(c.ttft.p50.error) + " | " + Pct(c.tpot.p50.error) + " | " + ks +
           " | " + corr + " | " + DriftCell(c.storage_drift) + " | " + (c.misses.empty() ? "met" : std::to_string(c.misses.size()) + " missed") + " |\n";
  }
  for (const FidelityCaseResult& c : r.cases) {
    char head[256];
    std::snprintf(head, sizeof(head),
                  "\n## %s\n\n%s, L2 %.2f x T (%llu bytes), queue depth %u, %u requests, %u prefill + %u decode, "
                  "%u thread(s), prefetch %s\n\n",
                  c.config.name.c_str(), c.config.dtype.c_str(), c.config.l2_over_token_cycle,
                  static_cast<unsigned long long>(c.l2_bytes), c.config.queue_depth, c.config.requests,
                  c.config.prefill_tokens, c.config.decode_passes, c.config.threads, c.config.prefetch.c_str());
    out += head;
    out += "| statistic | measured (median) | predicted | error | noise |\n|---|---:|---:|---:|---:|\n";
    for (const DistributionComparison& d : c.steps) DistributionRows(d, &out);
    out += Row("tokens/s", c.tokens_per_s, false);
    DistributionRows(c.ttft, &out);
    DistributionRows(c.tpot, &out);
    DistributionRows(c.request_latency, &out);
    for (const StorageDrift& d : c.storage_drift) {
      char line[320];
      std::snprintf(line, sizeof(line),
                    "\n- disk probe, %llu-byte reads at depth %u (%llu reads): P50 %s measured, %s on the profile "
                    "(drift %s); %.0f vs %.0f MB/s",
                    static_cast<unsigned long long>(d.read_bytes), d.queue_depth,
                    static_cast<unsigned long long>(d.reads),
                    reports::FormatValue(static_cast<double>(d.measured_p50_ns), "ns").c_str(),
                    reports::FormatValue(static_cast<double>(d.profile_p50_ns), "ns").c_str(), Pct(d.drift).c_str(),
                    static_cast<double>(d.measured_bytes_per_s) / 1e6, static_cast<double>(d.profile_bytes_per_s) / 1e6);
      out += line;
    }
    if (!c.storage_drift.empty()) out += "\n";
    for (const std::string& miss : c.misses) out += "\n- misses " + miss;
    if (!c.misses.empty()) out += "\n";
  }
  return out;
}

std::string FidelityHtml(const FidelityReport& r) {
  reports::CurvesPage page;
  page.title = "Fidelity: " + r.machine + " against this machine's engine";
  page.notes.push_back("Grid " + r.grid + "; each chart overlays the predicted CDF (the replay on the profile) on the "
                       "measured one (the first real run) of one step. Disk drift: (profile - measured) / measured P50 "
                       "of one expert block's reads at min(queue depth, 4), probed before / after the real runs.");
  for (const std::string& w : r.warnings) page.notes.push_back("warning: " + w);
  page.table_header = {"configuration", "layer_batch P50", "layer_batch P99", "tokens/s", "TTFT P50", "TPOT P50",
                       "disk drift", "targets"};
  for (const FidelityCaseResult& c : r.cases) {
    const DistributionComparison& lb = c.steps.back();
    page.table_rows.push_back({c.config.name, Pct(lb.p50.error), Pct(lb.p99.error), Pct(c.tokens_per_s.error),
                               Pct(c.ttft.p50.error), Pct(c.tpot.p50.error), DriftCell(c.storage_drift),
                               c.misses.empty() ? "met" : std::to_string(c.misses.size()) + " missed"});
    for (const DistributionComparison& d : c.steps) {
      if (d.measured_samples.empty() && d.predicted_samples.empty()) continue;
      int64_t lo = INT64_MAX, hi = 0;
      for (const auto* v : {&d.measured_samples, &d.predicted_samples}) {
        for (int64_t x : *v) {
          lo = std::min(lo, x);
          hi = std::max(hi, x);
        }
      }
      if (hi <= 0) continue;  // a step that takes no time
      lo = std::max<int64_t>(lo, 1);
      reports::CurvesChart chart;
      chart.name = c.config.name + "-" + d.name;
      chart.title = c.config.name + ": " + d.name;
      chart.x_label = "ns";
      chart.y_label = "CDF";
      chart.y_min = 0;
      chart.y_max = 1;
      for (const auto& [label, samples] : {std::pair<const char*, const std::vector<int64_t>*>{"measured", &d.measured_samples},
                                           {"predicted", &d.predicted_samples}}) {
        reports::CurveSeries series;
        series.label = label;
        for (const auto& [x, y] : reports::EmpiricalCdf(*samples, lo, hi, 64)) series.points.emplace_back(static_cast<double>(x), y);
        chart.series.push_back(std::move(series));
      }
      page.charts.push_back(std::move(chart));
    }
  }
  return reports::RenderCurvesHtml(page);
}

}  // namespace colibri::replay
