#include "colibri/engine/moe_engine.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <utility>

#include "colibri/engine/router.h"

namespace colibri::engine {
namespace {

// Moves the loop's clock by `ns` of modelled host work (engine/host_work.h) where the engine does it.
void ChargeHostWork(EventLoop& loop, TimeNs ns) { loop.WaitUntil(loop.Now() + ns); }

// Delivers a storage backend's completions to the engine.
class StorageEventSource final : public EventSource {
 public:
  explicit StorageEventSource(StorageBackend* storage) : storage_(storage) {}
  size_t pending() const override { return storage_->outstanding(); }
  Status Poll(bool wait) override {
    completions_.clear();
    COLIBRI_RETURN_IF_ERROR(storage_->Poll(wait, &completions_));
    for (const ReadCompletion& c : completions_) on_done(c);
    return Status::Ok();
  }
  std::function<void(const ReadCompletion&)> on_done;

 private:
  StorageBackend* storage_;
  std::vector<ReadCompletion> completions_;
};

// The tier's cache, or null when its pool is empty (the tier is disabled; the
// policy name is still checked). The cache's byte budget is exactly the pool's
// slots, so "fits" means "a slot is free".
// A tier's cache over `pool`: its byte budget is the pool's whole slots, or,
// with per-layer expert sizes, `budget_bytes` itself.
Result<std::unique_ptr<ExpertCache>> MakeTier(const std::string& policy, const SlabPool& pool, uint64_t budget_bytes,
                                              bool per_layer_sizes, CachePolicyOptions options) {
  options.budget_bytes = per_layer_sizes ? budget_bytes : pool.total_bytes();
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<CachePolicy> p, MakeCachePolicy(policy, options));
  if (pool.slot_count() == 0) return std::unique_ptr<ExpertCache>();
  return std::make_unique<ExpertCache>(std::move(p), CacheMode::kHardBudget);
}

// The bytes of a tier's pool: the budget, or, with per-layer expert sizes, as
// many whole blocks as experts of the smallest layer fit in the budget (the
// cache keeps the byte budget; the pool only needs a slot per entry).
uint64_t PoolBytes(uint64_t budget_bytes, uint64_t block_bytes, uint64_t smallest_bytes) {
  if (smallest_bytes == block_bytes || budget_bytes < smallest_bytes) return budget_bytes;
  return budget_bytes / smallest_bytes * block_bytes;
}

// Per-layer expert sizes: one per layer, each a positive multiple of the
// alignment no larger than the block, and only where storage models time
// (a partial block of real weights would be computed on).
Status CheckLayerExpertBytes(const EngineModel& m, const EngineBackends& b) {
  if (m.layer_expert_bytes.empty()) return Status::Ok();
  if (m.layer_expert_bytes.size() != m.moe_layers) {
    return Status::InvalidArgument("engine model: layer_expert_bytes must hold one size per MoE layer");
  }
  if (b.storage->caps().delivers_data) {
    return Status::InvalidArgument("engine model: per-layer expert sizes need storage that only models time");
  }
  const uint32_t alignment = b.storage->caps().alignment_bytes;
  for (uint64_t bytes : m.layer_expert_bytes) {
    if (bytes == 0 || bytes > m.layout.block_bytes || bytes % alignment != 0) {
      return Status::InvalidArgument("engine model: layer expert size " + std::to_string(bytes) +
                                     " must be a positive multiple of " + std::to_string(alignment) + " up to the block (" +
                                     std::to_string(m.layout.block_bytes) + ")");
    }
  }
  return Status::Ok();
}

// A compute backend that reads expert data needs backends that deliver it.
Status CheckDataFlow(const EngineBackends& b, const EngineOptions& options) {
  const bool copies = options.l1_bytes > 0 || b.compute->caps().device_memory;  // L1 admissions, device staging
  if (copies && b.transfer->caps().delivers_data && !b.storage->caps().delivers_data) {
    return Status::InvalidArgument(std::string("transfer backend '") + b.transfer->caps().name +
                                   "' copies expert bytes, but storage backend '" + b.storage->caps().name +
                                   "' only models time: there are none to copy (use a modelled transfer, real "
                                   "storage, or an L1 budget of 0 with a compute device that reads host memory)");
  }
  if (!b.compute->caps().reads_data) return Status::Ok();
  if (!b.storage->caps().delivers_data) {
    return Status::InvalidArgument(std::string("compute backend '") + b.compute->caps().name +
                                   "' reads expert data, but storage backend '" + b.storage->caps().name +
                                   "' only models time");
  }
  const char* compute = b.compute->caps().name;
  const char* transfer = b.transfer->caps().name;
  const bool on_device = b.compute->caps().device_memory;
  if (on_device && !b.transfer->caps().delivers_data) {
    return Status::InvalidArgument(std::string("compute backend '") + compute +
                                   "' reads expert blocks in device memory, but transfer backend '" + transfer +
                                   "' only models time");
  }
  if (options.l1_bytes > 0 && !b.transfer->caps().delivers_data) {
    return Status::InvalidArgument(std::string("compute backend '") + compute +
                                   "' reads expert data, but transfer backend '" + transfer +
                                   "' only models time (or use an L1 budget of 0)");
  }
  if (on_device && b.transfer->caps().device_is_host) {
    return Status::InvalidArgument(std::string("compute backend '") + compute +
                                   "' reads expert blocks in device memory, but transfer backend '" + transfer +
                                   "' keeps its pool in host memory (use the device's transfer, e.g. --transfer cuda)");
  }
  if (!on_device && options.l1_bytes > 0 && !b.transfer->caps().device_is_host) {
    return Status::InvalidArgument(std::string("compute backend '") + compute +
                                   "' reads host memory, but transfer backend '" + transfer +
                                   "' puts the L1 pool in device memory (use a host transfer, e.g. --transfer cpu, or "
                                   "an L1 budget of 0)");
  }
  return Status::Ok();
}

// `pool`'s memory in regions of whole slots, each at most `max_bytes` (one slot when a slot is larger).
TierCounters CountersOf(const ExpertCache* cache) {
  if (cache == nullptr) return {};
  return TierCounters{cache->counters().lookups, cache->counters().hits, cache->counters().misses};
}

// One expert of a layer batch's union.
struct Work {
  uint32_t expert = 0;
  uint32_t first = 0;  // its assignments: BatchScratch::assignments[first, end)
  uint32_t end = 0;
  bool l1_hit = false;
  bool l2_hit = false;
  const std::byte* read_into = nullptr;  // destination of the NVMe read
  int64_t staging_slot = -1;
  int64_t l1_slot = -1;                  // the L1 slot admitted for a block L1 lacked
  const std::byte* data = nullptr;       // block to compute from, once ready
};

// A prefetch read's tag: this bit set, the entry index ([layer x experts + expert]) below it.
constexpr uint64_t kPrefetchTag = uint64_t{1} << 63;

// A FIFO of work indices over a vector that keeps its capacity (each work is queued at most once per batch).
class WorkQueue {
 public:
  void clear() {
    items_.clear();
    head_ = 0;
  }
  bool empty() const { return head_ == items_.size(); }
  void push_back(size_t i) { items_.push_back(i); }
  size_t front() const { return items_[head_]; }
  void pop_front() { ++head_; }

