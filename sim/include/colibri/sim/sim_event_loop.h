// SimEventLoop: the event loop of a modelled run. Now() is a virtual clock in
// integer nanoseconds that starts at 0 and only moves forward: RunUntil jumps
// it to the next scheduled task; WaitUntil (a modelled synchronous operation,
// e.g. a kernel the engine thread waits for) moves it without running tasks.
// Tasks run in (time, scheduling sequence) order, so equal-time tasks run in
// the order they were scheduled (as in ns-3). Modelled devices schedule their
// completions as tasks ("this completes at now + latency") and their
// EventSource::Poll only hands over completions those tasks marked: the loop
// never blocks and never polls with `wait`.
//
// One loop per run, shared by every model. Ownership: owns its queued tasks;
// sources are borrowed. Thread-safety: none; one thread drives the run.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "colibri/engine/event_loop.h"

namespace colibri::sim {

class SimEventLoop final : public engine::EventLoop {
 public:
  engine::TimeNs Now() const override { return now_; }
  void RunAt(engine::TimeNs when, engine::Task task) override { queue_.Push(when, std::move(task)); }
  void AddSource(engine::EventSource* source) override { sources_.push_back(source); }
  // Runs due tasks and hands sources' completions over until `done()`, or
  // until no task is left (then returns OK; the caller decides whether that
  // is an error). A failed source poll ends the run with its status.
  Status RunUntil(const std::function<bool()>& done) override;
  void WaitUntil(engine::TimeNs when) override;

  uint64_t tasks_run() const { return tasks_run_; }

 private:
  Status PollSources();

  engine::TimeNs now_ = 0;
  engine::TimedTaskQueue queue_;
  std::vector<engine::EventSource*> sources_;
  uint64_t tasks_run_ = 0;
};

}  // namespace colibri::sim
