// LayerBatch: the state machine of one layer batch (moe_engine.h has the
// steps): the union, lookups, admissions and reads, copies, computes in the
// order blocks become ready, and the fixed-order aggregation.
//
// Cache decisions are made in union order before any read completes (so they
// never depend on completion order); reads complete through the engine's
// storage event source (OnReadDone, OnPrefetchDone) while the batch runs the
// event loop waiting for a ready block. After a failed Run the engine waits
// for every read still in flight (no buffer is written after that) and calls
// Abandon, which frees staging slots and forgets L1 and L2 entries whose data
// never arrived.
//
// Ownership: lives only inside MoeEngine::Execute; borrows everything
// (BatchParts: the engine's tiers, prefetcher, backends and scratch) and the
// caller's hidden, routing and out. Thread-safety: none; the engine's thread.
// With BatchParts::isolate_failures an expert that cannot be read, copied or
// computed fails alone (FailWork): the batch finishes the others, writes
// zeros for the tokens that needed it, and lists both in BatchScratch::failures.
// A demand read that completes with a transient error (RetryableReadError)
// is submitted again into the same buffer, up to BatchParts::read_retries
// times (counted in LayerBatchReport::read_retries).
// Errors: an expert id out of range, a read (after its retries), copy or
// kernel that failed (naming the expert and MoE layer), a stalled batch, as Status.
#pragma once

#include <cstdint>
#include <vector>

#include "colibri/engine/moe_engine.h"
#include "prefetcher.h"
#include "tier_set.h"

namespace colibri::engine {

// One expert of a layer batch's union.
struct BatchWork {
  uint32_t expert = 0;
  uint32_t first = 0;  // its assignments: BatchScratch::assignments[first, end)
  uint32_t end = 0;
  bool l1_hit = false;
  bool l2_hit = false;
  const std::byte* read_into = nullptr;  // destination of the NVMe read
  int64_t staging_slot = -1;
  int64_t l1_slot = -1;                  // the L1 slot admitted for a block L1 lacked
  const std::byte* data = nullptr;       // block to compute from, once ready
  uint32_t read_retries = 0;             // times its read was submitted again after a transient failure
  bool failed = false;                   // not computed (isolated failure)
};

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

// A layer batch's work lists and buffers, kept between batches (no
// allocation on the hot path once warm).
struct BatchScratch {
  explicit BatchScratch(uint32_t experts) : count_of(experts, 0), present((experts + 63) / 64, 0) {}
  std::vector<BatchWork> works;        // the batch union, ascending expert ids
  std::vector<uint32_t> assignments;   // per work, the indices t x k + s routed to it, in token order
  std::vector<uint32_t> count_of;      // expert -> assignments (zero between batches)
  std::vector<uint64_t> present;       // bit per expert: in the union (zero between batches)
  WorkQueue ready;
  WorkQueue waiting;
  std::vector<size_t> prefetch_waits;   // works whose L2 hit is a prefetch still in flight
  std::vector<uint32_t> union_experts;  // the union's expert ids, for the prefetcher
  std::vector<TransferCompletion> copies;
  std::vector<float> expert_out;  // [token x top_k + slot] x hidden: each slot's FFN output
  std::vector<float> x_buffer;    // gathered inputs of one expert
  std::vector<float> y_buffer;    // its outputs
  BatchFailures failures;         // isolated failures of the last batch
  std::vector<uint8_t> token_failed;  // per token of the batch: a slot routed to a failed expert
};

// What a batch works with: the engine's parts.
struct BatchParts {
  const EngineModel& model;
  const EngineBackends& backends;
  TierSet& tiers;
  Prefetcher& prefetcher;
  BatchScratch& scratch;
  bool moves_data;  // compute reads data: gather inputs, aggregate outputs
  uint32_t read_retries;  // EngineOptions::read_retries
  bool isolate_failures;  // EngineOptions::isolate_expert_failures
};

class LayerBatch {
 public:
  LayerBatch(const BatchParts& parts, uint32_t layer, const float* hidden, const LayerRouting& routing, float* out);
  LayerBatch(const LayerBatch&) = delete;
  LayerBatch& operator=(const LayerBatch&) = delete;

  // Runs the batch; `report` receives its counts and step times.
  Status Run(LayerBatchReport* report);
  // After a failed Run, once no read is in flight: frees what the batch held
  // for data that never arrived.
  void Abandon();
  // A demand read (tag: the work's index) completed.
  void OnReadDone(const ReadCompletion& c);
  // The prefetch read of entry `index` finished: works waiting on it become ready (or fail with `status`).
  void OnPrefetchDone(size_t index, const Status& status);

 private:
  size_t Index(uint32_t expert) const { return static_cast<size_t>(layer_) * p_.model.experts + expert; }
  ExpertKey Key(const BatchWork& w) const { return MakeExpertKey(layer_, w.expert); }
  Status FormUnion();
  void LookUp(LayerBatchReport* report);
  Status Dispatch();
  Status SubmitWaiting();
  Status SubmitRead(size_t i);
  void Fail(Status status);
  // Work i could not be made ready or computed: with isolation it alone
  // fails (its slots freed, its entries forgotten), else the batch does.
  void FailWork(size_t i, Status status);
  // The failed works' tokens (after ComputeAll), in scratch.failures.tokens and token_failed.
  void CollectFailedTokens();
  Status MakeReady(size_t i, const std::byte* host);
  Status CopyAndWait(std::byte* device, const std::byte* host, uint64_t tag);
  Result<const std::byte*> ComputeBlock(const BatchWork& w);
  Status ComputeAll();
  Status ComputeOne(BatchWork& w);
  void Gather(const BatchWork& w);
  void Scatter(const BatchWork& w);
  void Aggregate();

  const BatchParts& p_;
  const uint32_t layer_;
  const float* hidden_;
  const LayerRouting& routing_;
  float* out_;
  const uint32_t k_;
  // The engine's scratch, cleared for this batch.
  std::vector<BatchWork>& works_;
  WorkQueue& ready_;
  WorkQueue& waiting_;
  std::vector<size_t>& prefetch_waits_;
  Status failure_;
  size_t finished_ = 0;  // works computed or failed
  uint64_t reads_submitted_ = 0;
  uint64_t read_bytes_ = 0;
  uint32_t staged_ = 0;
  uint32_t device_staged_ = 0;
  uint32_t read_retries_ = 0;
  uint32_t prefetch_reads_ = 0;
  uint64_t prefetch_bytes_ = 0;
  TimeNs first_read_submit_ = 0;
  TimeNs last_read_done_ = 0;
  TimeNs copy_ns_ = 0;
  TimeNs read_latency_sum_ns_ = 0;
  TimeNs compute_ns_ = 0;
};

}  // namespace colibri::engine
