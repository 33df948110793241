#include "colibri/sim/sim_event_loop.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace colibri::sim {
namespace {

using engine::TimeNs;

TEST(SimEventLoopTest, JumpsToEachTaskInTimeOrder) {
  SimEventLoop loop;
  EXPECT_EQ(loop.Now(), 0);
  std::vector<std::pair<std::string, TimeNs>> seen;
  auto record = [&](std::string name) { return [&, name] { seen.emplace_back(name, loop.Now()); }; };
  loop.RunAt(1'000'000'000, record("late"));
  loop.RunAt(50, record("early"));
  loop.RunAt(700, record("middle"));
  ASSERT_TRUE(loop.RunUntil([] { return false; }).ok());  // runs until no task is left
  const std::vector<std::pair<std::string, TimeNs>> expected = {
      {"early", 50}, {"middle", 700}, {"late", 1'000'000'000}};
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(loop.Now(), 1'000'000'000);
  EXPECT_EQ(loop.tasks_run(), 3u);
}

TEST(SimEventLoopTest, EqualTimesRunInSchedulingOrder) {
  SimEventLoop loop;
  std::string order;
  loop.RunAt(10, [&] { order += "a"; });
  loop.RunAt(5, [&] { order += "0"; });
  loop.RunAt(10, [&] { order += "b"; });
  loop.RunAt(10, [&] {
    order += "c";
    loop.Post([&] { order += "e"; });  // scheduled at Now() = 10, after d
  });
  loop.RunAt(10, [&] { order += "d"; });
  ASSERT_TRUE(loop.RunUntil([] { return false; }).ok());
  EXPECT_EQ(order, "0abcde");
  EXPECT_EQ(loop.Now(), 10);
}

TEST(SimEventLoopTest, StopsWhenDone) {
  SimEventLoop loop;
  int runs = 0;
  for (TimeNs t = 1; t <= 5; ++t) loop.RunAt(t * 100, [&] { ++runs; });
  ASSERT_TRUE(loop.RunUntil([&] { return runs == 2; }).ok());
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(loop.Now(), 200);
}

// WaitUntil moves the clock without running tasks; a task whose time has
// passed then runs at once, and the clock never goes back.
TEST(SimEventLoopTest, WaitUntilMovesTheClockOnly) {
  SimEventLoop loop;
  TimeNs ran_at = -1;
  loop.RunAt(100, [&] { ran_at = loop.Now(); });
  loop.WaitUntil(500);
  EXPECT_EQ(loop.Now(), 500);
  EXPECT_EQ(ran_at, -1);
  loop.WaitUntil(300);  // in the past: no effect
  EXPECT_EQ(loop.Now(), 500);
  ASSERT_TRUE(loop.RunUntil([] { return false; }).ok());
  EXPECT_EQ(ran_at, 500);
  EXPECT_EQ(loop.Now(), 500);
}

// A source with one completion that a task marks ready.
class OneShotSource : public engine::EventSource {
 public:
  size_t pending() const override { return pending_; }
  Status Poll(bool wait) override {
    EXPECT_FALSE(wait);  // the simulated loop never blocks
    if (ready_) {
      pending_ = 0;
      ready_ = false;
      ++delivered_;
    }
    return Status::Ok();
  }
  size_t pending_ = 1;
  bool ready_ = false;
  int delivered_ = 0;
};

TEST(SimEventLoopTest, HandsOverSourceCompletionsMarkedByTasks) {
  SimEventLoop loop;
  OneShotSource source;
  loop.AddSource(&source);
  loop.RunAt(42, [&] { source.ready_ = true; });
  ASSERT_TRUE(loop.RunUntil([&] { return source.delivered_ == 1; }).ok());
  EXPECT_EQ(source.delivered_, 1);
  EXPECT_EQ(loop.Now(), 42);
}

class FailingSource : public engine::EventSource {
 public:
  size_t pending() const override { return 1; }
  Status Poll(bool) override { return Status::IoError("device gone"); }
};

TEST(SimEventLoopTest, AFailedSourcePollEndsTheRun) {
  SimEventLoop loop;
  FailingSource source;
  loop.AddSource(&source);
  const Status status = loop.RunUntil([] { return false; });
  EXPECT_EQ(status.code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace colibri::sim
