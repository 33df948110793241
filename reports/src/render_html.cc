// RenderHtml (compare.h): one self-contained HTML5 page -- inline CSS, inline
// SVG drawn here, no network, no fonts, no libraries. Sections: the runs, the
// metric table, latency CDFs, expert-load heat maps, hit rate over time and
// routing stability. A few lines of inline script only check that every chart
// drew something and write the verdict to <body data-render-check> (tests read
// it through chromium --dump-dom).
//
// RenderCurvesHtml (curves_html.h): a page of line charts and a table, drawn by
// the same line-chart code, styles and check script.
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
#include "colibri/reports/curves_html.h"

namespace colibri::reports {

namespace {

// ---------------------------------------------------------------- text and numbers

std::string Escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  }
  return out;
}

// Fixed point with `decimals` digits; never "-0".
std::string Fixed(double v, int decimals) {
  if (!std::isfinite(v)) return "n/a";
  char buf[400];
  const auto result = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, decimals);
  std::string out(buf, result.ptr);
  if (out.front() == '-' && out.find_first_not_of("-0.") == std::string::npos) out.erase(0, 1);
  return out;
}

std::string Int(uint64_t v) { return std::to_string(v); }

// `digits` significant digits in fixed notation; whole numbers print whole.
// `trim`: no trailing zeros after the point (axis labels).
std::string Significant(double v, int digits, bool trim = false) {
  if (!std::isfinite(v)) return "n/a";
  if (v == std::round(v) && std::fabs(v) < 1e15) return Fixed(v, 0);
  const int magnitude = static_cast<int>(std::floor(std::log10(std::fabs(v))));
  int decimals = std::max(0, digits - 1 - magnitude);
  const double scale = std::pow(10.0, decimals);
  // 9.996 rounds to 10.00: one digit too many.
  if (decimals > 0 && std::fabs(std::round(v * scale) / scale) >= std::pow(10.0, magnitude + 1)) --decimals;
  std::string out = Fixed(v, decimals);
  if (trim && out.find('.') != std::string::npos) {
    out.erase(out.find_last_not_of('0') + 1);
    if (out.back() == '.') out.pop_back();
  }
  return out;
}

struct Scale {
  double factor;
  const char* suffix;
};
constexpr Scale kTimeScales[] = {{1, " ns"}, {1e3, " µs"}, {1e6, " ms"}, {1e9, " s"}};
constexpr Scale kByteScales[] = {
    {1, " B"}, {1024.0, " KiB"}, {1048576.0, " MiB"}, {1073741824.0, " GiB"}, {1099511627776.0, " TiB"}};
constexpr Scale kCountScales[] = {{1, ""}, {1e3, "k"}, {1e6, "M"}, {1e9, "G"}};

// Three significant digits in the largest unit the value reaches (after rounding).
std::string Scaled(double v, std::span<const Scale> scales, bool trim = false) {
  const Scale* pick = &scales.front();
  for (const Scale& s : scales) {
    if (std::fabs(v) >= s.factor * 0.9995) pick = &s;
  }
  return Significant(v / pick->factor, 3, trim) + pick->suffix;
}

std::string FormatNs(double ns) { return Scaled(ns, kTimeScales); }
std::string TimeLabel(double ns) { return Scaled(ns, kTimeScales, true); }
std::string CountLabel(double n) { return Scaled(n, kCountScales, true); }

// Two decimals, never rounding a partial value to 0% or 100%.
std::string Pct(double pct) {
  if (pct > 0 && pct < 0.005) return "&lt;0.01%";
  if (pct < 100 && pct >= 99.995) return "&gt;99.99%";
  return Fixed(pct, 2) + "%";
}

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


std::string OrDash(const std::string& s) { return s.empty() ? "—" : Escape(s); }

// ---------------------------------------------------------------- runs: names and styles

// Okabe-Ito: distinguishable with the common colour-vision deficiencies. Past
// seven runs a colour repeats with a dash pattern.
constexpr std::array<const char*, 7> kPalette = {"#0072b2", "#e69f00", "#009e73", "#cc79a7",
                                                 "#d55e00", "#56b4e9", "#000000"};
constexpr std::array<const char*, 3> kDashes = {"", "7 3", "2 2"};

std::string RunStroke(size_t run) {
  std::string out = std::string(" stroke=\"") + kPalette[run % kPalette.size()] + "\"";
  const char* dash = kDashes[(run / kPalette.size()) % kDashes.size()];
  if (*dash) out += std::string(" stroke-dasharray=\"") + dash + "\"";
  return out;
}

