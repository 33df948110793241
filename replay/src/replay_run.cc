#include "colibri/replay/replay_run.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include "colibri/engine/block_check.h"
#include "colibri/engine/cpu_compute.h"
#include "colibri/replay/cache_lab.h"
#include "colibri/replay/hw_backends.h"
#include "batch_counts.h"
#include "cache_lab_predictor.h"
#include "colibri/replay/continuous_batching.h"
#include "colibri/replay/dense_cost.h"
#include "colibri/replay/request_store.h"
#include "colibri/reports/run_recording.h"
#include "colibri/traces/arrivals.h"
#include "colibri/engine/dtype.h"
#include "colibri/engine/model.h"
#include "colibri/sim/event_log.h"
#include "colibri/sim/sim_compute.h"
#include "colibri/sim/sim_host_work.h"
#include "colibri/sim/machine_identity.h"
#include "colibri/sim/sim_event_loop.h"
#include "colibri/sim/sim_storage.h"
#include "colibri/sim/sim_transfer.h"
#include "colibri/traces/reader.h"

namespace colibri::replay {
namespace {

constexpr uint64_t kBlockAlignmentBytes = 4096;

// Everything one replay runs on; not movable (the models borrow the loop and the log).
struct Rig {
  std::unique_ptr<engine::EventLoop> loop;
  sim::EventLog log;
  sim::FaultLog faults{&log};
  std::optional<engine::Model> model;
  std::unique_ptr<engine::StorageBackend> storage;
  std::unique_ptr<engine::TransferBackend> transfer;
  std::unique_ptr<engine::ComputeBackend> compute;
  sim::SimCompute* sim_compute = nullptr;  // when compute is modelled
  std::unique_ptr<sim::SimHostWork> host_work;  // when modelled and the machine has measured host work
  std::unique_ptr<engine::MoeEngine> engine;
  std::string modelled_layout;
};

Status CheckPacing(const ReplayConfig& c) {
  if (c.pacing == Pacing::kOpen) {
    if (c.max_batch == 0) return Status::InvalidArgument("--max-batch 0: expected at least 1 request per pass");
    return Status::Ok();
  }
  const bool open_options = !c.arrivals_path.empty() || c.time_scale != 1.0 || c.repeat || c.max_arrivals != 0;
  if (open_options) {
    return Status::InvalidArgument(
        "--arrivals, --time-scale, --repeat and --max-arrivals pace arrivals: they need --pacing open");
  }
  return Status::Ok();
}

Status CheckConfig(const ReplayConfig& c) {
  const std::set<std::string> storages{"sim", "uring", "pread"}, backends{"sim", "cpu", "cuda"};
  if (!storages.count(c.storage)) return Status::InvalidArgument("--storage " + c.storage + ": expected sim, uring or pread");
  if (!backends.count(c.transfer)) return Status::InvalidArgument("--transfer " + c.transfer + ": expected sim, cpu or cuda");
  if (!backends.count(c.compute)) return Status::InvalidArgument("--compute " + c.compute + ": expected sim, cpu or cuda");
  const bool needs_model = c.storage != "sim" || c.compute != "sim";
  if (needs_model && c.model_dir.empty()) {
    return Status::InvalidArgument("real backends (--storage " + c.storage + ", --compute " + c.compute +
                                   ") read and compute the experts: pass --model DIR");
  }
  const engine::RoutingOptions& r = c.router;
  if (c.routing == RoutingMode::kRecorded &&
      (r.router.mode != engine::RouterMode::kSoftmaxTopK || r.router.load_aware.enabled || r.capacity_factor > 0)) {
    return Status::InvalidArgument("--router, --load-aware and --capacity-factor route again: they need --routing recompute");
  }
  return CheckPacing(c);
}

uint64_t RoundUp(uint64_t value, uint64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// The expert shape the models cost, from the trace header: its dtype when the
// engine knows it (gguf and other block formats are modelled as int8: about
// the same bytes), its hidden size (or the configured one), the intermediate
// size that makes 3 x H x I weights fill the recorded expert bytes; the block
// read from storage is the recorded expert bytes (the largest layer's).
Result<engine::ExpertLayout> ModelledLayout(const traces::ModelShape& shape, uint32_t hidden, std::string* note) {
  auto parsed = engine::ParseDType(shape.dtype);
  const engine::DType dtype = parsed.ok() ? parsed.value() : engine::DType::kInt8;
  const uint32_t h = shape.hidden_size > 0 ? shape.hidden_size : hidden;
  if (h == 0) {
    return Status::InvalidArgument("the trace records no hidden_size: pass --hidden (the model's hidden size)");
  }
  uint64_t expert_bytes = 0;
  for (uint64_t bytes : shape.expert_bytes) expert_bytes = std::max(expert_bytes, bytes);
  if (expert_bytes == 0) return Status::InvalidArgument("the trace records no expert_bytes");
  const uint64_t per_weight = engine::DTypeBytes(dtype);
  const auto intermediate = static_cast<uint32_t>(std::max<uint64_t>(1, expert_bytes / (3 * h * per_weight)));
  engine::ExpertLayout layout = engine::ExpertLayout::Make(dtype, h, intermediate, kBlockAlignmentBytes);
  layout.block_bytes = RoundUp(expert_bytes, kBlockAlignmentBytes);
  *note = std::string(engine::DTypeName(dtype)) + (parsed.ok() ? "" : " (for '" + shape.dtype + "')") +
          ", H=" + std::to_string(h) + ", I=" + std::to_string(intermediate) + ", block " +
          std::to_string(layout.block_bytes) + " bytes";
  return layout;
}

Result<engine::EngineModel> ModelledEngineModel(const traces::ModelShape& shape, uint32_t hidden, std::string* note) {
  engine::EngineModel m;
  m.moe_layers = static_cast<uint32_t>(shape.moe_layer_ids.size());
  m.experts = shape.experts_per_layer;
  m.top_k = shape.top_k;
  COLIBRI_ASSIGN_OR_RETURN(m.layout, ModelledLayout(shape, hidden, note));
  for (uint64_t i = 0; i < static_cast<uint64_t>(m.moe_layers) * m.experts; ++i) {
    m.expert_offsets.push_back(i * m.layout.block_bytes);
  }
  // Layers whose experts differ in size (mixed quantisation) read and cache their own size.
  for (uint64_t bytes : shape.expert_bytes) m.layer_expert_bytes.push_back(RoundUp(bytes, kBlockAlignmentBytes));
  const bool uniform = std::all_of(m.layer_expert_bytes.begin(), m.layer_expert_bytes.end(),
                                   [&](uint64_t bytes) { return bytes == m.layout.block_bytes; });
  if (uniform || m.layer_expert_bytes.size() != m.moe_layers) m.layer_expert_bytes.clear();
  if (!m.layer_expert_bytes.empty()) *note += ", per-layer expert sizes";
  return m;
}

Status OpenStorage(const ReplayConfig& c, const engine::EngineModel& m, Rig* rig) {
  if (c.storage == "sim") {
    sim::SimStorageOptions o;
    o.loop = rig->loop.get();
    o.queue_depth = c.queue_depth;
    o.seed = c.seed;
    o.event_log = &rig->log;
    if (c.compute != "sim") {
      o.data_path = rig->model->experts_path();  // the compute reads real weights
    } else {
      o.file_bytes = m.expert_offsets.back() + m.layout.block_bytes;
    }
    COLIBRI_ASSIGN_OR_RETURN(rig->storage, sim::MakeSimStorage(c.machine.nvme, o));
  } else {
    engine::StorageOptions o;
    o.clock = rig->loop.get();
    o.queue_depth = c.queue_depth;
    const std::string path = rig->model->experts_path();
    COLIBRI_ASSIGN_OR_RETURN(rig->storage, engine::OpenStorage(c.storage, path, o));
  }
  if (c.faults.storage_any()) {  // under the block check, which then sees a corrupted read
    rig->storage = sim::WithFaults(std::move(rig->storage), c.faults, c.seed, rig->loop.get(), &rig->faults);
  }
  // Blocks that land in memory are checked when the model was not hashed whole
  // at open, and always under injected corruption (a read damaged after open).
  if (rig->model) {
    const bool corrupting = c.faults.storage_corrupt.on();
    if (corrupting && (!rig->model->has_block_digests() || c.model_verify == engine::ModelVerify::kNone)) {
      return Status::InvalidArgument(
          "--faults storage.corrupt damages bytes that only the model's block digests detect: it needs a format 2 "
          "model (colibri model upgrade) and --verify other than none");
    }
    rig->storage = engine::CheckBlocksOnRead(
        *rig->model, std::move(rig->storage),
        corrupting ? engine::BlockCheckMode::kAlways : engine::BlockCheckMode::kUnlessVerifiedAtOpen);
  }
  return Status::Ok();
}

HwBackendOptions HwOptions(const ReplayConfig& c) { return HwBackendOptions{c.threads, c.cuda_device, c.copy_streams}; }

Status OpenTransferAndCompute(const ReplayConfig& c, Rig* rig) {
  if (c.transfer == "sim") {
    COLIBRI_ASSIGN_OR_RETURN(rig->transfer,
                             sim::MakeSimTransfer(c.machine.pcie, sim::SimTransferOptions{rig->loop.get(), c.pinned, &rig->log}));
  } else {
    COLIBRI_ASSIGN_OR_RETURN(rig->transfer, MakeHwTransfer(c.transfer, rig->loop.get(), HwOptions(c)));
  }
  if (c.compute == "sim") {
    COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<sim::SimCompute> compute,
                             sim::MakeSimCompute(c.machine.compute,
                                                 sim::SimComputeOptions{rig->loop.get(), &rig->log, c.threads}));
    rig->sim_compute = compute.get();
    rig->compute = std::move(compute);
  } else {
    COLIBRI_ASSIGN_OR_RETURN(rig->compute, MakeHwCompute(c.compute, HwOptions(c)));
  }
  if (c.faults.transfer_any()) {
    rig->transfer = sim::WithFaults(std::move(rig->transfer), c.faults, c.seed, rig->loop.get(), &rig->faults);
  }
  if (c.faults.compute_any()) {
    rig->compute = sim::WithFaults(std::move(rig->compute), c.faults, c.seed, rig->loop.get(), &rig->faults);
  }
  return Status::Ok();
}

// Belady's future for a tier that runs it: every lookup of the trace's layer
// batches, which that tier sees in order only in a closed loop, and L2 only
// without L1 (L1's hits would hide lookups from it). Null when no tier runs it.
Result<std::shared_ptr<const engine::NextUseIndex>> BeladyFuture(const ReplayConfig& c) {
  const bool l1 = c.l1_bytes > 0 && c.l1_policy == "belady", l2 = c.l2_bytes > 0 && c.policy == "belady";
  if (!l1 && !l2) return std::shared_ptr<const engine::NextUseIndex>();
  if (c.pacing != Pacing::kClosed) {
    return Status::InvalidArgument("policy 'belady' reads the trace's future layer batches: it needs --pacing closed");
  }
  if (l2 && c.l1_bytes > 0) {
    return Status::InvalidArgument("--policy belady on L2 needs --l1-bytes 0 (L1's hits would hide lookups from L2)");
  }
  COLIBRI_ASSIGN_OR_RETURN(const LabTrace trace, LoadLabTrace(c.trace_path, c.allow_torn));
  return BuildNextUse(trace);
}

// The engine's prefetch for a replay. Made here: "oracle" (the trace's next
// batch, which the engine sees in order only in a closed loop) and "coact"
// trained on a profile trace; the engine makes the others.
Result<engine::PrefetchConfig> ReplayPrefetch(const ReplayConfig& c, const traces::ModelShape& shape) {
  engine::PrefetchConfig p = c.prefetch;
  if (p.predictor == "oracle") {
    if (c.pacing != Pacing::kClosed) {
      return Status::InvalidArgument("prefetch 'oracle' reads the trace's next layer batch: it needs --pacing closed");
    }
    COLIBRI_ASSIGN_OR_RETURN(LabTrace trace, LoadLabTrace(c.trace_path, c.allow_torn));
    p.custom = MakeTraceOracle(std::move(trace));
  } else if (!c.prefetch_profile.empty()) {
    if (p.predictor != "coact") return Status::InvalidArgument("--prefetch-profile trains --prefetch coact");
    COLIBRI_RETURN_IF_ERROR(engine::CheckCoactDecay(p.decay));
    COLIBRI_ASSIGN_OR_RETURN(const LabTrace profile, LoadLabTrace(c.prefetch_profile));
    const auto layers = static_cast<uint32_t>(shape.moe_layer_ids.size());
    COLIBRI_RETURN_IF_ERROR(CheckProfileShape(profile, layers, shape.experts_per_layer));
    auto coact = std::make_shared<engine::CoactivationPredictor>(layers, shape.experts_per_layer, p.decay);
    TrainCoact(profile, coact.get());
    p.custom = std::move(coact);
  }
  return p;
}

Result<std::unique_ptr<Rig>> BuildRig(const ReplayConfig& c, const traces::ModelShape& shape) {
  COLIBRI_RETURN_IF_ERROR(CheckConfig(c));
  auto rig = std::make_unique<Rig>();
  const bool simulated = c.storage == "sim" && c.transfer == "sim" && c.compute == "sim";
  if (simulated) {
    rig->loop = std::make_unique<sim::SimEventLoop>();
  } else {
    rig->loop = std::make_unique<engine::RealEventLoop>();
  }
  engine::EngineModel model;
  if (!c.model_dir.empty()) {
    COLIBRI_ASSIGN_OR_RETURN(rig->model, engine::OpenModel(c.model_dir, c.model_verify));
    model = engine::EngineModelOf(*rig->model);
    rig->modelled_layout = "model " + c.model_dir;
  } else {
    COLIBRI_ASSIGN_OR_RETURN(model, ModelledEngineModel(shape, c.hidden, &rig->modelled_layout));
  }
  COLIBRI_RETURN_IF_ERROR(OpenStorage(c, model, rig.get()));
  COLIBRI_RETURN_IF_ERROR(OpenTransferAndCompute(c, rig.get()));
  engine::EngineOptions options{c.l1_bytes, c.l2_bytes, c.l1_policy, c.policy, c.staging_slots};
  options.read_retries = c.read_retries;
  options.routing = c.router;
  COLIBRI_ASSIGN_OR_RETURN(options.next_use, BeladyFuture(c));
  COLIBRI_ASSIGN_OR_RETURN(options.prefetch, ReplayPrefetch(c, shape));
  COLIBRI_ASSIGN_OR_RETURN(options.pinned, LearnHotSet(c.policy == "pinned", c.pin_from, c.pin_bytes, model.moe_layers,
                                                       model.experts));
  // The engine's own work takes modelled time only on a fully modelled machine that measured it.
  if (simulated && !c.machine.machine.host_work.empty()) {
    COLIBRI_ASSIGN_OR_RETURN(const sim::HostWorkProfile host_work, sim::HostWorkAtThreads(c.machine.machine.host_work, c.threads));
    COLIBRI_ASSIGN_OR_RETURN(rig->host_work, sim::SimHostWork::Make(host_work, rig->sim_compute, c.machine.nvme.read_grid));
  }
  const engine::EngineBackends backends{rig->loop.get(), rig->storage.get(), rig->transfer.get(), rig->compute.get(),
                                        nullptr, rig->host_work.get()};
  COLIBRI_ASSIGN_OR_RETURN(rig->engine, engine::MoeEngine::Create(std::move(model), options, backends));
  (void)rig->storage->RegisterBuffers(rig->engine->read_buffer_regions());  // unregistered reads still work
  return rig;
}

// A request's pass boundaries on the run's clock.
struct RequestTimes {
  engine::TimeNs start = 0;        // arrival (open loop) or first batch start
  engine::TimeNs first_batch = 0;  // start of its first batch
  uint64_t pass = 0;
  uint64_t passes = 0;
  engine::TimeNs first_pass_end = 0;
  engine::TimeNs last_end = 0;
};

// Accumulates one replay's metrics, batch by batch.
class Metrics {
 public:
  Metrics(uint32_t layers, uint32_t experts, uint64_t raw_step_samples_cap, bool decode_series)
      : loads_(layers, std::vector<uint64_t>(experts, 0)), raw_step_samples_cap_(raw_step_samples_cap),
        decode_series_(decode_series) {}