 private:
  std::vector<size_t> items_;
  size_t head_ = 0;
};

}  // namespace

struct MoeEngine::BatchScratch {
  explicit BatchScratch(uint32_t experts) : count_of(experts, 0), present((experts + 63) / 64, 0) {}
  std::vector<Work> works;            // the batch union, ascending expert ids
  std::vector<uint32_t> assignments;  // per work, the indices t x k + s routed to it, in token order
  std::vector<uint32_t> count_of;     // expert -> assignments (zero between batches)
  std::vector<uint64_t> present;      // bit per expert: in the union (zero between batches)
  WorkQueue ready;
  WorkQueue waiting;
  std::vector<size_t> prefetch_waits;  // works whose L2 hit is a prefetch still in flight
  std::vector<uint32_t> union_experts;  // the union's expert ids, for the predictor
  std::vector<ExpertKey> evicted;
  std::vector<TransferCompletion> copies;
};

// State of one layer batch; lives only inside Execute().
class MoeEngine::Batch {
 public:
  Batch(MoeEngine& engine, uint32_t layer, const float* hidden, const LayerRouting& routing, float* out)
      : e_(engine), layer_(layer), hidden_(hidden), routing_(routing), out_(out), k_(engine.model_.top_k),
        works_(engine.scratch_->works), ready_(engine.scratch_->ready), waiting_(engine.scratch_->waiting),
        prefetch_waits_(engine.scratch_->prefetch_waits), evicted_(engine.scratch_->evicted),
        copies_(engine.scratch_->copies) {
    works_.clear();
    ready_.clear();
    waiting_.clear();
    prefetch_waits_.clear();
    e_.current_batch_ = this;
  }
  ~Batch() { e_.current_batch_ = nullptr; }
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  Status Run(LayerBatchReport* report) {
    Clock& clock = *e_.backends_.loop;
    const TimeNs start = clock.Now();
    report->layer_index = layer_;
    report->tokens = routing_.tokens;
    COLIBRI_RETURN_IF_ERROR(FormUnion());
    report->distinct_experts = static_cast<uint32_t>(works_.size());
    LookUp(report);
    if (const HostWorkModel* model = e_.backends_.host_work; model != nullptr) {
      ChargeHostWork(*e_.backends_.loop, model->SchedulingNs(routing_.tokens, k_, report->distinct_experts, report->nvme_reads));
    }
    Status status = Dispatch();
    report->step_ns.scheduling = clock.Now() - start;
    if (status.ok()) status = ComputeAll();
    if (!status.ok()) {
      Abandon();
      return status;
    }
    const TimeNs aggregate_start = clock.Now();
    if (e_.moves_data_) Aggregate();
    if (const HostWorkModel* model = e_.backends_.host_work; model != nullptr) {
      ChargeHostWork(*e_.backends_.loop, model->AggregationNs(routing_.tokens, k_, e_.model_.layout.hidden));
    }
    const TimeNs end = clock.Now();
    report->step_ns.aggregation = end - aggregate_start;
    report->step_ns.nvme_read = last_read_done_ > first_read_submit_ ? last_read_done_ - first_read_submit_ : 0;
    report->step_ns.host_to_device = copy_ns_;
    report->step_ns.compute = compute_ns_;
    report->step_ns.total = end - start;
    report->read_bytes = read_bytes_;
    report->read_latency_sum_ns = read_latency_sum_ns_;
    report->staged = staged_;
    report->device_staged = device_staged_;
    report->prefetch_reads = prefetch_reads_;
    report->prefetch_bytes = prefetch_bytes_;
    report->prefetch_waits = static_cast<uint32_t>(prefetch_waits_.size());
    return Status::Ok();
  }

  void OnReadDone(const ReadCompletion& c) {
    last_read_done_ = std::max(last_read_done_, c.complete_ns);
    read_latency_sum_ns_ += c.complete_ns - c.submit_ns;
    if (!c.status.ok()) {
      Fail(c.status.WithPrefix("reading expert " + std::to_string(works_[c.tag].expert) + " of MoE layer " +
                               std::to_string(layer_)));
      return;
    }
    read_bytes_ += c.bytes;
    Fail(MakeReady(c.tag, works_[c.tag].read_into));
  }

  // The prefetch read of entry `index` finished: works waiting on it become ready (or fail with `status`).
  void OnPrefetchDone(size_t index, const Status& status) {
    for (size_t i : prefetch_waits_) {
      if (Index(works_[i].expert) != index) continue;
      if (!status.ok()) {
        Fail(status.WithPrefix("prefetching expert " + std::to_string(works_[i].expert) + " of MoE layer " +
                               std::to_string(layer_)));
        continue;
      }
      Fail(MakeReady(i, e_.l2_pool_->SlotData(static_cast<uint32_t>(e_.l2_slot_of_[index]))));
    }
  }

 private:
  size_t Index(uint32_t expert) const { return static_cast<size_t>(layer_) * e_.model_.experts + expert; }
  ExpertKey Key(const Work& w) const { return MakeExpertKey(layer_, w.expert); }

  // The union in ascending expert ids, each work's assignments in token
  // order: a counting sort over the batch's expert ids.
  Status FormUnion() {
    const size_t n = routing_.tokens * k_;
    const uint32_t* ids = routing_.expert_ids;
    const uint32_t experts = e_.model_.experts;
    BatchScratch& s = *e_.scratch_;
    uint32_t* count_of = s.count_of.data();  // all zero here
    size_t distinct = 0;
    for (size_t a = 0; a < n; ++a) {
      const uint32_t id = ids[a];
      if (id < experts) {
        distinct += count_of[id]++ == 0;
      } else if (id != kDroppedExpert) {
        for (size_t b = 0; b < a; ++b) {
          if (ids[b] < experts) --count_of[ids[b]];  // back to all zero
        }
        return Status::InvalidArgument("routing: expert id " + std::to_string(id) + " out of range (" +
                                       std::to_string(experts) + " experts)");
      }
    }
    // Works are written through a pointer into the sized vector (no push_back
    // per expert); count_of[id] becomes the expert's next place in `assignments`.
    works_.resize(distinct + 1);  // + 1: the branch-free scan below writes one past the last work
    Work* out = works_.data();
    uint32_t first = 0;
    if (n * 4 >= experts) {  // a large batch: scan every expert, without a branch per expert
      for (uint32_t id = 0; id < experts; ++id) {
        const uint32_t count = count_of[id];
        const uint32_t present = count != 0;
        out->expert = id;
        out->first = first;
        out->end = first + count;
        count_of[id] = first & (0u - present);  // stays 0 for an absent expert
        first += count;
        out += present;
      }
    } else {  // a few ids: a bitmap of them, walked in ascending order
      for (size_t a = 0; a < n; ++a) {
        if (ids[a] != kDroppedExpert) s.present[ids[a] >> 6] |= uint64_t{1} << (ids[a] & 63);
      }
      for (size_t word = 0; word < s.present.size(); ++word) {
        for (uint64_t bits = std::exchange(s.present[word], 0); bits != 0; bits &= bits - 1) {
          const auto id = static_cast<uint32_t>(word * 64 + static_cast<size_t>(std::countr_zero(bits)));
          const uint32_t count = count_of[id];
          out->expert = id;
          out->first = first;
          out->end = first + count;
          count_of[id] = first;
          first += count;
          ++out;
        }
      }
    }
    works_.pop_back();
    if (s.assignments.size() < first) s.assignments.resize(first);
    uint32_t* assignments = s.assignments.data();
    for (size_t a = 0; a < n; ++a) {
      if (ids[a] != kDroppedExpert) assignments[count_of[ids[a]]++] = static_cast<uint32_t>(a);
    }
    for (const Work& w : works_) count_of[w.expert] = 0;
    return Status::Ok();
  }

