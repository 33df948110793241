// The text renderers of a Comparison (table, markdown, JSON) and the gate's JSON.
#include <cmath>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "colibri/reports/compare.h"

namespace colibri::reports {
namespace {

using Json = nlohmann::ordered_json;

std::string Format(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, value);
  return buffer;
}

}  // namespace

std::string FormatValue(double v, const std::string& unit) {
  if (unit == "ns") {
    const double a = std::fabs(v);
    if (a >= 1e9) return Format("%.3f s", v / 1e9);
    if (a >= 1e6) return Format("%.3f ms", v / 1e6);
    if (a >= 1e3) return Format("%.3f us", v / 1e3);
    return Format("%.0f ns", v);
  }
  if (unit == "bytes") {
    const double a = std::fabs(v);
    if (a >= 1073741824.0) return Format("%.2f GiB", v / 1073741824.0);
    if (a >= 1048576.0) return Format("%.2f MiB", v / 1048576.0);
    if (a >= 1024.0) return Format("%.1f KiB", v / 1024.0);
    return Format("%.0f B", v);
  }
  if (unit == "%") return Format("%.2f%%", v);
  if (unit == "1/s") return Format("%.1f/s", v);
  return Format("%.4f", v);
}

std::string FormatUtcTime(int64_t unix_ms) {
  if (unix_ms <= 0) return "";
  const auto seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

namespace {

// The change against the baseline in percent; unset when either is missing or the baseline is 0.
std::optional<double> DeltaPct(const MetricRow& row, size_t i, size_t baseline) {
  if (i == baseline || !row.values[i] || !row.values[baseline] || *row.values[baseline] == 0) return std::nullopt;
  return 100.0 * (*row.values[i] - *row.values[baseline]) / std::fabs(*row.values[baseline]);
}

// One cell: the value, its delta vs the baseline, '*' on the best value, '~' when low-confidence.
std::string Cell(const MetricRow& row, size_t i, size_t baseline) {
  if (!row.values[i]) return "-";
  std::string cell = FormatValue(*row.values[i], row.unit);
  if (const auto d = DeltaPct(row, i, baseline)) cell += Format(" (%+.1f%%)", *d);
  if (row.best == static_cast<int>(i)) cell += " *";
  return cell;
}

std::string RunHeading(const RunSummary& r, bool baseline) {
  return "#" + std::to_string(r.info.run_id) + " " + r.info.label + (baseline ? " (baseline)" : "");
}

std::string RowLabel(const MetricRow& row) { return row.key + (row.low_confidence ? " ~" : ""); }

std::string Footnote() {
  return "* best value; (+x%) change vs the baseline; ~ a percentile from fewer than 100 samples (low confidence)\n";
}

std::string StabilityLines(const Comparison& c) {
  std::string out;
  for (const RunSummary& r : c.runs) {
    if (&r == &c.runs[c.baseline]) continue;
    out += "routing #" + std::to_string(r.info.run_id) + " vs baseline: ";
    if (!r.stability) {
      out += "not compared (" + r.stability_note + ")\n";
      continue;
    }
    const RoutingStability& s = *r.stability;
    out += Format("%.4f%% sets identical", 100 * s.set_identical_fraction()) +
           Format(", %.4f%% ranked identical", 100 * s.ranked_identical_fraction()) +
           Format(", mean Jaccard %.4f", s.mean_jaccard()) + " over " + std::to_string(s.compared) + " decisions";
    if (s.diverged) {
      out += "; first divergence: request " + std::to_string(s.first.request_id) + ", token " +
             std::to_string(s.first.position) + ", layer " + std::to_string(s.first.layer);
    }
    out += "\n";
  }
  return out;
}

// One line per run that replayed a torn trace (--allow-torn): its numbers cover a prefix only.
std::string TraceEndingLines(const Comparison& c) {
  std::string out;
  for (const RunSummary& r : c.runs) {
    if (r.trace_torn()) out += "trace of #" + std::to_string(r.info.run_id) + ": " + r.trace_ending + "\n";
  }
  return out;
}

// A run's distribution in the comparison JSON: wider than PercentilesJson
// (latency_json.h), with count (for samples), min and mean; not the same shape.
Json ComparisonPercentilesJson(const Percentiles& p) {
  return Json{{"count", p.count},         {"min", p.min},   {"p50", p.p50}, {"p90", p.p90},
              {"p99", p.p99},             {"p999", p.p999}, {"max", p.max}, {"mean", p.mean},
              {"source", p.from_histogram ? "histogram" : "raw"}, {"low_confidence", p.low_confidence()}};
}

Json ListJson(const std::vector<uint32_t>& v) { return Json(v); }

Json StabilityJson(const RoutingStability& s) {
  Json j{{"compared", s.compared},
         {"set_identical_fraction", s.set_identical_fraction()},
         {"ranked_identical_fraction", s.ranked_identical_fraction()},
         {"mean_jaccard", s.mean_jaccard()},
         {"missing_in_candidate", s.missing_in_candidate},
         {"missing_in_baseline", s.missing_in_baseline},
         {"first_divergence", nullptr}};
  if (s.diverged) {
    j["first_divergence"] = Json{{"request_id", s.first.request_id}, {"position", s.first.position},
                                 {"layer", s.first.layer}, {"baseline", ListJson(s.first.baseline)},
                                 {"candidate", ListJson(s.first.candidate)}};
  }
  return j;
}

Json RunJson(const RunSummary& r) {
  Json dists = Json::object();
  for (const auto& [name, p] : r.distributions) dists[name] = ComparisonPercentilesJson(p);
  Json tiers = Json::array();
  for (const TierCounters& t : r.tiers) {
    tiers.push_back(Json{{"tier", t.tier}, {"lookups", t.lookups}, {"hits", t.hits},
                         {"decode_lookups", t.decode_lookups}, {"decode_hits", t.decode_hits},
                         {"read_bytes", t.read_bytes}});
  }
  Json load = Json::array();
  for (const LayerLoad& l : r.load) {
    load.push_back(Json{{"cv", l.cv}, {"max_over_mean", l.max_over_mean}, {"gini", l.gini}, {"unused", l.unused}});
  }
  return Json{{"run_id", r.info.run_id},
              {"kind", r.info.kind},
              {"label", r.info.label},
              {"trace", r.info.trace_path},
              {"backends", r.info.backends},
              {"seed", r.info.seed},
              {"git_commit", r.info.git_commit},
              {"distributions", dists},
              {"scalars", r.scalars},
              {"tiers", tiers},
              {"load", {{"cv_mean", r.load_cv_mean}, {"cv_max", r.load_cv_max}, {"gini_mean", r.load_gini_mean},
                        {"max_over_mean_max", r.load_max_over_mean_max}, {"layers", load}}},
              {"stability", r.stability ? StabilityJson(*r.stability) : Json(nullptr)},
              {"stability_note", r.stability_note},
              {"trace_ending", r.trace_ending.empty() ? Json(nullptr) : Json(r.trace_ending)}};
}

Json OptionalJson(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

}  // namespace

std::string RenderTable(const Comparison& c) {
  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> header{"metric"};
  for (size_t i = 0; i < c.runs.size(); ++i) header.push_back(RunHeading(c.runs[i], i == c.baseline));
  cells.push_back(header);
  for (const MetricRow& row : c.rows) {
    std::vector<std::string> line{RowLabel(row)};
    for (size_t i = 0; i < c.runs.size(); ++i) line.push_back(Cell(row, i, c.baseline));
    cells.push_back(line);
  }
  std::vector<size_t> widths(header.size(), 0);
  for (const auto& line : cells) {
    for (size_t i = 0; i < line.size(); ++i) widths[i] = std::max(widths[i], line[i].size());
  }
  std::string out;
  for (size_t r = 0; r < cells.size(); ++r) {
    for (size_t i = 0; i < cells[r].size(); ++i) {
      const std::string& s = cells[r][i];
      out += i == 0 ? s + std::string(widths[i] - s.size(), ' ') : "  " + std::string(widths[i] - s.size(), ' ') + s;
    }
    out += "\n";
  }
  return out + StabilityLines(c) + TraceEndingLines(c) + Footnote();
}

std::string RenderMarkdown(const Comparison& c) {
  std::string out = "| metric |";
  std::string rule = "|---|";
  for (size_t i = 0; i < c.runs.size(); ++i) {
    out += " " + RunHeading(c.runs[i], i == c.baseline) + " |";
    rule += "---:|";
  }
  out += "\n" + rule + "\n";
  for (const MetricRow& row : c.rows) {
    out += "| " + RowLabel(row) + " |";
    for (size_t i = 0; i < c.runs.size(); ++i) {
      std::string cell = Cell(row, i, c.baseline);
      if (row.best == static_cast<int>(i)) cell = "**" + cell + "**";
      out += " " + cell + " |";
    }
    out += "\n";
  }
  return out + "\n" + StabilityLines(c) + TraceEndingLines(c) + "\n" + Footnote();
}

std::string RenderJson(const Comparison& c) {
  Json runs = Json::array();
  for (const RunSummary& r : c.runs) runs.push_back(RunJson(r));
  Json rows = Json::array();
  for (const MetricRow& row : c.rows) {
    Json values = Json::array(), deltas = Json::array();
    for (size_t i = 0; i < row.values.size(); ++i) {
      values.push_back(OptionalJson(row.values[i]));
      deltas.push_back(OptionalJson(DeltaPct(row, i, c.baseline)));
    }
    rows.push_back(Json{{"group", row.group},
                        {"key", row.key},
                        {"unit", row.unit},
                        {"lower_is_better", row.lower_is_better},
                        {"values", values},
                        {"delta_pct", deltas},
                        {"best_run_id", row.best >= 0 ? Json(c.runs[static_cast<size_t>(row.best)].info.run_id)
                                                      : Json(nullptr)},
                        {"low_confidence", row.low_confidence}});
  }
  return Json{{"baseline", c.runs[c.baseline].info.run_id}, {"runs", runs}, {"rows", rows}}.dump(2) + "\n";
}

std::string GateJson(const GateResult& g) {
  return Json{{"pass", g.pass},
              {"baseline_p99", g.baseline_p99},
              {"candidate_p99", g.candidate_p99},
              {"regression_pct", std::isfinite(g.regression_pct) ? Json(g.regression_pct) : Json(nullptr)},
              {"checks", g.checks},
              {"reasons", g.reasons},
              {"stability", g.stability ? StabilityJson(*g.stability) : Json(nullptr)}}
             .dump(2) +
         "\n";
}

}  // namespace colibri::reports