  // The run's clock starts at `at` (the hit-rate series counts from there).
  void Start(engine::TimeNs at) { run_start_ = at; }

  // Open loop: the request arrived at `at` (its latencies count from there).
  void Arrive(uint64_t request, engine::TimeNs at) { requests_[request].start = at; }

  void Add(const LayerBatch& batch, const engine::LayerBatchReport& r, engine::TimeNs start, engine::TimeNs dense_ns,
           engine::TimeNs end, ReplayResult* out) {
    const engine::StepTimes& s = r.step_ns;
    const engine::TimeNs steps[] = {s.routing, s.scheduling,  s.nvme_read, s.host_to_device,
                                    s.compute, s.aggregation, dense_ns,    end - start};
    static_assert(std::size(steps) == ReplayResult::kStepNames.size());
    reports::AddStepSamples(out->step_ns.data(), steps, std::size(steps), out->layer_batches, raw_step_samples_cap_);
    out->moe_ns += s.total;
    out->steps += batch.tokens();
    if (batch.layer_index == 0) out->processed_tokens += batch.tokens();
    ++out->layer_batches;
    AddBatchCounts(r, batch.prefill, out);
    hit_rate_.Add(out->layer_batches, end - run_start_, out->lookups, out->served);
    if (!batch.prefill) AddDecode(batch, r, dense_ns, end - start, out);
    std::vector<uint64_t>& load = loads_[batch.layer_index];
    for (uint32_t id : batch.expert_ids) {
      if (id < load.size()) ++load[id];
    }
    uint64_t last_request = UINT64_MAX;
    for (const BatchRow& row : batch.rows) {
      if (row.request_id != last_request) Touch(row.request_id, batch.pass_id, start, end);
      last_request = row.request_id;
    }
  }

