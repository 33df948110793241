// RenderCurvesHtml (curves_html.h): a page of line charts and a table, drawn
// with the comparison page's kit (html_kit.h: line charts, styles, check
// script). Deterministic: the CurvesPage's order, no clock.
#include <algorithm>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "colibri/reports/curves_html.h"
#include "html_kit.h"

namespace colibri::reports {
namespace {

using namespace html_kit;  // NOLINT: the pages' drawing kit

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

std::string RenderCurvesHtml(const CurvesPage& page) {
  std::string out = OpenPage(Escape(page.title), kCurvesCss) + "<h1>" + Escape(page.title) + "</h1>\n";
  for (const std::string& note : page.notes) out += "<p class=\"lead\">" + Escape(note) + "</p>";
  out += "\n<div class=\"charts\">";
  for (const CurvesChart& chart : page.charts) out += CurvesChartHtml(chart);
  return out + "</div>\n" + CurvesTable(page) + "\n" + ClosePage();
}

}  // namespace colibri::reports
