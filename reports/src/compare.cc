#include "colibri/reports/compare.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <thread>

#include "colibri/traces/importers.h"
#include "colibri/traces/stats.h"
#include "colibri/no_throw.h"

namespace colibri::reports {
namespace {

// The CDF of a distribution at up to `points` values (from the raw samples
// when kept, else from the histogram's buckets), for plotting.
std::vector<CdfPoint> CdfOf(const Samples& s, size_t points) {
  std::vector<CdfPoint> out;
  const uint64_t n = s.count();
  if (n == 0 || points == 0) return out;
  if (s.has_raw()) {
    std::vector<int64_t> sorted = s.raw();
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 1; i <= points; ++i) {
      const uint64_t rank = std::max<uint64_t>(1, (n * i + points - 1) / points);  // ceil(n i / points)
      out.push_back(CdfPoint{sorted[rank - 1], static_cast<double>(rank) / static_cast<double>(n)});
    }
  } else {
    uint64_t seen = 0;
    for (const LatencyHistogram::Bucket& b : s.histogram().NonEmptyBuckets()) {
      seen += b.count;
      out.push_back(CdfPoint{b.upper_ns, static_cast<double>(seen) / static_cast<double>(n)});
    }
    if (out.size() > points) {  // keep every k-th bucket and the last
      std::vector<CdfPoint> thinned;
      const size_t step = (out.size() + points - 1) / points;
      for (size_t i = step - 1; i < out.size(); i += step) thinned.push_back(out[i]);
      if (thinned.back().fraction < 1.0) thinned.push_back(out.back());
      out = std::move(thinned);
    }
  }
  return out;
}

void SummarizeLoad(RunSummary* r) {
  double cv_sum = 0, gini_sum = 0;
  for (const std::vector<uint64_t>& loads : r->expert_load) {
    const traces::LoadDeviation d = traces::ComputeLoadDeviation(loads);
    r->load.push_back(LayerLoad{d.cv, d.max_over_mean, d.gini, d.unused});
    cv_sum += d.cv;
    gini_sum += d.gini;
    r->load_cv_max = std::max(r->load_cv_max, d.cv);
    r->load_max_over_mean_max = std::max(r->load_max_over_mean_max, d.max_over_mean);
  }
  if (!r->load.empty()) {
    r->load_cv_mean = cv_sum / static_cast<double>(r->load.size());
    r->load_gini_mean = gini_sum / static_cast<double>(r->load.size());
  }
}

Result<RunSummary> Summarize(const RunStore& store, int64_t run_id, const CompareOptions& o) {
  RunSummary r;
  COLIBRI_ASSIGN_OR_RETURN(r.info, store.Info(run_id));
  if (r.info.status != "complete") {
    return Status::InvalidArgument("run " + std::to_string(run_id) + " is " + r.info.status +
                                   ": only complete runs can be compared");
  }
  COLIBRI_ASSIGN_OR_RETURN(RunResults results, store.Results(run_id, /*with_samples=*/true));
  for (auto& [name, samples] : results.distributions) {
    r.distributions[name] = samples.Summarize();
    if (o.bootstrap_resamples > 0 && samples.has_raw()) {
      const Interval ci = BootstrapPercentile(samples.raw(), 99, o.bootstrap_resamples, o.bootstrap_seed);
      r.scalars[name + ".p99_ci_low"] = static_cast<double>(ci.low);
      r.scalars[name + ".p99_ci_high"] = static_cast<double>(ci.high);
    }
    if (o.cdf_points > 0 && samples.max() > 0) r.cdfs[name] = CdfOf(samples, o.cdf_points);  // not all-zero steps
  }
  for (const auto& [name, value] : results.scalars) r.scalars[name] = value;
  r.tiers = std::move(results.tiers);
  r.expert_load = std::move(results.expert_load);
  SummarizeLoad(&r);
  if (!o.with_load_matrix) r.expert_load.clear();
  r.hit_rate = std::move(results.hit_rate);
  if (const auto ending = results.texts.find("trace_ending"); ending != results.texts.end()) r.trace_ending = ending->second;
  return r;
}

// Summaries of every run, on two threads (the second with its own connection).
Result<std::vector<RunSummary>> SummarizeAll(const RunStore& store, const std::vector<int64_t>& ids,
                                             const CompareOptions& o) {
  std::vector<std::optional<Result<RunSummary>>> out(ids.size());
  Status second_open;
  std::thread helper([&] {
    auto second = NoThrow([&] { return RunStore::Open(store.path(), store.options()); });  // read-only if the first is
    if (!second.ok()) {
      second_open = second.status();
      return;
    }
    for (size_t i = 1; i < ids.size(); i += 2) out[i] = NoThrow([&] { return Summarize(*second.value(), ids[i], o); });
  });
  for (size_t i = 0; i < ids.size(); i += 2) out[i] = NoThrow([&] { return Summarize(store, ids[i], o); });
  helper.join();
  COLIBRI_RETURN_IF_ERROR(second_open);
  std::vector<RunSummary> runs;
  for (auto& r : out) {
    COLIBRI_RETURN_IF_ERROR(r->status());
    runs.push_back(std::move(r->value()));
  }
  return runs;
}

// Stability of `run`'s routing against the baseline's: identical when both
// name the same trace contents, else both traces are read (each checked
// against its stored digest first).
Result<RoutingStability> StabilityOf(const RunSummary& baseline, const RunSummary& run) {
  for (const RunInfo* info : {&baseline.info, &run.info}) {
    if (info->routing_path.empty()) {
      return Status::NotFound("run " + std::to_string(info->run_id) + " stored no routing decisions");
    }
  }
  if (baseline.info.routing_digest == run.info.routing_digest) {
    RoutingStability same;
    const auto it = run.scalars.find("routing_decisions");
    same.compared = it == run.scalars.end() ? 0 : static_cast<uint64_t>(it->second);
    same.set_identical = same.ranked_identical = same.compared;
    same.jaccard_sum = static_cast<double>(same.compared);
    return same;
  }
  for (const RunInfo* info : {&baseline.info, &run.info}) {
    COLIBRI_ASSIGN_OR_RETURN(traces::SourceFile file, traces::DescribeSourceFile(info->routing_path));
    if (file.sha256 != info->routing_digest) {
      return Status::Corruption(info->routing_path + ": changed since run " + std::to_string(info->run_id) +
                                " stored it (SHA-256 " + file.sha256 + ", stored " + info->routing_digest + ")");
    }
  }
  return CompareRouting(baseline.info.routing_path, run.info.routing_path);
}

void AddStability(Comparison* c) {
  const RunSummary& base = c->runs[c->baseline];
  for (size_t i = 0; i < c->runs.size(); ++i) {
    if (i == c->baseline) continue;
    Result<RoutingStability> s = StabilityOf(base, c->runs[i]);
    if (s.ok()) {
      c->runs[i].stability = s.value();
    } else {
      c->runs[i].stability_note = s.status().message();
    }
  }
}

// ---- Rows ----

void MarkBest(MetricRow* row) {
  std::optional<double> best;
  int best_index = -1, count = 0;
  bool tie = false;
  for (size_t i = 0; i < row->values.size(); ++i) {
    if (!row->values[i]) continue;
    ++count;
    const double v = *row->values[i];
    const bool better = !best || (row->lower_is_better ? v < *best : v > *best);
    if (better) {
      best = v;
      best_index = static_cast<int>(i);
      tie = false;
    } else if (v == *best) {
      tie = true;
    }
  }
  row->best = count >= 2 && !tie ? best_index : -1;
}

class RowBuilder {
 public:
  explicit RowBuilder(Comparison* c) : c_(c) {}

