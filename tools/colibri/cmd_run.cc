// `colibri run`: the production engine end to end on this machine (CPU):
// R requests, each a prefill pass of P tokens, then N decode passes over all
// requests together; experts stream from experts.bin (io_uring or pread)
// through the L2 host cache and the L1 pool into CpuCompute. Hidden states
// come from seeded token ids (Zipf over a vocabulary), with a tunable temporal
// correlation so routing has locality.
// Optionally records every layer's routing as a trace.

#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>

#include "cache_flags.h"
#include "cli_common.h"
#include "colibri/bench/process_memory.h"
#include "colibri/engine/local_engine.h"
#include "colibri/replay/cache_lab.h"
#include "colibri/replay/trace_recorder.h"
#include "colibri/reports/latency_json.h"
#include "colibri/reports/run_recording.h"
#include "colibri/traces/importers.h"
#include "commands.h"
#include "hw_flags.h"
#include "router_flags.h"
#include "run_storage.h"

namespace colibri::cli {
namespace {

using engine::TimeNs;

struct RunFlags {
  std::string model_dir;
  uint32_t requests = 4;
  uint32_t prefill = 32;
  uint32_t tokens = 32;
  uint64_t seed = 1;
  std::string l1_bytes = "0";
  std::string l2_bytes = std::to_string(1ull << 30);
  std::string policy = "lru";
  std::string l1_policy = "lru";
  PrefetchFlags prefetch;
  PinFlags pin;
  RouterFlags router;
  std::string log_level = "warn";
  uint32_t queue_depth = 32;
  uint32_t staging_slots = 4;
  uint32_t threads = 1;
  HwFlags hw;
  std::string storage = "auto";
  bool direct_io = true;
  double correlation = 0.9;
  uint32_t vocab = 32000;
  bool verify = false;
  std::string record;
  bool record_logits = false;
  bool record_hidden = false;
  bool record_tokens = false;
  TraceOutputFlags record_output;
  uint64_t raw_step_samples_cap = 10'000'000;
  StoreFlags store;
  bool json = false;
};

// Box-Muller from a raw 64-bit stream (the standard distributions differ across libraries).
double Normal(std::mt19937_64& rng) {
  const double u1 = (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53;
  const double u2 = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

// Seeded token ids: each request draws its tokens from its own stream, Zipf
// distributed over the vocabulary (rank r has weight 1 / r^1.1; natural
// language token frequencies are roughly Zipfian), token id = rank - 1.
class TokenStreams {
 public:
  TokenStreams(uint64_t seed, uint32_t requests, uint32_t vocab) : cdf_(vocab) {
    double sum = 0;
    for (uint32_t r = 0; r < vocab; ++r) cdf_[r] = sum += std::pow(static_cast<double>(r + 1), -kZipfExponent);
    for (double& c : cdf_) c /= sum;
    for (uint64_t i = 0; i < requests; ++i) rngs_.emplace_back(seed ^ (0xD1B54A32D192ED03ull * (i + 1)) ^ 0x746f6b656eull);
  }
  uint32_t Next(uint64_t request) {
    const double u = static_cast<double>(rngs_[request]() >> 11) * 0x1.0p-53;
    const auto it = std::upper_bound(cdf_.begin(), cdf_.end(), u);
    return static_cast<uint32_t>(std::min<size_t>(it - cdf_.begin(), cdf_.size() - 1));
  }

 private:
  static constexpr double kZipfExponent = 1.1;
  std::vector<double> cdf_;
  std::vector<std::mt19937_64> rngs_;
};

// Seeded hidden states: per (request, MoE layer) an AR(1) process
// x_t = rho x_{t-1} + sqrt(1 - rho^2) e(layer, token_t), where e is a fixed
// standard normal "embedding" of each (layer, token id), made from a stream
// seeded by both. The same token pushes routing the same way, and with a high
// rho consecutive tokens of a request route alike (realistic decode locality).
class HiddenStates {
 public:
  HiddenStates(uint64_t seed, uint32_t requests, uint32_t layers, uint32_t hidden, double rho)
      : seed_(seed), layers_(layers), hidden_(hidden), rho_(rho), state_(static_cast<size_t>(requests) * layers * hidden),
        started_(static_cast<size_t>(requests) * layers, false) {}
  // The state of (request, layer) after `token`.
  const float* Next(uint64_t request, uint32_t layer, uint32_t token) {
    const size_t i = static_cast<size_t>(request) * layers_ + layer;
    float* x = &state_[i * hidden_];
    const double rho = started_[i] ? rho_ : 0.0;  // the first token is its embedding alone
    const double fresh = std::sqrt(1.0 - rho * rho);
    std::mt19937_64 embedding(seed_ ^ (0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(layer) << 32 | token)) ^
                              0x68696464656eull);  // "hidden"
    for (uint32_t h = 0; h < hidden_; ++h) x[h] = static_cast<float>(rho * x[h] + fresh * Normal(embedding));
    started_[i] = true;
    return x;
  }

 private:
  uint64_t seed_;
  uint32_t layers_, hidden_;
  double rho_;
  std::vector<float> state_;
  std::vector<bool> started_;
};

// FNV-1a 64 over bytes: the output digest (equality check, not security).
class Fnv1a {
 public:
  void Add(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) hash_ = (hash_ ^ p[i]) * 0x100000001b3ull;
  }
  std::string Hex() const {
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(hash_));
    return buf;
  }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ull;
};

struct RunStats {
  static constexpr std::array<const char*, 7> kStepNames = {
      "routing", "scheduling", "nvme_read", "host_to_device", "compute", "aggregation", "layer_batch"};
  std::array<reports::Samples, kStepNames.size()> step_ns;  // one sample per layer batch, raw up to the cap
  uint64_t raw_step_samples_cap = 0;
  uint64_t steps = 0;                                    // (token, layer) steps
  uint64_t layer_batches = 0;
  uint64_t lookups_decode = 0, served_decode = 0, lookups = 0, served = 0, l1_hits_decode = 0, l2_hits_decode = 0;
  std::vector<int64_t> ttft_ns;            // per request: run start to the end of its prefill pass
  std::vector<int64_t> tpot_ns;            // per decode pass (one token of every request)
  reports::HitRateSeries hit_rate;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  uint64_t read_bytes = 0, dropped = 0, staged = 0, device_staged = 0, prefill_tokens = 0, decode_tokens = 0;
  Fnv1a digest;

