#include "colibri/engine/block_check.h"

#include <vector>

#include "storage_common.h"

namespace colibri::engine {
namespace {

class BlockCheckStorage final : public StorageBackend {
 public:
  BlockCheckStorage(const Model& model, std::unique_ptr<StorageBackend> inner)
      : model_(model),
        inner_(std::move(inner)),
        first_block_offset_(model.ExpertOffset(0, 0)),
        block_bytes_(model.config().layout.block_bytes),
        blocks_(uint64_t{model.config().layers()} * model.config().experts) {}

  const StorageCaps& caps() const override { return inner_->caps(); }

  const StorageCounters& counters() const override {
    counters_ = inner_->counters();
    counters_.reads -= mismatches_;
    counters_.read_bytes -= mismatch_bytes_;
    counters_.read_errors += mismatches_;
    return counters_;
  }

  // Remembers the request under a slot number of our own (the caller's tags
  // need not be unique) and submits it with that tag.
  Status Submit(const ReadRequest& request) override {
    uint64_t slot;
    if (free_slots_.empty()) {
      slot = pending_.size();
      pending_.push_back(request);
    } else {
      slot = free_slots_.back();
      free_slots_.pop_back();
      pending_[slot] = request;
    }
    ReadRequest inner_request = request;
    inner_request.tag = slot;
    Status submitted = inner_->Submit(inner_request);
    if (!submitted.ok()) free_slots_.push_back(slot);
    return submitted;
  }

  // Re-entrant (NestedScratch): the inner backend may run the loop, which polls this one again.
  Status Poll(bool wait, std::vector<ReadCompletion>* out) override {
    std::vector<ReadCompletion>& completions = scratch_.Enter();
    const Status polled = inner_->Poll(wait, &completions);
    if (!polled.ok()) {
      scratch_.Leave();
      return polled;
    }
    for (ReadCompletion& c : completions) {
      const ReadRequest request = pending_[c.tag];
      free_slots_.push_back(c.tag);
      c.tag = request.tag;
      if (c.status.ok()) {
        c.status = Check(request);
        if (!c.status.ok()) {  // the backend read it, but the bytes are wrong
          ++mismatches_;
          mismatch_bytes_ += c.bytes;
        }
      }
      out->push_back(std::move(c));
    }
    scratch_.Leave();
    return Status::Ok();
  }

  size_t outstanding() const override { return inner_->outstanding(); }
  Status RegisterBuffers(const std::vector<MemoryRegion>& regions) override { return inner_->RegisterBuffers(regions); }
  const std::string& warning() const override { return inner_->warning(); }

 private:
  Status Check(const ReadRequest& request) const {
    if (request.bytes != block_bytes_ || request.offset < first_block_offset_ ||
        (request.offset - first_block_offset_) % block_bytes_ != 0) {
      return Status::Ok();  // not one whole block
    }
    const uint64_t block = (request.offset - first_block_offset_) / block_bytes_;
    if (block >= blocks_) return Status::Ok();
    const uint32_t experts = model_.config().experts;
    return model_.CheckExpertBlock(static_cast<uint32_t>(block / experts), static_cast<uint32_t>(block % experts),
                                   request.buffer);
  }

  const Model& model_;
  std::unique_ptr<StorageBackend> inner_;
  const uint64_t first_block_offset_;
  const uint64_t block_bytes_;
  const uint64_t blocks_;
  std::vector<ReadRequest> pending_;  // by slot
  std::vector<uint64_t> free_slots_;
  storage_internal::NestedScratch<ReadCompletion> scratch_;  // Poll's lists, one per nesting level
  uint64_t mismatches_ = 0;
  uint64_t mismatch_bytes_ = 0;
  mutable StorageCounters counters_;
};

}  // namespace

std::unique_ptr<StorageBackend> CheckBlocksOnRead(const Model& model, std::unique_ptr<StorageBackend> storage,
                                                  BlockCheckMode mode) {
  const bool wanted = mode == BlockCheckMode::kAlways ? model.has_block_digests() : model.check_blocks_on_read();
  if (!storage || !wanted || !storage->caps().delivers_data) return storage;
  return std::make_unique<BlockCheckStorage>(model, std::move(storage));
}

}  // namespace colibri::engine