  void Finish(ReplayResult* out) {
    FlushDecodePass(out);
    for (const auto& [id, t] : requests_) {
      if (t.passes == 0) continue;  // arrived, never run
      reports::AddRequestLatencies({t.start, t.first_pass_end, t.last_end, t.passes}, &out->request_latency_ns,
                                   &out->ttft_ns, &out->tpot_ns);
      out->queue_ns.Add(t.first_batch - t.start);
      out->passes += t.passes;
      ++out->requests;
    }
    for (const auto& layer : loads_) out->expert_load.push_back(traces::ComputeLoadDeviation(layer));
    out->expert_load_counts = loads_;
    out->hit_rate = hit_rate_.points();
  }

 private:
  // Sums a decode layer batch into its pass; a new pass id closes the previous pass.
  void AddDecode(const LayerBatch& batch, const engine::LayerBatchReport& r, engine::TimeNs dense_ns,
                 engine::TimeNs elapsed_ns, ReplayResult* out) {
    if (!pass_open_ || batch.pass_id != pass_id_) {
      FlushDecodePass(out);
      pass_open_ = true;
      pass_id_ = batch.pass_id;
      ++out->decode.passes;
      out->decode.tokens += batch.tokens();
    }
    pass_read_bytes_ += r.read_bytes + r.prefetch_bytes;
    pass_nvme_read_ns_ += r.step_ns.nvme_read;
    pass_dense_ns_ += dense_ns;
    pass_elapsed_ns_ += elapsed_ns;
    out->decode.read_bytes += r.read_bytes + r.prefetch_bytes;
    out->decode.nvme_read_ns += r.step_ns.nvme_read;
    out->decode.read_latency_ns += r.read_latency_sum_ns;
    out->decode.compute_ns += r.step_ns.compute;
    out->decode.elapsed_ns += elapsed_ns;
  }

