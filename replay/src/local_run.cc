#include "colibri/replay/local_run.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <span>
#include <utility>

#include "colibri/engine/local_engine.h"
#include "colibri/engine/mix.h"
#include "colibri/replay/cache_lab.h"
#include "colibri/replay/hw_backends.h"
#include "colibri/replay/trace_recorder.h"
#include "colibri/sim/sim_event_loop.h"
#include "colibri/sim/sim_storage.h"
#include "batch_counts.h"
#include "seeded_inputs.h"

namespace colibri::replay {
namespace {

using engine::TimeNs;

// FNV-1a 64 over bytes: the output digest (equality check, not security).
class Fnv1a {
 public:
  void Add(const void* data, size_t n) { hash_ = engine::Fnv1a64Bytes(data, n, hash_); }
  std::string Hex() const {
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(hash_));
    return buf;
  }

 private:
  uint64_t hash_ = engine::kFnv1a64Basis;
};

// Counts each layer's expert selections, then hands the decision on (to the
// recorder, if any). With a log, prints each (token, slot) decision as
// `[ROUTER] 0x<request id> | EXPERT:<id> | LOAD:<0..1> | LATENCY:<n>us`:
// LOAD = the expert's selections so far in this layer over the layer's most
// selected expert's, LATENCY = the batch's routing step.
class LoadCounter final : public engine::EngineObserver {
 public:
  LoadCounter(uint32_t layers, uint32_t experts, std::FILE* log, const engine::Clock* clock)
      : loads_(layers, std::vector<uint64_t>(experts, 0)), log_(log), clock_(clock) {}
  void set_next(engine::EngineObserver* next) { next_ = next; }
  // The rows of the batches routed next (request ids for the log); borrowed.
  void set_rows(const std::vector<BatchRow>* rows) { rows_ = rows; }
  void OnRouting(const engine::RoutingDecision& d) override {
    const TimeNs start_ns = clock_->Now();
    std::vector<uint64_t>& load = loads_[d.layer_index];
    for (size_t i = 0; i < d.tokens * d.top_k; ++i) ++load[d.expert_ids[i]];
    if (log_ != nullptr && rows_ != nullptr) LogDecisions(d, load);
    if (next_ != nullptr) next_->OnRouting(d);
    observed_ns_ += clock_->Now() - start_ns;
  }
  const std::vector<std::vector<uint64_t>>& loads() const { return loads_; }
  // Time spent in OnRouting so far (counting, the log, the recorder): the harness's, not the engine's.
  TimeNs observed_ns() const { return observed_ns_; }

 private:
  void LogDecisions(const engine::RoutingDecision& d, const std::vector<uint64_t>& load) const {
    const double max_load = static_cast<double>(*std::max_element(load.begin(), load.end()));
    for (size_t t = 0; t < d.tokens && t < rows_->size(); ++t) {
      for (uint32_t s = 0; s < d.top_k; ++s) {
        const uint32_t id = d.expert_ids[t * d.top_k + s];
        std::fprintf(log_, "[ROUTER] 0x%016llx | EXPERT:%u | LOAD:%.2f | LATENCY:%lldus\n",
                     static_cast<unsigned long long>((*rows_)[t].request_id), id,
                     static_cast<double>(load[id]) / max_load, static_cast<long long>(d.routing_ns / 1000));
      }
    }
  }