  // Every lookup of the union before any insert, L1 then L2 (ExpertCache's contract).
  void LookUp(LayerBatchReport* report) {
    if (e_.l1_cache_) e_.l1_cache_->BeginBatch();
    if (e_.l2_cache_) e_.l2_cache_->BeginBatch();
    for (Work& w : works_) {
      w.l1_hit = e_.l1_cache_ && e_.l1_cache_->Lookup(Key(w));
      if (!w.l1_hit) w.l2_hit = e_.l2_cache_ && e_.l2_cache_->Lookup(Key(w));
      report->l1_hits += w.l1_hit;
      report->l2_hits += w.l2_hit;
      report->nvme_reads += !w.l1_hit && !w.l2_hit;
    }
    ScorePrediction();
  }

  // The previous batch's prediction against this batch's union (both ascending), when it predicted this layer.
  void ScorePrediction() {
    if (!e_.has_prediction_ || e_.prediction_layer_ != layer_) return;
    e_.has_prediction_ = false;
    PrefetchCounters& p = e_.prefetch_;
    p.predicted += e_.prediction_.size();
    p.next_lookups += works_.size();
    auto predicted = e_.prediction_.begin();
    for (const Work& w : works_) {
      while (predicted != e_.prediction_.end() && *predicted < w.expert) ++predicted;
      p.predicted_used += predicted != e_.prediction_.end() && *predicted == w.expert;
    }
  }

  // Admits `w` to L1, freeing the slots of what it evicts. The slot, or -1.
  int64_t AdmitL1(const Work& w) {
    if (!e_.l1_cache_) return -1;
    evicted_.clear();
    if (!e_.l1_cache_->Insert(Key(w), e_.ExpertBytes(layer_), &evicted_)) return -1;
    for (ExpertKey victim : evicted_) {
      int64_t& slot = e_.l1_slot_of_[e_.EntryIndex(victim)];
      e_.l1_pool_->Release(static_cast<uint32_t>(slot));
      slot = -1;
    }
    const uint32_t slot = *e_.l1_pool_->Acquire();  // the cache's budget equals the pool's slots
    e_.l1_slot_of_[Index(w.expert)] = slot;
    return slot;
  }

  // Makes `key` resident in L2 (a demand miss, or a prefetch), freeing the
  // slots of what it evicts. The slot, or -1 when L2 cannot admit it.
  Result<int64_t> AdmitL2(ExpertKey key, bool prefetch) {
    if (!e_.l2_cache_) return int64_t{-1};
    evicted_.clear();
    const uint64_t bytes = e_.ExpertBytes(LayerIndexOf(key));
    if (!(prefetch ? e_.l2_cache_->Prefetch(key, bytes, &evicted_) : e_.l2_cache_->Insert(key, bytes, &evicted_))) {
      return int64_t{-1};
    }
    for (ExpertKey victim : evicted_) COLIBRI_RETURN_IF_ERROR(e_.ReleaseL2Slot(victim));
    const uint32_t slot = *e_.l2_pool_->Acquire();  // the cache's budget equals the pool's slots
    e_.l2_slot_of_[e_.EntryIndex(key)] = slot;
    return int64_t{slot};
  }

  // L1 admissions are decided here, in union order, for every expert L1
  // lacks (the copy follows when the block is in host memory), so cache
  // decisions never depend on the order reads complete in.
  Status Dispatch() {
    for (size_t i = 0; i < works_.size(); ++i) {
      Work& w = works_[i];
      if (w.l1_hit) {
        w.data = e_.l1_pool_->SlotData(static_cast<uint32_t>(e_.l1_slot_of_[Index(w.expert)]));
        ready_.push_back(i);
        continue;
      }
      w.l1_slot = AdmitL1(w);
      if (w.l2_hit && e_.prefetch_in_flight_[Index(w.expert)]) {
        prefetch_waits_.push_back(i);
        ++e_.prefetch_.waits;
        continue;
      }
      if (w.l2_hit) {
        COLIBRI_RETURN_IF_ERROR(MakeReady(i, e_.l2_pool_->SlotData(static_cast<uint32_t>(e_.l2_slot_of_[Index(w.expert)]))));
        continue;
      }
      COLIBRI_ASSIGN_OR_RETURN(const int64_t slot, AdmitL2(Key(w), false));
      if (slot >= 0) {
        w.read_into = e_.l2_pool_->SlotData(static_cast<uint32_t>(slot));
        COLIBRI_RETURN_IF_ERROR(SubmitRead(i));
      } else {
        waiting_.push_back(i);
      }
    }
    COLIBRI_RETURN_IF_ERROR(SubmitWaiting());
    return Prefetch();
  }

  // Predicts the next layer's experts and prefetches those no tier holds, in
  // the predictor's order, while L2 can admit them.
  Status Prefetch() {
    if (!e_.predictor_) return Status::Ok();
    std::vector<uint32_t>& experts = e_.scratch_->union_experts;
    experts.clear();
    for (const Work& w : works_) experts.push_back(w.expert);
    const uint32_t next_layer = (layer_ + 1) % e_.model_.moe_layers;
    const PredictorInput input{layer_, experts, next_layer, routing_.tokens, hidden_, e_.model_.layout.hidden};
    const uint64_t width = e_.options_.prefetch.width != 0 ? e_.options_.prefetch.width
                                                            : std::min<uint64_t>(e_.model_.experts, uint64_t{k_} * routing_.tokens);
    COLIBRI_RETURN_IF_ERROR(e_.predictor_->Predict(input, static_cast<uint32_t>(width), &e_.prediction_));
    for (uint32_t expert : e_.prediction_) {
      if (expert >= e_.model_.experts) return Status::Internal("predictor named expert " + std::to_string(expert));
      const ExpertKey key = MakeExpertKey(next_layer, expert);
      if (e_.l1_cache_ && e_.l1_cache_->Contains(key)) continue;
      if (!e_.l2_cache_->Contains(key)) {
        COLIBRI_ASSIGN_OR_RETURN(const int64_t slot, AdmitL2(key, true));
        if (slot < 0) break;  // L2 holds only experts this batch needs or expects: no room
        COLIBRI_RETURN_IF_ERROR(SubmitPrefetch(key, slot));
      }
      e_.l2_cache_->Protect(key);  // no later prefetch of this batch evicts what it expects
    }
    std::sort(e_.prediction_.begin(), e_.prediction_.end());
    e_.prediction_layer_ = next_layer;
    e_.has_prediction_ = true;
    return Status::Ok();
  }

