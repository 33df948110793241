#include "cpu_compute_pool.h"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace colibri::engine {
namespace {

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() or kSpinBeforeBlockNs have passed; true when done() held.
template <typename Done>
bool SpinUntil(Done done) {
  if (done()) return true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(CpuWorkerPool::kSpinBeforeBlockNs);
  while (true) {
    for (int i = 0; i < 64; ++i) {
      CpuRelax();
      if (done()) return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
  }
}

bool SpinSuits(uint32_t threads) {
  const unsigned cpus = std::thread::hardware_concurrency();  // 0: unknown
  return threads > 1 && cpus != 0 && threads <= cpus;
}

}  // namespace

CpuWorkerPool::CpuWorkerPool(uint32_t threads) : threads_(threads), spin_(SpinSuits(threads)) {
  for (uint32_t part = 1; part < threads_; ++part) workers_.emplace_back([this, part] { WorkerMain(part); });
}

CpuWorkerPool::~CpuWorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_release);
  }
  start_cv_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void CpuWorkerPool::Dispatch(void* context, Trampoline call) {
  if (workers_.empty()) {
    call(context, 0);
    return;
  }
  context_ = context;
  call_ = call;
  pending_.store(static_cast<uint32_t>(workers_.size()), std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_cv_.notify_all();
  call(context, 0);
  const auto finished = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  if (spin_ && SpinUntil(finished)) return;
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, finished);
}

void CpuWorkerPool::WorkerMain(uint32_t part) {
  uint64_t seen = 0;
  const auto started = [&] {
    return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
  };
  while (true) {
    if (!spin_ || !SpinUntil(started)) {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, started);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    call_(context_, part);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_one();
    }
  }
}

}  // namespace colibri::engine
