// The fidelity harness (colibri/replay/fidelity.h): the grid, the real runs,
// the replays of their recordings, and the comparisons.
#include "colibri/replay/fidelity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "colibri/engine/model.h"
#include "colibri/replay/local_run.h"
#include "colibri/replay/replay_run.h"
#include "colibri/replay/run_record.h"
#include "colibri/reports/stored_report.h"
#include "colibri/reports/distribution_compare.h"
#include "colibri/sim/machine_identity.h"
#include "colibri/sim/random.h"

namespace colibri::replay {
namespace {

using Json = nlohmann::json;

// The steps both the engine and the replay time, in the report's order.
constexpr const char* kSteps[] = {"routing",        "scheduling", "nvme_read", "host_to_device",
                                  "compute",        "aggregation", "layer_batch"};

int64_t NowUnixMs() {  // provenance of stored runs only
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

StatComparison Compare(std::vector<double> measured, double predicted) {
  StatComparison c;
  c.measured = std::move(measured);
  c.measured_median = Median(c.measured);
  c.predicted = predicted;
  c.error = reports::SignedError(predicted, c.measured_median);
  if (c.measured.size() >= 2) {
    const auto [lo, hi] = std::minmax_element(c.measured.begin(), c.measured.end());
    if (c.measured_median != 0) {
      c.noise_floor = (*hi - *lo) / c.measured_median;
    } else if (*hi == *lo) {
      c.noise_floor = 0.0;
    }
  }
  return c;
}

DistributionComparison CompareDistributions(const std::string& name, const std::vector<const reports::Samples*>& measured,
                                            const reports::Samples& predicted) {
  DistributionComparison d;
  d.name = name;
  std::vector<double> p50, p90, p99;
  std::vector<int64_t> pooled;
  for (const reports::Samples* s : measured) {
    const reports::Percentiles q = s->Summarize();
    p50.push_back(static_cast<double>(q.p50));
    p90.push_back(static_cast<double>(q.p90));
    p99.push_back(static_cast<double>(q.p99));
    pooled.insert(pooled.end(), s->raw().begin(), s->raw().end());
  }
  const reports::Percentiles q = predicted.Summarize();
  d.p50 = Compare(std::move(p50), static_cast<double>(q.p50));
  d.p90 = Compare(std::move(p90), static_cast<double>(q.p90));
  d.p99 = Compare(std::move(p99), static_cast<double>(q.p99));
  d.ks_distance = reports::KsDistance(pooled, predicted.raw());
  if (!measured.empty()) d.measured_samples = measured.front()->raw();
  d.predicted_samples = predicted.raw();
  return d;
}

// Whether |error| is within max(bound, noise floor); a statistic without an error (0 measured) misses.
bool Within(const StatComparison& s, double bound) {
  if (!s.error) return false;
  return std::abs(*s.error) <= std::max(bound, s.noise_floor.value_or(0.0));
}

std::string Percent(const std::optional<double>& v) {
  if (!v) return "n/a";
  char text[32];
  std::snprintf(text, sizeof(text), "%+.1f%%", *v * 100);
  return text;
}

void CheckTargets(FidelityCaseResult* r) {
  auto check = [&](const std::string& what, const StatComparison& s, double bound) {
    // A step that takes no time in either (e.g. host_to_device without L1) is met.
    if (s.measured_median == 0 && s.predicted == 0) return;
    if (Within(s, bound)) return;
    char text[160];
    std::snprintf(text, sizeof(text), "%s: %s, beyond max(%.0f%%, noise floor %s)", what.c_str(),
                  Percent(s.error).c_str(), bound * 100, Percent(s.noise_floor).c_str());
    r->misses.emplace_back(text);
  };
  for (const DistributionComparison& step : r->steps) {
    if (step.name == "layer_batch") {
      check("layer_batch P50", step.p50, 0.05);
      check("layer_batch P99", step.p99, 0.10);
    } else {
      check(step.name + " P50", step.p50, 0.10);
    }
  }
  check("tokens/s", r->tokens_per_s, 0.05);
  check("TTFT P50", r->ttft.p50, 0.05);
  check("TTFT P99", r->ttft.p99, 0.10);
  check("TPOT P50", r->tpot.p50, 0.05);
  check("TPOT P99", r->tpot.p99, 0.10);
}

Json CaseJson(const FidelityCase& c) {
  return Json{{"name", c.name},
              {"dtype", c.dtype},
              {"l2_over_token_cycle", c.l2_over_token_cycle},
              {"queue_depth", c.queue_depth},
              {"requests", c.requests},
              {"prefill_tokens", c.prefill_tokens},
              {"decode_passes", c.decode_passes},
              {"threads", c.threads},
              {"prefetch", c.prefetch}};
}

// The synthetic model of `dtype` in work_dir, made once (reused when its config is there).
Result<std::string> EnsureModel(const std::string& work_dir, const FidelityModel& m, const std::string& dtype,
                                uint64_t seed) {
  const std::string dir = (std::filesystem::path(work_dir) / ("model-" + dtype + "-" + std::to_string(m.layers) + "x" +
                                                              std::to_string(m.experts) + "-h" + std::to_string(m.hidden) +
                                                              "-i" + std::to_string(m.intermediate)))
                              .string();
  if (std::filesystem::exists(std::filesystem::path(dir) / "experts.bin") &&
      std::filesystem::exists(std::filesystem::path(dir) / "config.json")) {
    return dir;
  }
  engine::ModelConfig shape;
  COLIBRI_ASSIGN_OR_RETURN(shape.dtype, engine::ParseDType(dtype));
  for (uint32_t l = 0; l < m.layers; ++l) shape.layer_ids.push_back(l);
  shape.experts = m.experts;
  shape.top_k = m.top_k;
  shape.hidden = m.hidden;
  shape.intermediate = m.intermediate;
  std::error_code error;
  std::filesystem::remove_all(dir, error);
  COLIBRI_RETURN_IF_ERROR(engine::SynthModel(shape, seed, dir).status());
  return dir;
}

// Stores a finished run, returning its id (0 without a store).
Result<int64_t> Store(reports::RunStore* store, reports::RunInfo info, const reports::RunResults& results,
                      const FidelityOptions& o) {
  if (store == nullptr) return int64_t{0};
  info.tool_version = o.tool_version;
  info.git_commit = o.git_commit;
  info.started_at_ms = NowUnixMs();
  if (info.command_json.empty()) info.command_json = "[]";
  COLIBRI_ASSIGN_OR_RETURN(const int64_t id, store->BeginRun(info));
  COLIBRI_RETURN_IF_ERROR(store->FinishRun(id, results, NowUnixMs()));
  return id;
}

Result<FidelityCaseResult> RunCase(const FidelityCase& c, const FidelityModel& m, const std::string& model_dir,
                                   const FidelityOptions& o, size_t* done, size_t total) {
  FidelityCaseResult out;
  out.config = c;
  COLIBRI_ASSIGN_OR_RETURN(const engine::DType dtype, engine::ParseDType(c.dtype));
  const engine::ExpertLayout layout = engine::ExpertLayout::Make(dtype, m.hidden, m.intermediate);
  const uint64_t token_cycle = uint64_t{m.layers} * m.top_k * layout.block_bytes;
  const uint64_t everything = uint64_t{m.layers} * m.experts * layout.block_bytes;
  out.l2_bytes = c.l2_over_token_cycle <= 0
                     ? everything
                     : std::max<uint64_t>(layout.block_bytes,
                                          static_cast<uint64_t>(c.l2_over_token_cycle * static_cast<double>(token_cycle)));
  // The drive now against the profile's, around the real runs (storage_drift.h).
  auto probe = [&]() -> Status {
    if (!o.probe_storage || c.l2_over_token_cycle <= 0) return Status::Ok();
    StorageDriftOptions drift;
    drift.file = (std::filesystem::path(model_dir) / "experts.bin").string();
    drift.read_bytes = layout.block_bytes;
    drift.queue_depth = std::min<uint32_t>(c.queue_depth, 4);
    drift.max_reads = 2000;
    drift.seed = sim::DeriveSeed(o.seed, out.storage_drift.empty() ? "fidelity_probe_before" : "fidelity_probe_after");
    Result<StorageDrift> d = ProbeStorageDrift(drift, o.machine.nvme);
    if (!d.ok()) return d.status().WithPrefix("fidelity " + c.name + ", storage probe");
    out.storage_drift.push_back(d.value());
    return Status::Ok();
  };
  COLIBRI_RETURN_IF_ERROR(probe());
  std::vector<LocalRunResult> runs;
  for (uint32_t r = 0; r < o.repeats; ++r) {
    if (o.progress) o.progress((*done)++, total, c.name + ": real run " + std::to_string(r + 1));
    LocalRunOptions run;
    run.model_dir = model_dir;
    run.requests = c.requests;
    run.prefill_tokens = c.prefill_tokens;
    run.decode_passes = c.decode_passes;
    run.seed = o.seed;
    run.l2_bytes = out.l2_bytes;
    run.queue_depth = c.queue_depth;
    run.threads = c.threads;
    run.storage = "uring";
    run.transfer = "cpu";
    run.compute = "cpu";
    run.prefetch.predictor = c.prefetch;
    run.record_path = (std::filesystem::path(o.work_dir) / (c.name + "-run" + std::to_string(r + 1) + ".ctrace")).string();
    Result<LocalRunResult> result = RunLocal(run);
    if (!result.ok()) return result.status().WithPrefix("fidelity " + c.name + ", real run " + std::to_string(r + 1));
    runs.push_back(std::move(result).value());
    reports::RunInfo info;
    info.kind = "run";
    info.label = "fidelity " + c.name + ": measured " + std::to_string(r + 1);
    info.config_json = CaseJson(c).dump();
    info.hardware_json = "{}";
    info.backends = "storage=" + runs.back().storage_backend + " transfer=" + runs.back().transfer_backend +
                    " compute=" + runs.back().compute_backend;
    info.seed = o.seed;
    if (o.store != nullptr) {
      COLIBRI_ASSIGN_OR_RETURN(reports::RunResults stored, LocalRunStoredResults(runs.back(), "{}"));
      COLIBRI_ASSIGN_OR_RETURN(const int64_t id, Store(o.store, info, stored, o));
      out.measured_run_ids.push_back(id);
    }
  }
  COLIBRI_RETURN_IF_ERROR(probe());
  if (o.progress) o.progress((*done)++, total, c.name + ": replay on " + o.machine.label);
  ReplayConfig replay;
  replay.trace_path = runs.front().recording->path;
  replay.machine = o.machine;
  replay.l2_bytes = out.l2_bytes;
  replay.queue_depth = c.queue_depth;
  replay.threads = c.threads;
  replay.hidden = m.hidden;
  replay.seed = o.seed;
  replay.prefetch.predictor = c.prefetch;
  Result<ReplayResult> predicted = RunReplay(replay);
  if (!predicted.ok()) return predicted.status().WithPrefix("fidelity " + c.name + ", replay");
  const ReplayResult& p = predicted.value();
  if (o.store != nullptr) {
    COLIBRI_ASSIGN_OR_RETURN(reports::RunInfo info, ReplayRunInfo(replay));
    info.label = "fidelity " + c.name + ": predicted on " + o.machine.label;
    reports::RunResults stored = ReplayRunResults(p, "{}");
    std::string ids;
    for (int64_t id : out.measured_run_ids) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    stored.texts["fidelity_measured_run_ids"] = ids;
    COLIBRI_ASSIGN_OR_RETURN(out.predicted_run_id, Store(o.store, info, stored, o));
  }
  for (size_t i = 0; i < std::size(kSteps); ++i) {
    std::vector<const reports::Samples*> measured;
    for (const LocalRunResult& r : runs) measured.push_back(&r.step_ns[i]);  // LocalRunResult::kStepNames order
    out.steps.push_back(CompareDistributions(kSteps[i], measured, p.step(kSteps[i])));
  }
  auto per_request = [&](const char* name, reports::Samples LocalRunResult::*field, const reports::Samples& predicted_samples) {
    std::vector<const reports::Samples*> measured;
    for (const LocalRunResult& r : runs) measured.push_back(&(r.*field));
    return CompareDistributions(name, measured, predicted_samples);
  };
  out.ttft = per_request("ttft_ns", &LocalRunResult::ttft_ns, p.ttft_ns);
  out.tpot = per_request("tpot_ns", &LocalRunResult::tpot_ns, p.tpot_ns);
  out.request_latency = per_request("request_latency_ns", &LocalRunResult::request_latency_ns, p.request_latency_ns);
  std::vector<double> tokens_per_s;
  for (const LocalRunResult& r : runs) tokens_per_s.push_back(r.throughput.tokens_per_s);
  const double predicted_tokens_per_s =
      p.elapsed_ns > 0 ? static_cast<double>(p.passes) * 1e9 / static_cast<double>(p.elapsed_ns) : 0.0;
  out.tokens_per_s = Compare(std::move(tokens_per_s), predicted_tokens_per_s);
  out.layer_batch_correlation =
      reports::PearsonCorrelation(runs.front().step_ns.back().raw(), p.step("layer_batch").raw());
  CheckTargets(&out);
  return out;
}

FidelityCase Case(const char* name, const char* dtype, double l2, uint32_t qd, uint32_t requests, uint32_t prefill,
                  uint32_t decode, uint32_t threads, const char* prefetch) {
  return FidelityCase{name, dtype, l2, qd, requests, prefill, decode, threads, prefetch};
}

}  // namespace

Result<std::vector<FidelityCase>> FidelityGrid(const std::string& grid) {
  if (grid != "quick" && grid != "full") {
    return Status::InvalidArgument("fidelity grid '" + grid + "': expected quick or full");
  }
  // Every axis the issue names: L2 below the token cycle T, near it, 2T and
  // everything; queue depth 1, 8, 32; 1, 4 and 16 requests; prefill-heavy and
  // decode-heavy; bf16 and int8; 1 and 2 threads; prefetch off and coact.
  std::vector<FidelityCase> cases = {
      Case("bf16-l2half-qd32-r4", "bf16", 0.5, 32, 4, 16, 32, 2, "none"),
      Case("bf16-l2t-qd8-r4", "bf16", 1.0, 8, 4, 16, 32, 2, "none"),
      Case("bf16-l22t-qd32-r4", "bf16", 2.0, 32, 4, 16, 32, 2, "none"),
      Case("bf16-l2all-qd32-r4", "bf16", 0.0, 32, 4, 16, 32, 2, "none"),
      Case("bf16-l2half-qd1-r1-decode", "bf16", 0.5, 1, 1, 4, 64, 1, "none"),
      Case("bf16-l2half-qd32-r16", "bf16", 0.5, 32, 16, 8, 8, 2, "none"),
      Case("bf16-l22t-qd8-r1-prefill", "bf16", 2.0, 8, 1, 64, 8, 2, "none"),
      Case("int8-l2half-qd32-r4", "int8", 0.5, 32, 4, 16, 32, 2, "none"),
      Case("int8-l22t-qd8-r16-t1", "int8", 2.0, 8, 16, 8, 8, 1, "none"),
      Case("bf16-l2half-qd32-r4-t1-coact", "bf16", 0.5, 32, 4, 16, 32, 1, "coact"),
      Case("int8-l2t-qd1-r4-coact", "int8", 1.0, 1, 4, 16, 32, 2, "coact"),
      Case("bf16-l2all-qd8-r16-t1", "bf16", 0.0, 8, 16, 32, 16, 1, "none"),
  };
  if (grid == "quick") {
    for (FidelityCase& c : cases) {  // the same shapes, a quarter of the tokens
      c.prefill_tokens = std::max<uint32_t>(1, c.prefill_tokens / 4);
      c.decode_passes = std::max<uint32_t>(2, c.decode_passes / 4);
    }
  }
  return cases;
}

Result<FidelityModel> FidelityModelFor(const std::string& grid) {
  if (grid == "quick") return FidelityModel{4, 16, 2, 256, 128};
  if (grid == "full") return FidelityModel{8, 64, 4, 2048, 1024};
  return Status::InvalidArgument("fidelity grid '" + grid + "': expected quick or full");
}

Result<FidelityReport> RunFidelity(const FidelityOptions& o) {
  if (o.work_dir.empty()) return Status::InvalidArgument("fidelity: a work directory is required");
  if (o.repeats < 1) return Status::InvalidArgument("fidelity: repeats must be >= 1");
  COLIBRI_ASSIGN_OR_RETURN(const std::vector<FidelityCase> cases, FidelityGrid(o.grid));
  COLIBRI_ASSIGN_OR_RETURN(const FidelityModel model, FidelityModelFor(o.grid));
  std::error_code error;
  std::filesystem::create_directories(o.work_dir, error);
  if (error) return Status::IoError(o.work_dir + ": cannot create: " + error.message());
  FidelityReport report;
  report.grid = o.grid;
  report.machine = o.machine.label;
  report.model = model;
  report.repeats = o.repeats;
  if (const std::string elsewhere = sim::IdentityMismatch(o.machine.machine.identity, sim::ThisMachineIdentity());
      !elsewhere.empty()) {
    report.warnings.push_back("machine profile '" + o.machine.machine.name + "' was measured on another machine: " +
                              elsewhere);
  }
  std::map<std::string, std::string> models;
  for (const FidelityCase& c : cases) {
    if (models.count(c.dtype)) continue;
    if (o.progress) o.progress(0, 1, "making the " + c.dtype + " model");
    COLIBRI_ASSIGN_OR_RETURN(models[c.dtype], EnsureModel(o.work_dir, model, c.dtype, o.seed));
  }
  size_t done = 0;
  const size_t total = cases.size() * (o.repeats + 1);
  std::vector<int64_t> linked;
  for (const FidelityCase& c : cases) {
    COLIBRI_ASSIGN_OR_RETURN(FidelityCaseResult r, RunCase(c, model, models[c.dtype], o, &done, total));
    linked.insert(linked.end(), r.measured_run_ids.begin(), r.measured_run_ids.end());
    if (r.predicted_run_id != 0) linked.push_back(r.predicted_run_id);
    report.cases.push_back(std::move(r));
  }
  if (o.store != nullptr) {
    reports::RunInfo info;
    info.kind = "fidelity";
    info.label = "fidelity " + o.grid + " on " + o.machine.label;
    info.config_json = Json{{"grid", o.grid}, {"repeats", o.repeats}}.dump();
    info.hardware_json = "{}";
    info.backends = "real vs modelled";
    info.seed = o.seed;
    reports::RunResults results;
    std::string ids;
    for (int64_t id : linked) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    // The renderings are kept whole, so `colibri report fidelity` prints them from the store.
    results.texts = {{"linked_run_ids", ids},
                     {reports::StoredReportText("json"), FidelityJson(report)},
                     {reports::StoredReportText("md"), FidelityMarkdown(report)},
                     {reports::StoredReportText("html"), FidelityHtml(report)}};
    COLIBRI_ASSIGN_OR_RETURN(report.report_run_id, Store(o.store, info, results, o));
  }
  return report;
}

}  // namespace colibri::replay
