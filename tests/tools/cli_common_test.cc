#include "cli_common.h"

#include <gtest/gtest.h>

namespace colibri::cli {
namespace {

TEST(CliCommonTest, SizesUseBinarySuffixes) {
  EXPECT_EQ(ParseSizeBytes("0").value(), 0u);
  EXPECT_EQ(ParseSizeBytes("123").value(), 123u);
  EXPECT_EQ(ParseSizeBytes("64K").value(), 64u << 10);
  EXPECT_EQ(ParseSizeBytes("512M").value(), 512ull << 20);
  EXPECT_EQ(ParseSizeBytes("4G").value(), 4ull << 30);
  EXPECT_EQ(ParseSizeBytes("4GiB").value(), 4ull << 30);
  EXPECT_EQ(ParseSizeBytes("2T").value(), 2ull << 40);
  EXPECT_FALSE(ParseSizeBytes("").ok());
  EXPECT_FALSE(ParseSizeBytes("M").ok());
  EXPECT_FALSE(ParseSizeBytes("-1").ok());
  EXPECT_FALSE(ParseSizeBytes("1.5G").ok());
  EXPECT_NE(ParseSizeBytes("4X").status().message().find("unknown unit 'X'"), std::string::npos);
  EXPECT_NE(ParseSizeBytes("20000000000T").status().message().find("overflows"), std::string::npos);
  EXPECT_NE(ParseSizeBytes("99999999999999999999").status().message().find("overflows"), std::string::npos);
}

TEST(CliCommonTest, DurationsInNanoseconds) {
  EXPECT_EQ(ParseDurationNs("250").value(), 250u);
  EXPECT_EQ(ParseDurationNs("250ns").value(), 250u);
  EXPECT_EQ(ParseDurationNs("10us").value(), 10'000u);
  EXPECT_EQ(ParseDurationNs("5ms").value(), 5'000'000u);
  EXPECT_EQ(ParseDurationNs("2s").value(), 2'000'000'000u);
  EXPECT_FALSE(ParseDurationNs("5m").ok());
  EXPECT_FALSE(ParseDurationNs("ms").ok());
}

TEST(CliCommonTest, ValidatorsCanonicaliseFlags) {
  CLI::App app;
  std::string size, duration;
  app.add_option("--size", size)->transform(SizeValidator());
  app.add_option("--window", duration)->transform(DurationValidator());
  app.parse(std::vector<std::string>{"5ms", "--window", "1M", "--size"});  // CLI11 parses the vector reversed
  EXPECT_EQ(size, std::to_string(1ull << 20));
  EXPECT_EQ(duration, "5000000");
  EXPECT_THROW(app.parse(std::vector<std::string>{"1Q", "--size"}), CLI::ValidationError);
}

TEST(CliCommonTest, ListsAndExitCodes) {
  EXPECT_EQ(SplitList("lru,lfu", "--policies").value(), (std::vector<std::string>{"lru", "lfu"}));
  EXPECT_EQ(SplitList("lru", "--policies").value(), std::vector<std::string>{"lru"});
  EXPECT_FALSE(SplitList("lru,,lfu", "--policies").ok());
  EXPECT_FALSE(SplitList("", "--policies").ok());
  EXPECT_EQ(ExitCodeFor(Status::Ok()), kExitOk);
  EXPECT_EQ(ExitCodeFor(Status::Corruption("x")), kExitCheckFailed);
  EXPECT_EQ(ExitCodeFor(Status::Truncated("x")), kExitCheckFailed);
  EXPECT_EQ(ExitCodeFor(Status::NotFound("x")), kExitBadInput);
  EXPECT_EQ(ExitCodeFor(Status::InvalidArgument("x")), kExitBadInput);
}

}  // namespace
}  // namespace colibri::cli