  void FlushDecodePass(ReplayResult* out) {
    if (!pass_open_) return;
    out->decode.read_bytes_per_pass.Add(static_cast<int64_t>(pass_read_bytes_));
    out->decode.nvme_read_ns_per_pass.Add(pass_nvme_read_ns_);
    out->decode.elapsed_ns_per_pass.Add(pass_elapsed_ns_);
    if (decode_series_) {
      out->decode.series.push_back({pass_read_bytes_, pass_nvme_read_ns_, pass_dense_ns_, pass_elapsed_ns_});
    }
    pass_open_ = false;
    pass_read_bytes_ = 0;
    pass_nvme_read_ns_ = pass_dense_ns_ = pass_elapsed_ns_ = 0;
  }

  void Touch(uint64_t request, uint64_t pass, engine::TimeNs start, engine::TimeNs end) {
    if (last_ == nullptr || request != last_request_) {  // map nodes are stable: keep the last one
      auto [it, fresh] = requests_.try_emplace(request);
      if (fresh) it->second.start = start;
      last_ = &it->second;
      last_request_ = request;
    }
    RequestTimes& t = *last_;
    if (t.passes == 0) {
      t.first_batch = start;
      t.pass = pass;
      t.passes = 1;
    } else if (pass != t.pass) {
      if (t.passes == 1) t.first_pass_end = t.last_end;
      t.pass = pass;
      ++t.passes;
    }
    t.last_end = end;
  }

