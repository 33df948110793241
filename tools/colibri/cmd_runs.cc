// `colibri runs list|show|export|delete|rerun`: the run store (docs/RUNS.md).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli_common.h"
#include "colibri/reports/compare.h"
#include "colibri/reports/latency_json.h"
#include "colibri/traces/importers.h"
#include "commands.h"
#include "run_storage.h"

namespace colibri::cli {
namespace {

struct RunsFlags {
  StoreFlags store;
  std::vector<int64_t> ids;
  std::string format = "json";
  std::string output;
  bool samples = false;
  bool json = false;
};

Json InfoJson(const reports::RunInfo& i) {
  return Json{{"run_id", i.run_id},
              {"kind", i.kind},
              {"status", i.status},
              {"error", i.error},
              {"label", i.label},
              {"trace", i.trace_path},
              {"trace_digest", i.trace_digest},
              {"routing", i.routing_path},
              {"routing_digest", i.routing_digest},
              {"backends", i.backends},
              {"seed", i.seed},
              {"tool_version", i.tool_version},
              {"git_commit", i.git_commit},
              {"started_at", reports::FormatUtcTime(i.started_at_ms)},
              {"ended_at", reports::FormatUtcTime(i.ended_at_ms)},
              {"command", Json::parse(i.command_json.empty() ? "[]" : i.command_json, nullptr, false)},
              {"config", Json::parse(i.config_json.empty() ? "{}" : i.config_json, nullptr, false)},
              {"hardware", Json::parse(i.hardware_json.empty() ? "{}" : i.hardware_json, nullptr, false)}};
}

Json ResultsJson(const reports::RunResults& r) {
  Json dists = Json::object();
  for (const auto& [name, s] : r.distributions) dists[name] = reports::PercentilesJson(s.Summarize());
  Json tiers = Json::array();
  for (const reports::TierCounters& t : r.tiers) {
    tiers.push_back(Json{{"tier", t.tier}, {"lookups", t.lookups}, {"hits", t.hits},
                         {"decode_lookups", t.decode_lookups}, {"decode_hits", t.decode_hits},
                         {"hit_pct_cum", reports::Pct(t.hits, t.lookups)}, {"hit_pct_decode", reports::Pct(t.decode_hits, t.decode_lookups)},
                         {"read_bytes", t.read_bytes}});
  }
  Json texts = Json::object();
  for (const auto& [name, value] : r.texts) {
    if (name != "summary_json") texts[name] = value;
  }
  return Json{{"distributions", dists},
              {"scalars", r.scalars},
              {"texts", texts},
              {"tiers", tiers},
              {"expert_load_layers", r.expert_load.size()},
              {"hit_rate_points", r.hit_rate.size()},
              {"faults", r.faults.size()}};
}

Result<Json> List(const RunsFlags& f) {
  COLIBRI_ASSIGN_OR_RETURN(auto store, OpenStoreForReading(f.store));
  COLIBRI_ASSIGN_OR_RETURN(const std::vector<reports::RunInfo> runs, store->List());
  Json out = Json::array();
  for (const reports::RunInfo& i : runs) {
    out.push_back(Json{{"run_id", i.run_id}, {"kind", i.kind}, {"status", i.status}, {"label", i.label},
                       {"trace", i.trace_path}, {"backends", i.backends}, {"seed", i.seed},
                       {"started_at", reports::FormatUtcTime(i.started_at_ms)}, {"git_commit", i.git_commit}});
  }
  return Json{{"db", store->path()}, {"runs", out}};
}

void PrintList(const Json& j) {
  std::printf("%s\n%6s  %-10s %-7s %-28s %-20s  %s\n", j["db"].get<std::string>().c_str(), "run", "status", "kind",
              "label", "started", "trace");
  for (const Json& r : j["runs"]) {
    std::printf("%6lld  %-10s %-7s %-28s %-20s  %s\n", static_cast<long long>(r["run_id"].get<int64_t>()),
                r["status"].get<std::string>().c_str(), r["kind"].get<std::string>().c_str(),
                r["label"].get<std::string>().c_str(), r["started_at"].get<std::string>().c_str(),
                r["trace"].get<std::string>().c_str());
  }
}

Result<Json> Show(const RunsFlags& f) {
  COLIBRI_ASSIGN_OR_RETURN(auto store, OpenStoreForReading(f.store));
  Json out = Json::array();
  for (int64_t id : f.ids) {
    COLIBRI_ASSIGN_OR_RETURN(const reports::RunInfo info, store->Info(id));
    Json run = InfoJson(info);
    if (info.status == "complete") {
      COLIBRI_ASSIGN_OR_RETURN(const reports::RunResults results, store->Results(id));
      run["results"] = ResultsJson(results);
    }
    out.push_back(run);
  }
  return Json{{"runs", out}};
}

void PrintShow(const Json& j) {
  for (const Json& r : j["runs"]) {
    std::printf("run %lld: %s %s on %s (%s)\n", static_cast<long long>(r["run_id"].get<int64_t>()),
                r["status"].get<std::string>().c_str(), r["kind"].get<std::string>().c_str(),
                r["label"].get<std::string>().c_str(), r["backends"].get<std::string>().c_str());
    std::printf("  trace %s (sha256 %s)\n  seed %llu, colibri %s (%s), %s .. %s\n",
                r["trace"].get<std::string>().c_str(), r["trace_digest"].get<std::string>().c_str(),
                static_cast<unsigned long long>(r["seed"].get<uint64_t>()),
                r["tool_version"].get<std::string>().c_str(), r["git_commit"].get<std::string>().c_str(),
                r["started_at"].get<std::string>().c_str(), r["ended_at"].get<std::string>().c_str());
    if (!r["error"].get<std::string>().empty()) std::printf("  error: %s\n", r["error"].get<std::string>().c_str());
    if (!r.contains("results")) continue;
    std::printf("  %-34s %12s %12s %12s %12s %10s\n", "distribution (ns)", "p50", "p99", "p99.9", "max", "samples");
    for (const auto& [name, d] : r["results"]["distributions"].items()) {
      std::printf("  %-34s %12lld %12lld %12lld %12lld %10llu%s\n", name.c_str(),
                  static_cast<long long>(d["p50"].get<int64_t>()), static_cast<long long>(d["p99"].get<int64_t>()),
                  static_cast<long long>(d["p999"].get<int64_t>()), static_cast<long long>(d["max"].get<int64_t>()),
                  static_cast<unsigned long long>(d["samples"].get<uint64_t>()),
                  d["source"] == "histogram" ? " (histogram)" : "");
    }
    for (const Json& t : r["results"]["tiers"]) {
      std::printf("  cache %-4s hit %.2f%% (decode %.2f%%) of %llu lookups\n", t["tier"].get<std::string>().c_str(),
                  t["hit_pct_cum"].get<double>(), t["hit_pct_decode"].get<double>(),
                  static_cast<unsigned long long>(t["lookups"].get<uint64_t>()));
    }
    for (const auto& [name, value] : r["results"]["texts"].items()) {
      std::printf("  %s: %s\n", name.c_str(), value.get<std::string>().c_str());
    }
  }
}

// Summary export: one row per (run, metric).
std::string SummaryCsv(const Json& runs) {
  std::string csv = "run_id,kind,label,metric,value\n";
  auto quote = [](const std::string& s) {
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  for (const Json& r : runs) {
    if (!r.contains("results")) continue;
    const std::string prefix =
        std::to_string(r["run_id"].get<int64_t>()) + "," + r["kind"].get<std::string>() + "," + quote(r["label"]) + ",";
    for (const auto& [name, d] : r["results"]["distributions"].items()) {
      for (const char* p : {"p50", "p90", "p99", "p999", "max", "samples"}) {
        csv += prefix + name + "." + p + "," + d[p].dump() + "\n";
      }
    }
    for (const auto& [name, v] : r["results"]["scalars"].items()) csv += prefix + name + "," + v.dump() + "\n";
    for (const Json& t : r["results"]["tiers"]) {
      for (const char* k : {"lookups", "hits", "decode_lookups", "decode_hits"}) {
        csv += prefix + "cache." + t["tier"].get<std::string>() + "." + k + "," + t[k].dump() + "\n";
      }
    }
  }
  return csv;
}

// Raw samples export: one row per sample (run_id, distribution, index, value_ns).
Result<std::string> SamplesExport(const RunsFlags& f, reports::RunStore& store) {
  std::string csv = "run_id,distribution,index,value_ns\n";
  Json json = Json::array();
  for (int64_t id : f.ids) {
    COLIBRI_ASSIGN_OR_RETURN(const reports::RunResults r, store.Results(id));
    Json dists = Json::object();
    for (const auto& [name, s] : r.distributions) {
      if (!s.has_raw()) {
        dists[name] = Json{{"source", "histogram"}, {"values", nullptr}};
        continue;
      }
      dists[name] = Json{{"source", "raw"}, {"values", s.raw()}};
      const std::string prefix = std::to_string(id) + "," + name + ",";
      for (size_t i = 0; i < s.raw().size(); ++i) csv += prefix + std::to_string(i) + "," + std::to_string(s.raw()[i]) + "\n";
    }
    json.push_back(Json{{"run_id", id}, {"distributions", dists}});
  }
  return f.format == "csv" ? csv : Json{{"runs", json}}.dump() + "\n";
}

Result<Json> Export(const RunsFlags& f) {
  COLIBRI_ASSIGN_OR_RETURN(auto store, OpenStoreForReading(f.store));
  std::string bytes;
  if (f.samples) {
    COLIBRI_ASSIGN_OR_RETURN(bytes, SamplesExport(f, *store));
  } else {
    COLIBRI_ASSIGN_OR_RETURN(const Json shown, Show(f));
    bytes = f.format == "csv" ? SummaryCsv(shown["runs"]) : shown.dump(2) + "\n";
  }
  COLIBRI_RETURN_IF_ERROR(WriteOutput(f.output, bytes));
  return Json{{"written", f.output}, {"bytes", bytes.size()}};
}

Result<Json> Delete(const RunsFlags& f) {
  COLIBRI_ASSIGN_OR_RETURN(auto store, OpenStore(f.store));
  const std::string routing_dir = store->path() + ".routing/";
  Json deleted = Json::array();
  for (int64_t id : f.ids) {
    COLIBRI_ASSIGN_OR_RETURN(const reports::RunInfo info, store->Info(id));
    COLIBRI_RETURN_IF_ERROR(store->Delete(id));
    if (info.routing_path.rfind(routing_dir, 0) == 0) std::remove(info.routing_path.c_str());  // a trace the run wrote
    deleted.push_back(id);
  }
  return Json{{"deleted", deleted}};
}

void PrintDeleted(const Json& j) { std::printf("deleted %zu run(s)\n", j["deleted"].size()); }

// Runs `args` with stdout sent to /dev/null; returns its exit code.
int RunQuietly(const std::vector<std::string>& args) {
  std::fflush(stdout);
  const int saved = ::dup(STDOUT_FILENO);
  const int null = ::open("/dev/null", O_WRONLY);
  ::dup2(null, STDOUT_FILENO);
  ::close(null);
  const int code = RunCommandLine(args);
  std::fflush(stdout);
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);
  return code;
}

Result<std::string> DigestOf(const reports::RunStore& store, int64_t id) {
  COLIBRI_ASSIGN_OR_RETURN(const reports::RunResults r, store.Results(id, /*with_samples=*/false));
  for (const char* name : {"event_digest", "output_digest"}) {
    const auto it = r.texts.find(name);
    if (it != r.texts.end()) return it->second;
  }
  return std::string();
}

// Re-runs a stored run from its argv into the same store; exit 1 when its digest differs.
Result<Json> Rerun(const RunsFlags& f, int* exit_code) {
  COLIBRI_ASSIGN_OR_RETURN(auto store, OpenStore(f.store));
  const int64_t id = f.ids.at(0);
  COLIBRI_ASSIGN_OR_RETURN(const reports::RunInfo info, store->Info(id));
  if (!info.trace_path.empty()) {
    COLIBRI_ASSIGN_OR_RETURN(const traces::SourceFile trace, traces::DescribeSourceFile(info.trace_path));
    if (trace.sha256 != info.trace_digest) {
      return Status::InvalidArgument(info.trace_path + ": changed since run " + std::to_string(id) +
                                     " (SHA-256 " + trace.sha256 + ", stored " + info.trace_digest + ")");
    }
  }
  std::vector<std::string> args = Json::parse(info.command_json).get<std::vector<std::string>>();
  args.insert(args.end(), {"--db", store->path()});
  StoredRunIds().clear();
  const int code = RunQuietly(args);
  if (code != kExitOk || StoredRunIds().empty()) {
    *exit_code = code == kExitOk ? kExitCheckFailed : code;
    return Json{{"run_id", id}, {"rerun_exit_code", code}, {"rerun_run_id", nullptr}, {"identical", false}};
  }
  const int64_t rerun_id = StoredRunIds().back();
  std::string original_digest;
  if (info.status == "complete") {
    COLIBRI_ASSIGN_OR_RETURN(original_digest, DigestOf(*store, id));
  }
  COLIBRI_ASSIGN_OR_RETURN(const std::string rerun_digest, DigestOf(*store, rerun_id));
  const bool identical = !original_digest.empty() && original_digest == rerun_digest;
  COLIBRI_ASSIGN_OR_RETURN(const reports::RunInfo rerun_info, store->Info(rerun_id));
  *exit_code = identical ? kExitOk : kExitCheckFailed;
  return Json{{"run_id", id},
              {"rerun_run_id", rerun_id},
              {"command", args},
              {"digest", original_digest},
              {"rerun_digest", rerun_digest},
              {"identical", identical},
              {"hardware_identical", rerun_info.hardware_json == info.hardware_json}};
}

void PrintRerun(const Json& j) {
  if (j["rerun_run_id"].is_null()) {
    std::printf("rerun of run %lld failed (exit %d)\n", static_cast<long long>(j["run_id"].get<int64_t>()),
                j["rerun_exit_code"].get<int>());
    return;
  }
  std::printf("run %lld re-run as run %lld: digest %s %s %s%s\n", static_cast<long long>(j["run_id"].get<int64_t>()),
              static_cast<long long>(j["rerun_run_id"].get<int64_t>()), j["digest"].get<std::string>().c_str(),
              j["identical"].get<bool>() ? "==" : "!=", j["rerun_digest"].get<std::string>().c_str(),
              j["hardware_identical"].get<bool>() ? "" : " (the hardware profile has changed since)");
}

CLI::App* Subcommand(CLI::App* runs, const char* name, const char* help, const std::shared_ptr<RunsFlags>& f,
                     bool ids) {
  CLI::App* cmd = runs->add_subcommand(name, help);
  AddDbFlag(cmd, &f->store);
  cmd->add_flag("--json", f->json, "Print the result as JSON on stdout");
  if (ids) cmd->add_option("run_ids", f->ids, "Run ids")->required();
  return cmd;
}

}  // namespace

void AddRunsCommands(CLI::App* app, int* exit_code) {
  CLI::App* runs = app->add_subcommand("runs", "List, show, export, delete and re-run stored runs");
  runs->require_subcommand(1);
  auto f = std::make_shared<RunsFlags>();
  Subcommand(runs, "list", "List the stored runs, newest first", f, false)->callback([f, exit_code] {
    *exit_code = Emit(List(*f), f->json, &PrintList);
  });
  Subcommand(runs, "show", "Show runs: provenance, configuration and results", f, true)->callback([f, exit_code] {
    *exit_code = Emit(Show(*f), f->json, &PrintShow);
  });
  CLI::App* exp = Subcommand(runs, "export", "Export runs' summaries (or raw samples) as CSV or JSON", f, true);
  exp->add_option("--format", f->format, "csv or json")->check(CLI::IsMember({"csv", "json"}))->capture_default_str();
  exp->add_option("-o,--output", f->output, "Write to this file (default: stdout)");
  exp->add_flag("--samples", f->samples, "Export every raw latency sample instead of the summary");
  exp->callback([f, exit_code] {
    const Result<Json> r = Export(*f);
    *exit_code = r.ok() ? kExitOk : Fail(r.status());
  });
  Subcommand(runs, "delete", "Delete runs and their results", f, true)->callback([f, exit_code] {
    *exit_code = Emit(Delete(*f), f->json, &PrintDeleted);
  });
  CLI::App* rerun = Subcommand(runs, "rerun", "Re-run a stored run from its stored command; exit 1 when its digest differs",
                               f, true);
  rerun->callback([f, exit_code] {
    if (f->ids.size() != 1) {
      *exit_code = Fail(Status::InvalidArgument("runs rerun: name exactly one run id"));
      return;
    }
    int rerun_code = kExitOk;
    const int emitted = Emit(Rerun(*f, &rerun_code), f->json, &PrintRerun);
    *exit_code = emitted != kExitOk ? emitted : rerun_code;
  });
}

}  // namespace colibri::cli