  Status SubmitPrefetch(ExpertKey key, int64_t slot) {
    const size_t index = e_.EntryIndex(key);
    ReadRequest request;
    request.offset = e_.model_.expert_offsets[index];
    request.bytes = e_.ExpertBytes(LayerIndexOf(key));
    request.buffer = e_.l2_pool_->SlotData(static_cast<uint32_t>(slot));
    request.tag = kPrefetchTag | index;
    e_.prefetch_in_flight_[index] = 1;
    ++e_.prefetches_in_flight_;
    ++e_.prefetch_.issued;
    e_.prefetch_.issued_bytes += request.bytes;
    ++prefetch_reads_;
    prefetch_bytes_ += request.bytes;
    e_.ChargeReadSubmit(request.bytes);
    return e_.backends_.storage->Submit(request);
  }

  // Starts reads of experts no tier admitted, as staging slots allow.
  Status SubmitWaiting() {
    while (!waiting_.empty()) {
      std::optional<uint32_t> slot = e_.staging_pool_->Acquire();
      if (!slot) return Status::Ok();
      Work& w = works_[waiting_.front()];
      w.staging_slot = *slot;
      w.read_into = e_.staging_pool_->SlotData(*slot);
      ++staged_;
      const size_t i = waiting_.front();
      waiting_.pop_front();
      COLIBRI_RETURN_IF_ERROR(SubmitRead(i));
    }
    return Status::Ok();
  }

  Status SubmitRead(size_t i) {
    const Work& w = works_[i];
    ReadRequest request;
    request.offset = e_.model_.expert_offsets[Index(w.expert)];
    request.bytes = e_.ExpertBytes(layer_);
    request.buffer = const_cast<std::byte*>(w.read_into);
    request.tag = i;
    if (reads_submitted_++ == 0) first_read_submit_ = e_.backends_.loop->Now();
    e_.ChargeReadSubmit(request.bytes);
    return e_.backends_.storage->Submit(request);
  }

  // Keeps the batch's first failure.
  void Fail(Status status) {
    if (!status.ok() && failure_.ok()) failure_ = std::move(status);
  }

  // The block of works_[i] is in host memory at `host`: copy it to its L1
  // slot when L1 admitted it, else compute from where it is. (Copies are
  // waited for at once: CpuTransfer completes them inside Copy; an
  // asynchronous transfer backend will complete them through the event loop
  // like reads.)
  Status MakeReady(size_t i, const std::byte* host) {
    Work& w = works_[i];
    if (w.l1_slot < 0) {
      w.data = host;
      ready_.push_back(i);
      return Status::Ok();
    }
    std::byte* device = e_.l1_pool_->SlotData(static_cast<uint32_t>(w.l1_slot));
    COLIBRI_RETURN_IF_ERROR(CopyAndWait(device, host, i));
    w.data = device;
    ready_.push_back(i);
    return Status::Ok();
  }

  // Copies an expert block from host memory to `device` and waits for it.
  Status CopyAndWait(std::byte* device, const std::byte* host, uint64_t tag) {
    COLIBRI_RETURN_IF_ERROR(e_.backends_.transfer->Copy(device, host, e_.ExpertBytes(layer_), tag));
    while (e_.backends_.transfer->outstanding() > 0) {
      copies_.clear();
      COLIBRI_RETURN_IF_ERROR(e_.backends_.transfer->Poll(true, &copies_));
      for (const TransferCompletion& c : copies_) {
        COLIBRI_RETURN_IF_ERROR(c.status);
        copy_ns_ += c.complete_ns - c.submit_ns;
      }
    }
    return Status::Ok();
  }

  // The block `w` computes from: where it is, or, for a compute backend that
  // reads device memory and a block in host memory (L2 or a staging slot),
  // its copy in the device staging slot.
  Result<const std::byte*> ComputeBlock(const Work& w) {
    if (!e_.device_staging_pool_ || w.l1_hit || w.l1_slot >= 0) return w.data;
    std::byte* device = e_.device_staging_pool_->SlotData(0);
    COLIBRI_RETURN_IF_ERROR(CopyAndWait(device, w.data, static_cast<uint64_t>(&w - works_.data())));
    ++device_staged_;
    return static_cast<const std::byte*>(device);
  }

  Status ComputeAll() {
    size_t computed = 0;
    while (computed < works_.size()) {
      if (!failure_.ok()) break;
      if (ready_.empty()) {
        COLIBRI_RETURN_IF_ERROR(e_.backends_.loop->RunUntil([this] { return !ready_.empty() || !failure_.ok(); }));
        if (ready_.empty() && failure_.ok()) return Status::Internal("layer batch stalled: no expert ready, no read pending");
        continue;
      }
      const size_t i = ready_.front();
      ready_.pop_front();
      COLIBRI_RETURN_IF_ERROR(ComputeOne(works_[i]));
      ++computed;
    }
    return failure_;
  }

  // After a failure: waits for reads still in flight (no buffer is written
  // after we return), frees staging slots and forgets L1 and L2 entries whose
  // data never arrived.
  void Abandon() {
    e_.current_batch_ = nullptr;
    e_.DrainStorage();
    for (Work& w : works_) {
      if (w.l1_slot >= 0 && w.data == nullptr) {
        e_.l1_cache_->Erase(Key(w));
        e_.l1_pool_->Release(static_cast<uint32_t>(w.l1_slot));
        e_.l1_slot_of_[Index(w.expert)] = -1;
      }
      if (w.staging_slot >= 0) {
        e_.staging_pool_->Release(static_cast<uint32_t>(w.staging_slot));
        w.staging_slot = -1;
        continue;
      }
      const bool read_into_l2 = w.read_into != nullptr;
      if (!read_into_l2 || w.data != nullptr) continue;
      e_.l2_cache_->Erase(Key(w));
      int64_t& slot = e_.l2_slot_of_[Index(w.expert)];
      e_.l2_pool_->Release(static_cast<uint32_t>(slot));
      slot = -1;
    }
  }

