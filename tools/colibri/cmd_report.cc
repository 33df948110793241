// `colibri report compare RUN...`, `colibri report gate` (docs/REPORTS.md) and
// `colibri report fidelity RUN` (docs/FIDELITY.md).
#include <cstdio>
#include <memory>
#include <optional>

#include "cli_common.h"
#include "colibri/reports/compare.h"
#include "colibri/reports/stored_report.h"
#include "commands.h"
#include "run_storage.h"

namespace colibri::cli {
namespace {

struct CompareFlags {
  StoreFlags store;
  std::vector<int64_t> ids;
  uint32_t last = 0;
  int64_t baseline = 0;
  std::string format = "table";
  std::string output;
  uint32_t bootstrap = 0;
  uint64_t bootstrap_seed = 1;
  bool no_stability = false;
  bool json = false;
};

// The runs named, else the `last` newest complete ones (oldest first).
Result<std::vector<int64_t>> RunIds(const CompareFlags& f, const reports::RunStore& store) {
  if (!f.ids.empty() && f.last > 0) return Status::InvalidArgument("name run ids or --last N, not both");
  if (f.last == 0) return f.ids;
  COLIBRI_ASSIGN_OR_RETURN(const std::vector<reports::RunInfo> runs, store.List());
  std::vector<int64_t> ids;
  for (const reports::RunInfo& r : runs) {
    if (r.status == "complete" && ids.size() < f.last) ids.insert(ids.begin(), r.run_id);
  }
  if (ids.size() < f.last) {
    return Status::InvalidArgument("--last " + std::to_string(f.last) + ": " + store.path() + " holds only " +
                                   std::to_string(ids.size()) + " complete runs");
  }
  return ids;
}

Status Compare(const CompareFlags& f) {
  COLIBRI_ASSIGN_OR_RETURN(auto store, OpenStoreForReading(f.store));
  reports::CompareOptions o;
  COLIBRI_ASSIGN_OR_RETURN(const std::vector<int64_t> ids, RunIds(f, *store));
  if (f.baseline != 0) o.baseline_run_id = f.baseline;
  const std::string format = f.json ? "json" : f.format;
  if (format == "html") {
    o.cdf_points = 200;
    o.with_load_matrix = true;
  }
  o.stability = !f.no_stability;
  o.bootstrap_resamples = f.bootstrap;
  o.bootstrap_seed = f.bootstrap_seed;
  COLIBRI_ASSIGN_OR_RETURN(const reports::Comparison c, reports::BuildComparison(*store, ids, o));
  const std::string text = format == "json"   ? reports::RenderJson(c)
                           : format == "md"   ? reports::RenderMarkdown(c)
                           : format == "html" ? reports::RenderHtml(c)
                                              : reports::RenderTable(c);
  return WriteOutput(f.output, text);
}

struct GateFlags {
  StoreFlags store;
  int64_t baseline = 0, candidate = 0;
  reports::GateOptions options;
  double max_load_cv = -1;
  bool json = false;
};

Result<reports::GateResult> Gate(const GateFlags& f) {
  COLIBRI_ASSIGN_OR_RETURN(auto store, OpenStoreForReading(f.store));
  reports::GateOptions o = f.options;
  if (f.max_load_cv >= 0) o.max_load_cv = f.max_load_cv;
  return reports::RunGate(*store, f.baseline, f.candidate, o);
}

int EmitGate(const GateFlags& f) {
  const Result<reports::GateResult> r = Gate(f);
  if (!r.ok()) return Fail(r.status());
  const reports::GateResult& g = r.value();
  if (f.json) {
    std::fputs(reports::GateJson(g).c_str(), stdout);
  } else {
    std::printf("gate: candidate run %lld vs baseline run %lld: %s\n", static_cast<long long>(f.candidate),
                static_cast<long long>(f.baseline), g.pass ? "PASS" : "FAIL");
    for (const std::string& line : g.checks) std::printf("  %s\n", line.c_str());
  }
  return g.pass ? kExitOk : kExitCheckFailed;
}

void AddCompare(CLI::App* report, int* exit_code) {
  auto f = std::make_shared<CompareFlags>();
  CLI::App* cmd = report->add_subcommand("compare", "Compare stored runs: latency per step and end to end, cache, "
                                                    "load deviation, routing stability vs a baseline");
  cmd->add_option("run_ids", f->ids, "Runs to compare (the first is the baseline unless --baseline)");
  cmd->add_option("--last", f->last, "Compare the N newest complete runs instead");
  cmd->add_option("--baseline", f->baseline, "The baseline run (added to the runs if not named)");
  cmd->add_option("--format", f->format, "table, md, json or html")
      ->check(CLI::IsMember({"table", "md", "json", "html"}))
      ->capture_default_str();
  cmd->add_option("-o,--output", f->output, "Write the report to this file (default: stdout)");
  cmd->add_option("--bootstrap", f->bootstrap, "Bootstrap resamples for 95% intervals of each P99 (0 = none)")
      ->capture_default_str();
  cmd->add_option("--bootstrap-seed", f->bootstrap_seed, "Seed of the bootstrap")->capture_default_str();
  cmd->add_flag("--no-stability", f->no_stability, "Skip routing stability (reading the routing traces)");
  AddDbFlag(cmd, &f->store);
  cmd->add_flag("--json", f->json, "Same as --format json");
  cmd->callback([f, exit_code] {
    const Status s = Compare(*f);
    *exit_code = s.ok() ? kExitOk : Fail(s);
  });
}

void AddGate(CLI::App* report, int* exit_code) {
  auto f = std::make_shared<GateFlags>();
  CLI::App* cmd = report->add_subcommand("gate", "Pass or fail a candidate run against a baseline (exit 0 pass, 1 fail)");
  cmd->add_option("--baseline", f->baseline, "Baseline run id")->required();
  cmd->add_option("--candidate", f->candidate, "Candidate run id")->required();
  cmd->add_option("--max-p99-regression", f->options.max_p99_regression_pct,
                  "Largest allowed P99 increase over the baseline, in percent")
      ->capture_default_str();
  cmd->add_option("--metric", f->options.metric,
                  "Distribution whose P99 is gated (e.g. request_latency_ns, step_latency_ns.nvme_read)")
      ->capture_default_str();
  cmd->add_flag("--require-identical-routing", f->options.require_identical_routing,
                "Fail unless every (request, token, layer) routing decision equals the baseline's");
  cmd->add_option("--max-load-cv", f->max_load_cv, "Fail when the candidate's mean per-layer load CV exceeds this")
      ->check(NonNegativeNumber());
  AddDbFlag(cmd, &f->store);
  cmd->add_flag("--json", f->json, "Print the verdict as JSON on stdout");
  cmd->callback([f, exit_code] { *exit_code = EmitGate(*f); });
}

struct FidelityReportFlags {
  StoreFlags store;
  int64_t run_id = 0;
  std::string format = "md";
  std::string output;
  bool json = false;
};

void AddFidelityReport(CLI::App* report, int* exit_code) {
  auto f = std::make_shared<FidelityReportFlags>();
  CLI::App* cmd = report->add_subcommand("fidelity", "Print a stored colibri fidelity report: the tables (md, json) "
                                                     "or the page with its CDF overlays (html)");
  cmd->add_option("run_id", f->run_id, "The fidelity run (colibri fidelity prints its id; runs list shows kinds)")
      ->required();
  cmd->add_option("--format", f->format, "md, json or html")->check(CLI::IsMember({"md", "json", "html"}))->capture_default_str();
  cmd->add_option("-o,--output", f->output, "Write the report to this file (default: stdout)");
  AddDbFlag(cmd, &f->store);
  cmd->add_flag("--json", f->json, "Same as --format json");
  cmd->callback([f, exit_code] {
    const Status s = [&]() -> Status {
      COLIBRI_ASSIGN_OR_RETURN(auto store, OpenStoreForReading(f->store));
      COLIBRI_ASSIGN_OR_RETURN(const std::string text,
                               reports::StoredFidelityReport(*store, f->run_id, f->json ? "json" : f->format));
      return WriteOutput(f->output, text);
    }();
    *exit_code = s.ok() ? kExitOk : Fail(s);
  });
}

}  // namespace

void AddReportCommands(CLI::App* app, int* exit_code) {
  CLI::App* report = app->add_subcommand("report", "Reports over stored runs");
  report->require_subcommand(1);
  AddCompare(report, exit_code);
  AddGate(report, exit_code);
  AddFidelityReport(report, exit_code);
}

}  // namespace colibri::cli
