#include "colibri/engine/event_loop.h"

#include <gtest/gtest.h>

#include <string>

namespace colibri::engine {
namespace {

TEST(TimedTaskQueueTest, OrdersByTimeThenSubmission) {
  TimedTaskQueue queue;
  std::string order;
  queue.Push(20, [&] { order += "c"; });
  queue.Push(10, [&] { order += "a"; });
  queue.Push(10, [&] { order += "b"; });
  queue.Push(5, [&] { order += "0"; });
  while (!queue.empty()) queue.Pop()();
  EXPECT_EQ(order, "0abc");
}

// A source that completes one unit of work per poll.
class CountdownSource : public EventSource {
 public:
  explicit CountdownSource(int work) : left_(work) {}
  size_t pending() const override { return static_cast<size_t>(left_); }
  Status Poll(bool wait) override {
    ++polls_;
    waited_ += wait;
    --left_;
    return Status::Ok();
  }
  int left_;
  int polls_ = 0;
  int waited_ = 0;
};

TEST(RealEventLoopTest, RunsDueTasksAndPollsSourcesUntilDone) {
  RealEventLoop loop;
  CountdownSource source(3);
  loop.AddSource(&source);
  std::string order;
  const TimeNs start = loop.Now();
  loop.RunAt(start + 1'000'000, [&] { order += "late"; });
  loop.Post([&] { order += "now,"; });
  ASSERT_TRUE(loop.RunUntil([] { return false; }).ok());  // runs until nothing is left
  EXPECT_EQ(order, "now,late");
  EXPECT_EQ(source.left_, 0);
  EXPECT_GE(loop.Now() - start, 1'000'000);
}

TEST(RealEventLoopTest, StopsAsSoonAsDone) {
  RealEventLoop loop;
  int runs = 0;
  for (int i = 0; i < 5; ++i) loop.Post([&] { ++runs; });
  ASSERT_TRUE(loop.RunUntil([&] { return runs == 2; }).ok());
  EXPECT_EQ(runs, 2);
}

class FailingSource : public EventSource {
 public:
  size_t pending() const override { return 1; }
  Status Poll(bool) override { return Status::IoError("device gone"); }
};

TEST(RealEventLoopTest, SourceErrorEndsTheRun) {
  RealEventLoop loop;
  FailingSource source;
  loop.AddSource(&source);
  Status s = loop.RunUntil([] { return false; });
  EXPECT_EQ(s.code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace colibri::engine