  void Add(const engine::LayerBatchReport& r, bool prefill) {
    const engine::StepTimes& s = r.step_ns;
    const TimeNs steps_ns[] = {s.routing, s.scheduling, s.nvme_read, s.host_to_device, s.compute, s.aggregation, s.total};
    static_assert(std::size(steps_ns) == kStepNames.size());
    reports::AddStepSamples(step_ns.data(), steps_ns, kStepNames.size(), layer_batches, raw_step_samples_cap);
    steps += r.tokens;
    const uint64_t hits = r.l1_hits + r.l2_hits;
    lookups += r.distinct_experts;
    served += hits;
    if (!prefill) {
      lookups_decode += r.distinct_experts;
      served_decode += hits;
      l1_hits_decode += r.l1_hits;
      l2_hits_decode += r.l2_hits;
    }
    hit_rate.Add(++layer_batches, ElapsedNs(), lookups, served);
    read_bytes += r.read_bytes + r.prefetch_bytes;
    dropped += r.dropped_assignments;
    staged += r.staged;
    device_staged += r.device_staged;
  }

  int64_t ElapsedNs() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  }
};

// Counts each layer's expert selections, then hands the decision on (to the
// recorder, if any). With the debug log, prints each (token, slot) decision as
// `[ROUTER] 0x<request id> | EXPERT:<id> | LOAD:<0..1> | LATENCY:<n>us`:
// LOAD = the expert's selections so far in this layer over the layer's most
// selected expert's, LATENCY = the batch's routing step.
class LoadCounter final : public engine::EngineObserver {
 public:
  LoadCounter(uint32_t layers, uint32_t experts) : loads_(layers, std::vector<uint64_t>(experts, 0)) {}
  void set_next(engine::EngineObserver* next) { next_ = next; }
  // The rows of the batches routed next (request ids for the debug log), or null: no log.
  void set_debug_rows(const std::vector<replay::BatchRow>* rows) { debug_rows_ = rows; }
  void OnRouting(const engine::RoutingDecision& d) override {
    std::vector<uint64_t>& load = loads_[d.layer_index];
    for (size_t i = 0; i < d.tokens * d.top_k; ++i) ++load[d.expert_ids[i]];
    if (debug_rows_ != nullptr) LogDecisions(d, load);
    if (next_ != nullptr) next_->OnRouting(d);
  }
  const std::vector<std::vector<uint64_t>>& loads() const { return loads_; }

