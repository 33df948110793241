// RunReplay with injected faults (ReplayConfig::faults): transient read
// faults are retried by the engine and change timing only (the cache makes
// the same decisions and reads the same bytes), every fault is in the result
// (and so in the run store and the event digest), a seed gives the same
// faults again, and a fault the engine cannot survive fails the run loudly.
#include <gtest/gtest.h>

#include "colibri/replay/replay_run.h"
#include "replay_test_util.h"

namespace colibri::replay {
namespace {

class ReplayFaultsTest : public testing::ReplayTest {
 protected:
  ReplayFaultsTest() : ReplayTest("replay-faults") {}

  ReplayConfig FaultConfig(const std::string& spec) const {
    ReplayConfig c = Config(Write("faults.ctrace", testing::TestTrace{1, 30, 0, 5, std::nullopt, false}), "a100-pm9a3-gen4");
    c.l2_bytes = 6u * 196608;
    c.l1_bytes = 2u * 196608;
    auto parsed = sim::ParseFaultSpec(spec);
    EXPECT_TRUE(parsed.ok()) << parsed.status().message();
    if (parsed.ok()) c.faults = parsed.value();
    return c;
  }
};

uint64_t CountKind(const std::vector<sim::InjectedFault>& faults, const std::string& kind) {
  uint64_t n = 0;
  for (const sim::InjectedFault& f : faults) n += f.kind == kind;
  return n;
}

TEST_F(ReplayFaultsTest, TransientReadFaultsAreRetriedAndChangeTimingOnly) {
  auto clean = RunReplay(FaultConfig("none"));
  ASSERT_TRUE(clean.ok()) << clean.status().message();
  EXPECT_TRUE(clean.value().faults.empty());
  EXPECT_EQ(clean.value().read_retries, 0u);

  const ReplayConfig c = FaultConfig("storage.eio=1/8,storage.spike=1/10:2ms,storage.stuck=1/40:10ms");
  auto a = RunReplay(c), b = RunReplay(c);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok());
  const ReplayResult& r = a.value();
  const uint64_t eio = CountKind(r.faults, "storage.eio"), stuck = CountKind(r.faults, "storage.stuck");
  EXPECT_GT(eio, 0u);
  EXPECT_GT(stuck, 0u);
  EXPECT_GT(CountKind(r.faults, "storage.spike"), 0u);
  EXPECT_EQ(r.read_retries, eio + stuck);  // every failed attempt is read again (none ran out of retries)
  // The same decisions and bytes as the fault-free run; only time moved.
  EXPECT_EQ(r.served, clean.value().served);
  EXPECT_EQ(r.l1.hits, clean.value().l1.hits);
  EXPECT_EQ(r.l2.hits, clean.value().l2.hits);
  EXPECT_EQ(r.read_bytes, clean.value().read_bytes);
  EXPECT_EQ(r.reads, clean.value().reads);
  EXPECT_GT(r.elapsed_ns, clean.value().elapsed_ns);
  EXPECT_NE(r.event_digest, clean.value().event_digest);
  // A seed is the whole story: the same faults at the same times, the same digest.
  EXPECT_EQ(r.faults, b.value().faults);
  EXPECT_EQ(r.event_digest, b.value().event_digest);
  ReplayConfig other = c;
  other.seed = c.seed + 1;
  auto o = RunReplay(other);
  ASSERT_TRUE(o.ok());
  EXPECT_NE(o.value().faults, r.faults);
}

TEST_F(ReplayFaultsTest, FaultsTheEngineCannotSurviveFailTheRunLoudly) {
  auto oom = RunReplay(FaultConfig("transfer.oom=1/1"));
  ASSERT_FALSE(oom.ok());
  EXPECT_NE(oom.status().message().find("device out of memory (injected transfer.oom)"), std::string::npos)
      << oom.status().message();
  auto kernel = RunReplay(FaultConfig("compute.fail=1/1"));
  ASSERT_FALSE(kernel.ok());
  EXPECT_NE(kernel.status().message().find("computing expert"), std::string::npos) << kernel.status().message();
  EXPECT_NE(kernel.status().message().find("kernel failed (injected compute.fail)"), std::string::npos);
  auto always = RunReplay(FaultConfig("storage.eio=1/1"));  // every attempt fails: the retries run out
  ASSERT_FALSE(always.ok());
  EXPECT_NE(always.status().message().find("(after 2 retries)"), std::string::npos) << always.status().message();
}

}  // namespace
}  // namespace colibri::replay
