#include <time.h>

#include <cerrno>

#include "colibri/engine/event_loop.h"

namespace colibri::engine {

void TimedTaskQueue::Push(TimeNs when, Task task) {
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
    tasks_[slot] = std::move(task);
  } else {
    slot = static_cast<uint32_t>(tasks_.size());
    tasks_.push_back(std::move(task));
  }
  heap_.push(Entry{when, next_sequence_++, slot});
}

Task TimedTaskQueue::Pop() {
  const uint32_t slot = heap_.top().slot;
  heap_.pop();
  Task task = std::move(tasks_[slot]);
  tasks_[slot] = nullptr;
  free_slots_.push_back(slot);
  return task;
}

size_t RealEventLoop::PendingInSources() const {
  size_t pending = 0;
  for (const EventSource* source : sources_) pending += source->pending();
  return pending;
}

Status RealEventLoop::PollSources(bool wait) {
  for (EventSource* source : sources_) {
    if (source->pending() == 0) continue;
    COLIBRI_RETURN_IF_ERROR(source->Poll(wait));
    wait = false;  // one blocking wait per round is enough
  }
  return Status::Ok();
}

Status RealEventLoop::RunUntil(const std::function<bool()>& done) {
  while (!done()) {
    if (!queue_.empty() && queue_.next_time() <= Now()) {
      queue_.Pop()();
      continue;
    }
    const size_t pending = PendingInSources();
    if (pending > 0) {
      // Block in the sources only when no task is scheduled; otherwise poll and come back.
      COLIBRI_RETURN_IF_ERROR(PollSources(queue_.empty()));
      continue;
    }
    if (queue_.empty()) return Status::Ok();
    WaitUntil(queue_.next_time());
  }
  return Status::Ok();
}

void RealEventLoop::WaitUntil(TimeNs when) {
  // MonotonicClock reads CLOCK_MONOTONIC, so an absolute sleep on it ends at `when` (restarted after signals).
  const struct timespec until {static_cast<time_t>(when / 1'000'000'000), static_cast<long>(when % 1'000'000'000)};
  while (Now() < when && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr) == EINTR) {
  }
}

}  // namespace colibri::engine
