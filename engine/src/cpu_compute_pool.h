// CpuWorkerPool: a fixed set of threads that run one task per part, used by
// CpuCompute to split output rows. threads - 1 workers are started once; the
// calling thread runs part 0 itself, so threads == 1 starts none.
//
// Hand-off: an idle worker spins on the pool's generation for up to
// kSpinBeforeBlockNs before it blocks on a condition variable, and Run()'s
// caller spins as long on the workers' completion before it blocks. An
// engine's FFNs and gate GEMVs come back to back (one per expert, one per
// layer), so the next Run usually starts within that window and the worker
// is already awake: on a 2-core VM a condition-variable wake-up cost 70-190 us
// per Run, more than a one-token FFN. Spinning is skipped when the pool has
// more threads than the machine has online CPUs (a spinning worker would take
// the core another part needs). The spin bound uses the steady clock only to
// decide when an idle thread stops burning its core; it never changes what is
// computed or in what order.
// Thread-safety: Run() is called by one thread at a time.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace colibri::engine {

class CpuWorkerPool {
 public:
  static constexpr int64_t kSpinBeforeBlockNs = 100'000;

  explicit CpuWorkerPool(uint32_t threads);
  ~CpuWorkerPool();  // joins the workers
  CpuWorkerPool(const CpuWorkerPool&) = delete;
  CpuWorkerPool& operator=(const CpuWorkerPool&) = delete;

  uint32_t threads() const { return threads_; }
  bool spins() const { return spin_; }

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
  const bool spin_;
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  // Written under mu_ (so a blocked waiter cannot miss a change), read without
  // it while spinning. context_ and call_ are written before generation_'s
  // release store and read after its acquire load, and not rewritten until
  // pending_ reaches 0.
  std::atomic<uint64_t> generation_{0};  // incremented per Run; workers wait for a change
  std::atomic<uint32_t> pending_{0};     // workers still running the current generation
  std::atomic<bool> stop_{false};
  void* context_ = nullptr;
  Trampoline call_ = nullptr;
  std::vector<std::thread> workers_;
};

}  // namespace colibri::engine