  // One row from a per-run value (unset when the run lacks it); skipped when no run has it.
  template <typename F>
  void Add(const std::string& group, const std::string& key, const std::string& unit, bool lower_is_better,
           F value_of) {
    MetricRow row{group, key, unit, lower_is_better, {}, -1, false};
    bool any = false;
    for (const RunSummary& r : c_->runs) {
      row.values.push_back(value_of(r));
      any = any || row.values.back().has_value();
    }
    if (!any) return;
    MarkBest(&row);
    c_->rows.push_back(std::move(row));
  }

  void Distribution(const std::string& group, const std::string& name) {
    bool low_confidence = false;
    for (const RunSummary& r : c_->runs) {
      const auto it = r.distributions.find(name);
      low_confidence = low_confidence || (it != r.distributions.end() && it->second.low_confidence());
    }
    const std::pair<const char*, int64_t Percentiles::*> fields[] = {
        {"p50", &Percentiles::p50}, {"p99", &Percentiles::p99}, {"p999", &Percentiles::p999}};
    for (const auto& [suffix, field] : fields) {
      const size_t before = c_->rows.size();
      Add(group, name + "." + suffix, "ns", true, [&, f = field](const RunSummary& r) -> std::optional<double> {
        const auto it = r.distributions.find(name);
        if (it == r.distributions.end() || it->second.max == 0) return std::nullopt;  // absent, or a step never taken
        return static_cast<double>(it->second.*f);
      });
      if (c_->rows.size() > before && std::string(suffix) != "p50") c_->rows.back().low_confidence = low_confidence;
    }
    for (const char* bound : {".p99_ci_low", ".p99_ci_high"}) Scalar(group, name + bound, "ns", true);
  }

