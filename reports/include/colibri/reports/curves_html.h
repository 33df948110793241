// Curves as one self-contained HTML5 page: line charts (inline SVG), notes and
// a table, with the run-comparison report's look (RenderHtml, compare.h) and
// its drawing code -- inline CSS, no network, no fonts, no libraries. Used by
// `colibri cache sweep --format html` for hit-rate curves over budgets.
//
// Ownership: plain values; RenderCurvesHtml reads the page and returns a new
// string. Thread-safety: no shared state; concurrent calls are safe.
// Deterministic: numbers through std::to_chars (never the locale), data in the
// given order, no clock. Escaping: every string (titles, labels, notes, table
// cells) is text and is HTML-escaped; none is markup.
//
// A few lines of inline script check after load that every chart drew
// something and write the verdict to <body data-render-check> as JSON
// {charts, empty[]}, as RenderHtml's page does. A chart without any point is
// not drawn: a note says so instead.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace colibri::reports {

struct CurveSeries {
  std::string label;                                 // the legend entry
  std::vector<std::pair<double, double>> points;     // (x, y) in data units, drawn in this order
};

struct CurvesChart {
  std::string name;                    // short and unique on the page: data-chart="curves:<name>"
  std::string title;                   // the caption above the chart
  std::string x_label, y_label;        // axis titles
  bool log_x = false;                  // log x axis: x values must be > 0
  double y_min = 0, y_max = 100;       // the y axis; the x axis spans the points and the marker
  std::vector<CurveSeries> series;     // one colour (then dash pattern) each, in order
  std::optional<std::pair<double, std::string>> x_marker;  // a dashed vertical line at x, with its label
};

struct CurvesPage {
  std::string title;                   // <title> and the heading
  std::vector<std::string> notes;      // one paragraph each, under the heading
  std::vector<CurvesChart> charts;
  std::vector<std::string> table_header;               // no table when both are empty
  std::vector<std::vector<std::string>> table_rows;
};

std::string RenderCurvesHtml(const CurvesPage& page);

}  // namespace colibri::reports
