// RenderHtml (compare.h) on a Comparison built in memory: the page is
// self-contained, escapes data, is deterministic, formats values by unit, notes
// missing data in text -- and, in a real headless Chromium, every chart draws,
// nothing logs to the console and the screenshot is not blank. The same for
// RenderCurvesHtml (curves_html.h) on a CurvesPage, with its marker.
//
// The browser test needs chromium (tools/install-deps.sh installs it) and
// python3; COLIBRI_SKIP_BROWSER_TESTS=1 skips it.
#include "colibri/reports/compare.h"
#include "colibri/reports/curves_html.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace colibri::reports {
namespace {

namespace fs = std::filesystem;

constexpr char kHostileLabel[] = "pc-nvme <script>alert('x')</script> & \"co\"";

Percentiles MakePercentiles(uint64_t count, int64_t p50_ns) {
  Percentiles p;
  p.count = count;
  p.min = p50_ns / 2;
  p.p50 = p50_ns;
  p.p90 = p50_ns * 2;
  p.p99 = p50_ns * 4;
  p.p999 = p50_ns * 5;
  p.max = p50_ns * 6;
  p.mean = static_cast<double>(p50_ns) * 1.3;
  return p;
}

// `points` values growing geometrically from `first_ns`, fractions up to 1.
std::vector<CdfPoint> MakeCdf(int64_t first_ns, int points) {
  std::vector<CdfPoint> cdf;
  double value = static_cast<double>(first_ns);
  for (int i = 1; i <= points; ++i, value *= 1.35) cdf.push_back({static_cast<int64_t>(value), double(i) / points});
  return cdf;
}

// A layers x experts matrix with a few hot and some never-selected experts.
std::vector<std::vector<uint64_t>> MakeLoad(int layers, int experts, uint64_t seed) {
  std::vector<std::vector<uint64_t>> m(layers, std::vector<uint64_t>(experts));
  for (int l = 0; l < layers; ++l) {
    for (int e = 0; e < experts; ++e) m[l][e] = (e * 7 + l * 3 + seed) % 11 == 0 ? 0 : 10 + (e * 13 + l + seed) % 40;
    m[l][(l + seed) % experts] = 200;
  }
  return m;
}

std::vector<HitRatePoint> MakeHitRate(int points, double final_pct) {
  std::vector<HitRatePoint> series;
  for (int i = 1; i <= points; ++i) {
    const uint64_t lookups = 1000ull * i;
    const double pct = final_pct * (1 - 0.5 / i);
    series.push_back({uint64_t(i) * 250, int64_t(i) * 1000000, lookups, static_cast<uint64_t>(lookups * pct / 100)});
  }
  return series;
}

RunSummary MakeRun(int64_t id, const std::string& label, int64_t p50_ns) {
  RunSummary r;
  r.info.run_id = id;
  r.info.kind = "replay";
  r.info.status = "complete";
  r.info.label = label;
  r.info.trace_path = "/data/traces/qwen3-30b-a3b.ctrace";
  r.info.trace_digest = "9f2c";
  r.info.backends = "storage=sim transfer=sim compute=sim";
  r.info.seed = 42;
  r.info.git_commit = "d2d6cbd0a1b2";
  r.info.started_at_ms = 1717236000000 + id * 60000;
  r.distributions["request_latency_ns"] = MakePercentiles(64, p50_ns);
  r.cdfs["request_latency_ns"] = MakeCdf(p50_ns / 3, 24);
  r.load_cv_mean = 0.41;
  r.load_cv_max = 0.73;
  return r;
}

// Three runs: the baseline (a hostile label), one with routing divergence, one
// without a load matrix or stability; 4 rows across three groups.
Comparison MakeComparison() {
  Comparison c;
  c.runs.push_back(MakeRun(11, kHostileLabel, 900000));
  c.runs.push_back(MakeRun(12, "phone-ufs", 2100000));
  c.runs.push_back(MakeRun(13, "h200", 300000));
  c.runs[0].cdfs["step_latency_ns.nvme_read"] = MakeCdf(40000, 30);
  c.runs[1].cdfs["step_latency_ns.nvme_read"] = MakeCdf(150000, 30);
  c.runs[0].cdfs["ttft_ns"] = {{5000000, 1.0}};  // a single sample
  c.runs[0].expert_load = MakeLoad(4, 16, 1);
  c.runs[1].expert_load = MakeLoad(4, 16, 5);
  c.runs[0].hit_rate = MakeHitRate(12, 92);
  c.runs[1].hit_rate = MakeHitRate(12, 95);
  c.runs[2].hit_rate = MakeHitRate(1, 80);
  RoutingStability s;
  s.compared = 3000;
  s.set_identical = 2990;
  s.ranked_identical = 2950;
  s.jaccard_sum = 2995.5;
  s.diverged = true;
  s.first = {7, 3, 2, {1, 4}, {1, 5}};
  c.runs[1].stability = s;
  c.runs[2].stability_note = "routing traces differ in shape";
  c.rows = {
      {"end to end", "request_latency_ns.p99", "ns", true, {1234000.0, 2500000.0, 900000.0}, 2, true},
      {"end to end", "tokens_per_s", "1/s", false, {12.5, 8.25, 30.0}, 2, false},
      {"cache", "hit_pct_decode.l2", "%", false, {91.5, 93.25, std::nullopt}, 1, false},
      {"cache", "read_bytes_per_token", "bytes", true, {12.0 * 1048576, 3.5 * 1073741824, std::nullopt}, 0, false},
      {"load", "load_cv_mean", "", true, {0.25, 0.5, 0.25}, -1, false},
  };
  return c;
}

constexpr int kExpectedCharts = 3 + 2 + 1;  // CDFs, heat maps, hit rate

size_t Count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

TEST(HtmlRender, IsSelfContained) {
  const std::string html = RenderHtml(MakeComparison());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  for (const char* outside : {"http://", "https://", "src=", "<link", "@import", "url("}) {
    EXPECT_EQ(html.find(outside), std::string::npos) << outside;
  }
  EXPECT_EQ(Count(html, "<script>"), 1u);  // the render check only
}

TEST(HtmlRender, EscapesStringsFromData) {
  const std::string html = RenderHtml(MakeComparison());
  EXPECT_NE(html.find("pc-nvme &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;co&quot;"),
            std::string::npos);
  EXPECT_EQ(html.find(kHostileLabel), std::string::npos);
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
}

TEST(HtmlRender, IsDeterministic) {
  const Comparison c = MakeComparison();
  const std::string first = RenderHtml(c);
  EXPECT_EQ(first, RenderHtml(c));
  EXPECT_EQ(first, RenderHtml(MakeComparison()));
}

TEST(HtmlRender, FormatsValuesByUnitAndMarksTheBest) {
  const std::string html = RenderHtml(MakeComparison());
  for (const char* text : {"1.23 ms", "2.50 ms", "900 µs", "12.5 /s", "91.50%", "93.25%", "12 MiB", "3.50 GiB",
                           "0.250", "+102.6%", "+1.75 pp", "−27.1%"}) {
    EXPECT_NE(html.find(text), std::string::npos) << text;
  }
  EXPECT_EQ(Count(html, "<td class=\"best\">"), 4u);  // every row but the tied one
  EXPECT_NE(html.find("<td class=\"best\"><strong>900 µs</strong>"), std::string::npos);
  EXPECT_NE(html.find("<code>request_latency_ns.p99</code> <span class=\"lowconf\""), std::string::npos);
  EXPECT_EQ(Count(html, "<tr class=\"group\">"), 3u);
}

TEST(HtmlRender, DrawsEveryChartAndTheStability) {
  const std::string html = RenderHtml(MakeComparison());
  EXPECT_EQ(Count(html, "class=\"chart\""), size_t{kExpectedCharts});
  for (const char* chart : {"cdf:request_latency_ns", "cdf:step_latency_ns.nvme_read", "cdf:ttft_ns",
                            "heatmap:run-11", "heatmap:run-12", "hitrate:cumulative"}) {
    EXPECT_NE(html.find("data-chart=\"" + std::string(chart) + "\""), std::string::npos) << chart;
  }
  EXPECT_EQ(Count(html, "<rect class=\"data h"), 2u * 4 * 16);
  EXPECT_NE(html.find("#13 h200: no expert-load matrix stored"), std::string::npos);
  EXPECT_NE(html.find("request 7, position 3, layer 2: [1, 4] → [1, 5]"), std::string::npos);
  EXPECT_NE(html.find("99.67%"), std::string::npos);  // set identical
  EXPECT_NE(html.find("routing traces differ in shape"), std::string::npos);
}

TEST(HtmlRender, SaysInTextWhenDataIsMissing) {
  Comparison c;
  c.runs.push_back(MakeRun(1, "bare", 1000));
  c.runs[0].cdfs.clear();
  std::string html = RenderHtml(c);
  EXPECT_EQ(html.find("<svg class=\"chart\""), std::string::npos);
  for (const char* note : {"No metrics to compare.", "No latency CDFs stored", "no expert-load matrix stored",
                           "No hit-rate series stored", "One run only"}) {
    EXPECT_NE(html.find(note), std::string::npos) << note;
  }
  c.runs[0].cdfs["queue_ns"] = {};
  html = RenderHtml(c);
  EXPECT_EQ(html.find("<svg class=\"chart\""), std::string::npos);
  EXPECT_NE(html.find("No samples in any run."), std::string::npos);
}

// ---------------------------------------------------------------- curves

constexpr char kHostileSeries[] = "lru <b>&</b> 'x'";

// Two charts of three series (one a lone point), the token-cycle marker, notes and a table.
CurvesPage MakeCurvesPage() {
  CurvesPage page{.title = "Colibri cache sweep: \"a<b>.ctrace\"",
                  .notes = {"a<b>.ctrace: 6192 layer batches, token cycle T = 785 MiB", "warning: <below T>"},
                  .charts = {},
                  .table_header = {"policy", "budget MiB", "hit% decode"},
                  .table_rows = {{kHostileSeries, "500 <T", "0.00"}, {"belady", "500 <T", "45.30"}}};
  for (const char* name : {"decode", "cumulative"}) {
    page.charts.push_back({.name = name,
                           .title = std::string(name) + " hit % by budget",
                           .x_label = "budget (MiB, log scale)",
                           .y_label = "hit %",
                           .log_x = true,
                           .y_min = 0,
                           .y_max = 100,
                           .series = {{kHostileSeries, {{500, 0}, {1000, 37.7}, {4000, 80.3}, {8000, 96}}},
                                      {"belady", {{500, 45.3}, {1000, 62.7}, {4000, 92.7}, {8000, 97.1}}},
                                      {"lfu+coact", {{2000, 60}}}},
                           .x_marker = std::pair{785.0, "T = 785 MiB"}});
  }
  return page;
}

TEST(HtmlCurves, IsSelfContained) {
  const std::string html = RenderCurvesHtml(MakeCurvesPage());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  for (const char* outside : {"http://", "https://", "src=", "<link", "@import", "url("}) {
    EXPECT_EQ(html.find(outside), std::string::npos) << outside;
  }
  EXPECT_EQ(Count(html, "<script>"), 1u);  // the render check only
}

TEST(HtmlCurves, EscapesStringsFromData) {
  const std::string html = RenderCurvesHtml(MakeCurvesPage());
  EXPECT_EQ(html.find(kHostileSeries), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_EQ(Count(html, "lru &lt;b&gt;&amp;&lt;/b&gt; &#39;x&#39;"), 2u + 1);  // two legends, one table row
  EXPECT_NE(html.find("<title>Colibri cache sweep: &quot;a&lt;b&gt;.ctrace&quot;</title>"), std::string::npos);
  EXPECT_NE(html.find("warning: &lt;below T&gt;"), std::string::npos);
  EXPECT_NE(html.find("<td>500 &lt;T</td>"), std::string::npos);
}

TEST(HtmlCurves, IsDeterministic) {
  const CurvesPage page = MakeCurvesPage();
  const std::string first = RenderCurvesHtml(page);
  EXPECT_EQ(first, RenderCurvesHtml(page));
  EXPECT_EQ(first, RenderCurvesHtml(MakeCurvesPage()));
}

TEST(HtmlCurves, DrawsEveryChartWithTheMarker) {
  const std::string html = RenderCurvesHtml(MakeCurvesPage());
  EXPECT_EQ(Count(html, "<svg class=\"chart\""), 2u);
  EXPECT_NE(html.find("data-chart=\"curves:decode\""), std::string::npos);
  EXPECT_NE(html.find("data-chart=\"curves:cumulative\""), std::string::npos);
  EXPECT_EQ(Count(html, "<polyline class=\"data line\""), 2u * 3);
  EXPECT_EQ(Count(html, "<circle class=\"data\""), 2u * (4 + 4 + 1));  // a dot per point
  EXPECT_EQ(Count(html, "<line class=\"mark\""), 2u);                // T, vertical
  EXPECT_EQ(Count(html, ">T = 785 MiB</text>"), 2u);
  for (const char* tick : {">500</text>", ">1000</text>", ">5000</text>", ">100</text>"}) {
    EXPECT_NE(html.find(tick), std::string::npos) << tick;
  }
  EXPECT_EQ(Count(html, "<tr><td>"), 2u);
}

TEST(HtmlCurves, SaysInTextWhenAChartHasNoPoints) {
  CurvesPage page = MakeCurvesPage();
  for (CurveSeries& s : page.charts[1].series) s.points.clear();
  const std::string html = RenderCurvesHtml(page);
  EXPECT_EQ(Count(html, "<svg class=\"chart\""), 1u);
  EXPECT_NE(html.find("No points."), std::string::npos);
}

// ---------------------------------------------------------------- in a real browser

std::string FindBrowser() {
  const char* path = std::getenv("PATH");
  for (const char* name : {"chromium", "chromium-headless-shell", "google-chrome"}) {
    std::stringstream dirs(path ? path : "");
    for (std::string dir; std::getline(dirs, dir, ':');) {
      const fs::path candidate = fs::path(dir) / name;
      if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return candidate.string();
    }
  }
  return "";
}

int Shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

// The JSON the page's script wrote to <body data-render-check="...">.
nlohmann::json RenderCheck(const std::string& dom) {
  const std::string marker = "data-render-check=\"";
  const size_t start = dom.find(marker);
  if (start == std::string::npos) return nullptr;
  std::string value = dom.substr(start + marker.size(), dom.find('"', start + marker.size()) - start - marker.size());
  for (const auto& [entity, ch] : {std::pair{"&quot;", "\""}, std::pair{"&amp;", "&"}}) {
    for (size_t at = value.find(entity); at != std::string::npos; at = value.find(entity, at + 1)) {
      value.replace(at, std::string(entity).size(), ch);
    }
  }
  return nlohmann::json::parse(value, nullptr, false);
}

std::vector<std::string> ConsoleLines(const std::string& log) {
  std::vector<std::string> lines;
  std::stringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.find("CONSOLE") != std::string::npos) lines.push_back(line);
  }
  return lines;
}

