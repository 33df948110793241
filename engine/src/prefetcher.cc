#include "prefetcher.h"

#include <algorithm>
#include <string>

#include "host_work_charge.h"

namespace colibri::engine {

void Prefetcher::Score(uint32_t layer, std::span<const uint32_t> union_experts) {
  if (!has_prediction_ || prediction_layer_ != layer) return;
  has_prediction_ = false;
  PrefetchCounters& p = counters_;
  p.predicted += prediction_.size();
  p.next_lookups += union_experts.size();
  auto predicted = prediction_.begin();
  for (uint32_t expert : union_experts) {
    while (predicted != prediction_.end() && *predicted < expert) ++predicted;
    p.predicted_used += predicted != prediction_.end() && *predicted == expert;
  }
}

Status Prefetcher::Issue(uint32_t layer, std::span<const uint32_t> union_experts, size_t tokens, const float* hidden,
                         uint32_t* reads, uint64_t* bytes) {
  if (!predictor_) return Status::Ok();
  const uint32_t next_layer = (layer + 1) % model_.moe_layers;
  const PredictorInput input{layer, union_experts, next_layer, tokens, hidden, model_.layout.hidden};
  const uint64_t width =
      width_ != 0 ? width_ : std::min<uint64_t>(model_.experts, uint64_t{model_.top_k} * tokens);
  COLIBRI_RETURN_IF_ERROR(predictor_->Predict(input, static_cast<uint32_t>(width), &prediction_));
  for (uint32_t expert : prediction_) {
    if (expert >= model_.experts) return Status::Internal("predictor named expert " + std::to_string(expert));
    const ExpertKey key = MakeExpertKey(next_layer, expert);
    if (tiers_.l1() && tiers_.l1()->Contains(key)) continue;
    if (!tiers_.l2()->Contains(key)) {
      COLIBRI_ASSIGN_OR_RETURN(const int64_t slot, tiers_.AdmitL2(key, true));
      if (slot < 0) break;  // L2 holds only experts this batch needs or expects: no room
      COLIBRI_RETURN_IF_ERROR(Submit(key, slot));
      ++*reads;
      *bytes += tiers_.ExpertBytes(next_layer);
    }
    tiers_.l2()->Protect(key);  // no later prefetch of this batch evicts what it expects
  }
  std::sort(prediction_.begin(), prediction_.end());
  prediction_layer_ = next_layer;
  has_prediction_ = true;
  return Status::Ok();
}

Status Prefetcher::Submit(ExpertKey key, int64_t slot) {
  const size_t index = tiers_.EntryIndex(key);
  ++counters_.issued;
  counters_.issued_bytes += tiers_.ExpertBytes(LayerIndexOf(key));
  retries_of_[index] = 0;
  return SubmitRead(index, tiers_.L2SlotData(slot));
}

Status Prefetcher::SubmitRead(size_t index, void* buffer) {
  ReadRequest request;
  request.offset = model_.expert_offsets[index];
  request.bytes = tiers_.ExpertBytes(static_cast<uint32_t>(index / model_.experts));
  request.buffer = buffer;
  request.tag = kPrefetchTag | index;
  tiers_.set_fill_in_flight(index, true);
  ++in_flight_;
  ChargeReadSubmit(backends_, request.bytes);
  return backends_.storage->Submit(request);
}

bool Prefetcher::OnReadDone(size_t index, Status* status) {
  tiers_.set_fill_in_flight(index, false);
  --in_flight_;
  if (status->ok()) return true;
  const ExpertKey key = MakeExpertKey(static_cast<uint32_t>(index / model_.experts), static_cast<uint32_t>(index % model_.experts));
  const bool resident = tiers_.l2()->Contains(key);  // else it was evicted in flight, and its evictor frees the slot
  if (resident && RetryableReadError(*status) && retries_of_[index] < read_retries_) {
    ++retries_of_[index];
    ++counters_.retries;
    const Status resubmitted = SubmitRead(index, tiers_.L2Block(index));
    if (resubmitted.ok()) return false;
    --in_flight_;  // not queued
    tiers_.set_fill_in_flight(index, false);
    *status = resubmitted;
  }
  ++counters_.failed;
  if (resident) tiers_.DropL2(key);
  return true;
}

Status Prefetcher::Preload(const std::vector<ExpertKey>& pinned, uint64_t* bytes) {
  const uint64_t failed_before = counters_.failed;
  for (ExpertKey key : pinned) {
    if (tiers_.l2()->Contains(key)) continue;
    COLIBRI_ASSIGN_OR_RETURN(const uint32_t slot, tiers_.AdmitPinned(key));
    const size_t index = tiers_.EntryIndex(key);
    const uint64_t expert_bytes = tiers_.ExpertBytes(LayerIndexOf(key));
    ReadRequest request{model_.expert_offsets[index], expert_bytes, tiers_.L2SlotData(slot), kPrefetchTag | index};
    tiers_.set_fill_in_flight(index, true);
    ++in_flight_;
    retries_of_[index] = 0;
    *bytes += expert_bytes;
    COLIBRI_RETURN_IF_ERROR(backends_.storage->Submit(request));
  }
  COLIBRI_RETURN_IF_ERROR(Finish());
  if (counters_.failed != failed_before) return Status::IoError("pinned: reading the hot set failed");
  return Status::Ok();
}

Status Prefetcher::Finish() {
  COLIBRI_RETURN_IF_ERROR(backends_.loop->RunUntil([this] { return in_flight_ == 0; }));
  return in_flight_ == 0 ? Status::Ok() : Status::Internal("prefetch reads outstanding but the event loop ran dry");
}

PrefetchCounters Prefetcher::counters() const {
  PrefetchCounters p = counters_;
  if (const ExpertCache* l2 = tiers_.l2(); l2 != nullptr) {
    p.hits = l2->counters().prefetch_hits;
    p.wasted_bytes = l2->counters().prefetch_wasted_bytes;
  }
  return p;
}

}  // namespace colibri::engine
