// provenance.h and fio.h: quoting, this process's command line, the time,
// and the fio command and its figures.
#include "colibri/bench/provenance.h"

#include <gtest/gtest.h>

#include "colibri/bench/fio.h"

namespace colibri::bench {
namespace {

TEST(ProvenanceTest, ShellQuoteQuotesEveryWord) {
  EXPECT_EQ(ShellQuote("fio"), "'fio'");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
}

TEST(ProvenanceTest, CommandLineAndDate) {
  EXPECT_NE(CommandLine().find("bench_test"), std::string::npos) << CommandLine();
  const std::string now = UtcNow();
  ASSERT_EQ(now.size(), 20u) << now;
  EXPECT_EQ(now[10], 'T');
  EXPECT_EQ(now.back(), 'Z');
}

TEST(FioTest, CommandMatchesOurReads) {
  FioOptions o{.fio = "/opt/fio", .path = "/data/my file", .block_bytes = 4096, .queue_depth = 8, .seconds = 2};
  const std::string command = FioCommand(o);
  EXPECT_EQ(command.rfind("'/opt/fio' --name=colibri --filename='/data/my file' ", 0), 0u) << command;
  for (const char* part : {"--ioengine=io_uring", "--direct=1", "--rw=randread", "--bs=4096", "--iodepth=8",
                           "--runtime=2", "--time_based", "--output-format=json"}) {
    EXPECT_NE(command.find(part), std::string::npos) << part;
  }
  EXPECT_EQ(command.find("--fixedbufs"), std::string::npos);
  o.fixed_buffers = true;
  EXPECT_NE(FioCommand(o).find(" --fixedbufs"), std::string::npos);
}

TEST(FioTest, AvailabilityAndFailures) {
  EXPECT_FALSE(FioAvailable("none"));
  EXPECT_FALSE(FioAvailable("/nonexistent/fio"));
  EXPECT_TRUE(FioAvailable("sh"));
  const auto failed = RunFio("false");
  EXPECT_EQ(failed.status().code(), StatusCode::kIoError);
  EXPECT_NE(failed.status().message().find("false"), std::string::npos);
  EXPECT_EQ(RunFio("echo '{\"jobs\": []}'").status().code(), StatusCode::kIoError);  // no job figures
  const auto read = RunFio("echo 'a note' && echo '{\"jobs\": [{\"read\": {\"bw_bytes\": 5}}]}'");
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read.value()["bw_bytes"].get<int>(), 5);
}

TEST(FioTest, LatencyPercentilesAreRenamedLikeOurs) {
  const Json read = Json::parse(R"({"clat_ns": {"max": 900, "percentile": {"50.000000": 100, "99.000000": 500}}})");
  const Json lat = FioLatencyJson(read);
  EXPECT_EQ(lat["p50"].get<int>(), 100);
  EXPECT_TRUE(lat["p90"].is_null());
  EXPECT_EQ(lat["p99"].get<int>(), 500);
  EXPECT_TRUE(lat["p999"].is_null());
  EXPECT_EQ(lat["max"].get<int>(), 900);
  EXPECT_EQ(lat.begin().key(), "p50");
}

}  // namespace
}  // namespace colibri::bench