  std::vector<std::vector<uint64_t>> loads_;
  std::FILE* log_;
  const engine::Clock* clock_;
  TimeNs observed_ns_ = 0;
  engine::EngineObserver* next_ = nullptr;
  const std::vector<BatchRow>* rows_ = nullptr;
};

Status Validate(const LocalRunOptions& o) {
  if (o.requests == 0) return Status::InvalidArgument("a local run needs at least one request");
  if (o.prefill_tokens == 0) return Status::InvalidArgument("a local run needs at least one prefill token per request");
  if (o.vocab == 0) return Status::InvalidArgument("a local run needs a vocabulary of at least one token");
  if (!(o.correlation >= 0.0 && o.correlation < 1.0)) {
    return Status::InvalidArgument("the hidden states' correlation must be in [0, 1), not " +
                                   std::to_string(o.correlation));
  }
  return Status::Ok();
}

// Wraps the backends `options` opens with fault injectors on streams of
// `seed`, recording into `log`; corruption turns the block check on for every read.
void AddFaultInjection(const sim::FaultSpec& spec, uint64_t seed, sim::FaultLog* log,
                       engine::LocalEngineOptions* options) {
  options->wrap_storage = [spec, seed, log](std::unique_ptr<engine::StorageBackend> storage, engine::EventLoop* loop)
      -> Result<std::unique_ptr<engine::StorageBackend>> {
    return sim::WithFaults(std::move(storage), spec, seed, loop, log);
  };
  if (spec.storage_corrupt.on()) options->block_check = engine::BlockCheckMode::kAlways;
  options->wrap_transfer = [spec, seed, log](std::unique_ptr<engine::TransferBackend> transfer, engine::EventLoop* loop)
      -> Result<std::unique_ptr<engine::TransferBackend>> {
    return sim::WithFaults(std::move(transfer), spec, seed, loop, log);
  };
  options->wrap_compute = [spec, seed, log](std::unique_ptr<engine::ComputeBackend> compute, engine::EventLoop* loop)
      -> Result<std::unique_ptr<engine::ComputeBackend>> {
    return sim::WithFaults(std::move(compute), spec, seed, loop, log);
  };
}

Result<engine::LocalEngineOptions> EngineOptionsOf(const LocalRunOptions& o, sim::FaultLog* faults) {
  engine::LocalEngineOptions options;
  options.model_dir = o.model_dir;
  options.verify = o.verify;
  options.storage = o.storage;
  options.queue_depth = o.queue_depth;
  options.direct_io = o.direct_io;
  options.threads = o.threads;
  const HwBackendOptions hw{o.threads, o.cuda_device, o.copy_streams};
  const HwBackendNames names = ResolveHwBackends(o.transfer, o.compute, o.cuda_device);
  options.make_transfer = [names, hw](const engine::Clock* clock) { return MakeHwTransfer(names.transfer, clock, hw); };
  options.make_compute = [names, hw] { return MakeHwCompute(names.compute, hw); };
  if (o.modelled_storage) {
    options.make_loop = [] { return std::unique_ptr<engine::EventLoop>(new sim::SimEventLoop()); };
    options.make_storage = [nvme = *o.modelled_storage, depth = o.queue_depth, seed = o.seed](
                               const std::string& path, engine::EventLoop* loop) {
      sim::SimStorageOptions sim_options;
      sim_options.loop = loop;
      sim_options.queue_depth = depth;
      sim_options.seed = seed;
      sim_options.data_path = path;
      return sim::MakeSimStorage(nvme, sim_options);
    };
  }
  if (o.faults.any()) AddFaultInjection(o.faults, o.seed, faults, &options);
  options.engine.l1_bytes = o.l1_bytes;
  options.engine.l2_bytes = o.l2_bytes;
  options.engine.l1_policy = o.l1_policy;
  options.engine.l2_policy = o.l2_policy;
  options.engine.staging_slots = o.staging_slots;
  options.engine.read_retries = o.read_retries;
  options.engine.isolate_expert_failures = o.isolate_failures;
  options.engine.prefetch = o.prefetch;
  options.engine.routing = o.router;
  const bool pinned = o.l2_policy == "pinned";
  engine::ModelConfig shape;  // the hot set is checked against the model's shape
  if (pinned) {
    COLIBRI_ASSIGN_OR_RETURN(shape, engine::ReadModelConfig(o.model_dir));
  }
  COLIBRI_ASSIGN_OR_RETURN(options.engine.pinned,
                           LearnHotSet(pinned, o.pin_from, o.pin_bytes, shape.layers(), shape.experts));
  return options;
}

// The engine with its observers: the load counter, then the recorder.
struct Rig {
  std::unique_ptr<sim::FaultLog> faults = std::make_unique<sim::FaultLog>();  // outlives the injectors in `local`
  std::unique_ptr<engine::LocalEngine> local;
  std::unique_ptr<LoadCounter> loads;
  std::unique_ptr<TraceRecorder> recorder;
};

Result<Rig> OpenRig(const LocalRunOptions& o, std::vector<std::string>* warnings) {
  Rig rig;
  COLIBRI_ASSIGN_OR_RETURN(const engine::LocalEngineOptions options, EngineOptionsOf(o, rig.faults.get()));
  COLIBRI_ASSIGN_OR_RETURN(rig.local, engine::LocalEngine::Open(options));
  if (o.faults.storage_corrupt.on() && !rig.local->model.has_block_digests()) {
    return Status::InvalidArgument("--faults storage.corrupt damages bytes that only the model's block digests detect: " +
                                   o.model_dir + " is a format 1 model (colibri model upgrade makes it format 2)");
  }
  COLIBRI_RETURN_IF_ERROR(rig.local->moe->PreloadPinned());
  if (!rig.local->warning.empty()) warnings->push_back(rig.local->warning);
  for (std::string& w : rig.local->moe->SizingWarnings()) warnings->push_back(std::move(w));
  const engine::ModelConfig& config = rig.local->model.config();
  rig.loads = std::make_unique<LoadCounter>(config.layers(), config.experts, o.routing_log, rig.local->loop.get());
  rig.local->moe->set_observer(rig.loads.get());
  if (!o.record_path.empty()) {
    const RecorderOptions recorder{o.record_logits, o.record_hidden, o.record_writer};
    COLIBRI_ASSIGN_OR_RETURN(rig.recorder, TraceRecorder::Create(o.record_path, config, o.record_provenance, recorder));
    rig.loads->set_next(rig.recorder.get());
  }
  return rig;
}

// The passes of one run and what they measure, on the engine's clock.
class Workload {
 public:
  Workload(const LocalRunOptions& o, Rig* rig, LocalRunResult* out)
      : o_(o),
        rig_(*rig),
        config_(rig->local->model.config()),
        tokens_(o.seed, o.requests, o.vocab),
        hidden_(o.seed, o.requests, config_.layers(), config_.hidden, o.correlation),
        out_(*out) {
    out_.request_times.resize(o.requests);
    request_digests_.resize(o.requests);
    failed_.assign(o.requests, 0);
    rig_.loads->set_rows(&rows_);
  }

