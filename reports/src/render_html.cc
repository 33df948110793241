// RenderHtml (compare.h): one self-contained HTML5 page -- inline CSS, inline
// SVG drawn here, no network, no fonts, no libraries. Sections: the runs, the
// metric table, latency CDFs, expert-load heat maps, hit rate over time and
// routing stability. A few lines of inline script only check that every chart
// drew something and write the verdict to <body data-render-check> (tests read
// it through chromium --dump-dom).
//
// Drawn with html_kit.h (shared with RenderCurvesHtml, render_curves_html.cc).
//
// Deterministic: numbers through std::to_chars (never the locale), data in the
// Comparison's order or its maps' key order (the CurvesPage's order), no clock.

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <limits>
#include <numeric>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "colibri/reports/compare.h"
#include "html_kit.h"

namespace colibri::reports {

namespace {

using namespace html_kit;  // NOLINT: the pages' drawing kit

// ---------------------------------------------------------------- values and runs

std::string HtmlValue(double v, const std::string& unit) {
  if (unit == "ns") return FormatNs(v);
  if (unit == "bytes") return Scaled(v, kByteScales);
  if (unit == "%") return Pct(v);
  if (unit == "1/s") return Significant(v, 3) + " /s";
  return Significant(v, 3) + (unit.empty() ? "" : " " + Escape(unit));
}

// The change against the baseline: percentage points for "%" values, else relative.
std::string DeltaHtml(const MetricRow& row, double value, double base) {
  const bool points = row.unit == "%";
  if (!points && base == 0) return value == 0 ? R"(<span class="delta same">±0%</span>)" : "";
  const double d = points ? value - base : (value - base) / std::fabs(base) * 100;
  const std::string magnitude = Fixed(std::fabs(d), points ? 2 : 1);
  const bool zero = magnitude.find_first_not_of("0.") == std::string::npos;
  const char* verdict = zero ? "same" : ((d < 0) == row.lower_is_better ? "better" : "worse");
  const char* sign = zero ? "±" : (d < 0 ? "−" : "+");
  return std::string("<span class=\"delta ") + verdict + "\">" + sign + magnitude + (points ? " pp" : "%") + "</span>";
}

std::string RunName(const RunSummary& r) { return "#" + std::to_string(r.info.run_id) + " " + Escape(r.info.label); }

std::string RunHeading(const Comparison& c, size_t run) {
  std::string out = Swatch(run) + RunName(c.runs[run]);
  if (run == c.baseline) out += " <span class=\"tag\">baseline</span>";
  return out;
}

std::vector<std::string> RunNames(const Comparison& c) {
  std::vector<std::string> names;
  for (const RunSummary& r : c.runs) names.push_back(RunName(r));
  return names;
}

// ---------------------------------------------------------------- header and tables

std::string RenderHeader(const Comparison& c) {
  std::string out = "<h1>Colibri run comparison</h1><p class=\"lead\">" + std::to_string(c.runs.size()) +
                    (c.runs.size() == 1 ? " run" : " runs") + " compared; baseline " + RunName(c.runs[c.baseline]) +
                    ".</p>";
  out += "<div class=\"scroll\"><table class=\"runs\"><thead><tr><th>Run</th><th>Kind</th><th>Trace</th>"
         "<th>Backends</th><th>Seed</th><th>Commit</th><th>Started (UTC)</th></tr></thead><tbody>";
  for (size_t i = 0; i < c.runs.size(); ++i) {
    const RunInfo& info = c.runs[i].info;
    out += "<tr><td>" + RunHeading(c, i) + "</td><td>" + OrDash(info.kind) + "</td><td class=\"path\" title=\"" +
           Escape(info.trace_digest) + "\">" + OrDash(info.trace_path) +
           (c.runs[i].trace_torn() ? "<br><span class=\"warn\">" + Escape(c.runs[i].trace_ending) + "</span>" : "") +
           "</td><td>" + OrDash(info.backends) +
           "</td><td class=\"num\">" + Int(info.seed) + "</td><td title=\"" + Escape(info.tool_version) + "\"><code>" +
           OrDash(info.git_commit) + "</code></td><td class=\"time\">" + OrDash(FormatUtcTime(info.started_at_ms)) + "</td></tr>";
  }
  return out + "</tbody></table></div>";
}

std::string MetricCell(const Comparison& c, const MetricRow& row, size_t run) {
  if (run >= row.values.size() || !row.values[run]) return "<td class=\"na\">—</td>";
  const double value = *row.values[run];
  const std::string text = HtmlValue(value, row.unit);
  constexpr char kBestMark[] = " <span class=\"star\" title=\"best\">★</span>";
  const bool best = row.best == static_cast<int>(run);
  std::string cell = best ? "<td class=\"best\"><strong>" + text + "</strong>" + kBestMark : "<td>" + text;
  const bool has_base = c.baseline < row.values.size() && row.values[c.baseline];
  if (run != c.baseline && has_base) cell += DeltaHtml(row, value, *row.values[c.baseline]);
  return cell + "</td>";
}

std::string MetricRowHtml(const Comparison& c, const MetricRow& row) {
  std::string out = "<tr><th scope=\"row\"><code>" + Escape(row.key) + "</code>";
  if (row.low_confidence) out += " <span class=\"lowconf\" title=\"fewer than 100 samples in some run\">†</span>";
  out += "</th>";
  for (size_t i = 0; i < c.runs.size(); ++i) out += MetricCell(c, row, i);
  return out + "</tr>";
}

std::string RenderMetrics(const Comparison& c) {
  std::string out = "<h2>Metrics</h2>";
  if (c.rows.empty()) return out + Note("No metrics to compare.");
  out += "<p class=\"hint\">Deltas against the baseline: relative, or in percentage points (pp) for percentages; "
         "<span class=\"better\">blue</span> is better, <span class=\"worse\">vermillion</span> worse. "
         "<span class=\"star\">★</span> marks the best run.</p>";
  out += "<div class=\"scroll\"><table class=\"metrics\"><thead><tr><th>Metric</th>";
  for (size_t i = 0; i < c.runs.size(); ++i) out += "<th>" + RunHeading(c, i) + "</th>";
  out += "</tr></thead><tbody>";
  bool low_confidence = false;
  for (size_t r = 0; r < c.rows.size(); ++r) {
    const MetricRow& row = c.rows[r];
    if (r == 0 || row.group != c.rows[r - 1].group) {
      out += "<tr class=\"group\"><th colspan=\"" + std::to_string(c.runs.size() + 1) + "\">" + Escape(row.group) +
             "</th></tr>";
    }
    out += MetricRowHtml(c, row);
    low_confidence |= row.low_confidence;
  }
  out += "</tbody></table></div>";
  if (low_confidence) {
    out += Note("<span class=\"lowconf\">†</span> fewer than 100 samples in some run: its P99 is the maximum, "
                "not a tail estimate.");
  }
  return out;
}

std::string ExpertList(const std::vector<uint32_t>& experts) {
  if (experts.empty()) return "missing";
  std::string out = "[";
  for (size_t i = 0; i < experts.size(); ++i) out += (i ? ", " : "") + std::to_string(experts[i]);
  return out + "]";
}

std::string DivergenceHtml(const RoutingStability& s) {
  if (!s.diverged) return "none";
  const RoutingDivergence& d = s.first;
  return "request " + Int(d.request_id) + ", position " + Int(d.position) + ", layer " + Int(d.layer) + ": " +
         ExpertList(d.baseline) + " → " + ExpertList(d.candidate);
}

std::string StabilityRow(const Comparison& c, size_t run) {
  const RunSummary& r = c.runs[run];
  std::string out = "<tr><td>" + RunHeading(c, run) + "</td>";
  if (!r.stability) {
    const std::string why = r.stability_note.empty() ? "not computed" : Escape(r.stability_note);
    return out + "<td colspan=\"6\" class=\"na\">" + why + "</td></tr>";
  }
  const RoutingStability& s = *r.stability;
  return out + "<td class=\"num\">" + Int(s.compared) + "</td><td class=\"num\">" +
         Pct(100 * s.set_identical_fraction()) + "</td><td class=\"num\">" + Pct(100 * s.ranked_identical_fraction()) +
         "</td><td class=\"num\">" + Fixed(s.mean_jaccard(), 4) + "</td><td class=\"num\">" +
         Int(s.missing_in_candidate) + " / " + Int(s.missing_in_baseline) + "</td><td>" + DivergenceHtml(s) +
         "</td></tr>";
}

std::string RenderStability(const Comparison& c) {
  std::string out = "<h2>Routing stability vs the baseline</h2>";
  if (c.runs.size() < 2) return out + Note("One run only: nothing to compare against.");
  out += "<div class=\"scroll\"><table class=\"stability\"><thead><tr><th>Run</th><th>Keys compared</th>"
         "<th>Top-k set identical</th><th>Ranked identical</th><th>Mean Jaccard</th>"
         "<th>Missing (candidate / baseline)</th><th>First divergence</th></tr></thead><tbody>";
  for (size_t i = 0; i < c.runs.size(); ++i) {
    if (i != c.baseline) out += StabilityRow(c, i);
  }
  return out + "</tbody></table></div>";
}
// ---------------------------------------------------------------- latency CDFs

// The empirical CDF as steps: up at each value, flat between.
Points CdfSteps(const std::vector<CdfPoint>& cdf) {
  Points out;
  double fraction = 0;
  for (const CdfPoint& p : cdf) {
    const double v = static_cast<double>(p.value_ns);
    out.emplace_back(v, fraction);
    out.emplace_back(v, p.fraction);
    fraction = p.fraction;
  }
  return out;
}

// The log axis over every run's positive values.
Axis CdfAxis(const std::vector<const std::vector<CdfPoint>*>& cdfs) {
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (const auto* cdf : cdfs) {
    for (const CdfPoint& p : *cdf) {
      if (p.value_ns > 0) lo = std::min(lo, static_cast<double>(p.value_ns));
      hi = std::max(hi, static_cast<double>(p.value_ns));
    }
  }
  if (lo > hi) lo = hi = 1;  // every value 0
  return PaddedLogAxis(lo, hi);
}

std::string CdfChart(const Comparison& c, const std::string& name) {
  static const std::vector<CdfPoint> kNone;
  std::vector<const std::vector<CdfPoint>*> cdfs;
  for (const RunSummary& r : c.runs) {
    const auto it = r.cdfs.find(name);
    cdfs.push_back(it == r.cdfs.end() ? &kNone : &it->second);
  }
  const std::string caption = "<code>" + Escape(name) + "</code>";
  if (std::all_of(cdfs.begin(), cdfs.end(), [](const auto* cdf) { return cdf->empty(); })) {
    return Figure(caption, Note("No samples in any run."));
  }
  const Frame frame{CdfAxis(cdfs), Axis{0, 1, false}};
  const LineChartSpec spec{.kind = "cdf",
                           .name = name,
                           .frame = frame,
                           .x_ticks = Ticks(LogTickValues(frame.x.lo, frame.x.hi), TimeLabel),
                           .y_ticks = Ticks(LinearTickValues(0, 1, 5), [](double v) { return Fixed(v, 1); }),
                           .y_marks = {{0.5, "p50"}, {0.9, "p90"}, {0.99, "p99"}},
                           .x_marks = {},
                           .x_title = "latency (log scale)",
                           .y_title = "fraction of samples ≤ latency",
                           .dots = false};
  std::vector<Points> series;
  for (const auto* cdf : cdfs) series.push_back(CdfSteps(*cdf));
  return Figure(caption, LineChart(spec, series, RunNames(c)));
}

std::string RenderCdfs(const Comparison& c) {
  std::set<std::string> names;
  for (const RunSummary& r : c.runs) {
    for (const auto& [name, points] : r.cdfs) names.insert(name);
  }
  std::string out = "<h2>Latency CDFs</h2>";
  if (names.empty()) return out + Note("No latency CDFs stored for these runs.");
  out += "<div class=\"charts\">";
  for (const std::string& name : names) out += CdfChart(c, name);
  return out + "</div>";
}

// ---------------------------------------------------------------- hit rate over time

// Cumulative served / lookups in %, per layer batch; points before the first lookup are skipped.
Points HitRatePoints(const std::vector<HitRatePoint>& series) {
  Points out;
  for (const HitRatePoint& p : series) {
    if (p.lookups > 0) out.emplace_back(static_cast<double>(p.layer_batch), 100.0 * p.served / p.lookups);
  }
  return out;
}

std::string RenderHitRate(const Comparison& c) {
  std::string out = "<h2>Hit rate over time</h2>";
  std::vector<Points> series;
  double max_batch = 0, min_pct = 100;
  for (const RunSummary& r : c.runs) {
    series.push_back(HitRatePoints(r.hit_rate));
    for (const auto& [batch, pct] : series.back()) {
      max_batch = std::max(max_batch, batch);
      min_pct = std::min(min_pct, pct);
    }
  }
  if (std::all_of(series.begin(), series.end(), [](const Points& s) { return s.empty(); })) {
    return out + Note("No hit-rate series stored for these runs.");
  }
  const double y_lo = std::min(90.0, std::floor(min_pct / 10) * 10);
  const Frame frame{Axis{0, std::max(1.0, max_batch), false}, Axis{y_lo, 100, false}};
  const LineChartSpec spec{.kind = "hitrate",
                           .name = "cumulative",
                           .frame = frame,
                           .x_ticks = Ticks(LinearTickValues(frame.x.lo, frame.x.hi, 6), CountLabel),
                           .y_ticks = Ticks(LinearTickValues(y_lo, 100, 5), [](double v) { return Fixed(v, 0) + "%"; }),
                           .y_marks = {},
                           .x_marks = {},
                           .x_title = "layer batches run",
                           .y_title = "served from cache (cumulative)",
                           .dots = false};
  return out + Figure("Cumulative share of expert lookups served from cache", LineChart(spec, series, RunNames(c)));
}

// ---------------------------------------------------------------- expert-load heat maps

// Colour bins of load / layer mean on a log2 scale, half a power of two each:
// h0 at <= 1/4 of the mean, h4 at the mean, h8 at >= 4x; hz: never selected.
int LoadBin(uint64_t load, double mean) {
  const double t = std::clamp(std::log2(static_cast<double>(load) / mean), -2.0, 2.0);
  return static_cast<int>(std::lround((t + 2) * 2));
}

std::string LegendBin(const std::string& bin, const char* label) {
  return "<span class=\"bin\"><span class=\"cell h" + bin + "\"></span>" + label + "</span>";
}

std::string HeatLegend() {
  static const std::array<const char*, 9> kLabels = {"≤¼×", "", "½×", "", "mean", "", "2×", "", "≥4×"};
  std::string out = "<div class=\"heatlegend\">" + LegendBin("z", "never") + "<span class=\"gap\"></span>";
  for (size_t i = 0; i < kLabels.size(); ++i) out += LegendBin(std::to_string(i), kLabels[i]);
  return out + "</div>";
}

// The smallest power of two whose span of cells is at least `min_px` wide.
int LabelStep(int cell_px, int min_px) {
  int step = 1;
  while (step * cell_px < min_px) step *= 2;
  return step;
}

std::string HeatCells(const std::vector<std::vector<uint64_t>>& matrix, int left, int top, int cw, int ch) {
  const int gap = cw >= 6 ? 1 : 0;
  const std::string size =
      "\" width=\"" + std::to_string(cw - gap) + "\" height=\"" + std::to_string(ch - gap) + "\"/>";
  std::string out;
  for (size_t l = 0; l < matrix.size(); ++l) {
    const std::vector<uint64_t>& row = matrix[l];
    const double sum = static_cast<double>(std::accumulate(row.begin(), row.end(), uint64_t{0}));
    const double mean = row.empty() ? 0 : sum / static_cast<double>(row.size());
    const std::string y = std::to_string(top + static_cast<int>(l) * ch);
    for (size_t e = 0; e < row.size(); ++e) {
      const std::string bin = row[e] == 0 ? "z" : std::to_string(LoadBin(row[e], mean));
      out += "<rect class=\"data h" + bin + "\" x=\"" + std::to_string(left + static_cast<int>(e) * cw) + "\" y=\"" +
             y + size;
    }
  }
  return out;
}

std::string HeatMap(const RunSummary& r) {
  const auto& m = r.expert_load;
  size_t experts = 0;
  for (const auto& row : m) experts = std::max(experts, row.size());
  if (experts == 0) return Note(RunName(r) + ": no expert-load matrix stored for this run; heat map skipped.");
  const int layers = static_cast<int>(m.size()), cols = static_cast<int>(experts);
  const int cw = std::clamp(1040 / cols, 2, 24), ch = std::clamp(cw, 4, 16);
  const int left = 44, top = 22, width = left + cols * cw + 8, height = top + layers * ch + 6;
  std::string svg = OpenSvg("heatmap", "run-" + std::to_string(r.info.run_id), width, height);
  svg += "<rect class=\"heatbg\" x=\"" + std::to_string(left) + "\" y=\"" + std::to_string(top) + "\" width=\"" +
         std::to_string(cols * cw) + "\" height=\"" + std::to_string(layers * ch) + "\"/>";
  svg += Text(left - 6, top - 8, "end", "layer", "title");
  for (int e = 0; e < cols; e += LabelStep(cw, 28)) svg += Text(left + e * cw + cw / 2.0, top - 8, "middle", Int(e));
  for (int l = 0; l < layers; l += LabelStep(ch, 13)) svg += Text(left - 6, top + l * ch + ch / 2.0 + 4, "end", Int(l));
  svg += HeatCells(m, left, top, cw, ch) + "</svg>";
  const std::string caption = RunName(r) + " — " + Int(m.size()) + " MoE layers × " + Int(experts) +
                              " experts; load CV mean " + Fixed(r.load_cv_mean, 3) + ", max " +
                              Fixed(r.load_cv_max, 3);
  return Figure(caption, "<div class=\"scroll\">" + svg + "</div>");
}

std::string RenderHeatMaps(const Comparison& c) {
  std::string out = "<h2>Expert load</h2><p class=\"hint\">Selections of each expert (columns) per MoE layer (rows), "
                    "coloured by the ratio to that layer's mean.</p>" +
                    HeatLegend();
  for (const RunSummary& r : c.runs) out += HeatMap(r);
  return out;
}
// ---------------------------------------------------------------- page

std::string PageTitle(const Comparison& c) {
  std::string out = "Colibri comparison:";
  for (const RunSummary& r : c.runs) out += " #" + std::to_string(r.info.run_id);
  return out;
}
}  // namespace

std::string RenderHtml(const Comparison& c) {
  std::string out = OpenPage(PageTitle(c));
  if (c.runs.empty()) return out + Note("No runs to compare.") + "</body></html>\n";
  out += RenderHeader(c) + "\n" + RenderMetrics(c) + "\n" + RenderCdfs(c) + "\n" + RenderHeatMaps(c) + "\n" +
         RenderHitRate(c) + "\n" + RenderStability(c) + "\n";
  return out + ClosePage();
}
}  // namespace colibri::reports