  std::vector<std::vector<uint64_t>> loads_;
  uint64_t raw_step_samples_cap_;
  bool decode_series_;
  reports::HitRateSeries hit_rate_;
  engine::TimeNs run_start_ = 0;
  std::map<uint64_t, RequestTimes> requests_;  // ordered: deterministic iteration
  RequestTimes* last_ = nullptr;               // the last request touched
  uint64_t last_request_ = 0;
  bool pass_open_ = false;  // the decode pass being summed
  uint64_t pass_id_ = 0;
  uint64_t pass_read_bytes_ = 0;
  engine::TimeNs pass_nvme_read_ns_ = 0, pass_dense_ns_ = 0, pass_elapsed_ns_ = 0;
};

// One replay in progress: the rig, the replayer and the metrics, batch by batch.
class Runner {
 public:
  Runner(const ReplayConfig& c, const traces::ModelShape& shape, Rig* rig, EngineReplayer* replayer,
         const DenseCost* dense)
      : c_(c), shape_(shape), rig_(rig), replayer_(replayer), dense_(dense),
        metrics_(static_cast<uint32_t>(shape.moe_layer_ids.size()), shape.experts_per_layer, c.raw_step_samples_cap,
                 c.decode_series) {
    metrics_.Start(rig->loop->Now());
  }