  Status ComputeOne(Work& w) {
    const size_t n = w.end - w.first;
    if (e_.moves_data_) Gather(w);
    if (const HostWorkModel* model = e_.backends_.host_work; model != nullptr) {
      ChargeHostWork(*e_.backends_.loop, model->GatherNs(n, e_.model_.layout.hidden));
    }
    COLIBRI_ASSIGN_OR_RETURN(const std::byte* block, ComputeBlock(w));  // a copy here counts as host_to_device
    const TimeNs start = e_.backends_.loop->Now();
    float* x = e_.moves_data_ ? e_.x_buffer_.data() : nullptr;
    float* y = e_.moves_data_ ? e_.y_buffer_.data() : nullptr;
    COLIBRI_RETURN_IF_ERROR(e_.backends_.compute->ExpertFfn(ExpertView{&e_.model_.layout, block}, x, n, y));
    compute_ns_ += e_.backends_.loop->Now() - start;
    if (e_.moves_data_) Scatter(w);
    if (w.staging_slot >= 0) {
      e_.staging_pool_->Release(static_cast<uint32_t>(w.staging_slot));
      w.staging_slot = -1;
      COLIBRI_RETURN_IF_ERROR(SubmitWaiting());
    }
    return Status::Ok();
  }

  // The inputs of the tokens routed to `w`, in assignment order, into x_buffer_.
  void Gather(const Work& w) {
    const uint32_t hidden = e_.model_.layout.hidden;
    const size_t n = w.end - w.first;
    const uint32_t* assignments = e_.scratch_->assignments.data() + w.first;
    e_.x_buffer_.resize(n * hidden);
    e_.y_buffer_.resize(n * hidden);
    for (size_t r = 0; r < n; ++r) {
      const size_t token = assignments[r] / k_;
      std::copy_n(hidden_ + token * hidden, hidden, e_.x_buffer_.data() + r * hidden);
    }
  }

  // y_buffer_'s rows to their (token, slot) places in expert_out_.
  void Scatter(const Work& w) {
    const uint32_t hidden = e_.model_.layout.hidden;
    const uint32_t* assignments = e_.scratch_->assignments.data() + w.first;
    for (size_t r = 0; r < w.end - w.first; ++r) {
      std::copy_n(e_.y_buffer_.data() + r * hidden, hidden,
                  e_.expert_out_.data() + static_cast<size_t>(assignments[r]) * hidden);
    }
  }

  // out[t] = sum over slots s in rank order of weight[t][s] x FFN output: a fixed order.
  void Aggregate() {
    const uint32_t hidden = e_.model_.layout.hidden;
    for (size_t t = 0; t < routing_.tokens; ++t) {
      float* dst = out_ + t * hidden;
      std::fill_n(dst, hidden, 0.0f);
      for (uint32_t s = 0; s < k_; ++s) {
        const size_t a = t * k_ + s;
        if (routing_.expert_ids[a] == kDroppedExpert) continue;
        const float weight = routing_.weights[a];
        const float* src = e_.expert_out_.data() + a * hidden;
        for (uint32_t h = 0; h < hidden; ++h) dst[h] += weight * src[h];
      }
    }
  }

  MoeEngine& e_;
  const uint32_t layer_;
  const float* hidden_;
  const LayerRouting& routing_;
  float* out_;
  const uint32_t k_;
  // The engine's scratch (BatchScratch), cleared for this batch.
  std::vector<Work>& works_;
  WorkQueue& ready_;
  WorkQueue& waiting_;
  std::vector<size_t>& prefetch_waits_;
  std::vector<ExpertKey>& evicted_;
  std::vector<TransferCompletion>& copies_;
  Status failure_;
  uint64_t reads_submitted_ = 0;
  uint64_t read_bytes_ = 0;
  uint32_t staged_ = 0;
  uint32_t device_staged_ = 0;
  uint32_t prefetch_reads_ = 0;
  uint64_t prefetch_bytes_ = 0;
  TimeNs first_read_submit_ = 0;
  TimeNs last_read_done_ = 0;
  TimeNs copy_ns_ = 0;
  TimeNs read_latency_sum_ns_ = 0;
  TimeNs compute_ns_ = 0;
};

MoeEngine::MoeEngine(EngineModel model, EngineOptions options, EngineBackends backends)
    : model_(std::move(model)), options_(std::move(options)), backends_(backends) {}

MoeEngine::~MoeEngine() {
  // Real reads still writing into the pools must land before the pools go.
  if (prefetches_in_flight_ > 0 && backends_.storage->caps().delivers_data) DrainStorage();
}

void MoeEngine::OnStorageDone(const ReadCompletion& c) {
  if ((c.tag & kPrefetchTag) == 0) {
    if (current_batch_ != nullptr) current_batch_->OnReadDone(c);
    return;
  }
  const size_t index = c.tag & ~kPrefetchTag;
  prefetch_in_flight_[index] = 0;
  --prefetches_in_flight_;
  if (!c.status.ok()) {
    ++prefetch_.failed;
    const ExpertKey key = MakeExpertKey(static_cast<uint32_t>(index / model_.experts), static_cast<uint32_t>(index % model_.experts));
    if (l2_cache_->Contains(key)) {  // else it was evicted in flight, and its evictor frees the slot
      l2_cache_->Erase(key);
      l2_pool_->Release(static_cast<uint32_t>(l2_slot_of_[index]));
      l2_slot_of_[index] = -1;
    }
  }
  if (current_batch_ != nullptr) current_batch_->OnPrefetchDone(index, c.status);
}

void MoeEngine::DrainStorage() {
  std::vector<ReadCompletion> completions;
  while (backends_.storage->outstanding() > 0) {
    completions.clear();
    if (!backends_.storage->Poll(true, &completions).ok()) break;
    for (const ReadCompletion& c : completions) OnStorageDone(c);
  }
}

Status MoeEngine::ReleaseL2Slot(ExpertKey victim) {
  const size_t index = EntryIndex(victim);
  if (prefetch_in_flight_[index]) {
    COLIBRI_RETURN_IF_ERROR(backends_.loop->RunUntil([&] { return !prefetch_in_flight_[index]; }));
    if (prefetch_in_flight_[index]) return Status::Internal("prefetch read of an evicted expert never completed");
  }
  int64_t& slot = l2_slot_of_[index];
  if (slot >= 0) l2_pool_->Release(static_cast<uint32_t>(slot));  // < 0: a failed prefetch already freed it
  slot = -1;
  return Status::Ok();
}

void MoeEngine::ChargeReadSubmit(uint64_t bytes) {
  const HostWorkModel* model = backends_.host_work;
  if (model == nullptr) return;
  const size_t in_flight = backends_.storage->outstanding();
  if (in_flight >= backends_.storage->caps().queue_depth) return;
  ChargeHostWork(*backends_.loop, model->ReadSubmitNs(bytes, in_flight));
}