std::string RunName(const RunSummary& r) { return "#" + std::to_string(r.info.run_id) + " " + Escape(r.info.label); }

// A short line in the run's colour and dash, for legends and headings.
std::string Swatch(size_t run) {
  return "<svg class=\"swatch\" width=\"26\" height=\"10\" aria-hidden=\"true\">"
         "<line x1=\"1\" y1=\"5\" x2=\"25\" y2=\"5\"" +
         RunStroke(run) + "/></svg>";
}

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

// One key per series: its swatch and its name (HTML).
std::string Legend(const std::vector<std::string>& names, const std::vector<bool>& has_data) {
  std::string out = "<div class=\"legend\">";
  for (size_t i = 0; i < names.size(); ++i) {
    out += "<span class=\"key\">" + Swatch(i) + names[i];
    if (!has_data[i]) out += " <em>(no data)</em>";
    out += "</span>";
  }
  return out + "</div>";
}

std::string Note(const std::string& html) { return "<p class=\"note\">" + html + "</p>"; }

std::string Figure(const std::string& caption, const std::string& body) {
  return "<figure><figcaption>" + caption + "</figcaption>" + body + "</figure>";
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

// ---------------------------------------------------------------- line charts

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  // 0 at lo, 1 at hi; values outside are clamped.
  double Norm(double v) const {
    const double t = std::clamp(v, lo, hi);
    return log ? std::log10(t / lo) / std::log10(hi / lo) : (t - lo) / (hi - lo);
  }
};

struct Tick {
  double value;
  std::string label;
};

struct Frame {
  static constexpr double kWidth = 560, kHeight = 300, kLeft = 58, kRight = 36, kTop = 14, kBottom = 46;
  Axis x, y;
  double X(double v) const { return kLeft + x.Norm(v) * (kWidth - kLeft - kRight); }
  double Y(double v) const { return kHeight - kBottom - y.Norm(v) * (kHeight - kTop - kBottom); }
};

using Points = std::vector<std::pair<double, double>>;  // data coordinates

struct LineChartSpec {
  std::string kind, name;
  Frame frame;
  std::vector<Tick> x_ticks, y_ticks;
  std::vector<Tick> y_marks;  // dashed reference lines, labelled on the right
  std::vector<Tick> x_marks;  // dashed reference lines, labelled at the top
  std::string x_title, y_title;
  bool dots = false;  // a dot at every point (a lone point always gets one)
};

std::string Coord(double v) { return Fixed(v, 1); }

std::string OpenSvg(const std::string& kind, const std::string& name, double width, double height) {
  const std::string w = Coord(width), h = Coord(height);
  return "<svg class=\"chart\" data-chart=\"" + Escape(kind + ":" + name) + "\" viewBox=\"0 0 " + w + " " + h +
         "\" width=\"" + w + "\" height=\"" + h + "\" role=\"img\" aria-label=\"" + Escape(kind + " " + name) + "\">";
}

std::string Text(double x, double y, const char* anchor, const std::string& text, const char* cls = "tick") {
  return "<text class=\"" + std::string(cls) + "\" x=\"" + Coord(x) + "\" y=\"" + Coord(y) + "\" text-anchor=\"" +
         anchor + "\">" + text + "</text>";
}

std::string Line(double x1, double y1, double x2, double y2, const char* cls) {
  return "<line class=\"" + std::string(cls) + "\" x1=\"" + Coord(x1) + "\" y1=\"" + Coord(y1) + "\" x2=\"" +
         Coord(x2) + "\" y2=\"" + Coord(y2) + "\"/>";
}

std::string Marks(const LineChartSpec& s) {
  const Frame& f = s.frame;
  const double x0 = Frame::kLeft, x1 = Frame::kWidth - Frame::kRight;
  const double y0 = Frame::kHeight - Frame::kBottom, y1 = Frame::kTop;
  std::string out;
  for (const Tick& t : s.y_marks) {
    out += Line(x0, f.Y(t.value), x1, f.Y(t.value), "mark") + Text(x1 + 4, f.Y(t.value) + 4, "start", t.label);
  }
  for (const Tick& t : s.x_marks) {
    out += Line(f.X(t.value), y0, f.X(t.value), y1, "mark") + Text(f.X(t.value) + 4, y1 + 12, "start", t.label);
  }
  return out;
}