  // The dense part of the layer (modelled compute), then the MoE layer batch on the engine.
  Status RunBatch(LayerBatch& batch, ReplayResult* out) {
    if (c_.hook != nullptr) COLIBRI_RETURN_IF_ERROR(c_.hook->BeforeBatch(&batch));
    engine::EventLoop& loop = *rig_->loop;
    const engine::TimeNs start = loop.Now();
    COLIBRI_ASSIGN_OR_RETURN(const DenseCostParts dense, dense_->ForBatch(batch));
    const engine::TimeNs dense_ns = dense.total_ns();
    if (dense.charged) {
      loop.WaitUntil(start + dense_ns);
      const uint64_t dense_bytes = batch.layer_index < shape_.dense_bytes.size() ? shape_.dense_bytes[batch.layer_index] : 0;
      rig_->log.Span(start, start + dense_ns, sim::EventKind::kDense, batch.layer_index, dense_bytes);
      out->dense_cost.Add(dense);
    }
    engine::LayerBatchReport report;
    const Status run = replayer_->Run(batch, &report);
    if (!run.ok()) {
      return run.WithPrefix(c_.trace_path + ": pass " + std::to_string(batch.pass_id) + ", MoE layer index " +
                            std::to_string(batch.layer_index));
    }
    if (c_.routing == RoutingMode::kRecompute) {  // the load and the hook see the routing the engine computed
      const std::span<const uint32_t> routed = rig_->engine->last_routed_ids();
      batch.expert_ids.assign(routed.begin(), routed.end());
    }
    const engine::TimeNs end = loop.Now();
    rig_->log.Append(start, end, sim::EventKind::kLayerBatch, batch.layer_index, batch.tokens());
    metrics_.Add(batch, report, start, dense_ns, end, out);
    return c_.hook != nullptr ? c_.hook->AfterBatch(batch, report) : Status::Ok();
  }