Status MoeEngine::FinishPrefetches() {
  COLIBRI_RETURN_IF_ERROR(backends_.loop->RunUntil([this] { return prefetches_in_flight_ == 0; }));
  return prefetches_in_flight_ == 0 ? Status::Ok() : Status::Internal("prefetch reads outstanding but the event loop ran dry");
}

PrefetchCounters MoeEngine::prefetch_counters() const {
  PrefetchCounters p = prefetch_;
  if (l2_cache_) {
    p.hits = l2_cache_->counters().prefetch_hits;
    p.wasted_bytes = l2_cache_->counters().prefetch_wasted_bytes;
  }
  return p;
}

namespace {

// The predictor `config` names for the engine (null for "none"). Errors: an
// unknown name, prefetch without an L2 tier, lookahead without gates or data.
Result<std::shared_ptr<ExpertPredictor>> MakePredictor(const PrefetchConfig& config, const EngineModel& model,
                                                       const EngineOptions& options, ComputeBackend* compute) {
  if (config.predictor == "none" && !config.custom) return std::shared_ptr<ExpertPredictor>();
  if (options.l2_bytes == 0) return Status::InvalidArgument("prefetch fills the L2 tier: it needs an L2 budget");
  if (config.custom) return config.custom;
  if (config.predictor == "coact") {
    COLIBRI_RETURN_IF_ERROR(CheckCoactDecay(config.decay));
    return std::shared_ptr<ExpertPredictor>(
        std::make_shared<CoactivationPredictor>(model.moe_layers, model.experts, config.decay));
  }
  if (config.predictor == "lookahead") {
    if (model.gate_weights.size() != model.moe_layers || !compute->caps().reads_data) {
      return Status::InvalidArgument(std::string("prefetch 'lookahead' runs the next layer's router: it needs the "
                                                 "model's gate weights and a compute backend that reads data ('") +
                                     compute->caps().name + "' " + (compute->caps().reads_data ? "does" : "only models time") + ")");
    }
    return std::shared_ptr<ExpertPredictor>(std::make_shared<RouterLookaheadPredictor>(
        model.gate_weights, model.gate_biases, model.experts, model.top_k, compute));
  }
  return Status::InvalidArgument("unknown prefetch predictor '" + config.predictor + "' (known: none, coact, lookahead)");
}

// Policy "pinned" runs on L2, with a hot set of distinct keys of the model
// that fits the L2 budget.
Status CheckPinned(const EngineModel& model, const EngineOptions& options, uint64_t expert_bytes_of_layer0,
                   const std::vector<uint64_t>& layer_expert_bytes) {
  if (options.l1_policy == "pinned" && options.l1_bytes > 0) {
    return Status::InvalidArgument("policy 'pinned' runs on L2 (--policy pinned), not on L1");
  }
  if (options.l2_policy != "pinned" || options.l2_bytes == 0) return Status::Ok();
  std::vector<ExpertKey> sorted = options.pinned;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    return Status::InvalidArgument("pinned: the hot set repeats a key");
  }
  uint64_t bytes = 0;
  for (ExpertKey key : sorted) {
    if (LayerIndexOf(key) >= model.moe_layers || ExpertOf(key) >= model.experts) {
      return Status::InvalidArgument("pinned: key (layer index " + std::to_string(LayerIndexOf(key)) + ", expert " +
                                     std::to_string(ExpertOf(key)) + ") is outside the model");
    }
    bytes += layer_expert_bytes.empty() ? expert_bytes_of_layer0 : layer_expert_bytes[LayerIndexOf(key)];
  }
  if (bytes > options.l2_bytes) {
    return Status::InvalidArgument("pinned: the hot set (" + std::to_string(bytes) + " bytes) is larger than the L2 budget (" +
                                   std::to_string(options.l2_bytes) + " bytes)");
  }
  return Status::Ok();
}

// One Router per MoE layer (EngineOptions::router).
Result<std::vector<std::unique_ptr<Router>>> MakeRouters(const EngineModel& model, const RoutingOptions& options) {
  if (options.capacity_factor < 0.0 || !std::isfinite(options.capacity_factor)) {
    return Status::InvalidArgument("capacity factor " + std::to_string(options.capacity_factor) + " must be finite and >= 0");
  }
  std::vector<std::unique_ptr<Router>> routers;
  for (uint32_t layer = 0; layer < model.moe_layers; ++layer) {
    RouterConfig config = options.router;
    config.renormalize = model.renormalize;
    config.table_seed += layer;  // hash-token: one table per layer, as Hash Layers do
    if (config.mode == RouterMode::kHashProjection && config.projection.empty()) {
      if (config.projection_dims == 0) config.projection_dims = 4;
      config.projection = SeededRouterProjection(model.layout.hidden, config.projection_dims, options.seed + layer);
    }
    auto router = Router::Create(std::move(config), model.experts, model.top_k, model.layout.hidden);
    if (!router.ok()) return router.status().WithPrefix("router");
    routers.push_back(std::move(router).value());
  }
  return routers;
}

}  // namespace

Status MoeEngine::PreloadPinned() {
  if (options_.l2_policy != "pinned" || !l2_cache_) return Status::Ok();
  const uint64_t failed_before = prefetch_.failed;
  for (ExpertKey key : options_.pinned) {
    if (l2_cache_->Contains(key)) continue;
    std::vector<ExpertKey>& evicted = scratch_->evicted;
    evicted.clear();
    const uint64_t bytes = ExpertBytes(LayerIndexOf(key));
    if (!l2_cache_->Insert(key, bytes, &evicted) || !evicted.empty()) return Status::Internal("pinned: the hot set does not fit L2's slots");
    const size_t index = EntryIndex(key);
    const uint32_t slot = *l2_pool_->Acquire();
    l2_slot_of_[index] = slot;
    ReadRequest request{model_.expert_offsets[index], bytes, l2_pool_->SlotData(slot), kPrefetchTag | index};
    prefetch_in_flight_[index] = 1;
    ++prefetches_in_flight_;
    preloaded_bytes_ += bytes;
    COLIBRI_RETURN_IF_ERROR(backends_.storage->Submit(request));
  }
  COLIBRI_RETURN_IF_ERROR(FinishPrefetches());
  if (prefetch_.failed != failed_before) return Status::IoError("pinned: reading the hot set failed");
  return Status::Ok();
}

