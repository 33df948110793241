#include "layer_batch.h"

#include <algorithm>
#include <bit>
#include <string>
#include <utility>

#include "host_work_charge.h"

namespace colibri::engine {

LayerBatch::LayerBatch(const BatchParts& parts, uint32_t layer, const float* hidden, const LayerRouting& routing,
                       float* out)
    : p_(parts), layer_(layer), hidden_(hidden), routing_(routing), out_(out), k_(parts.model.top_k),
      works_(parts.scratch.works), ready_(parts.scratch.ready), waiting_(parts.scratch.waiting),
      prefetch_waits_(parts.scratch.prefetch_waits) {
  works_.clear();
  ready_.clear();
  waiting_.clear();
  prefetch_waits_.clear();
  parts.scratch.failures.experts.clear();
  parts.scratch.failures.tokens.clear();
}

Status LayerBatch::Run(LayerBatchReport* report) {
  Clock& clock = *p_.backends.loop;
  const TimeNs start = clock.Now();
  report->layer_index = layer_;
  report->tokens = routing_.tokens;
  COLIBRI_RETURN_IF_ERROR(FormUnion());
  report->distinct_experts = static_cast<uint32_t>(works_.size());
  LookUp(report);
  if (const HostWorkModel* model = p_.backends.host_work; model != nullptr) {
    ChargeHostWork(*p_.backends.loop, model->SchedulingNs(routing_.tokens, k_, report->distinct_experts, report->nvme_reads));
  }
  Status status = Dispatch();
  report->step_ns.scheduling = clock.Now() - start;
  if (status.ok()) status = ComputeAll();
  COLIBRI_RETURN_IF_ERROR(status);
  if (!p_.scratch.failures.empty()) CollectFailedTokens();
  report->failed_experts = static_cast<uint32_t>(p_.scratch.failures.experts.size());
  report->failed_tokens = static_cast<uint32_t>(p_.scratch.failures.tokens.size());
  const TimeNs aggregate_start = clock.Now();
  if (p_.moves_data) Aggregate();
  if (const HostWorkModel* model = p_.backends.host_work; model != nullptr) {
    ChargeHostWork(*p_.backends.loop, model->AggregationNs(routing_.tokens, k_, p_.model.layout.hidden));
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
  report->read_retries = read_retries_;
  report->prefetch_reads = prefetch_reads_;
  report->prefetch_bytes = prefetch_bytes_;
  report->prefetch_waits = static_cast<uint32_t>(prefetch_waits_.size());
  return Status::Ok();
}

void LayerBatch::OnReadDone(const ReadCompletion& c) {
  last_read_done_ = std::max(last_read_done_, c.complete_ns);
  read_latency_sum_ns_ += c.complete_ns - c.submit_ns;
  if (!c.status.ok()) {
    BatchWork& w = works_[c.tag];
    if (RetryableReadError(c.status) && w.read_retries < p_.read_retries) {
      ++w.read_retries;
      ++read_retries_;
      Fail(SubmitRead(c.tag));
      return;
    }
    const std::string retried =
        w.read_retries == 0 ? "" : " (after " + std::to_string(w.read_retries) + " retries)";
    FailWork(c.tag, c.status.WithPrefix("reading expert " + std::to_string(w.expert) + " of MoE layer " +
                                        std::to_string(layer_) + retried));
    return;
  }
  read_bytes_ += c.bytes;
  const Status ready = MakeReady(c.tag, works_[c.tag].read_into);
  if (!ready.ok()) FailWork(c.tag, ready);
}

void LayerBatch::OnPrefetchDone(size_t index, const Status& status) {
  for (size_t i : prefetch_waits_) {
    if (Index(works_[i].expert) != index) continue;
    if (!status.ok()) {
      FailWork(i, status.WithPrefix("prefetching expert " + std::to_string(works_[i].expert) + " of MoE layer " +
                                    std::to_string(layer_)));
      continue;
    }
    const Status ready = MakeReady(i, p_.tiers.L2Block(index));
    if (!ready.ok()) FailWork(i, ready);
  }
}

// The union in ascending expert ids, each work's assignments in token
// order: a counting sort over the batch's expert ids.
Status LayerBatch::FormUnion() {
  const size_t n = routing_.tokens * k_;
  const uint32_t* ids = routing_.expert_ids;
  const uint32_t experts = p_.model.experts;
  BatchScratch& s = p_.scratch;
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
  BatchWork* out = works_.data();
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
  for (const BatchWork& w : works_) count_of[w.expert] = 0;
  return Status::Ok();
}

// Every lookup of the union before any insert, L1 then L2 (ExpertCache's
// contract); then the last prediction is scored against the union.
void LayerBatch::LookUp(LayerBatchReport* report) {
  ExpertCache* l1 = p_.tiers.l1();
  ExpertCache* l2 = p_.tiers.l2();
  if (l1) l1->BeginBatch();
  if (l2) l2->BeginBatch();
  for (BatchWork& w : works_) {
    w.l1_hit = l1 && l1->Lookup(Key(w));
    if (!w.l1_hit) w.l2_hit = l2 && l2->Lookup(Key(w));
    report->l1_hits += w.l1_hit;
    report->l2_hits += w.l2_hit;
    report->nvme_reads += !w.l1_hit && !w.l2_hit;
  }
  if (!p_.prefetcher.enabled()) return;
  std::vector<uint32_t>& experts = p_.scratch.union_experts;
  experts.clear();
  for (const BatchWork& w : works_) experts.push_back(w.expert);
  p_.prefetcher.Score(layer_, experts);
}

// L1 admissions are decided here, in union order, for every expert L1
// lacks (the copy follows when the block is in host memory), so cache
// decisions never depend on the order reads complete in.
Status LayerBatch::Dispatch() {
  for (size_t i = 0; i < works_.size(); ++i) {
    BatchWork& w = works_[i];
    if (w.l1_hit) {
      w.data = p_.tiers.L1Block(Index(w.expert));
      ready_.push_back(i);
      continue;
    }
    w.l1_slot = p_.tiers.AdmitL1(Key(w));
    if (w.l2_hit && !p_.tiers.l2()->Contains(Key(w))) {
      // Its prefetch failed for good while earlier works were dispatched (the
      // loop ran in an admission), and the entry was dropped: it has no data.
      FailWork(i, Status::IoError("prefetching expert " + std::to_string(w.expert) + " of MoE layer " +
                                  std::to_string(layer_) + ": the read failed before the batch reached it"));
      if (!failure_.ok()) return failure_;
      continue;
    }
    if (w.l2_hit && p_.tiers.fill_in_flight(Index(w.expert))) {
      prefetch_waits_.push_back(i);
      p_.prefetcher.CountWait();
      continue;
    }
    if (w.l2_hit) {
      const Status ready = MakeReady(i, p_.tiers.L2Block(Index(w.expert)));
      if (!ready.ok()) FailWork(i, ready);
      if (!failure_.ok()) return failure_;
      continue;
    }
    COLIBRI_ASSIGN_OR_RETURN(const int64_t slot, p_.tiers.AdmitL2(Key(w), false));
    if (slot >= 0) {
      w.read_into = p_.tiers.L2SlotData(slot);
      COLIBRI_RETURN_IF_ERROR(SubmitRead(i));
    } else {
      waiting_.push_back(i);
    }
  }
  COLIBRI_RETURN_IF_ERROR(SubmitWaiting());
  return p_.prefetcher.Issue(layer_, p_.scratch.union_experts, routing_.tokens, hidden_, &prefetch_reads_,
                             &prefetch_bytes_);
}

// Starts reads of experts no tier admitted, as staging slots allow.
Status LayerBatch::SubmitWaiting() {
  while (!waiting_.empty()) {
    std::optional<uint32_t> slot = p_.tiers.AcquireStaging();
    if (!slot) return Status::Ok();
    BatchWork& w = works_[waiting_.front()];
    w.staging_slot = *slot;
    w.read_into = p_.tiers.StagingData(*slot);
    ++staged_;
    const size_t i = waiting_.front();
    waiting_.pop_front();
    COLIBRI_RETURN_IF_ERROR(SubmitRead(i));
  }
  return Status::Ok();
}

Status LayerBatch::SubmitRead(size_t i) {
  const BatchWork& w = works_[i];
  ReadRequest request;
  request.offset = p_.model.expert_offsets[Index(w.expert)];
  request.bytes = p_.tiers.ExpertBytes(layer_);
  request.buffer = const_cast<std::byte*>(w.read_into);
  request.tag = i;
  if (reads_submitted_++ == 0) first_read_submit_ = p_.backends.loop->Now();
  ChargeReadSubmit(p_.backends, request.bytes);
  return p_.backends.storage->Submit(request);
}

// Keeps the batch's first failure.
void LayerBatch::Fail(Status status) {
  if (!status.ok() && failure_.ok()) failure_ = std::move(status);
}

void LayerBatch::FailWork(size_t i, Status status) {
  if (!p_.isolate_failures) return Fail(std::move(status));
  BatchWork& w = works_[i];
  if (w.failed) return;
  w.failed = true;
  ++finished_;
  p_.scratch.failures.experts.push_back(ExpertFailure{layer_, w.expert, std::move(status)});
  if (w.l1_slot >= 0 && w.data == nullptr) {  // L1 admitted it, but its bytes never arrived there
    p_.tiers.DropL1(Key(w), w.l1_slot);
    w.l1_slot = -1;
  }
  if (w.staging_slot >= 0) {
    p_.tiers.ReleaseStaging(static_cast<uint32_t>(w.staging_slot));
    w.staging_slot = -1;
    Fail(SubmitWaiting());  // the slot is free for a work waiting for one
  } else if (w.read_into != nullptr && w.data == nullptr && !w.l2_hit) {  // its demand read into L2 never landed
    p_.tiers.DropL2(Key(w));
  }
  w.read_into = nullptr;
}

void LayerBatch::CollectFailedTokens() {
  std::vector<uint8_t>& failed = p_.scratch.token_failed;
  failed.assign(routing_.tokens, 0);
  const uint32_t* assignments = p_.scratch.assignments.data();
  for (const BatchWork& w : works_) {
    if (!w.failed) continue;
    for (uint32_t a = w.first; a < w.end; ++a) failed[assignments[a] / k_] = 1;
  }
  for (size_t t = 0; t < routing_.tokens; ++t) {
    if (failed[t]) p_.scratch.failures.tokens.push_back(static_cast<uint32_t>(t));
  }
}

// The block of works_[i] is in host memory at `host`: copy it to its L1
// slot when L1 admitted it, else compute from where it is. (Copies are
// waited for at once: CpuTransfer completes them inside Copy; an
// asynchronous transfer backend will complete them through the event loop
// like reads.)
Status LayerBatch::MakeReady(size_t i, const std::byte* host) {
  BatchWork& w = works_[i];
  if (w.l1_slot < 0) {
    w.data = host;
    ready_.push_back(i);
    return Status::Ok();
  }
  std::byte* device = p_.tiers.L1SlotData(w.l1_slot);
  const Status copied = CopyAndWait(device, host, i);
  if (!copied.ok()) {
    return copied.WithPrefix("copying expert " + std::to_string(w.expert) + " of MoE layer " + std::to_string(layer_));
  }
  w.data = device;
  ready_.push_back(i);
  return Status::Ok();
}

// Copies an expert block from host memory to `device` and waits for it.
Status LayerBatch::CopyAndWait(std::byte* device, const std::byte* host, uint64_t tag) {
  TransferBackend& transfer = *p_.backends.transfer;
  COLIBRI_RETURN_IF_ERROR(transfer.Copy(device, host, p_.tiers.ExpertBytes(layer_), tag));
  std::vector<TransferCompletion>& copies = p_.scratch.copies;
  while (transfer.outstanding() > 0) {
    copies.clear();
    COLIBRI_RETURN_IF_ERROR(transfer.Poll(true, &copies));
    for (const TransferCompletion& c : copies) {
      COLIBRI_RETURN_IF_ERROR(c.status);
      copy_ns_ += c.complete_ns - c.submit_ns;
    }
  }
  return Status::Ok();
}

// The block `w` computes from: where it is, or, for a compute backend that
// reads device memory and a block in host memory (L2 or a staging slot),
// its copy in the device staging slot.
Result<const std::byte*> LayerBatch::ComputeBlock(const BatchWork& w) {
  SlabPool* device_staging = p_.tiers.device_staging();
  if (device_staging == nullptr || w.l1_hit || w.l1_slot >= 0) return w.data;
  std::byte* device = device_staging->SlotData(0);
  COLIBRI_RETURN_IF_ERROR(CopyAndWait(device, w.data, static_cast<uint64_t>(&w - works_.data())));
  ++device_staged_;
  return static_cast<const std::byte*>(device);
}

Status LayerBatch::ComputeAll() {
  const auto all_finished = [this] { return finished_ == works_.size(); };
  while (!all_finished()) {
    if (!failure_.ok()) break;
    if (ready_.empty()) {
      COLIBRI_RETURN_IF_ERROR(p_.backends.loop->RunUntil(
          [&] { return !ready_.empty() || !failure_.ok() || all_finished(); }));
      if (ready_.empty() && failure_.ok() && !all_finished()) {
        return Status::Internal("layer batch stalled: no expert ready, no read pending");
      }
      continue;
    }
    const size_t i = ready_.front();
    ready_.pop_front();
    const Status computed = ComputeOne(works_[i]);
    if (!computed.ok()) FailWork(i, computed);
    if (!works_[i].failed) ++finished_;
  }
  return failure_;
}

void LayerBatch::Abandon() {
  for (BatchWork& w : works_) {
    if (w.l1_slot >= 0 && w.data == nullptr) p_.tiers.DropL1(Key(w), w.l1_slot);
    if (w.staging_slot >= 0) {
      p_.tiers.ReleaseStaging(static_cast<uint32_t>(w.staging_slot));
      w.staging_slot = -1;
      continue;
    }
    const bool read_into_l2 = w.read_into != nullptr;
    if (!read_into_l2 || w.data != nullptr) continue;
    p_.tiers.DropL2(Key(w));
  }
}

Status LayerBatch::ComputeOne(BatchWork& w) {
  const size_t n = w.end - w.first;
  if (p_.moves_data) Gather(w);
  if (const HostWorkModel* model = p_.backends.host_work; model != nullptr) {
    ChargeHostWork(*p_.backends.loop, model->GatherNs(n, p_.model.layout.hidden));
  }
  const auto where = [&](const char* step) {
    return std::string(step) + " expert " + std::to_string(w.expert) + " of MoE layer " + std::to_string(layer_);
  };
  Result<const std::byte*> block = ComputeBlock(w);  // a copy here counts as host_to_device
  if (!block.ok()) return block.status().WithPrefix(where("copying"));
  const TimeNs start = p_.backends.loop->Now();
  float* x = p_.moves_data ? p_.scratch.x_buffer.data() : nullptr;
  float* y = p_.moves_data ? p_.scratch.y_buffer.data() : nullptr;
  const Status ffn = p_.backends.compute->ExpertFfn(ExpertView{&p_.model.layout, block.value()}, x, n, y);
  if (!ffn.ok()) return ffn.WithPrefix(where("computing"));
  compute_ns_ += p_.backends.loop->Now() - start;
  if (p_.moves_data) Scatter(w);
  if (w.staging_slot >= 0) {
    p_.tiers.ReleaseStaging(static_cast<uint32_t>(w.staging_slot));
    w.staging_slot = -1;
    COLIBRI_RETURN_IF_ERROR(SubmitWaiting());
  }
  return Status::Ok();
}

// The inputs of the tokens routed to `w`, in assignment order, into x_buffer.
void LayerBatch::Gather(const BatchWork& w) {
  const uint32_t hidden = p_.model.layout.hidden;
  const size_t n = w.end - w.first;
  const uint32_t* assignments = p_.scratch.assignments.data() + w.first;
  p_.scratch.x_buffer.resize(n * hidden);
  p_.scratch.y_buffer.resize(n * hidden);
  for (size_t r = 0; r < n; ++r) {
    const size_t token = assignments[r] / k_;
    std::copy_n(hidden_ + token * hidden, hidden, p_.scratch.x_buffer.data() + r * hidden);
  }
}

// y_buffer's rows to their (token, slot) places in expert_out.
void LayerBatch::Scatter(const BatchWork& w) {
  const uint32_t hidden = p_.model.layout.hidden;
  const uint32_t* assignments = p_.scratch.assignments.data() + w.first;
  for (size_t r = 0; r < w.end - w.first; ++r) {
    std::copy_n(p_.scratch.y_buffer.data() + r * hidden, hidden,
                p_.scratch.expert_out.data() + static_cast<size_t>(assignments[r]) * hidden);
  }
}

// out[t] = sum over slots s in rank order of weight[t][s] x FFN output: a fixed order.
void LayerBatch::Aggregate() {
  const uint32_t hidden = p_.model.layout.hidden;
  const bool any_failed = !p_.scratch.failures.tokens.empty();
  for (size_t t = 0; t < routing_.tokens; ++t) {
    float* dst = out_ + t * hidden;
    std::fill_n(dst, hidden, 0.0f);
    if (any_failed && p_.scratch.token_failed[t]) continue;  // not computed: zeros
    for (uint32_t s = 0; s < k_; ++s) {
      const size_t a = t * k_ + s;
      if (routing_.expert_ids[a] == kDroppedExpert) continue;
      const float weight = routing_.weights[a];
      const float* src = p_.scratch.expert_out.data() + a * hidden;
      for (uint32_t h = 0; h < hidden; ++h) dst[h] += weight * src[h];
    }
  }
}

}  // namespace colibri::engine