  // Closed loop: every layer batch in trace order.
  Status RunClosedLoop(LayerBatchReader* batches, ReplayResult* out) {
    LayerBatch batch;
    while (true) {
      COLIBRI_ASSIGN_OR_RETURN(const bool more, batches->Next(&batch));
      if (!more) return Status::Ok();
      COLIBRI_RETURN_IF_ERROR(RunBatch(batch, out));
    }
  }

  // Open loop: requests arrive on schedule; continuous batching forms the passes.
  Status RunOpenLoop(LayerBatchReader* batches, ReplayResult* out) {
    COLIBRI_ASSIGN_OR_RETURN(const RequestStore store, RequestStore::Load(batches, shape_));
    std::optional<traces::ArrivalTrace> arrivals;
    if (!c_.arrivals_path.empty()) {
      COLIBRI_ASSIGN_OR_RETURN(arrivals, traces::ReadArrivals(c_.arrivals_path));
    }
    const ArrivalOptions options{arrivals ? &*arrivals : nullptr, c_.time_scale, c_.repeat, c_.max_arrivals};
    COLIBRI_ASSIGN_OR_RETURN(ArrivalSchedule schedule, ScheduleArrivals(store, options));
    out->arrivals_total = schedule.arrivals_total;
    engine::EventLoop& loop = *rig_->loop;
    const engine::TimeNs run_start = loop.Now();
    for (size_t i = 0; i < schedule.requests.size(); ++i) metrics_.Arrive(i, run_start + schedule.requests[i].arrival_ns);
    ContinuousBatcher batcher(&store, std::move(schedule.requests), c_.max_batch);
    LayerBatch batch;
    while (true) {
      const ContinuousBatcher::Step step = batcher.Next(loop.Now() - run_start);
      if (step.kind == ContinuousBatcher::Step::Kind::kDone) break;
      if (step.kind == ContinuousBatcher::Step::Kind::kWait) {
        loop.WaitUntil(run_start + step.wait_until_ns);
        continue;
      }
      while (batcher.NextLayerBatch(&batch)) COLIBRI_RETURN_IF_ERROR(RunBatch(batch, out));
    }
    out->max_pass_requests = batcher.max_pass_requests();
    return Status::Ok();
  }

  void Finish(ReplayResult* out) { metrics_.Finish(out); }

