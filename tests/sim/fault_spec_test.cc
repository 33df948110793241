// The fault spec grammar (sim/fault_spec.h): good specs parse to the rules
// they say and round-trip through FormatFaultSpec in canonical form; every
// malformed form is InvalidArgument naming the byte offset and what was
// expected there.
#include "colibri/sim/fault_spec.h"

#include <gtest/gtest.h>

#include <string>

namespace colibri::sim {
namespace {

FaultSpec Parsed(const std::string& text) {
  auto spec = ParseFaultSpec(text);
  EXPECT_TRUE(spec.ok()) << text << ": " << spec.status().message();
  return spec.ok() ? spec.value() : FaultSpec{};
}

TEST(FaultSpecTest, EmptyAndNoneAreNoFaults) {
  for (const char* text : {"", "none"}) {
    const FaultSpec spec = Parsed(text);
    EXPECT_FALSE(spec.any()) << text;
    EXPECT_EQ(spec, FaultSpec{});
  }
  EXPECT_EQ(FormatFaultSpec(FaultSpec{}), "none");
}

TEST(FaultSpecTest, EveryKindParsesToItsField) {
  const FaultSpec spec = Parsed(
      "storage.eio=1/100,storage.short=2/1000,storage.spike=1/50:5ms,storage.stuck=1/10000:2s,"
      "storage.corrupt=3/7,transfer.fail=1/2,transfer.oom=1/1,compute.fail=999999999/1000000000");
  EXPECT_EQ(spec.storage_eio, (FaultRate{1, 100, 0}));
  EXPECT_EQ(spec.storage_short, (FaultRate{2, 1000, 0}));
  EXPECT_EQ(spec.storage_spike, (FaultRate{1, 50, 5'000'000}));
  EXPECT_EQ(spec.storage_stuck, (FaultRate{1, 10000, 2'000'000'000}));
  EXPECT_EQ(spec.storage_corrupt, (FaultRate{3, 7, 0}));
  EXPECT_EQ(spec.transfer_fail, (FaultRate{1, 2, 0}));
  EXPECT_EQ(spec.transfer_oom, (FaultRate{1, 1, 0}));
  EXPECT_EQ(spec.compute_fail, (FaultRate{999999999, 1000000000, 0}));
  EXPECT_TRUE(spec.any());
  EXPECT_TRUE(spec.storage_any());
  EXPECT_TRUE(spec.transfer_any());
  EXPECT_TRUE(spec.compute_any());
  for (size_t i = 0; i < kFaultKindCount; ++i) {
    const FaultKind kind = static_cast<FaultKind>(i);
    EXPECT_TRUE(spec.rate(kind).on()) << FaultKindName(kind);
  }
}

TEST(FaultSpecTest, HelpersSayWhichSitesHaveRules) {
  const FaultSpec transfer_only = Parsed("transfer.oom=1/3");
  EXPECT_TRUE(transfer_only.any());
  EXPECT_FALSE(transfer_only.storage_any());
  EXPECT_TRUE(transfer_only.transfer_any());
  EXPECT_FALSE(transfer_only.compute_any());
  EXPECT_STREQ(FaultKindName(FaultKind::kStorageCorrupt), "storage.corrupt");
  EXPECT_STREQ(FaultKindName(FaultKind::kComputeFail), "compute.fail");
  EXPECT_TRUE(FaultKindTakesDuration(FaultKind::kStorageSpike));
  EXPECT_TRUE(FaultKindTakesDuration(FaultKind::kStorageStuck));
  EXPECT_FALSE(FaultKindTakesDuration(FaultKind::kStorageEio));
}

// Canonical text: kinds in FaultKind order, durations in the largest exact unit.
TEST(FaultSpecTest, FormatIsCanonicalAndRoundTrips) {
  const struct {
    const char* text;
    const char* canonical;
  } cases[] = {
      {"storage.eio=1/4", "storage.eio=1/4"},
      {"compute.fail=1/9,storage.eio=01/4", "storage.eio=1/4,compute.fail=1/9"},
      {"storage.spike=1/2:1000us", "storage.spike=1/2:1ms"},
      {"storage.spike=1/2:1500us", "storage.spike=1/2:1500us"},
      {"storage.stuck=1/2:3600000ms", "storage.stuck=1/2:3600s"},
      {"storage.stuck=1/2:1ns", "storage.stuck=1/2:1ns"},
      {"storage.spike=1/2:60000000000ns", "storage.spike=1/2:60s"},
      {"transfer.oom=5/5,transfer.fail=1/1000000000", "transfer.fail=1/1000000000,transfer.oom=5/5"},
      {"none", "none"},
  };
  for (const auto& c : cases) {
    const FaultSpec spec = Parsed(c.text);
    EXPECT_EQ(FormatFaultSpec(spec), c.canonical) << c.text;
    EXPECT_EQ(Parsed(FormatFaultSpec(spec)), spec) << c.text;
  }
  EXPECT_EQ(FormatFaultDuration(5'000'000), "5ms");
  EXPECT_EQ(FormatFaultDuration(1'001), "1001ns");
}

// Each malformed form: the code, the byte offset and what was expected.
TEST(FaultSpecTest, MalformedSpecsNameTheByteOffset) {
  const struct {
    const char* text;
    const char* message;
  } cases[] = {
      {"disk.eio=1/2", "at byte 0: unknown fault site 'disk' (expected storage, transfer or compute)"},
      {"storage.bogus=1/2", "at byte 8: unknown storage fault 'bogus' (expected eio, short, spike, stuck or corrupt)"},
      {"transfer.eio=1/2", "at byte 9: unknown transfer fault 'eio' (expected fail or oom)"},
      {"compute.oom=1/2", "at byte 8: unknown compute fault 'oom' (expected fail)"},
      {"storage=1/2", "at byte 7: expected \".\" after the fault site 'storage'"},
      {"storage.=1/2", "at byte 8: expected a storage fault kind"},
      {"storage.eio", "at byte 11: expected \"=\" after storage.eio"},
      {"storage.eio1/2", "at byte 8: unknown storage fault 'eio1'"},
      {"storage.eio:1/2", "at byte 11: expected \"=\" after storage.eio"},
      {"storage.eio=", "at byte 12: expected the rate's numerator (a decimal integer) after \"=\""},
      {"storage.eio=-1/2", "at byte 12: expected the rate's numerator"},
      {"storage.eio=1", "at byte 13: expected \"/\" after the rate's numerator"},
      {"storage.eio=1/", "at byte 14: expected the rate's denominator (a decimal integer) after \"/\""},
      {"storage.eio=5/4", "at byte 12: rate 5/4: the numerator must be <= the denominator"},
      {"storage.eio=0/4", "at byte 12: the rate's numerator must be >= 1"},
      {"storage.eio=1/0", "at byte 14: the rate's denominator must be >= 1"},
      {"storage.eio=0/0", "at byte 12: the rate's numerator must be >= 1"},
      {"storage.eio=1/1000000001", "at byte 14: the rate's denominator 1000000001 is above 1000000000"},
      {"storage.eio=99999999999999999999999/2", "at byte 12: the rate's numerator 99999999999999999999999 is above"},
      {"storage.spike=1/2", "at byte 17: storage.spike needs a duration"},
      {"storage.stuck=1/2", "at byte 17: storage.stuck needs a duration"},
      {"storage.eio=1/2:5ms", "at byte 15: storage.eio takes no duration"},
      {"transfer.oom=1/2:1s", "at byte 16: transfer.oom takes no duration"},
      {"storage.spike=1/2:", "at byte 18: expected a duration (a decimal integer and ns, us, ms or s)"},
      {"storage.spike=1/2:5", "at byte 19: expected a duration unit (ns, us, ms or s)"},
      {"storage.spike=1/2:5min", "at byte 19: expected a duration unit (ns, us, ms or s) (got 'min')"},
      {"storage.spike=1/2:5MS", "at byte 19: expected a duration unit (ns, us, ms or s) (got 'MS')"},
      {"storage.spike=1/2:0ms", "at byte 18: the duration must be > 0"},
      {"storage.stuck=1/2:3601s", "at byte 18: the duration 3601s is above 1 hour (3600s)"},
      {"storage.stuck=1/2:99999999999999999999999ns",
       "at byte 18: the duration 99999999999999999999999ns is above 1 hour"},
      {"storage.eio=1/2,storage.eio=1/3", "at byte 16: storage.eio given twice"},
      {"storage.eio=1/2,", "at byte 16: expected a fault rule after \",\""},
      {",storage.eio=1/2", "at byte 0: expected a fault site (storage, transfer or compute)"},
      {"storage.eio=1/2,,compute.fail=1/2", "at byte 16: expected a fault site"},
      {"storage.eio=1/2 ", "at byte 15: expected \",\" or the end of the spec after a rule"},
      {" storage.eio=1/2", "at byte 0: expected a fault site"},
      {"storage.eio=1/2;compute.fail=1/2", "at byte 15: expected \",\" or the end of the spec"},
      {"none,storage.eio=1/2", "at byte 0: \"none\" must stand alone"},
      {"NONE", "at byte 0: unknown fault site 'NONE'"},
  };
  for (const auto& c : cases) {
    auto spec = ParseFaultSpec(c.text);
    ASSERT_FALSE(spec.ok()) << c.text << " parsed";
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_EQ(spec.status().message().rfind("fault spec: ", 0), 0u) << spec.status().message();
    EXPECT_NE(spec.status().message().find(c.message), std::string::npos)
        << c.text << "\n  got:      " << spec.status().message() << "\n  expected: " << c.message;
  }
}

// A long bad word is echoed bounded (BoundedEcho), not whole.
TEST(FaultSpecTest, LongBadWordsAreEchoedBounded) {
  const std::string text = std::string(10'000, 'x') + ".eio=1/2";
  auto spec = ParseFaultSpec(text);
  ASSERT_FALSE(spec.ok());
  EXPECT_LT(spec.status().message().size(), 300u) << spec.status().message();
  EXPECT_NE(spec.status().message().find("(10000 bytes)"), std::string::npos) << spec.status().message();
}

}  // namespace
}  // namespace colibri::sim
