// child_process.h: a measurement in a forked child, its result and resources
// sent back, its errors and its death reported.
#include "colibri/bench/child_process.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <vector>

namespace colibri::bench {
namespace {

TEST(ChildProcessTest, TheChildsResultAndResourcesComeBack) {
  int ticks = 0;
  auto outcome = RunInChild(
      []() -> Result<Json> {
        std::vector<char> touched(32 << 20, 1);  // 32 MiB the parent never touches
        ::usleep(300'000);
        return Json{{"pid", ::getpid()}, {"sum", touched[12345] + touched.back()}};
      },
      [&] { ++ticks; });
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  EXPECT_NE(outcome.value().value["pid"].get<int>(), ::getpid());
  EXPECT_EQ(outcome.value().value["sum"].get<int>(), 2);
  EXPECT_GE(outcome.value().ru_maxrss_bytes, uint64_t{32} << 20);
  EXPECT_GE(ticks, 1);
}

TEST(ChildProcessTest, ErrorsKeepTheirCodeAndDeathsAreInternal) {
  auto failed = RunInChild([]() -> Result<Json> { return Status::NotFound("no such trace"); });
  EXPECT_EQ(failed.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(failed.status().message(), "no such trace");
  auto died = RunInChild([]() -> Result<Json> { ::_exit(5); });
  EXPECT_EQ(died.status().code(), StatusCode::kInternal);
  EXPECT_NE(died.status().message().find("status 5"), std::string::npos) << died.status().message();
}

}  // namespace
}  // namespace colibri::bench
