// `colibri cache sweep TRACE --budgets-mib LIST --policies LIST [--prefetch LIST]`:
// hit-rate curves of the engine's cache policies over a trace, under the
// shared accounting, with Belady's offline optimum as the ceiling and the
// token cycle T marked (docs/CACHE.md).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cache_flags.h"
#include "cli_common.h"
#include "colibri/engine/moe_engine.h"
#include "colibri/replay/cache_lab.h"
#include "colibri/reports/curves_html.h"
#include "colibri/reports/latency_json.h"
#include "colibri/traces/reader.h"
#include "commands.h"

namespace colibri::cli {
namespace {

constexpr double kMiB = 1048576.0;

struct SweepFlags {
  std::string trace;
  bool allow_torn = false;
  std::string budgets_mib = "1000,2000,4000,8000";
  std::string policies = "lru,lfu,layer,layerlfu,lfru,arc,random,belady";
  std::string prefetch = "none";
  uint32_t prefetch_width = 0;
  double prefetch_decay = 0.99;
  std::string prefetch_profile;
  std::string tier = "l2";
  PinFlags pin;
  uint64_t seed = 1;
  uint32_t threads = 2;
  std::string format = "table";
  std::string output;
  bool json = false;
};

Result<std::vector<uint64_t>> BudgetsBytes(const std::string& text) {
  COLIBRI_ASSIGN_OR_RETURN(const std::vector<std::string> parts, SplitList(text, "--budgets-mib"));
  std::vector<uint64_t> out;
  for (const std::string& part : parts) {
    char* end = nullptr;
    const double mib = std::strtod(part.c_str(), &end);
    if (end == part.c_str() || *end != '\0' || !(mib > 0) || mib > 1e9) {
      return Status::InvalidArgument("--budgets-mib: '" + part + "' is not a positive number of MiB");
    }
    out.push_back(static_cast<uint64_t>(std::llround(mib * kMiB)));
  }
  return out;
}

Result<replay::SweepOptions> Options(const SweepFlags& f, const replay::LabTrace& trace) {
  replay::SweepOptions o;
  COLIBRI_ASSIGN_OR_RETURN(o.budgets_bytes, BudgetsBytes(f.budgets_mib));
  COLIBRI_ASSIGN_OR_RETURN(o.policies, SplitList(f.policies, "--policies"));
  const std::vector<std::string> known = engine::CachePolicyNames();
  for (const std::string& p : o.policies) {
    if (std::find(known.begin(), known.end(), p) == known.end()) {
      return Status::InvalidArgument("--policies: unknown policy '" + p + "' (colibri cache sweep --help lists them)");
    }
  }
  COLIBRI_ASSIGN_OR_RETURN(const std::vector<std::string> predictors, SplitList(f.prefetch, "--prefetch"));
  o.prefetchers.clear();
  for (const std::string& p : predictors) {
    o.prefetchers.push_back(replay::PrefetchOptions{p, f.prefetch_width, f.prefetch_decay, f.prefetch_profile});
  }
  o.seed = f.seed;
  o.threads = f.threads;
  COLIBRI_ASSIGN_OR_RETURN(const uint64_t pin_bytes, ParseSizeBytes(f.pin.bytes));
  const bool pinned = std::find(o.policies.begin(), o.policies.end(), "pinned") != o.policies.end();
  COLIBRI_ASSIGN_OR_RETURN(o.pinned, replay::LearnHotSet(pinned, f.pin.from, pin_bytes, trace.moe_layers, trace.experts));
  return o;
}

// Belady's row at the same budget, for the gap.
const replay::LabResult* BeladyAt(const std::vector<replay::LabResult>& results, uint64_t budget) {
  for (const replay::LabResult& r : results) {
    if (r.policy == "belady" && r.budget_bytes == budget) return &r;
  }
  return nullptr;
}

Json ResultJson(const replay::LabResult& r, const replay::LabResult* belady, uint64_t token_cycle_bytes) {
  Json layers = Json::array();
  for (size_t l = 0; l < r.layer_lookups.size(); ++l) layers.push_back(reports::Pct(r.layer_hits[l], r.layer_lookups[l]));
  Json j{{"policy", r.policy},
         {"prefetch", r.predictor},
         {"budget_mib", static_cast<double>(r.budget_bytes) / kMiB},
         {"budget_bytes", r.budget_bytes},
         {"below_token_cycle", r.budget_bytes < token_cycle_bytes},
         {"hit_pct_decode", r.hit_pct_decode()},
         {"hit_pct_cum", r.hit_pct_cum()},
         {"read_bytes", r.read_bytes},
         {"demand_read_bytes", r.demand_read_bytes},
         {"prefetch_read_bytes", r.prefetch_read_bytes},
         {"preload_bytes", r.preload_bytes},
         {"belady_gap_pts", belady ? Json(belady->hit_pct_decode() - r.hit_pct_decode()) : Json(nullptr)},
         {"belady_gap_ratio", belady && r.hit_pct_decode() > 0 ? Json(belady->hit_pct_decode() / r.hit_pct_decode())
                                                              : Json(nullptr)},
         {"layer_hit_pct", layers}};
  if (r.predictor != "none") {
    j["prefetch_stats"] = Json{{"prefetch_hits", r.prefetch_hits},
                               {"prefetch_hits_decode", r.prefetch_hits_decode},
                               {"precision", r.precision()},
                               {"recall", r.recall()},
                               {"coverage", r.coverage()},
                               {"wasted_bytes", r.prefetch_wasted_bytes}};
  }
  return j;
}

// The LRU cliff guard for the smallest budget swept with global LRU.
std::string CliffWarning(const SweepFlags& f, const replay::SweepOptions& o, uint64_t token_cycle_bytes) {
  if (std::find(o.policies.begin(), o.policies.end(), "lru") == o.policies.end()) return "";
  const uint64_t smallest = *std::min_element(o.budgets_bytes.begin(), o.budgets_bytes.end());
  return engine::LruCliffWarning(f.tier == "l1" ? "L1" : "L2", "lru", smallest, token_cycle_bytes);
}

Result<Json> Sweep(const SweepFlags& f) {
  COLIBRI_ASSIGN_OR_RETURN(const replay::LabTrace trace, replay::LoadLabTrace(f.trace, f.allow_torn));
  if (trace.torn) {
    std::cerr << "colibri: warning: " << f.trace << ": " << traces::TornEnding(trace.torn_at_byte, trace.records) << "\n";
  }
  COLIBRI_ASSIGN_OR_RETURN(const replay::SweepOptions options, Options(f, trace));
  const std::string warning = CliffWarning(f, options, trace.token_cycle_bytes);
  if (!warning.empty()) std::cerr << "colibri: warning: " << warning << "\n";
  COLIBRI_ASSIGN_OR_RETURN(const std::vector<replay::LabResult> results, replay::Sweep(trace, options));
  Json rows = Json::array();
  for (const replay::LabResult& r : results) rows.push_back(ResultJson(r, BeladyAt(results, r.budget_bytes), trace.token_cycle_bytes));
  Json out{{"trace", f.trace},
           {"tier", f.tier},
           {"token_cycle_bytes", trace.token_cycle_bytes},
           {"token_cycle_mib", static_cast<double>(trace.token_cycle_bytes) / kMiB},
           {"layer_batches", trace.batches.size()},
           {"trace_ending", TraceEndingJson(trace.torn, trace.torn_at_byte, trace.records)},
           {"results", rows}};
  if (trace.has_recorded) {
    out["recorded"] = Json{{"hit_pct_decode", reports::Pct(trace.recorded_hits_decode, trace.recorded_lookups_decode)},
                           {"hit_pct_cum", reports::Pct(trace.recorded_hits, trace.recorded_lookups)},
                           {"lookups", trace.recorded_lookups}};
  }
  if (!warning.empty()) out["warning"] = warning;
  return out;
}

std::string Label(const Json& r) {
  const std::string prefetch = r["prefetch"].get<std::string>();
  return r["policy"].get<std::string>() + (prefetch == "none" ? "" : "+" + prefetch);
}

// A table row's cells: the columns below.
using Cells = std::array<std::string, 8>;
const Cells kColumns = {"policy",   "budget MiB",          "hit% decode", "hit% cum",
                        "read GiB", "gap to Belady (pts)", "prec",        "recall"};

std::string TwoDecimals(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f", v);
  return text;
}

// One result row as the tables show it; prefetch accuracy "-" for rows without prefetch.
Cells RowCells(const Json& r) {
  auto stat = [&](const char* k) {
    return r.contains("prefetch_stats") ? TwoDecimals(r["prefetch_stats"][k].get<double>()) : std::string("-");
  };
  const std::string budget = std::to_string(std::llround(r["budget_mib"].get<double>())) +
                             (r["below_token_cycle"].get<bool>() ? " <T" : "");
  const double gap = r["belady_gap_pts"].is_null() ? NAN : r["belady_gap_pts"].get<double>();
  return {Label(r), budget, TwoDecimals(r["hit_pct_decode"].get<double>()), TwoDecimals(r["hit_pct_cum"].get<double>()),
          TwoDecimals(r["read_bytes"].get<double>() / (kMiB * 1024)), TwoDecimals(gap), stat("precision"),
          stat("recall")};
}

std::string TableLine(bool markdown, const Cells& c) {
  const char* format = markdown ? "| %s | %s | %s | %s | %s | %s | %s | %s |\n"
                                : "%-16s  %10s  %11s  %9s  %9s  %19s  %6s  %6s\n";
  char line[512];
  std::snprintf(line, sizeof(line), format, c[0].c_str(), c[1].c_str(), c[2].c_str(), c[3].c_str(), c[4].c_str(),
                c[5].c_str(), c[6].c_str(), c[7].c_str());
  return line;
}

std::string Table(const Json& j, bool markdown) {
  std::string out = TableLine(markdown, kColumns);
  if (markdown) out += "|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const Json& r : j["results"]) out += TableLine(markdown, RowCells(r));
  return out;
}

std::string Csv(const Json& j) {
  std::string out = "policy,prefetch,budget_mib,below_token_cycle,hit_pct_decode,hit_pct_cum,read_bytes,belady_gap_pts\n";
  for (const Json& r : j["results"]) {
    out += r["policy"].get<std::string>() + "," + r["prefetch"].get<std::string>() + "," + r["budget_mib"].dump() + "," +
           (r["below_token_cycle"].get<bool>() ? "1" : "0") + "," + r["hit_pct_decode"].dump() + "," +
           r["hit_pct_cum"].dump() + "," + r["read_bytes"].dump() + "," + r["belady_gap_pts"].dump() + "\n";
  }
  return out;
}

// The lines above the table: the trace and its token cycle, the capture's own hit rates when recorded.
std::vector<std::string> HeadLines(const SweepFlags& f, const Json& j) {
  char line[256];
  std::snprintf(line, sizeof(line), "%s: %zu layer batches, token cycle T = %.0f MiB", f.trace.c_str(),
                j["layer_batches"].get<size_t>(), j["token_cycle_mib"].get<double>());
  std::vector<std::string> out{line};
  if (j.contains("recorded")) {
    std::snprintf(line, sizeof(line), "recorded by the capture: hit %.2f%% decode, %.2f%% cumulative",
                  j["recorded"]["hit_pct_decode"].get<double>(), j["recorded"]["hit_pct_cum"].get<double>());
    out.push_back(line);
  }
  return out;
}

// One curve per (policy, prefetch) label, in the results' order, points by budget: (budget MiB, r[key]).
std::vector<reports::CurveSeries> Curves(const Json& j, const char* key) {
  std::vector<reports::CurveSeries> out;
  for (const Json& r : j["results"]) {
    const std::string label = Label(r);
    auto it = std::find_if(out.begin(), out.end(), [&](const reports::CurveSeries& s) { return s.label == label; });
    if (it == out.end()) it = out.insert(out.end(), reports::CurveSeries{label, {}});
    it->points.emplace_back(r["budget_mib"].get<double>(), r[key].get<double>());
  }
  for (reports::CurveSeries& s : out) std::sort(s.points.begin(), s.points.end());
  return out;
}

reports::CurvesChart HitChart(const Json& j, const char* name, const char* what, const char* key) {
  const double t = j["token_cycle_mib"].get<double>();
  return {.name = name,
          .title = std::string(what) + " hit % by budget",
          .x_label = "budget (MiB, log scale)",
          .y_label = std::string(what) + " hit %",
          .log_x = true,
          .y_min = 0,
          .y_max = 100,
          .series = Curves(j, key),
          .x_marker = std::pair{t, "T = " + std::to_string(std::llround(t)) + " MiB"}};
}

std::string Html(const SweepFlags& f, const Json& j) {
  reports::CurvesPage page{.title = "Colibri cache sweep: " + std::filesystem::path(f.trace).filename().string(),
                           .notes = HeadLines(f, j),
                           .charts = {HitChart(j, "decode", "Decode", "hit_pct_decode"),
                                      HitChart(j, "cumulative", "Cumulative", "hit_pct_cum")},
                           .table_header = {kColumns.begin(), kColumns.end()},
                           .table_rows = {}};
  if (j.contains("warning")) page.notes.push_back("warning: " + j["warning"].get<std::string>());
  for (const Json& r : j["results"]) {
    const Cells cells = RowCells(r);
    page.table_rows.emplace_back(cells.begin(), cells.end());
  }
  return reports::RenderCurvesHtml(page);
}

std::string Render(const SweepFlags& f, const Json& j) {
  if (f.json || f.format == "json") return j.dump(2) + "\n";
  if (f.format == "csv") return Csv(j);
  if (f.format == "html") return Html(f, j);
  std::string head;
  for (const std::string& line : HeadLines(f, j)) head += line + (f.format == "md" ? "\n\n" : "\n");
  return head + Table(j, f.format == "md");
}

}  // namespace

void AddCacheCommands(CLI::App* app, int* exit_code) {
  CLI::App* cache = app->add_subcommand("cache", "Expert-cache policy lab over traces (docs/CACHE.md)");
  cache->require_subcommand(1);
  auto f = std::make_shared<SweepFlags>();
  CLI::App* cmd = cache->add_subcommand("sweep", "Hit-rate curves of cache policies over budgets, with Belady's ceiling");
  cmd->add_option("trace", f->trace, "Trace file")->required()->check(CLI::ExistingFile);
  AddAllowTornFlag(cmd, &f->allow_torn);
  cmd->add_option("--budgets-mib", f->budgets_mib, "Budgets in MiB (2^20 bytes), comma-separated")->capture_default_str();
  cmd->add_option("--policies", f->policies, "Policies, comma-separated: lru, lfu, layer, layerlfu, lfru, arc, random, "
                                             "pinned, belady")
      ->capture_default_str();
  cmd->add_option("--prefetch", f->prefetch, "Prefetchers, comma-separated: none, coact, oracle")->capture_default_str();
  cmd->add_option("--prefetch-width", f->prefetch_width, "Experts predicted per batch (0: top-k x tokens)")
      ->capture_default_str();
  cmd->add_option("--prefetch-decay", f->prefetch_decay, "coact: decay of the transition counts")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--prefetch-profile", f->prefetch_profile, "coact: train on this trace first")->check(CLI::ExistingFile);
  cmd->add_option("--tier", f->tier, "The tier modelled: l2 (host cache in front of NVMe) or l1 (device pool in front "
                                     "of host memory)")
      ->check(CLI::IsMember({"l1", "l2"}))
      ->capture_default_str();
  AddPinFlags(cmd, &f->pin);
  cmd->add_option("--seed", f->seed, "Seed of the random policy")->capture_default_str();
  cmd->add_option("--threads", f->threads, "Simulations run at once")->check(CLI::Range(1u, 256u))->capture_default_str();
  cmd->add_option("--format", f->format, "table, md, csv, json or html (the curves as a self-contained page)")
      ->check(CLI::IsMember({"table", "md", "csv", "json", "html"}))
      ->capture_default_str();
  cmd->add_option("-o,--output", f->output, "Write to this file (default: stdout)");
  cmd->add_flag("--json", f->json, "Same as --format json");
  cmd->callback([f, exit_code] {
    const Result<Json> r = Sweep(*f);
    if (!r.ok()) {
      *exit_code = Fail(r.status());
      return;
    }
    const Status written = WriteOutput(f->output, Render(*f, r.value()));
    *exit_code = written.ok() ? kExitOk : Fail(written);
  });
}

}  // namespace colibri::cli