 private:
  void LogDecisions(const engine::RoutingDecision& d, const std::vector<uint64_t>& load) const {
    const double max_load = static_cast<double>(*std::max_element(load.begin(), load.end()));
    for (size_t t = 0; t < d.tokens && t < debug_rows_->size(); ++t) {
      for (uint32_t s = 0; s < d.top_k; ++s) {
        const uint32_t id = d.expert_ids[t * d.top_k + s];
        std::fprintf(stderr, "[ROUTER] 0x%016llx | EXPERT:%u | LOAD:%.2f | LATENCY:%lldus\n",
                     static_cast<unsigned long long>((*debug_rows_)[t].request_id), id,
                     static_cast<double>(load[id]) / max_load, static_cast<long long>(d.routing_ns / 1000));
      }
    }
  }

  std::vector<std::vector<uint64_t>> loads_;
  engine::EngineObserver* next_ = nullptr;
  const std::vector<replay::BatchRow>* debug_rows_ = nullptr;
};


struct Engine {
  std::unique_ptr<engine::LocalEngine> local;
  std::unique_ptr<replay::TraceRecorder> recorder;
  std::unique_ptr<LoadCounter> loads;
};

Result<std::unique_ptr<Engine>> BuildEngine(const RunFlags& f) {
  engine::LocalEngineOptions options;
  options.model_dir = f.model_dir;
  options.verify_checksums = f.verify;
  options.storage = f.storage;
  options.queue_depth = f.queue_depth;
  options.direct_io = f.direct_io;
  options.threads = f.threads;
  const replay::HwBackendOptions hw = ToHwBackendOptions(f.hw, f.threads);
  options.make_transfer = [&f, hw](const engine::Clock* clock) { return replay::MakeHwTransfer(f.hw.transfer, clock, hw); };
  options.make_compute = [&f, hw] { return replay::MakeHwCompute(f.hw.compute, hw); };
  options.engine.l1_bytes = std::stoull(f.l1_bytes);
  options.engine.l2_bytes = std::stoull(f.l2_bytes);
  options.engine.l1_policy = f.l1_policy;
  options.engine.l2_policy = f.policy;
  options.engine.staging_slots = f.staging_slots;
  options.engine.prefetch = ToPrefetchConfig(f.prefetch);
  COLIBRI_RETURN_IF_ERROR(ApplyRouterFlags(f.router, f.vocab, f.seed, &options.engine.routing));
  const bool pinned = f.policy == "pinned";
  engine::ModelConfig shape;  // the hot set is checked against the model's shape
  if (pinned) {
    COLIBRI_ASSIGN_OR_RETURN(shape, engine::ReadModelConfig(f.model_dir));
  }
  COLIBRI_ASSIGN_OR_RETURN(options.engine.pinned, replay::LearnHotSet(pinned, f.pin.from, std::stoull(f.pin.bytes),
                                                                      shape.layers(), shape.experts));
  auto e = std::make_unique<Engine>();
  COLIBRI_ASSIGN_OR_RETURN(e->local, engine::LocalEngine::Open(options));
  COLIBRI_RETURN_IF_ERROR(e->local->moe->PreloadPinned());
  if (!e->local->warning.empty()) std::cerr << "colibri: warning: " << e->local->warning << "\n";
  for (const std::string& w : e->local->moe->SizingWarnings()) std::cerr << "colibri: warning: " << w << "\n";
  const engine::ModelConfig& config = e->local->model.config();
  e->loads = std::make_unique<LoadCounter>(config.layers(), config.experts);
  e->local->moe->set_observer(e->loads.get());
  if (!f.record.empty()) {
    traces::Provenance provenance;
    provenance.source_engine = std::string("colibri ") + COLIBRI_VERSION + " (" + COLIBRI_GIT_COMMIT + ")";
    provenance.importer = "colibri run";
    provenance.notes = "model " + f.model_dir + ", seed " + std::to_string(f.seed);
    replay::RecorderOptions recorder{f.record_logits, f.record_hidden, ToWriterOptions(f.record_output)};
    COLIBRI_ASSIGN_OR_RETURN(e->recorder,
                             replay::TraceRecorder::Create(f.record, e->local->model.config(), provenance, recorder));
    e->loads->set_next(e->recorder.get());
  }
  return e;
}