  void Scalar(const std::string& group, const std::string& key, const std::string& unit, bool lower_is_better) {
    Add(group, key, unit, lower_is_better, [&](const RunSummary& r) -> std::optional<double> {
      const auto it = r.scalars.find(key);
      if (it == r.scalars.end()) return std::nullopt;
      return it->second;
    });
  }

  void Tier(const std::string& tier) {
    auto pct = [](uint64_t part, uint64_t whole) -> std::optional<double> {
      if (whole == 0) return std::nullopt;
      return 100.0 * static_cast<double>(part) / static_cast<double>(whole);
    };
    auto find = [tier](const RunSummary& r) -> const TierCounters* {
      for (const TierCounters& t : r.tiers) {
        if (t.tier == tier) return &t;
      }
      return nullptr;
    };
    Add("cache", "hit_pct_decode." + tier, "%", false, [&](const RunSummary& r) -> std::optional<double> {
      const TierCounters* t = find(r);
      return t ? pct(t->decode_hits, t->decode_lookups) : std::nullopt;
    });
    Add("cache", "hit_pct_cum." + tier, "%", false, [&](const RunSummary& r) -> std::optional<double> {
      const TierCounters* t = find(r);
      return t ? pct(t->hits, t->lookups) : std::nullopt;
    });
  }

  void Load() {
    const std::pair<const char*, double RunSummary::*> fields[] = {
        {"load_cv_mean", &RunSummary::load_cv_mean},
        {"load_cv_max", &RunSummary::load_cv_max},
        {"load_gini_mean", &RunSummary::load_gini_mean},
        {"load_max_over_mean_max", &RunSummary::load_max_over_mean_max}};
    for (const auto& [key, field] : fields) {
      Add("load", key, "", true, [f = field](const RunSummary& r) -> std::optional<double> {
        if (r.load.empty()) return std::nullopt;
        return r.*f;
      });
    }
  }

  void Routing() {
    const std::pair<const char*, double (RoutingStability::*)() const> fields[] = {
        {"routing_set_identical_pct", &RoutingStability::set_identical_fraction},
        {"routing_ranked_identical_pct", &RoutingStability::ranked_identical_fraction},
        {"routing_mean_jaccard_pct", &RoutingStability::mean_jaccard}};
    for (const auto& [key, fraction] : fields) {
      Add("routing", key, "%", false, [&, f = fraction](const RunSummary& r) -> std::optional<double> {
        if (&r == &c_->runs[c_->baseline]) return 100.0;
        if (!r.stability) return std::nullopt;
        return 100.0 * ((*r.stability).*f)();
      });
    }
  }

 private:
  Comparison* c_;
};

// Every distribution name present in any run, the end-to-end ones first.
std::vector<std::string> DistributionNames(const Comparison& c) {
  std::set<std::string> names;
  for (const RunSummary& r : c.runs) {
    for (const auto& [name, p] : r.distributions) names.insert(name);
  }
  std::vector<std::string> ordered;
  for (const char* first : {"request_latency_ns", "ttft_ns", "tpot_ns", "queue_ns"}) {
    if (names.erase(first)) ordered.push_back(first);
  }
  ordered.insert(ordered.end(), names.begin(), names.end());
  return ordered;
}

void BuildRows(Comparison* c) {
  RowBuilder rows(c);
  const std::vector<std::string> names = DistributionNames(*c);
  auto is_step = [](const std::string& name) { return name.rfind("step_latency_ns.", 0) == 0; };
  for (const std::string& name : names) {
    if (!is_step(name)) rows.Distribution("end to end", name);
  }
  rows.Scalar("end to end", "tokens_per_s", "1/s", false);
  rows.Scalar("end to end", "steps_per_s", "1/s", false);
  rows.Scalar("end to end", "elapsed_ns", "ns", true);
  for (const std::string& name : names) {
    if (is_step(name)) rows.Distribution("step", name);
  }
  for (const char* tier : {"all", "l1", "l2"}) rows.Tier(tier);
  rows.Scalar("cache", "read_bytes_per_token", "bytes", true);
  rows.Scalar("cache", "read_bytes", "bytes", true);
  rows.Load();
  rows.Routing();
}

Status CheckIds(const std::vector<int64_t>& run_ids) {
  if (run_ids.empty()) return Status::InvalidArgument("no runs to compare: name at least one run id");
  std::set<int64_t> seen;
  for (int64_t id : run_ids) {
    if (!seen.insert(id).second) return Status::InvalidArgument("run " + std::to_string(id) + " is named twice");
  }
  return Status::Ok();
}

}  // namespace