std::string Axes(const LineChartSpec& s) {
  const Frame& f = s.frame;
  const double x0 = Frame::kLeft, x1 = Frame::kWidth - Frame::kRight;
  const double y0 = Frame::kHeight - Frame::kBottom, y1 = Frame::kTop;
  std::string out = "<rect class=\"plot\" x=\"" + Coord(x0) + "\" y=\"" + Coord(y1) + "\" width=\"" +
                    Coord(x1 - x0) + "\" height=\"" + Coord(y0 - y1) + "\"/>";
  double labelled = -1e9;  // x of the last labelled tick: closer ones keep their grid line only
  for (const Tick& t : s.x_ticks) {
    const double x = f.X(t.value);
    out += Line(x, y0, x, y1, "gridline");
    if (x - labelled < 48) continue;
    out += Text(x, y0 + 16, "middle", t.label);
    labelled = x;
  }
  for (const Tick& t : s.y_ticks) {
    out += Line(x0, f.Y(t.value), x1, f.Y(t.value), "gridline") + Text(x0 - 6, f.Y(t.value) + 4, "end", t.label);
  }
  out += Marks(s) + Line(x0, y0, x1, y0, "axis") + Line(x0, y0, x0, y1, "axis");
  out += Text((x0 + x1) / 2, Frame::kHeight - 8, "middle", s.x_title, "title");
  return out + "<text class=\"title\" transform=\"translate(14 " + Coord((y0 + y1) / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + s.y_title + "</text>";
}

std::string SeriesSvg(const Frame& f, const Points& points, size_t run, bool dots) {
  std::string coords;
  for (const auto& [x, y] : points) coords += (coords.empty() ? "" : " ") + Coord(f.X(x)) + "," + Coord(f.Y(y));
  std::string out = "<polyline class=\"data line\" points=\"" + coords + "\"" + RunStroke(run) + "/>";
  if (!dots && points.size() > 1) return out;  // a lone point draws no line
  for (const auto& [x, y] : points) {
    out += "<circle class=\"data\" cx=\"" + Coord(f.X(x)) + "\" cy=\"" + Coord(f.Y(y)) + "\" r=\"3\" fill=\"" +
           kPalette[run % kPalette.size()] + "\"/>";
  }
  return out;
}

// One chart, one series per name (empty: no data for that name), and its legend; names are HTML.
std::string LineChart(const LineChartSpec& spec, const std::vector<Points>& series,
                      const std::vector<std::string>& names) {
  std::string out = OpenSvg(spec.kind, spec.name, Frame::kWidth, Frame::kHeight) + Axes(spec);
  std::vector<bool> has_data;
  for (size_t i = 0; i < series.size(); ++i) {
    has_data.push_back(!series[i].empty());
    if (has_data.back()) out += SeriesSvg(spec.frame, series[i], i, spec.dots);
  }
  return out + "</svg>" + Legend(names, has_data);
}

// Nice steps (1, 2 or 5 x 10^k), about `target` of them over [lo, hi].
std::vector<double> LinearTickValues(double lo, double hi, int target) {
  const double raw = (hi - lo) / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * magnitude;
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  }
  std::vector<double> ticks;
  for (double i = std::ceil(lo / step - 1e-9); i * step <= hi * (1 + 1e-9); ++i) ticks.push_back(i * step);
  return ticks;
}

// Decades when the range spans three, else 1-2-5 or every digit; the ends when nothing fits.
std::vector<double> LogTickValues(double lo, double hi) {
  static const std::vector<std::vector<int>> kMultiples = {{1}, {1, 2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}};
  std::vector<double> ticks;
  for (const std::vector<int>& multiples : kMultiples) {
    ticks.clear();
    for (int e = static_cast<int>(std::floor(std::log10(lo))); e <= static_cast<int>(std::ceil(std::log10(hi))); ++e) {
      for (int m : multiples) {
        const double v = m * std::pow(10.0, e);
        if (v >= lo && v <= hi) ticks.push_back(v);
      }
    }
    if (ticks.size() >= 3) return ticks;
  }
  return ticks.size() >= 2 ? ticks : std::vector<double>{lo, hi};
}

template <typename Format>
std::vector<Tick> Ticks(const std::vector<double>& values, Format format) {
  std::vector<Tick> ticks;
  for (double v : values) ticks.push_back({v, format(v)});
  return ticks;
}

