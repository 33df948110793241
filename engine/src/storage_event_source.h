// StorageEventSource: delivers a storage backend's completions to the
// engine through the event loop (RunUntil polls it while reads are pending).
// Ownership: borrows the backend, which must outlive it. Thread-safety: the
// loop's thread. Errors: the backend's Poll failure, as Status.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "colibri/engine/event_loop.h"
#include "colibri/engine/storage.h"

namespace colibri::engine {

class StorageEventSource final : public EventSource {
 public:
  StorageEventSource(StorageBackend* storage, std::function<void(const ReadCompletion&)> on_done)
      : storage_(storage), on_done_(std::move(on_done)) {}
  size_t pending() const override { return storage_->outstanding(); }
  Status Poll(bool wait) override {
    completions_.clear();
    COLIBRI_RETURN_IF_ERROR(storage_->Poll(wait, &completions_));
    for (const ReadCompletion& c : completions_) on_done_(c);
    return Status::Ok();
  }

 private:
  StorageBackend* storage_;
  std::function<void(const ReadCompletion&)> on_done_;
  std::vector<ReadCompletion> completions_;
};

}  // namespace colibri::engine