// The seeded inputs of a run: token ids and the hidden states they drive.
struct Inputs {
  TokenStreams tokens;
  HiddenStates hidden;
  bool record_tokens;
  bool debug_log;  // --log-level debug: the router's decisions on stderr
};

// One forward pass: every MoE layer over `rows` (request, position, token) tokens.
Status RunPass(Engine& e, Inputs& in, std::vector<replay::BatchRow> rows, uint64_t pass_id, bool prefill,
               RunStats* stats) {
  const engine::ModelConfig& c = e.local->model.config();
  std::vector<uint32_t> token_ids;
  for (replay::BatchRow& row : rows) token_ids.push_back(*(row.token_id = in.tokens.Next(row.request_id)));
  if (in.debug_log) e.loads->set_debug_rows(&rows);
  std::vector<float> x(rows.size() * c.hidden), out(rows.size() * c.hidden);
  for (uint32_t layer = 0; layer < c.layers(); ++layer) {
    for (size_t i = 0; i < rows.size(); ++i) {
      std::copy_n(in.hidden.Next(rows[i].request_id, layer, *rows[i].token_id), c.hidden, x.data() + i * c.hidden);
    }
    if (layer == 0 && e.recorder) {
      if (!in.record_tokens) {
        for (replay::BatchRow& row : rows) row.token_id.reset();
      }
      e.recorder->BeginPass(pass_id, prefill, rows);
    }
    engine::LayerBatchReport report;
    COLIBRI_RETURN_IF_ERROR(e.local->moe->Forward(layer, x.data(), rows.size(), out.data(), &report, token_ids.data()));
    if (e.recorder && !e.recorder->status().ok()) return e.recorder->status();
    stats->Add(report, prefill);
    stats->digest.Add(out.data(), out.size() * sizeof(float));
  }
  return Status::Ok();
}