Result<std::unique_ptr<MoeEngine>> MoeEngine::Create(EngineModel model, const EngineOptions& options,
                                                     const EngineBackends& backends) {
  if (!backends.loop || !backends.storage || !backends.transfer || !backends.compute) {
    return Status::InvalidArgument("engine needs an event loop, storage, transfer and compute backend");
  }
  if (model.moe_layers == 0 || model.experts == 0 || model.top_k == 0 || model.top_k > model.experts) {
    return Status::InvalidArgument("engine model: layers, experts and top_k must be positive, top_k <= experts");
  }
  if (model.expert_offsets.size() != static_cast<size_t>(model.moe_layers) * model.experts) {
    return Status::InvalidArgument("engine model: expert_offsets must hold layers x experts entries");
  }
  const uint64_t block = model.layout.block_bytes;
  const uint32_t alignment = backends.storage->caps().alignment_bytes;
  if (block == 0 || block % alignment != 0) {
    return Status::InvalidArgument("expert block of " + std::to_string(block) + " bytes is not a multiple of the storage alignment (" +
                                   std::to_string(alignment) + ")");
  }
  for (uint64_t offset : model.expert_offsets) {
    if (offset % alignment != 0) return Status::InvalidArgument("expert offset " + std::to_string(offset) + " is not aligned to " + std::to_string(alignment));
  }
  if (options.staging_slots == 0) return Status::InvalidArgument("staging_slots must be at least 1");
  COLIBRI_RETURN_IF_ERROR(CheckDataFlow(backends, options));
  COLIBRI_RETURN_IF_ERROR(CheckLayerExpertBytes(model, backends));
  COLIBRI_RETURN_IF_ERROR(CheckPinned(model, options, block, model.layer_expert_bytes));
  const bool per_layer_sizes = !model.layer_expert_bytes.empty();
  const uint64_t smallest =
      per_layer_sizes ? *std::min_element(model.layer_expert_bytes.begin(), model.layer_expert_bytes.end()) : block;
  std::unique_ptr<MoeEngine> engine(new MoeEngine(std::move(model), options, backends));
  MoeEngine& e = *engine;
  e.moves_data_ = backends.compute->caps().reads_data;
  COLIBRI_ASSIGN_OR_RETURN(e.l1_pool_,
                           backends.transfer->CreateDevicePool(PoolBytes(options.l1_bytes, block, smallest), block));
  COLIBRI_RETURN_IF_ERROR(e.l1_pool_ ? Status::Ok() : Status::Internal("no L1 pool"));
  const bool host_data = backends.storage->caps().delivers_data;
  const uint64_t l2_pool_bytes = PoolBytes(options.l2_bytes, block, smallest);
  const auto host_pool = [&](uint64_t bytes) {
    return host_data ? backends.transfer->CreateHostPool(bytes, block) : SlabPool::CreateReserved(bytes, block);
  };
  auto l2 = host_pool(l2_pool_bytes);
  if (!l2.ok()) return l2.status().WithPrefix("--l2-bytes");
  e.l2_pool_ = std::move(l2).value();
  COLIBRI_ASSIGN_OR_RETURN(e.staging_pool_, host_pool(options.staging_slots * block));
  if (backends.compute->caps().device_memory) {
    COLIBRI_ASSIGN_OR_RETURN(e.device_staging_pool_, backends.transfer->CreateDevicePool(block, block));
  }
  CachePolicyOptions policy_options;
  policy_options.moe_layers = e.model_.moe_layers;
  policy_options.next_use = options.next_use;
  policy_options.pinned = options.pinned;
  COLIBRI_ASSIGN_OR_RETURN(e.l1_cache_,
                           MakeTier(options.l1_policy, *e.l1_pool_, options.l1_bytes, per_layer_sizes, policy_options));
  COLIBRI_ASSIGN_OR_RETURN(e.l2_cache_,
                           MakeTier(options.l2_policy, *e.l2_pool_, options.l2_bytes, per_layer_sizes, policy_options));
  const size_t entries = static_cast<size_t>(e.model_.moe_layers) * e.model_.experts;
  e.l1_slot_of_.assign(entries, -1);
  e.l2_slot_of_.assign(entries, -1);
  e.scratch_ = std::make_unique<BatchScratch>(e.model_.experts);
  COLIBRI_ASSIGN_OR_RETURN(e.routers_, MakeRouters(e.model_, options.routing));
  COLIBRI_ASSIGN_OR_RETURN(e.predictor_, MakePredictor(options.prefetch, e.model_, options, backends.compute));
  e.prefetch_in_flight_.assign(entries, 0);
  auto source = std::make_unique<StorageEventSource>(backends.storage);
  source->on_done = [&e](const ReadCompletion& c) { e.OnStorageDone(c); };
  e.storage_source_ = std::move(source);
  backends.loop->AddSource(e.storage_source_.get());
  return engine;
}

Status MoeEngine::Execute(uint32_t layer_index, const float* hidden, const LayerRouting& routing, float* out,
                          LayerBatchReport* report) {
  LayerBatchReport local;
  LayerBatchReport& r = report != nullptr ? *report : local;
  // A given routing costs nothing here unless a host-work model charges what computing it would have.
  TimeNs routing_ns = 0;
  if (backends_.host_work != nullptr) {
    routing_ns = backends_.host_work->RoutingNs(routing.tokens, model_.experts, model_.layout.hidden,
                                                /*gate_charged=*/false);
    ChargeHostWork(*backends_.loop, routing_ns);
  }
  COLIBRI_RETURN_IF_ERROR(Run(layer_index, hidden, routing, out, &r));
  r.step_ns.routing = routing_ns;
  r.step_ns.total += routing_ns;
  if (backends_.observer != nullptr) backends_.observer->OnLayerBatch(r);
  return Status::Ok();
}

Status MoeEngine::Run(uint32_t layer_index, const float* hidden, const LayerRouting& routing, float* out,
                      LayerBatchReport* report) {
  if (layer_index >= model_.moe_layers) {
    return Status::InvalidArgument("MoE layer index " + std::to_string(layer_index) + " out of range");
  }
  if (moves_data_) expert_out_.resize(routing.tokens * model_.top_k * model_.layout.hidden);
  *report = LayerBatchReport{};
  Batch batch(*this, layer_index, hidden, routing, out);
  return batch.Run(report);
}

EngineModel EngineModelOf(const Model& model) {
  const ModelConfig& c = model.config();
  EngineModel m;
  m.moe_layers = c.layers();
  m.experts = c.experts;
  m.top_k = c.top_k;
  m.layout = c.layout;
  m.renormalize = c.norm_topk_prob;
  m.expert_capacity = c.expert_capacity;
  for (uint32_t l = 0; l < c.layers(); ++l) {
    for (uint32_t e = 0; e < c.experts; ++e) m.expert_offsets.push_back(model.ExpertOffset(l, e));
    m.gate_weights.push_back(model.GateWeight(l));
    m.gate_biases.push_back(model.GateBias(l));
  }
  return m;
}

