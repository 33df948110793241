#include <time.h>

#include "colibri/engine/event_loop.h"

namespace colibri::engine {

void TimedTaskQueue::Push(TimeNs when, Task task) { heap_.push(Entry{when, next_sequence_++, std::move(task)}); }

Task TimedTaskQueue::Pop() {
  // priority_queue::top() is const; the task is moved out through a copy of the entry.
  Task task = std::move(const_cast<Entry&>(heap_.top()).task);
  heap_.pop();
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
    const TimeNs wait_ns = queue_.next_time() - Now();
    if (wait_ns > 0) {
      struct timespec ts {static_cast<time_t>(wait_ns / 1'000'000'000), static_cast<long>(wait_ns % 1'000'000'000)};
      nanosleep(&ts, nullptr);
    }
  }
  return Status::Ok();
}

}  // namespace colibri::engine