// Each request's prefill is one pass of P tokens; then each decode step is
// one pass with one token of every request.
Status RunWorkload(const RunFlags& f, Engine& e, RunStats* stats) {
  const engine::ModelConfig& c = e.local->model.config();
  Inputs inputs{TokenStreams(f.seed, f.requests, f.vocab), HiddenStates(f.seed, f.requests, c.layers(), c.hidden, f.correlation),
                f.record_tokens, f.log_level == "debug"};
  uint64_t pass_id = 0;
  Progress progress("run");
  const uint64_t passes = f.requests + f.tokens;
  for (uint32_t r = 0; r < f.requests; ++r) {
    std::vector<replay::BatchRow> rows;
    for (uint32_t t = 0; t < f.prefill; ++t) rows.push_back({r, t, std::nullopt});
    COLIBRI_RETURN_IF_ERROR(RunPass(e, inputs, std::move(rows), pass_id++, true, stats));
    stats->ttft_ns.push_back(stats->ElapsedNs());
    stats->prefill_tokens += f.prefill;
    progress.Update(pass_id, passes);
  }
  for (uint32_t step = 0; step < f.tokens; ++step) {
    std::vector<replay::BatchRow> rows;
    for (uint32_t r = 0; r < f.requests; ++r) rows.push_back({r, f.prefill + step, std::nullopt});
    const int64_t pass_start_ns = stats->ElapsedNs();
    COLIBRI_RETURN_IF_ERROR(RunPass(e, inputs, std::move(rows), pass_id++, false, stats));
    stats->tpot_ns.push_back(stats->ElapsedNs() - pass_start_ns);
    stats->decode_tokens += f.requests;
    progress.Update(pass_id, passes);
  }
  return Status::Ok();
}

Json TierJson(const engine::TierCounters& c) { return reports::TierJson(c.lookups, c.hits); }

Json ConfigJson(const RunFlags& f) {
  Json config{{"model", f.model_dir},       {"requests", f.requests},
              {"prefill", f.prefill},       {"tokens", f.tokens},
              {"seed", f.seed},             {"l1_bytes", std::stoull(f.l1_bytes)},
              {"l2_bytes", std::stoull(f.l2_bytes)}, {"policy", f.policy},
              {"l1_policy", f.l1_policy},
              {"prefetch", {{"predictor", f.prefetch.predictor}, {"width", f.prefetch.width}, {"decay", f.prefetch.decay}}},
              {"pin_from", f.pin.from},     {"pin_bytes", std::stoull(f.pin.bytes)},
              {"router", RouterConfigJson(f.router)},
              {"queue_depth", f.queue_depth},
              {"staging_slots", f.staging_slots},
              {"threads", f.threads},       {"storage", f.storage},
              {"direct_io", f.direct_io},   {"correlation", f.correlation}, {"vocab", f.vocab},
              {"verify", f.verify},         {"record", f.record},
              {"record_logits", f.record_logits}, {"record_hidden", f.record_hidden},
              {"record_tokens", f.record_tokens}};
  config.update(ToJson(f.record_output));
  config.update(HwJson(f.hw));
  return config;
}

Json ResultJson(const RunFlags& f, const Engine& e, const RunStats& s, double wall_s) {
  Json steps_json = Json::object();
  for (size_t i = 0; i < s.step_ns.size(); ++i) steps_json[RunStats::kStepNames[i]] = reports::PercentilesJson(s.step_ns[i].Summarize());
  Json out{{"config", ConfigJson(f)},
           {"storage_backend", e.local->storage->caps().name},
           {"transfer_backend", e.local->transfer->caps().name},
           {"compute_backend", e.local->compute->caps().name},
           {"output_digest", s.digest.Hex()},
           {"wall_s", wall_s},
           {"tokens", s.prefill_tokens + s.decode_tokens},
           {"prefill_tokens", s.prefill_tokens},
           {"decode_tokens", s.decode_tokens},
           {"tokens_per_s", (s.prefill_tokens + s.decode_tokens) / wall_s},
           {"steps", s.steps},
           {"hit_pct_decode", reports::Pct(s.served_decode, s.lookups_decode)},
           {"hit_pct_cum", reports::Pct(s.served, s.lookups)},
           {"cache", {{"l1", TierJson(e.local->moe->l1_counters())}, {"l2", TierJson(e.local->moe->l2_counters())}}},
           {"router", RouterJson(e.local->moe->routing(), e.local->moe->router_counters())},
           {"prefetch", PrefetchJson(f.prefetch.predictor, e.local->moe->prefetch_counters(),
                                     e.local->moe->l2_counters().misses)},
           {"read_bytes", s.read_bytes},
           {"preload_bytes", e.local->moe->preloaded_bytes()},
           {"staged_experts", s.staged},
           {"device_staged_experts", s.device_staged},
           {"dropped_assignments", s.dropped},
           {"pool_bytes", e.local->moe->pool_bytes()},
           {"peak_rss_bytes", bench::PeakRssBytes()},
           {"step_latency_ns", steps_json}};
  if (e.recorder) out["recorded_records"] = e.recorder->records_written();
  return out;
}