Status MoeEngine::Forward(uint32_t layer_index, const float* hidden, size_t tokens, float* out,
                          LayerBatchReport* report, const uint32_t* token_ids) {
  if (layer_index >= model_.moe_layers || layer_index >= model_.gate_weights.size()) {
    return Status::InvalidArgument("MoE layer index " + std::to_string(layer_index) + " out of range or without a router");
  }
  COLIBRI_RETURN_IF_ERROR(CheckRoutingCompute());
  const TimeNs start = backends_.loop->Now();
  const RouterMode mode = options_.routing.router.mode;
  const float* logits = nullptr;
  if (mode == RouterMode::kSoftmaxTopK || mode == RouterMode::kSigmoidGrouped) {  // the hash modes need no gate
    logits_.resize(tokens * model_.experts);
    COLIBRI_RETURN_IF_ERROR(backends_.compute->GateGemv(model_.gate_weights[layer_index], model_.gate_biases[layer_index],
                                                        model_.experts, model_.layout.hidden, hidden, tokens,
                                                        logits_.data()));
    logits = logits_.data();
  }
  return RouteAndRun(layer_index, RouterInput{tokens, logits, hidden, token_ids, start}, start, out, report);
}

Status MoeEngine::ExecuteLogits(uint32_t layer_index, const float* logits, const float* hidden, size_t tokens,
                                float* out, LayerBatchReport* report, const uint32_t* token_ids) {
  if (layer_index >= model_.moe_layers) {
    return Status::InvalidArgument("MoE layer index " + std::to_string(layer_index) + " out of range");
  }
  const TimeNs start = backends_.loop->Now();
  return RouteAndRun(layer_index, RouterInput{tokens, logits, hidden, token_ids, start}, start, out, report);
}

Status MoeEngine::CheckRoutingCompute() const {
  if (moves_data_) return Status::Ok();
  return Status::InvalidArgument(std::string("routing needs a compute backend that reads data; '") +
                                 backends_.compute->caps().name + "' only models time");
}

uint32_t MoeEngine::CapacityFor(size_t tokens) const {
  if (options_.routing.capacity_factor <= 0.0) return model_.expert_capacity;
  const double slots = static_cast<double>(tokens) * model_.top_k / model_.experts;
  return static_cast<uint32_t>(std::ceil(options_.routing.capacity_factor * slots));
}

Status MoeEngine::RouteAndRun(uint32_t layer_index, const RouterInput& input, TimeNs start, float* out,
                              LayerBatchReport* report) {
  const size_t tokens = input.tokens;
  const uint32_t k = model_.top_k;
  Router& router = *routers_[layer_index];
  routed_ids_.resize(tokens * k);
  routed_weights_.resize(tokens * k);
  const auto where = [layer_index] { return "routing MoE layer " + std::to_string(layer_index); };  // errors only
  const Status routed = router.Route(input, routed_ids_.data(), routed_weights_.data());
  if (!routed.ok()) return routed.WithPrefix(where());
  kept_ids_ = routed_ids_;
  kept_weights_ = routed_weights_;
  Result<CapacityCounts> capacity = router.ApplyCapacity(input, CapacityFor(tokens), options_.routing.capacity_overflow,
                                                         kept_ids_.data(), kept_weights_.data());
  if (!capacity.ok()) return capacity.status().WithPrefix(where());
  if (backends_.host_work != nullptr) {  // scoring and top-k; the gate GEMV kept its own time
    ChargeHostWork(*backends_.loop, backends_.host_work->RoutingNs(tokens, model_.experts, model_.layout.hidden,
                                                                   /*gate_charged=*/true));
  }
  const TimeNs routing_ns = backends_.loop->Now() - start;
  if (backends_.observer != nullptr) {
    backends_.observer->OnRouting(RoutingDecision{layer_index, tokens, k, model_.experts, model_.layout.hidden,
                                                  routed_ids_.data(), routed_weights_.data(), input.logits,
                                                  input.hidden, routing_ns});
  }
  LayerBatchReport local;
  LayerBatchReport& r = report != nullptr ? *report : local;
  COLIBRI_RETURN_IF_ERROR(Run(layer_index, input.hidden, LayerRouting{tokens, kept_ids_.data(), kept_weights_.data()}, out, &r));
  r.step_ns.routing = routing_ns;
  r.step_ns.total += routing_ns;
  r.dropped_assignments = static_cast<uint32_t>(capacity.value().dropped.dropped_slots);
  if (backends_.observer != nullptr) backends_.observer->OnLayerBatch(r);
  return Status::Ok();
}

RouterCounters MoeEngine::router_counters() const {
  RouterCounters sum;
  for (const auto& router : routers_) {
    const RouterCounters& c = router->counters();
    sum.tokens_routed += c.tokens_routed;
    sum.tokens_redirected += c.tokens_redirected;
    sum.slots_redirected += c.slots_redirected;
    sum.capacity_dropped_slots += c.capacity_dropped_slots;
    sum.capacity_rerouted_slots += c.capacity_rerouted_slots;
  }
  return sum;
}

std::string LruCliffWarning(const std::string& tier, const std::string& policy, uint64_t budget_bytes,
                            uint64_t token_cycle_bytes) {
  if (policy != "lru" || budget_bytes == 0 || budget_bytes >= token_cycle_bytes) return "";
  const auto mib = [](uint64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20); };
  return tier + " budget " + mib(budget_bytes) + " MiB is below the token cycle T = " + mib(token_cycle_bytes) +
         " MiB (every MoE layer's top-k experts): a global LRU evicts each expert before its next use, so its hit "
         "rate will collapse to about zero. Use at least " + mib(token_cycle_bytes) +
         " MiB, or a policy that keeps a resident set (lfu, layerlfu, layer).";
}

uint64_t MoeEngine::token_cycle_bytes() const {
  uint64_t bytes = 0;
  for (uint32_t l = 0; l < model_.moe_layers; ++l) bytes += static_cast<uint64_t>(model_.top_k) * ExpertBytes(l);
  return bytes;
}

std::vector<std::string> MoeEngine::SizingWarnings() const {
  std::vector<std::string> out;
  for (std::string w : {LruCliffWarning("L1", options_.l1_policy, options_.l1_bytes, token_cycle_bytes()),
                        LruCliffWarning("L2", options_.l2_policy, options_.l2_bytes, token_cycle_bytes())}) {
    if (!w.empty()) out.push_back(std::move(w));
  }
  return out;
}

TierCounters MoeEngine::l1_counters() const { return CountersOf(l1_cache_.get()); }
TierCounters MoeEngine::l2_counters() const { return CountersOf(l2_cache_.get()); }

std::vector<MemoryRegion> MoeEngine::read_buffer_regions() const {
  std::vector<MemoryRegion> regions;
  if (!backends_.storage->caps().delivers_data) return regions;
  regions = RegistrableRegions(*l2_pool_);
  const std::vector<MemoryRegion> staging = RegistrableRegions(*staging_pool_);
  regions.insert(regions.end(), staging.begin(), staging.end());
  return regions;
}

uint64_t MoeEngine::pool_bytes() const {
  return l1_pool_->total_bytes() + l2_pool_->total_bytes() + staging_pool_->total_bytes() +
         (device_staging_pool_ ? device_staging_pool_->total_bytes() : 0);
}

}  // namespace colibri::engine
