#include "cpu_compute_pool.h"

namespace colibri::engine {

CpuWorkerPool::CpuWorkerPool(uint32_t threads) : threads_(threads) {
  for (uint32_t part = 1; part < threads_; ++part) workers_.emplace_back([this, part] { WorkerMain(part); });
}

CpuWorkerPool::~CpuWorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void CpuWorkerPool::Dispatch(void* context, Trampoline call) {
  if (workers_.empty()) {
    call(context, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    context_ = context;
    call_ = call;
    pending_ = static_cast<uint32_t>(workers_.size());
    ++generation_;
  }
  start_cv_.notify_all();
  call(context, 0);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return pending_ == 0; });
}

void CpuWorkerPool::WorkerMain(uint32_t part) {
  uint64_t seen = 0;
  while (true) {
    void* context;
    Trampoline call;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      context = context_;
      call = call_;
    }
    call(context, part);
    std::lock_guard<std::mutex> lock(mu_);
    if (--pending_ == 0) done_cv_.notify_one();
  }
}

}  // namespace colibri::engine