void PrintHuman(const Json& r) {
  std::printf("output digest %s\n", r["output_digest"].get<std::string>().c_str());
  std::printf("%llu tokens in %.3f s: %.1f tokens/s (%s storage, %s transfer, %s compute)\n",
              static_cast<unsigned long long>(r["tokens"].get<uint64_t>()), r["wall_s"].get<double>(),
              r["tokens_per_s"].get<double>(), r["storage_backend"].get<std::string>().c_str(),
              r["transfer_backend"].get<std::string>().c_str(), r["compute_backend"].get<std::string>().c_str());
  std::printf("served without an NVMe read: %.1f%% (decode %.1f%%); L1 %llu/%llu hits, L2 %llu/%llu hits\n",
              r["hit_pct_cum"].get<double>(), r["hit_pct_decode"].get<double>(),
              static_cast<unsigned long long>(r["cache"]["l1"]["hits"].get<uint64_t>()),
              static_cast<unsigned long long>(r["cache"]["l1"]["lookups"].get<uint64_t>()),
              static_cast<unsigned long long>(r["cache"]["l2"]["hits"].get<uint64_t>()),
              static_cast<unsigned long long>(r["cache"]["l2"]["lookups"].get<uint64_t>()));
  std::printf("read %.1f MiB; peak RSS %.1f MiB (pools %.1f MiB)\n", r["read_bytes"].get<uint64_t>() / 1048576.0,
              r["peak_rss_bytes"].get<uint64_t>() / 1048576.0, r["pool_bytes"].get<uint64_t>() / 1048576.0);
  std::printf("%-16s %12s %12s %12s\n", "step (ns)", "p50", "p99", "max");
  for (const auto& [name, d] : r["step_latency_ns"].items()) {
    std::printf("%-16s %12lld %12lld %12lld\n", name.c_str(), static_cast<long long>(d["p50"].get<int64_t>()),
                static_cast<long long>(d["p99"].get<int64_t>()), static_cast<long long>(d["max"].get<int64_t>()));
  }
}

// The run's row in the store, begun before the run so that a killed run stays "incomplete".
struct StoredRun {
  std::unique_ptr<reports::RunStore> store;
  int64_t id = 0;
};

// Begins the run's row (unless --no-store); without --record the routing is recorded next to the database.
Result<StoredRun> BeginStoredRun(RunFlags* f) {
  StoredRun s;
  if (f->store.no_store) return s;
  COLIBRI_ASSIGN_OR_RETURN(s.store, OpenStore(f->store));
  reports::RunInfo info;
  info.kind = "run";
  info.label = f->model_dir;
  info.config_json = ConfigJson(*f).dump();
  info.hardware_json = "{}";
  info.backends = "storage=" + f->storage + " transfer=" + f->hw.transfer + " compute=" + f->hw.compute;
  info.seed = f->seed;
  StampRun(RerunArgs({}, {}), &info);
  COLIBRI_ASSIGN_OR_RETURN(s.id, s.store->BeginRun(info));
  if (f->record.empty()) {
    f->record = DbPath(f->store) + ".routing/run-" + std::to_string(s.id) + ".ctrace";
    std::error_code ignored;
    std::filesystem::create_directories(std::filesystem::path(f->record).parent_path(), ignored);
  }
  return s;
}