  // Each request's prefill is one pass of P tokens; then each decode step is
  // one pass with one token of every request.
  Status Run() {
    start_ns_ = rig_.local->loop->Now();
    const uint64_t passes = static_cast<uint64_t>(o_.requests) + o_.decode_passes;
    uint64_t pass_id = 0;
    for (uint32_t r = 0; r < o_.requests; ++r) {
      rows_.clear();
      for (uint32_t t = 0; t < o_.prefill_tokens; ++t) rows_.push_back({r, t, std::nullopt});
      COLIBRI_RETURN_IF_ERROR(RunPass(pass_id++, true));
      out_.prefill_tokens += o_.prefill_tokens;
      if (o_.on_pass) o_.on_pass(pass_id, passes);
    }
    for (uint32_t step = 0; step < o_.decode_passes; ++step) {
      rows_.clear();
      for (uint32_t r = 0; r < o_.requests; ++r) {
        if (!failed_[r]) rows_.push_back({r, o_.prefill_tokens + step, std::nullopt});
      }
      if (rows_.empty()) break;  // every request failed
      COLIBRI_RETURN_IF_ERROR(RunPass(pass_id++, false));
      out_.decode_tokens += rows_.size();
      if (o_.on_pass) o_.on_pass(pass_id, passes);
    }
    out_.elapsed_ns = Now();
    out_.forward_passes = pass_id;
    out_.request_output_digests.clear();
    for (uint32_t r = 0; r < o_.requests; ++r) {
      out_.request_output_digests.push_back(failed_[r] ? std::string() : request_digests_[r].Hex());
    }
    return Status::Ok();
  }

  std::string digest() const { return digest_.Hex(); }
  bool failed(uint32_t request) const { return failed_[request] != 0; }
  const reports::HitRateSeries& hit_rate() const { return hit_rate_; }

 private:
  // The engine's timeline: the loop's clock since the start, less the harness's own work so far.
  TimeNs Now() const { return rig_.local->loop->Now() - start_ns_ - harness_ns_ - rig_.loads->observed_ns(); }
  TimeNs RawNow() const { return rig_.local->loop->Now(); }

