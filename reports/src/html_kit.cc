#include "html_kit.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

namespace colibri::reports::html_kit {
namespace {

// Okabe-Ito: distinguishable with the common colour-vision deficiencies. Past
// seven runs a colour repeats with a dash pattern.
constexpr std::array<const char*, 7> kPalette = {"#0072b2", "#e69f00", "#009e73", "#cc79a7",
                                                 "#d55e00", "#56b4e9", "#000000"};
constexpr std::array<const char*, 3> kDashes = {"", "7 3", "2 2"};

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

}  // namespace

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
std::string Significant(double v, int digits, bool trim) {
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


// Three significant digits in the largest unit the value reaches (after rounding).
std::string Scaled(double v, std::span<const Scale> scales, bool trim) {
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
std::string OrDash(const std::string& s) { return s.empty() ? "—" : Escape(s); }

// ---------------------------------------------------------------- runs: names and styles

std::string RunStroke(size_t run) {
  std::string out = std::string(" stroke=\"") + kPalette[run % kPalette.size()] + "\"";
  const char* dash = kDashes[(run / kPalette.size()) % kDashes.size()];
  if (*dash) out += std::string(" stroke-dasharray=\"") + dash + "\"";
  return out;
}

// A short line in the run's colour and dash, for legends and headings.
std::string Swatch(size_t run) {
  return "<svg class=\"swatch\" width=\"26\" height=\"10\" aria-hidden=\"true\">"
         "<line x1=\"1\" y1=\"5\" x2=\"25\" y2=\"5\"" +
         RunStroke(run) + "/></svg>";
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
// ---------------------------------------------------------------- line charts

std::string Coord(double v) { return Fixed(v, 1); }

std::string OpenSvg(const std::string& kind, const std::string& name, double width, double height) {
  const std::string w = Coord(width), h = Coord(height);
  return "<svg class=\"chart\" data-chart=\"" + Escape(kind + ":" + name) + "\" viewBox=\"0 0 " + w + " " + h +
         "\" width=\"" + w + "\" height=\"" + h + "\" role=\"img\" aria-label=\"" + Escape(kind + " " + name) + "\">";
}

std::string Text(double x, double y, const char* anchor, const std::string& text, const char* cls) {
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


// A log axis over [lo, hi] (both > 0), padded a little (a factor of 2 around a single value).
Axis PaddedLogAxis(double lo, double hi) {
  const double pad = lo == hi ? 2 : std::pow(hi / lo, 0.03);
  return Axis{lo / pad, hi * pad, true};
}
// ---------------------------------------------------------------- page

// The page up to <body>; `title` is HTML, `css` is added to the shared style sheet.
std::string OpenPage(const std::string& title, std::string_view css) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>" +
         title + "</title><style>" + std::string(kCss) + std::string(css) + "</style></head><body>\n";
}

std::string ClosePage() { return "<script>" + std::string(kCheckScript) + "</script>\n</body></html>\n"; }

}  // namespace colibri::reports::html_kit