Result<Comparison> BuildComparison(const RunStore& store, const std::vector<int64_t>& run_ids,
                                   const CompareOptions& options) {
  std::vector<int64_t> ids = run_ids;
  if (options.baseline_run_id && std::find(ids.begin(), ids.end(), *options.baseline_run_id) == ids.end()) {
    ids.insert(ids.begin(), *options.baseline_run_id);
  }
  COLIBRI_RETURN_IF_ERROR(CheckIds(ids));
  Comparison c;
  COLIBRI_ASSIGN_OR_RETURN(c.runs, SummarizeAll(store, ids, options));
  if (options.baseline_run_id) {
    c.baseline = static_cast<size_t>(std::find(ids.begin(), ids.end(), *options.baseline_run_id) - ids.begin());
  }
  if (options.stability) AddStability(&c);
  BuildRows(&c);
  return c;
}

Result<GateResult> RunGate(const RunStore& store, int64_t baseline, int64_t candidate, const GateOptions& o) {
  CompareOptions co;
  co.baseline_run_id = baseline;
  co.stability = o.require_identical_routing;
  COLIBRI_ASSIGN_OR_RETURN(const Comparison c, BuildComparison(store, {baseline, candidate}, co));
  const RunSummary &base = c.runs[0], &cand = c.runs[1];
  GateResult g;
  auto check = [&g](bool ok, const std::string& line) {
    g.checks.push_back((ok ? "pass: " : "FAIL: ") + line);
    if (!ok) g.reasons.push_back(line);
    g.pass = g.pass && ok;
  };
  const auto b = base.distributions.find(o.metric), k = cand.distributions.find(o.metric);
  if (b == base.distributions.end() || k == cand.distributions.end() || b->second.count == 0 || k->second.count == 0) {
    return Status::InvalidArgument("--metric " + o.metric + ": not recorded in both runs (" +
                                   std::to_string(baseline) + ", " + std::to_string(candidate) + ")");
  }
  g.baseline_p99 = static_cast<double>(b->second.p99);
  g.candidate_p99 = static_cast<double>(k->second.p99);
  g.regression_pct = g.baseline_p99 > 0 ? 100.0 * (g.candidate_p99 - g.baseline_p99) / g.baseline_p99
                                        : (g.candidate_p99 > 0 ? INFINITY : 0.0);
  char line[512];
  std::snprintf(line, sizeof(line), "%s P99 %s vs baseline %s: %+.2f%% (limit +%.2f%%)%s", o.metric.c_str(),
                FormatValue(g.candidate_p99, "ns").c_str(), FormatValue(g.baseline_p99, "ns").c_str(),
                g.regression_pct, o.max_p99_regression_pct,
                b->second.low_confidence() || k->second.low_confidence() ? " [low confidence: < 100 samples]" : "");
  check(g.regression_pct <= o.max_p99_regression_pct, line);
  // A run of a torn trace's prefix measured another workload than the whole trace.
  for (const RunSummary* r : {&base, &cand}) {
    if (r->trace_torn()) {
      check(false, "trace: run " + std::to_string(r->info.run_id) + " replayed a torn trace, " + r->trace_ending +
                       "; the gate compares runs of whole traces");
    }
  }
  if (o.require_identical_routing) {
    if (!cand.stability) return Status::InvalidArgument("--require-identical-routing: " + cand.stability_note);
    const RoutingStability& s = *cand.stability;
    g.stability = s;
    std::string what = std::to_string(s.ranked_identical) + " of " + std::to_string(s.compared) +
                       " (request, token, layer) decisions identical";
    if (s.diverged) {
      auto list = [](const std::vector<uint32_t>& v) {
        std::string out = "[";
        for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
        return out + "]";
      };
      what += "; first divergence at request " + std::to_string(s.first.request_id) + ", token " +
              std::to_string(s.first.position) + ", layer " + std::to_string(s.first.layer) + ": baseline " +
              list(s.first.baseline) + ", candidate " + list(s.first.candidate);
    }
    check(s.ranked_identical == s.compared && !s.diverged, "routing: " + what);
  }
  if (o.max_load_cv) {
    std::snprintf(line, sizeof(line), "mean per-layer load CV %.4f (limit %.4f)", cand.load_cv_mean, *o.max_load_cv);
    check(!cand.load.empty() && cand.load_cv_mean <= *o.max_load_cv,
          cand.load.empty() ? std::string("load CV: the candidate stored no expert load") : std::string(line));
  }
  return g;
}

}  // namespace colibri::reports