 private:
  const ReplayConfig& c_;
  const traces::ModelShape& shape_;
  Rig* rig_;
  EngineReplayer* replayer_;
  const DenseCost* dense_;
  Metrics metrics_;
};

// Recompute mode with routing_out: a recorder of the routing the engine computes.
Result<std::unique_ptr<TraceRecorder>> RoutingRecorder(const ReplayConfig& c, const traces::ModelShape& shape) {
  if (c.routing_out.empty()) return std::unique_ptr<TraceRecorder>();
  if (c.routing != RoutingMode::kRecompute) {
    return Status::InvalidArgument("routing_out: only a recomputing replay writes its routing (the recorded "
                                   "routing is the input trace)");
  }
  traces::ModelShape recorded = shape;
  recorded.hidden_dtype = traces::HiddenDtype::kNone;
  traces::Provenance provenance;
  provenance.importer = "colibri replay --routing recompute";
  provenance.notes = "the routing recomputed from " + c.trace_path;
  return TraceRecorder::Create(c.routing_out, std::move(recorded), std::move(provenance), RecorderOptions{});
}

}  // namespace

const reports::Samples& ReplayResult::step(std::string_view name) const {
  for (size_t i = 0; i < kStepNames.size(); ++i) {
    if (name == kStepNames[i]) return step_ns[i];
  }
  return step_ns.back();
}

Result<ReplayResult> RunReplay(const ReplayConfig& c) {
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<traces::TraceReader> reader,
                           traces::TraceReader::Open(c.trace_path, traces::ReadOptions{.allow_torn = c.allow_torn}));
  const traces::ModelShape& shape = reader->header().shape;
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<Rig> rig, BuildRig(c, shape));
  rig->log.set_sink(c.event_sink);
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<TraceRecorder> recorder, RoutingRecorder(c, shape));
  COLIBRI_ASSIGN_OR_RETURN(EngineReplayer replayer,
                           EngineReplayer::Create(rig->engine.get(), shape, c.routing, recorder.get()));
  if (c.hook != nullptr) {
    if (recorder != nullptr) return Status::InvalidArgument("a replay hook and routing_out are exclusive");
    rig->engine->set_observer(c.hook);
  }
  ReplayResult out;
  out.simulated = rig->sim_compute != nullptr && c.storage == "sim" && c.transfer == "sim";
  out.modelled_layout = rig->modelled_layout;
  out.warnings = rig->engine->SizingWarnings();
  COLIBRI_ASSIGN_OR_RETURN(const DenseCost dense, DenseCost::Make(shape, rig->sim_compute, c.machine, c.l2_bytes, c.seed));
  out.warnings.insert(out.warnings.end(), dense.warnings().begin(), dense.warnings().end());
  // A measured profile describes the machine it was measured on (sim/machine_identity.h).
  if (const std::string elsewhere = sim::IdentityMismatch(c.machine.machine.identity, sim::ThisMachineIdentity());
      !elsewhere.empty() && out.simulated) {
    out.warnings.push_back("machine profile '" + c.machine.machine.name +
                           "' was measured on another machine: " + elsewhere);
  }
  out.open_loop = c.pacing == Pacing::kOpen;
  COLIBRI_RETURN_IF_ERROR(rig->engine->PreloadPinned());  // start-up, before the run's clock starts
  out.preload_bytes = rig->engine->preloaded_bytes();
  Runner runner(c, shape, rig.get(), &replayer, &dense);
  const auto wall_start = std::chrono::steady_clock::now();
  const engine::TimeNs run_start = rig->loop->Now();
  LayerBatchReader batches(reader.get());
  COLIBRI_RETURN_IF_ERROR(out.open_loop ? runner.RunOpenLoop(&batches, &out) : runner.RunClosedLoop(&batches, &out));
  if (recorder != nullptr) COLIBRI_RETURN_IF_ERROR(recorder->Close().WithPrefix(c.routing_out));
  out.elapsed_ns = rig->loop->Now() - run_start;
  COLIBRI_RETURN_IF_ERROR(rig->engine->FinishPrefetches());  // reads no batch waited for: counted, not timed
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  runner.Finish(&out);
  out.l1 = rig->engine->l1_counters();
  out.l2 = rig->engine->l2_counters();
  out.prefetch = rig->engine->prefetch_counters();
  out.read_retries += out.prefetch.retries;
  out.faults = rig->faults.records();
  out.router = rig->engine->router_counters();
  out.read_bytes = rig->storage->counters().read_bytes;
  out.reads = rig->storage->counters().reads;
  out.queue_full_events = rig->storage->counters().queue_full_events;
  out.event_digest = rig->log.digest_hex();
  out.events = rig->log.events();
  out.trace.torn = reader->truncated();
  out.trace.torn_at_byte = reader->truncated() ? reader->tail_offset() : 0;
  out.trace.records = reader->records_read();
  out.trace.file_bytes = reader->file_bytes();
  if (out.trace.torn) {
    out.warnings.push_back(c.trace_path + ": " + traces::TornEnding(out.trace.torn_at_byte, out.trace.records));
  }
  return out;
}

}  // namespace colibri::replay