// A log axis over [lo, hi] (both > 0), padded a little (a factor of 2 around a single value).
Axis PaddedLogAxis(double lo, double hi) {
  const double pad = lo == hi ? 2 : std::pow(hi / lo, 0.03);
  return Axis{lo / pad, hi * pad, true};
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

constexpr std::string_view kCss = R"(
:root{color-scheme:light}
body{margin:0 auto;max-width:1240px;padding:20px 28px 48px;background:#fff;color:#1b1f24;
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
h1{font-size:24px;margin:0 0 4px}
h2{font-size:18px;margin:32px 0 8px;padding-bottom:4px;border-bottom:1px solid #d8dee4}
code{font:12.5px/1.3 ui-monospace,"SFMono-Regular",Menlo,Consolas,"DejaVu Sans Mono",monospace}
.lead{margin:0 0 12px;color:#444}
.hint,.note{color:#555;margin:6px 0 10px}
.note{font-style:italic}
.scroll{overflow-x:auto}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
th,td{padding:4px 10px;border-bottom:1px solid #e4e8ec;text-align:left;vertical-align:top}
thead th{background:#f3f5f7;border-bottom:2px solid #c9d1d9;white-space:nowrap}
table.metrics td,td.num{text-align:right;white-space:nowrap}
table.metrics tbody tr:not(.group):hover{background:#f6f8fa}
tr.group th{background:#eef2f6;color:#333;font-weight:600;padding-top:8px}
td.na{color:#999;text-align:center}
td.path{max-width:340px;word-break:break-all}
td.time,table.stability td:first-child{white-space:nowrap}
td.best strong{font-weight:700}
.star{color:#b8860b}
.tag{font-size:11px;background:#1b1f24;color:#fff;border-radius:3px;padding:1px 5px;vertical-align:1px}
.delta{display:block;font-size:12px}
.better{color:#0072b2}.worse{color:#d55e00}.same{color:#777}
.lowconf{color:#d55e00;font-weight:700;cursor:help}
.warn{color:#d55e00;font-weight:700}
.swatch{vertical-align:middle;margin-right:4px}
.swatch line{stroke-width:3}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:12px 24px}
figure{margin:8px 0 16px}
figcaption{font-weight:600;margin-bottom:4px}
svg.chart{display:block;max-width:100%;height:auto;font-size:11px}
svg.chart text{fill:#444}
svg.chart text.title{fill:#222;font-size:12px}
.plot{fill:#fcfcfd;stroke:none}
line.gridline{stroke:#e3e6ea;stroke-width:1}
line.axis{stroke:#6a737d;stroke-width:1}
line.mark{stroke:#999;stroke-width:1;stroke-dasharray:4 3}
polyline.line{fill:none;stroke-width:2;stroke-linejoin:round}
.legend{display:flex;flex-wrap:wrap;gap:4px 18px;font-size:13px;margin-top:4px}
.heatbg{fill:#c8ccd0}
.heatlegend{display:flex;align-items:flex-start;font-size:12px;margin:4px 0 12px;color:#444}
.heatlegend .bin{display:flex;flex-direction:column;align-items:center;width:34px;min-height:32px}
.heatlegend .cell{width:34px;height:14px;box-shadow:inset 0 0 0 1px rgba(0,0,0,.08)}
.heatlegend .gap{width:16px}
.hz{fill:#3a3a3a;background:#3a3a3a}
.h0{fill:#2166ac;background:#2166ac}.h1{fill:#4393c3;background:#4393c3}.h2{fill:#92c5de;background:#92c5de}
.h3{fill:#d1e5f0;background:#d1e5f0}.h4{fill:#f7f7f7;background:#f7f7f7}.h5{fill:#fddbc7;background:#fddbc7}
.h6{fill:#f4a582;background:#f4a582}.h7{fill:#d6604d;background:#d6604d}.h8{fill:#b2182b;background:#b2182b}
)";

// After load: does every chart have a box and at least one drawn data element?
constexpr std::string_view kCheckScript = R"(
window.addEventListener("load", function () {
  var charts = document.querySelectorAll(".chart"), empty = [];
  charts.forEach(function (chart) {
    var box = chart.getBoundingClientRect(), drawn = false;
    chart.querySelectorAll(".data").forEach(function (el) {
      var b = el.getBBox();
      if (b.width > 0 || b.height > 0) drawn = true;
    });
    if (box.width <= 0 || box.height <= 0 || !drawn) empty.push(chart.getAttribute("data-chart"));
  });
  document.body.setAttribute("data-render-check", JSON.stringify({charts: charts.length, empty: empty}));
});
)";

// The page up to <body>; `title` is HTML, `css` is added to the shared style sheet.
std::string OpenPage(const std::string& title, std::string_view css = "") {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>" +
         title + "</title><style>" + std::string(kCss) + std::string(css) + "</style></head><body>\n";
}

std::string ClosePage() { return "<script>" + std::string(kCheckScript) + "</script>\n</body></html>\n"; }

std::string PageTitle(const Comparison& c) {
  std::string out = "Colibri comparison:";
  for (const RunSummary& r : c.runs) out += " #" + std::to_string(r.info.run_id);
  return out;
}

// ---------------------------------------------------------------- curves (curves_html.h)

constexpr std::string_view kCurvesCss = R"(.lead{margin:0 0 4px}
.charts+.scroll{margin-top:8px}
table.curves td{text-align:right;white-space:nowrap}
table.curves th:not(:first-child){text-align:right}
table.curves td:first-child{text-align:left}
)";

// The x axis over every point and the marker; a log axis keeps only x > 0.
Axis CurvesXAxis(const CurvesChart& chart) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  auto take = [&](double x) {
    if (chart.log_x && x <= 0) return;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  };
  for (const CurveSeries& s : chart.series) {
    for (const auto& point : s.points) take(point.first);
  }
  if (chart.x_marker) take(chart.x_marker->first);
  if (lo > hi) lo = hi = 1;  // no usable x
  if (chart.log_x) return PaddedLogAxis(lo, hi);
  return Axis{lo, lo == hi ? lo + 1 : hi, false};
}

std::string AxisLabel(double v) { return Significant(v, 3, true); }

std::string CurvesChartHtml(const CurvesChart& chart) {
  const std::string caption = Escape(chart.title);
  const auto no_points = [](const CurveSeries& s) { return s.points.empty(); };
  if (std::all_of(chart.series.begin(), chart.series.end(), no_points)) return Figure(caption, Note("No points."));
  const Frame frame{CurvesXAxis(chart), Axis{chart.y_min, chart.y_max, false}};
  const std::vector<double> x_ticks =
      chart.log_x ? LogTickValues(frame.x.lo, frame.x.hi) : LinearTickValues(frame.x.lo, frame.x.hi, 6);
  LineChartSpec spec{.kind = "curves",
                     .name = chart.name,
                     .frame = frame,
                     .x_ticks = Ticks(x_ticks, AxisLabel),
                     .y_ticks = Ticks(LinearTickValues(chart.y_min, chart.y_max, 5), AxisLabel),
                     .y_marks = {},
                     .x_marks = {},
                     .x_title = Escape(chart.x_label),
                     .y_title = Escape(chart.y_label),
                     .dots = true};
  if (chart.x_marker) spec.x_marks.push_back({chart.x_marker->first, Escape(chart.x_marker->second)});
  std::vector<Points> series;
  std::vector<std::string> names;
  for (const CurveSeries& s : chart.series) {
    series.push_back(s.points);
    names.push_back(Escape(s.label));
  }
  return Figure(caption, LineChart(spec, series, names));
}

std::string CellsHtml(const char* tag, const std::vector<std::string>& cells) {
  std::string out = "<tr>";
  for (const std::string& cell : cells) out += "<" + std::string(tag) + ">" + Escape(cell) + "</" + tag + ">";
  return out + "</tr>";
}

std::string CurvesTable(const CurvesPage& page) {
  if (page.table_header.empty() && page.table_rows.empty()) return "";
  std::string out = "<div class=\"scroll\"><table class=\"curves\"><thead>" + CellsHtml("th", page.table_header) +
                    "</thead><tbody>";
  for (const std::vector<std::string>& row : page.table_rows) out += CellsHtml("td", row);
  return out + "</tbody></table></div>";
}

}  // namespace

std::string RenderHtml(const Comparison& c) {
  std::string out = OpenPage(PageTitle(c));
  if (c.runs.empty()) return out + Note("No runs to compare.") + "</body></html>\n";
  out += RenderHeader(c) + "\n" + RenderMetrics(c) + "\n" + RenderCdfs(c) + "\n" + RenderHeatMaps(c) + "\n" +
         RenderHitRate(c) + "\n" + RenderStability(c) + "\n";
  return out + ClosePage();
}

std::string RenderCurvesHtml(const CurvesPage& page) {
  std::string out = OpenPage(Escape(page.title), kCurvesCss) + "<h1>" + Escape(page.title) + "</h1>\n";
  for (const std::string& note : page.notes) out += "<p class=\"lead\">" + Escape(note) + "</p>";
  out += "\n<div class=\"charts\">";
  for (const CurvesChart& chart : page.charts) out += CurvesChartHtml(chart);
  return out + "</div>\n" + CurvesTable(page) + "\n" + ClosePage();
}

}  // namespace colibri::reports
