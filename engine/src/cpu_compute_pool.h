// CpuWorkerPool: a fixed set of threads that run one task per part, used by
// CpuCompute to split output rows. threads - 1 workers are started once; the
// calling thread runs part 0 itself, so threads == 1 starts none.
// Thread-safety: Run() is called by one thread at a time.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace colibri::engine {

class CpuWorkerPool {
 public:
  explicit CpuWorkerPool(uint32_t threads);
  ~CpuWorkerPool();  // joins the workers
  CpuWorkerPool(const CpuWorkerPool&) = delete;
  CpuWorkerPool& operator=(const CpuWorkerPool&) = delete;

  uint32_t threads() const { return threads_; }

  // Calls task(part) once for each part in [0, threads()), concurrently, and
  // returns when every call has returned. `task` must not throw.
  template <typename Task>
  void Run(Task& task) {
    Dispatch(&task, [](void* context, uint32_t part) { (*static_cast<Task*>(context))(part); });
  }

 private:
  using Trampoline = void (*)(void* context, uint32_t part);
  void Dispatch(void* context, Trampoline call);
  void WorkerMain(uint32_t part);

  const uint32_t threads_;
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  uint64_t generation_ = 0;  // incremented per Run; workers wait for a change
  uint32_t pending_ = 0;     // workers still running the current generation
  bool stop_ = false;
  void* context_ = nullptr;
  Trampoline call_ = nullptr;
  std::vector<std::thread> workers_;
};

}  // namespace colibri::engine