Result<reports::RunResults> StoredResults(const RunFlags& f, const Engine& e, const RunStats& s, const Json& summary) {
  reports::RunResults out;
  for (size_t i = 0; i < s.step_ns.size(); ++i) {
    out.distributions[std::string("step_latency_ns.") + RunStats::kStepNames[i]] = s.step_ns[i];
  }
  out.distributions["ttft_ns"] = reports::Samples::FromRaw(s.ttft_ns);
  out.distributions["tpot_ns"] = reports::Samples::FromRaw(s.tpot_ns);
  const auto elapsed_ns = static_cast<int64_t>(summary["wall_s"].get<double>() * 1e9);
  out.distributions["request_latency_ns"] =  // every request runs from the start to the last decode pass
      reports::Samples::FromRaw(std::vector<int64_t>(f.requests, elapsed_ns));
  const uint64_t tokens = s.prefill_tokens + s.decode_tokens;
  out.scalars = {{"elapsed_ns", static_cast<double>(elapsed_ns)},
                 {"wall_s", summary["wall_s"].get<double>()},
                 {"tokens_per_s", summary["tokens_per_s"].get<double>()},
                 {"steps", static_cast<double>(s.steps)},
                 {"routing_decisions", static_cast<double>(s.steps)},
                 {"layer_batches", static_cast<double>(s.layer_batches)},
                 {"read_bytes", static_cast<double>(s.read_bytes)},
                 {"read_bytes_per_token", tokens > 0 ? static_cast<double>(s.read_bytes) / tokens : 0.0}};
  out.texts = {{"output_digest", s.digest.Hex()}, {"clock", "real"}, {"summary_json", summary.dump()}};
  const engine::TierCounters l1 = e.local->moe->l1_counters(), l2 = e.local->moe->l2_counters();
  out.tiers = reports::TiersOf(reports::CacheOutcome{s.lookups, s.served, s.lookups_decode, s.served_decode, l1.lookups,
                                                     l1.hits, s.l1_hits_decode, l2.lookups, l2.hits, s.l2_hits_decode,
                                                     s.read_bytes});
  out.expert_load = e.loads->loads();
  out.hit_rate = s.hit_rate.points();
  COLIBRI_ASSIGN_OR_RETURN(const traces::SourceFile routing, traces::DescribeSourceFile(f.record));
  out.routing_path = f.record;
  out.routing_digest = routing.sha256;
  return out;
}

Result<Json> Run(RunFlags f) {
  COLIBRI_ASSIGN_OR_RETURN(StoredRun stored, BeginStoredRun(&f));
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<Engine> built, BuildEngine(f));
  Engine& e = *built;
  RunStats stats;
  stats.raw_step_samples_cap = f.raw_step_samples_cap;
  Status status = RunWorkload(f, e, &stats);
  const double wall_s = static_cast<double>(stats.ElapsedNs()) / 1e9;
  if (status.ok()) status = e.local->moe->FinishPrefetches();  // reads no batch waited for: counted, not timed
  if (e.recorder) {
    Status closed = e.recorder->Close();
    if (status.ok()) status = closed;
  }
  if (!status.ok()) {
    if (stored.store) (void)stored.store->FailRun(stored.id, status.message(), NowUnixMs());
    return status;
  }
  Json out = ResultJson(f, e, stats, wall_s);
  if (!stored.store) return out;
  Json with_id{{"run_id", stored.id}};
  with_id.update(out);
  out = std::move(with_id);
  COLIBRI_ASSIGN_OR_RETURN(const reports::RunResults results, StoredResults(f, e, stats, out));
  COLIBRI_RETURN_IF_ERROR(stored.store->FinishRun(stored.id, results, NowUnixMs()));
  StoredRunIds().push_back(stored.id);
  return out;
}

}  // namespace

