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
#include "storage_common.h"

namespace colibri::engine {

class StorageEventSource final : public EventSource {
 public:
  StorageEventSource(StorageBackend* storage, std::function<void(const ReadCompletion&)> on_done)
      : storage_(storage), on_done_(std::move(on_done)) {}
  size_t pending() const override { return storage_->outstanding(); }
  // Re-entrant (NestedScratch): the loop may poll this source again from
  // inside the backend's Poll; each completion reaches the engine exactly once.
  Status Poll(bool wait) override {
    std::vector<ReadCompletion>& completions = scratch_.Enter();  // held through the callbacks: they may poll again
    Status status = storage_->Poll(wait, &completions);
    if (status.ok()) {
      for (const ReadCompletion& c : completions) on_done_(c);
    }
    scratch_.Leave();
    return status;
  }

 private:
  StorageBackend* storage_;
  std::function<void(const ReadCompletion&)> on_done_;
  storage_internal::NestedScratch<ReadCompletion> scratch_;
};

}  // namespace colibri::engine
