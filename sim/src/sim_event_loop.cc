#include "colibri/sim/sim_event_loop.h"

#include <algorithm>

namespace colibri::sim {

Status SimEventLoop::PollSources() {
  for (engine::EventSource* source : sources_) {
    if (source->pending() > 0) COLIBRI_RETURN_IF_ERROR(source->Poll(/*wait=*/false));
  }
  return Status::Ok();
}

Status SimEventLoop::RunUntil(const std::function<bool()>& done) {
  while (true) {
    COLIBRI_RETURN_IF_ERROR(PollSources());
    if (done()) return Status::Ok();
    if (queue_.empty()) return Status::Ok();
    now_ = std::max(now_, queue_.next_time());
    queue_.Pop()();
    ++tasks_run_;
  }
}

void SimEventLoop::WaitUntil(engine::TimeNs when) { now_ = std::max(now_, when); }

}  // namespace colibri::sim