  // One forward pass: every MoE layer over the rows_ (request, position) tokens, their token ids drawn now.
  Status RunPass(uint64_t pass_id, bool prefill) {
    TimeNs harness_start_ns = RawNow();
    std::vector<uint32_t> token_ids;
    for (BatchRow& row : rows_) token_ids.push_back(*(row.token_id = tokens_.Next(row.request_id)));
    if (rig_.recorder) {
      std::vector<BatchRow> recorded = rows_;
      if (!o_.record_tokens) {
        for (BatchRow& row : recorded) row.token_id.reset();
      }
      rig_.recorder->BeginPass(pass_id, prefill, std::move(recorded));
    }
    const size_t n = rows_.size(), hidden = config_.hidden;
    std::vector<float> x(n * hidden), y(n * hidden);
    TimeNs pass_start_ns = 0, batch_end_ns = 0;
    for (uint32_t layer = 0; layer < config_.layers(); ++layer) {
      for (size_t i = 0; i < n; ++i) {
        std::copy_n(hidden_.Next(rows_[i].request_id, layer, token_ids[i]), hidden, x.data() + i * hidden);
      }
      harness_ns_ += RawNow() - harness_start_ns;  // the seeded inputs (and the recorder's pass) are the harness's
      engine::LayerBatchReport report;
      const TimeNs batch_start_ns = Now();
      if (layer == 0) pass_start_ns = batch_start_ns;
      COLIBRI_RETURN_IF_ERROR(rig_.local->moe->Forward(layer, x.data(), n, y.data(), &report, token_ids.data()));
      batch_end_ns = Now();
      if (rig_.recorder && !rig_.recorder->status().ok()) return rig_.recorder->status();
      harness_start_ns = RawNow();
      AddBatch(report, prefill, batch_end_ns);
      digest_.Add(y.data(), y.size() * sizeof(float));
      if (const engine::BatchFailures& failures = rig_.local->moe->last_failures(); !failures.empty()) {
        NoteFailures(pass_id, layer, failures, batch_end_ns);
      }
      for (size_t i = 0; i < n; ++i) {
        const uint32_t r = rows_[i].request_id;
        if (!failed_[r]) request_digests_[r].Add(y.data() + i * hidden, hidden * sizeof(float));
      }
    }
    harness_ns_ += RawNow() - harness_start_ns;
    EndPass(pass_start_ns, batch_end_ns);
    return Status::Ok();
  }

  // The requests of the failed tokens fail, each with the first failed expert its token was routed to.
  void NoteFailures(uint64_t pass_id, uint32_t layer, const engine::BatchFailures& failures, TimeNs at_ns) {
    const std::span<const uint32_t> routed = rig_.local->moe->last_routed_ids();
    const uint32_t k = config_.top_k;
    for (uint32_t t : failures.tokens) {
      const uint32_t request = rows_[t].request_id;
      if (failed_[request]) continue;
      failed_[request] = 1;
      const engine::ExpertFailure* cause = &failures.experts.front();
      for (const engine::ExpertFailure& f : failures.experts) {
        if (std::find(routed.begin() + t * k, routed.begin() + (t + 1) * k, f.expert) != routed.begin() + (t + 1) * k) {
          cause = &f;
          break;
        }
      }
      out_.failed_requests.push_back(
          FailedRequest{request, pass_id, layer, cause->expert, at_ns, cause->status.message()});
    }
  }

  void AddBatch(const engine::LayerBatchReport& r, bool prefill, TimeNs end_ns) {
    const engine::StepTimes& s = r.step_ns;
    const TimeNs steps_ns[] = {s.routing, s.scheduling, s.nvme_read, s.host_to_device, s.compute, s.aggregation, s.total};
    static_assert(std::size(steps_ns) == LocalRunResult::kStepNames.size());
    reports::AddStepSamples(out_.step_ns.data(), steps_ns, std::size(steps_ns), out_.layer_batches,
                            o_.raw_step_samples_cap);
    out_.steps += r.tokens;
    AddBatchCounts(r, prefill, &out_);
    hit_rate_.Add(++out_.layer_batches, end_ns, out_.lookups, out_.served);
    out_.read_bytes += r.read_bytes + r.prefetch_bytes;
    out_.dropped_assignments += r.dropped_assignments;
    out_.device_staged += r.device_staged;
  }

  // Every request of the pass ran from `start_ns` (its first layer batch's start) to `end_ns`.
  void EndPass(TimeNs start_ns, TimeNs end_ns) {
    uint64_t last_request = UINT64_MAX;
    for (const BatchRow& row : rows_) {
      if (row.request_id == last_request) continue;
      last_request = row.request_id;
      reports::RequestTimes& t = out_.request_times[row.request_id];
      if (t.passes == 0) {
        t.start_ns = start_ns;
        t.first_pass_end_ns = end_ns;
      }
      t.last_end_ns = end_ns;
      ++t.passes;
    }
  }