void AddRunCommand(CLI::App* app, int* exit_code) {
  auto f = std::make_shared<RunFlags>();
  CLI::App* cmd = app->add_subcommand("run", "Run the MoE engine on a model: prefill + decode, experts streamed from disk");
  cmd->add_option("--model", f->model_dir, "Model directory (colibri model synth/export)")->required();
  cmd->add_option("--requests", f->requests, "Concurrent requests")->check(CLI::Range(1u, 4096u))->capture_default_str();
  cmd->add_option("--prefill", f->prefill, "Prompt tokens per request (one prefill pass each)")
      ->check(CLI::Range(1u, 1u << 20))
      ->capture_default_str();
  cmd->add_option("--tokens", f->tokens, "Decode steps (each one pass over all requests)")->capture_default_str();
  cmd->add_option("--seed", f->seed, "Seed of the hidden states")->capture_default_str();
  cmd->add_option("--l1-bytes", f->l1_bytes, "L1 pool budget (the device pool; host memory with CPU compute), 0 = off")
      ->transform(SizeValidator())
      ->capture_default_str();
  cmd->add_option("--l2-bytes", f->l2_bytes, "L2 host cache budget, 0 = off (every expert streams from disk)")
      ->transform(SizeValidator())
      ->capture_default_str();
  AddPrefetchFlags(cmd, &f->prefetch, {"none", "coact", "lookahead"});
  AddPinFlags(cmd, &f->pin);
  AddRouterFlags(cmd, &f->router);
  cmd->add_option("--log-level", f->log_level, "warn, info or debug (debug: one [ROUTER] line per routing decision)")
      ->check(CLI::IsMember({"warn", "info", "debug"}))
      ->capture_default_str();
  cmd->add_option("--policy", f->policy, "L2 cache policy")->check(CLI::IsMember(engine::CachePolicyNames()))->capture_default_str();
  cmd->add_option("--l1-policy", f->l1_policy, "L1 cache policy")
      ->check(CLI::IsMember(engine::CachePolicyNames()))
      ->capture_default_str();
  cmd->add_option("--queue-depth", f->queue_depth, "NVMe reads in flight")->check(CLI::Range(1u, 4096u))->capture_default_str();
  cmd->add_option("--staging-slots", f->staging_slots,
                  "Transient expert slots for reads no tier admits (L2 = 0, or a batch larger than L2)")
      ->check(CLI::Range(1u, 4096u))
      ->capture_default_str();
  cmd->add_option("--threads", f->threads, "CPU compute threads (--compute cpu)")->check(CLI::Range(1u, 256u))->capture_default_str();
  AddHwFlags(cmd, &f->hw, {"auto", "cpu", "cuda"});
  cmd->add_option("--storage", f->storage, "Storage backend: auto (io_uring, else pread), uring, pread")
      ->check(CLI::IsMember({"auto", "uring", "pread"}))
      ->capture_default_str();
  cmd->add_flag("!--no-direct", f->direct_io, "Read through the page cache instead of O_DIRECT");
  cmd->add_option("--correlation", f->correlation, "Temporal correlation of a request's hidden states (0..1)")
      ->check(CLI::Range(0.0, 0.9999))
      ->capture_default_str();
  cmd->add_option("--vocab", f->vocab, "Vocabulary of the seeded token ids (Zipf distributed)")
      ->check(CLI::Range(1u, 1u << 24))
      ->capture_default_str();
  cmd->add_flag("--verify", f->verify, "Verify the model's checksums before running");
  cmd->add_option("--record", f->record, "Record every layer's routing to this trace file");
  cmd->add_flag("--record-logits", f->record_logits, "Record raw router logits (with --record)");
  cmd->add_flag("--record-hidden", f->record_hidden, "Record the router inputs, fp32 (with --record)");
  cmd->add_flag("--record-tokens", f->record_tokens, "Record the seeded token ids (with --record)");
  AddTraceOutputFlags(cmd, &f->record_output);
  cmd->add_option("--raw-sample-cap", f->raw_step_samples_cap,
                  "Raw per-step latency samples kept (over all steps); beyond it, histograms (1% error)")
      ->capture_default_str();
  AddStoreFlags(cmd, &f->store);
  cmd->add_flag("--json", f->json, "Print the result as JSON on stdout");
  cmd->callback([f, exit_code] {
    ResolveHwFlags(&f->hw);
    *exit_code = Emit(Run(*f), f->json, &PrintHuman);
  });
}

}  // namespace colibri::cli
