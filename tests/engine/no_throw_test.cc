// NoThrow (colibri/no_throw.h): an exception in a body run on a thread of
// ours becomes an error value instead of std::terminate.
#include "colibri/no_throw.h"

#include <gtest/gtest.h>

#include <new>
#include <stdexcept>
#include <thread>

namespace colibri {
namespace {

TEST(NoThrowTest, ExceptionsBecomeErrorsAndValuesPassThrough) {
  const Status out_of_memory = NoThrow([]() -> Status { throw std::bad_alloc(); });
  EXPECT_EQ(out_of_memory.code(), StatusCode::kInternal);
  EXPECT_NE(out_of_memory.message().find("out of memory"), std::string::npos);
  const Result<int> failed = NoThrow([]() -> Result<int> { throw std::runtime_error("boom"); });
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("boom"), std::string::npos);
  const Result<int> unknown = NoThrow([]() -> Result<int> { throw 7; });
  EXPECT_EQ(unknown.status().code(), StatusCode::kInternal);
  const Result<int> value = NoThrow([]() -> Result<int> { return 42; });
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(value.value(), 42);
  EXPECT_EQ(NoThrow([] { return Status::NotFound("x"); }).code(), StatusCode::kNotFound);
}

TEST(NoThrowTest, AThrowingWorkerThreadReportsInsteadOfTerminating) {
  Status status;
  std::thread worker([&] { status = NoThrow([]() -> Status { throw std::length_error("vector too long"); }); });
  worker.join();
  EXPECT_EQ(status.code(), StatusCode::kInternal);
  EXPECT_NE(status.message().find("vector too long"), std::string::npos);
}

}  // namespace
}  // namespace colibri