  const LocalRunOptions& o_;
  Rig& rig_;
  const engine::ModelConfig& config_;
  TokenStreams tokens_;
  HiddenStates hidden_;
  LocalRunResult& out_;
  std::vector<BatchRow> rows_;  // the pass being run (the load counter's log reads them)
  Fnv1a digest_;
  std::vector<Fnv1a> request_digests_;  // per request
  std::vector<uint8_t> failed_;         // per request
  reports::HitRateSeries hit_rate_;
  TimeNs start_ns_ = 0;
  TimeNs harness_ns_ = 0;  // the harness's own work: inputs, bookkeeping, the digest (not the engine's)
};

// The engine's counters and the per-request distributions, once the passes ran.
void Finish(const LocalRunOptions& o, const Rig& rig, const Workload& workload, LocalRunResult* out) {
  const engine::MoeEngine& moe = *rig.local->moe;
  out->output_digest = workload.digest();
  out->storage_backend = rig.local->storage->caps().name;
  out->transfer_backend = rig.local->transfer->caps().name;
  out->compute_backend = rig.local->compute->caps().name;
  out->requests = out->request_times.size();
  for (uint32_t r = 0; r < out->request_times.size(); ++r) {
    if (workload.failed(r)) continue;  // its latency and tokens were never delivered
    const reports::RequestTimes& t = out->request_times[r];
    reports::AddRequestLatencies(t, &out->request_latency_ns, &out->ttft_ns, &out->tpot_ns);
    out->passes += t.passes;
  }
  out->throughput = reports::ThroughputOf(out->passes, out->prefill_tokens + out->decode_tokens, out->steps,
                                          out->elapsed_ns);
  out->l1 = moe.l1_counters();
  out->l2 = moe.l2_counters();
  out->prefetch = moe.prefetch_counters();
  out->read_retries += out->prefetch.retries;
  out->faults = rig.faults->records();
  out->router = moe.router_counters();
  out->preload_bytes = moe.preloaded_bytes();
  out->pool_bytes = moe.pool_bytes();
  out->expert_load_counts = rig.loads->loads();
  out->hit_rate = workload.hit_rate().points();
  if (rig.recorder) out->recording = LocalRunRecording{o.record_path, rig.recorder->records_written()};
}

}  // namespace

Result<LocalRunEstimate> EstimateLocalRun(const LocalRunOptions& options) {
  COLIBRI_ASSIGN_OR_RETURN(const engine::ModelConfig config, engine::ReadModelConfig(options.model_dir));
  LocalRunEstimate e;
  e.tokens = uint64_t{options.requests} * (uint64_t{options.prefill_tokens} + options.decode_passes);
  e.expert_calls = e.tokens * config.layers() * config.top_k;
  e.expert_flops = static_cast<double>(e.expert_calls) * 6.0 * config.hidden * config.intermediate;
  char flops[32];
  std::snprintf(flops, sizeof(flops), "%.2g", e.expert_flops);
  e.text = std::to_string(e.tokens) + " tokens (" + std::to_string(options.requests) + " requests x (" +
           std::to_string(options.prefill_tokens) + " prompt + " + std::to_string(options.decode_passes) +
           " decode)) through " + std::to_string(config.layers()) + " MoE layers at top-" +
           std::to_string(config.top_k) + ": " + flops + " expert FLOPs";
  return e;
}

Result<LocalRunResult> RunLocal(const LocalRunOptions& options) {
  COLIBRI_RETURN_IF_ERROR(Validate(options));
  if (!options.force) {
    COLIBRI_ASSIGN_OR_RETURN(const LocalRunEstimate estimate, EstimateLocalRun(options));
    if (estimate.expert_flops > kLocalRunFlopsWithoutForce) {
      return Status::InvalidArgument("this run would compute " + estimate.text + ", above the 1e15 a run starts " +
                                     "without --force (hours on a CPU); pass --force to run it anyway");
    }
  }
  LocalRunResult out;
  COLIBRI_ASSIGN_OR_RETURN(Rig rig, OpenRig(options, &out.warnings));
  Workload workload(options, &rig, &out);
  Status status = workload.Run();
  if (status.ok()) status = rig.local->moe->FinishPrefetches();  // reads no batch waited for: counted, not timed
  if (rig.recorder) {
    const Status closed = rig.recorder->Close();
    if (status.ok()) status = closed;
  }
  COLIBRI_RETURN_IF_ERROR(status);
  Finish(options, rig, workload, &out);
  return out;
}

}  // namespace colibri::replay
