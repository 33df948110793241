// CpuWorkerPool: every part runs exactly once per Run, whether the workers
// are caught spinning (back-to-back Runs) or blocked (Runs further apart than
// the spin window), and the pool joins cleanly from either state.
#include "cpu_compute_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace colibri::engine {
namespace {

struct CountParts {
  std::vector<std::atomic<uint32_t>>* calls;
  void operator()(uint32_t part) { (*calls)[part].fetch_add(1, std::memory_order_relaxed); }
};

void ExpectEachPartRan(CpuWorkerPool& pool, uint32_t runs, std::chrono::microseconds gap) {
  std::vector<std::atomic<uint32_t>> calls(pool.threads());
  CountParts task{&calls};
  for (uint32_t r = 0; r < runs; ++r) {
    pool.Run(task);
    for (uint32_t part = 0; part < pool.threads(); ++part) ASSERT_EQ(calls[part].load(), r + 1) << "part " << part;
    if (gap.count() > 0) std::this_thread::sleep_for(gap);
  }
}

TEST(CpuWorkerPoolTest, EveryPartOncePerRunBackToBack) {
  for (uint32_t threads : {1u, 2u, 3u, 4u}) {
    CpuWorkerPool pool(threads);
    ExpectEachPartRan(pool, 2000, std::chrono::microseconds(0));
  }
}

TEST(CpuWorkerPoolTest, EveryPartOncePerRunAfterWorkersBlock) {
  // Gaps of several spin windows: the workers have gone to the condition variable.
  const auto gap = std::chrono::microseconds(3 * CpuWorkerPool::kSpinBeforeBlockNs / 1000);
  CpuWorkerPool pool(2);
  ExpectEachPartRan(pool, 20, gap);
}

TEST(CpuWorkerPoolTest, PartsSeeTheCallersWritesAndTheCallerSeesTheirs) {
  CpuWorkerPool pool(3);
  std::vector<uint64_t> values(3, 0);
  for (uint64_t r = 1; r <= 500; ++r) {
    const uint64_t input = r * 7;  // written before Run, read by every part
    auto task = [&](uint32_t part) { values[part] = input + part; };
    pool.Run(task);
    for (uint32_t part = 0; part < 3; ++part) ASSERT_EQ(values[part], input + part);
  }
}

TEST(CpuWorkerPoolTest, NoSpinningWhenThreadsExceedTheCpus) {
  const unsigned cpus = std::thread::hardware_concurrency();
  if (cpus == 0) GTEST_SKIP() << "the number of online CPUs is unknown here";
  CpuWorkerPool one(1);
  EXPECT_FALSE(one.spins());
  CpuWorkerPool over(cpus + 1);
  EXPECT_FALSE(over.spins());
  ExpectEachPartRan(over, 50, std::chrono::microseconds(0));
  if (cpus >= 2) {
    CpuWorkerPool fits(2);
    EXPECT_TRUE(fits.spins());
  }
}

TEST(CpuWorkerPoolTest, DestroyedWhileWorkersSpinOrBlock) {
  for (int i = 0; i < 50; ++i) {
    CpuWorkerPool pool(2);
    auto task = [](uint32_t) {};
    pool.Run(task);
  }  // destroyed within the spin window
  CpuWorkerPool pool(2);
  auto task = [](uint32_t) {};
  pool.Run(task);
  std::this_thread::sleep_for(std::chrono::microseconds(3 * CpuWorkerPool::kSpinBeforeBlockNs / 1000));
}

}  // namespace
}  // namespace colibri::engine
