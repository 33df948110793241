// EventLoop: the engine's one clock and scheduler. All time is integer ns.
//
// Tasks scheduled with RunAt run in (time, submission sequence) order, so
// tasks at equal times run in the order they were scheduled (as in ns-3).
// Event sources (a storage backend's completion queue, CUDA events) are
// polled by the loop while it waits. RealEventLoop runs on the monotonic
// clock; a simulated loop (sim/) jumps Now() to the next event instead.
// Thread-safety: an event loop and its tasks run on one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "colibri/engine/clock.h"
#include "colibri/status.h"

namespace colibri::engine {

using Task = std::function<void()>;

// Something that completes work asynchronously and is polled by the loop.
class EventSource {
 public:
  virtual ~EventSource() = default;
  // Work submitted and not yet completed.
  virtual size_t pending() const = 0;
  // Delivers completions (by running callbacks or scheduling tasks). With
  // `wait`, blocks until at least one completes (only called when pending() > 0).
  virtual Status Poll(bool wait) = 0;
};

class EventLoop : public Clock {
 public:
  // Schedules `task` at `when` (a time in the past runs as soon as possible).
  virtual void RunAt(TimeNs when, Task task) = 0;
  void Post(Task task) { RunAt(Now(), std::move(task)); }
  // Registers a source polled by RunUntil; not owned; must outlive the loop's use.
  virtual void AddSource(EventSource* source) = 0;
  // Runs tasks and polls sources until `done()` is true, or no task is
  // scheduled and no source has pending work (then returns OK even if
  // `done()` is false: the caller decides whether that is an error). A failed
  // Poll ends the run with its status.
  virtual Status RunUntil(const std::function<bool()>& done) = 0;
  // Blocks the calling thread until Now() >= `when`, without running tasks or
  // polling sources (they run at the next RunUntil, in time order). For
  // synchronous work a modelled device performs on the caller's thread (a
  // modelled kernel, a waited-for copy): the real loop sleeps until then, a
  // simulated loop moves its clock there.
  virtual void WaitUntil(TimeNs when) = 0;
};

// The (time, sequence) ordered queue both event loops use. The heap orders
// small plain entries; the tasks stay in slots that are reused, so a warm
// queue does not allocate (beyond what a task's own captures need).
class TimedTaskQueue {
 public:
  void Push(TimeNs when, Task task);
  bool empty() const { return heap_.empty(); }
  TimeNs next_time() const { return heap_.top().when; }
  // Removes and returns the earliest task.
  Task Pop();

 private:
  struct Entry {
    TimeNs when;
    uint64_t sequence;
    uint32_t slot;  // in tasks_
    bool operator>(const Entry& other) const {
      return when != other.when ? when > other.when : sequence > other.sequence;
    }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap_;
  std::vector<Task> tasks_;
  std::vector<uint32_t> free_slots_;
  uint64_t next_sequence_ = 0;
};

// Runs on CLOCK_MONOTONIC. While waiting for a future task with no source
// pending it sleeps; with sources pending it polls them (blocking only when
// no task is due).
class RealEventLoop final : public EventLoop {
 public:
  TimeNs Now() const override { return clock_.Now(); }
  void RunAt(TimeNs when, Task task) override { queue_.Push(when, std::move(task)); }
  void AddSource(EventSource* source) override { sources_.push_back(source); }
  Status RunUntil(const std::function<bool()>& done) override;
  void WaitUntil(TimeNs when) override;

 private:
  size_t PendingInSources() const;
  Status PollSources(bool wait);

  MonotonicClock clock_;
  TimedTaskQueue queue_;
  std::vector<EventSource*> sources_;
};

}  // namespace colibri::engine