// A fresh directory, removed at the end unless the test failed (then kept to look at).
class ScratchDir {
 public:
  ScratchDir() : path_(fs::temp_directory_path() / ("colibri-html-test-" + std::to_string(getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    if (!::testing::Test::HasFailure()) fs::remove_all(path_);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Renders `page` in headless Chromium: `charts` charts, each drawn, no console line, a screenshot not blank.
void CheckInChromium(const std::string& page, int charts) {
  const char* skip = std::getenv("COLIBRI_SKIP_BROWSER_TESTS");
  if (skip && std::string(skip) == "1") GTEST_SKIP() << "COLIBRI_SKIP_BROWSER_TESTS=1";
  const std::string browser = FindBrowser();
  ASSERT_FALSE(browser.empty()) << "no chromium, chromium-headless-shell or google-chrome on PATH: run "
                                   "tools/install-deps.sh (it installs chromium), or set COLIBRI_SKIP_BROWSER_TESTS=1";
  ScratchDir dir;
  const fs::path html = dir.path() / "compare.html", png = dir.path() / "page.png";
  std::ofstream(html, std::ios::binary) << page;
  // As root Chromium needs --no-sandbox; its own profile keeps parallel runs apart.
  const std::string chromium = "timeout 60 " + Quote(browser) + " --headless --no-sandbox --disable-gpu" +
                               " --user-data-dir=" + Quote((dir.path() / "profile").string());
  const std::string url = Quote("file://" + html.string());
  const fs::path shot_log = dir.path() / "screenshot.log", dom = dir.path() / "dom.html", log = dir.path() / "dom.log";
  ASSERT_EQ(Shell(chromium + " --hide-scrollbars --window-size=1400,4000 --screenshot=" + Quote(png.string()) + " " +
                  url + " >" + Quote(shot_log.string()) + " 2>&1"),
            0)
      << ReadFile(shot_log);
  ASSERT_EQ(Shell(chromium + " --virtual-time-budget=2000 --enable-logging=stderr --v=0 --dump-dom " + url + " >" +
                  Quote(dom.string()) + " 2>" + Quote(log.string())),
            0)
      << ReadFile(log);

  const nlohmann::json check = RenderCheck(ReadFile(dom));
  ASSERT_TRUE(check.is_object()) << "no data-render-check in the dumped DOM: the script did not run";
  EXPECT_EQ(check.value("charts", -1), charts) << check.dump();
  EXPECT_EQ(check.value("empty", nlohmann::json::array()), nlohmann::json::array()) << check.dump();
  // The page writes nothing to the console: any console line is an error or a stray message.
  EXPECT_EQ(ConsoleLines(ReadFile(log)), std::vector<std::string>{});

  const fs::path summary = dir.path() / "png.json";
  const std::string script = std::string(COLIBRI_SOURCE_DIR) + "/tests/reports/check_png.py";
  ASSERT_EQ(Shell("python3 " + Quote(script) + " " + Quote(png.string()) + " >" + Quote(summary.string())), 0);
  const nlohmann::json image = nlohmann::json::parse(ReadFile(summary));
  EXPECT_EQ(image["width"], 1400) << image.dump();
  EXPECT_EQ(image["height"], 4000) << image.dump();
  EXPECT_GE(image["nonwhite"].get<double>(), 0.01) << image.dump();
  EXPECT_GE(image["colours"].get<int>(), 8) << image.dump();
}

TEST(HtmlRender, DrawsInHeadlessChromium) { CheckInChromium(RenderHtml(MakeComparison()), kExpectedCharts); }

TEST(HtmlCurves, DrawsInHeadlessChromium) { CheckInChromium(RenderCurvesHtml(MakeCurvesPage()), 2); }

}  // namespace
}  // namespace colibri::reports
