// The pieces both HTML pages of reports/ are drawn with (render_html.cc:
// the run comparison; render_curves_html.cc: the curves page): HTML text
// and number formatting, run colours and legends, the SVG line chart, and
// the page shell (one style sheet, the render-check script). Internal to
// reports/.
//
// Deterministic: numbers through std::to_chars (never the locale). Free
// functions and plain values, thread-safe.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace colibri::reports::html_kit {

// ---------------------------------------------------------------- text and numbers

std::string Escape(std::string_view s);
// Fixed point with `decimals` digits; never "-0".
std::string Fixed(double v, int decimals);
std::string Int(uint64_t v);
// `digits` significant digits in fixed notation; whole numbers print whole.
// `trim`: no trailing zeros after the point (axis labels).
std::string Significant(double v, int digits, bool trim = false);

struct Scale {
  double factor;
  const char* suffix;
};
inline constexpr Scale kTimeScales[] = {{1, " ns"}, {1e3, " µs"}, {1e6, " ms"}, {1e9, " s"}};
inline constexpr Scale kByteScales[] = {
    {1, " B"}, {1024.0, " KiB"}, {1048576.0, " MiB"}, {1073741824.0, " GiB"}, {1099511627776.0, " TiB"}};
inline constexpr Scale kCountScales[] = {{1, ""}, {1e3, "k"}, {1e6, "M"}, {1e9, "G"}};

// Three significant digits in the largest unit the value reaches (after rounding).
std::string Scaled(double v, std::span<const Scale> scales, bool trim = false);
std::string FormatNs(double ns);
std::string TimeLabel(double ns);
std::string CountLabel(double n);
// Two decimals, never rounding a partial value to 0% or 100%.
std::string Pct(double pct);
std::string OrDash(const std::string& s);

// ---------------------------------------------------------------- runs: colours and legends

// The stroke attributes of run `run`'s series (colour, then a dash pattern past seven runs).
std::string RunStroke(size_t run);
// A short line in the run's colour and dash, for legends and headings.
std::string Swatch(size_t run);
// One key per series: its swatch and its name (HTML).
std::string Legend(const std::vector<std::string>& names, const std::vector<bool>& has_data);
std::string Note(const std::string& html);
std::string Figure(const std::string& caption, const std::string& body);

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

std::string Coord(double v);
std::string OpenSvg(const std::string& kind, const std::string& name, double width, double height);
std::string Text(double x, double y, const char* anchor, const std::string& text, const char* cls = "tick");
std::string Line(double x1, double y1, double x2, double y2, const char* cls);
std::string Marks(const LineChartSpec& s);
std::string Axes(const LineChartSpec& s);
std::string SeriesSvg(const Frame& f, const Points& points, size_t run, bool dots);
// One chart, one series per name (empty: no data for that name), and its legend; names are HTML.
std::string LineChart(const LineChartSpec& spec, const std::vector<Points>& series,
                      const std::vector<std::string>& names);
// Nice steps (1, 2 or 5 x 10^k), about `target` of them over [lo, hi].
std::vector<double> LinearTickValues(double lo, double hi, int target);
std::vector<double> LogTickValues(double lo, double hi);
template <typename Format>
std::vector<Tick> Ticks(const std::vector<double>& values, Format format) {
  std::vector<Tick> ticks;
  for (double v : values) ticks.push_back({v, format(v)});
  return ticks;
}
// A log axis over [lo, hi] (both > 0), padded a little (a factor of 2 around a single value).
Axis PaddedLogAxis(double lo, double hi);

// ---------------------------------------------------------------- page

// The page up to <body>; `title` is HTML, `css` is added to the shared style sheet.
std::string OpenPage(const std::string& title, std::string_view css = "");
// The render-check script and the end of the page.
std::string ClosePage();

}  // namespace colibri::reports::html_kit
