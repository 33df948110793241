// The measured read grid (sim/read_grid.h): grid points from samples, the
// grid model SimStorage draws from, recovering a known modelled drive from
// its own closed-loop "measurements", the fitted channel model, and the
// grid's profile-file round trip and errors.
#include "colibri/sim/read_grid.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "colibri/sim/profile_json.h"
#include "colibri/sim/profiles.h"
#include "colibri/sim/random.h"

namespace colibri::sim {
namespace {

using Json = nlohmann::json;

// A known drive on the channel model: 4 channels of 500 MB/s behind a 1.6
// GB/s link, 20 us per op, 30 us (p99 60 us) added latency.
NvmeProfile KnownDrive() {
  NvmeProfile p;
  p.id = "known";
  p.name = "known drive";
  p.channels = 4;
  p.queue_depth = 256;
  p.per_op_ns = 20'000;
  p.channel_read_bytes_per_s = 500'000'000;
  p.read_bytes_per_s = 1'600'000'000;
  p.read_latency = LatencyDistribution{30'000, 60'000};
  return p;
}

double RelativeError(double predicted, double reference) { return (predicted - reference) / reference; }

TimeNs Quantile(std::vector<TimeNs> samples, double q) {
  std::sort(samples.begin(), samples.end());
  return SampleQuantileNs(samples, q);
}

// "Measures" `drive` over sizes x depths as calibrate measures a real one.
ReadGrid MeasureGrid(const NvmeProfile& drive, const std::vector<uint64_t>& sizes, const std::vector<uint32_t>& depths,
                     uint64_t reads, uint64_t seed) {
  ReadGrid grid;
  grid.quantiles.assign(std::begin(kReadGridQuantiles), std::end(kReadGridQuantiles));
  grid.figure = Figure{"read_grid", Basis::kMeasured, "the test's closed loop", ""};
  for (uint64_t size : sizes) {
    for (uint32_t depth : depths) {
      auto measured = SimulateClosedLoopReads(drive, size, depth, reads, seed++);
      EXPECT_TRUE(measured.ok()) << measured.status().message();
      auto point = MakeReadGridPoint(size, depth, measured.value().latencies_ns, measured.value().elapsed_ns);
      EXPECT_TRUE(point.ok()) << point.status().message();
      grid.points.push_back(point.value());
    }
  }
  return grid;
}

TEST(ReadGridTest, PointsFromSamples) {
  std::vector<TimeNs> latencies;
  for (TimeNs i = 1; i <= 101; ++i) latencies.push_back(i * 1000);  // 1..101 us, shuffled below
  std::reverse(latencies.begin(), latencies.end());
  auto point = MakeReadGridPoint(8192, 4, latencies, 1'000'000'000);
  ASSERT_TRUE(point.ok()) << point.status().message();
  EXPECT_EQ(point.value().reads, 101u);
  EXPECT_EQ(point.value().bytes_per_s, 101u * 8192);
  ASSERT_EQ(point.value().latency_ns.size(), std::size(kReadGridQuantiles));
  EXPECT_EQ(point.value().latency_ns.front(), 1000);   // the minimum
  EXPECT_EQ(point.value().latency_ns[5], 51'000);      // the median
  EXPECT_EQ(point.value().latency_ns.back(), 101'000);  // the maximum
  EXPECT_FALSE(MakeReadGridPoint(8192, 4, {}, 1000).ok());
  EXPECT_FALSE(MakeReadGridPoint(8192, 0, {5}, 1000).ok());
  EXPECT_FALSE(MakeReadGridPoint(8192, 1, {0}, 1000).ok());
}

TEST(ReadGridTest, ModelInterpolatesAndExtrapolates) {
  ReadGrid grid;
  grid.quantiles = {0.0, 0.5, 1.0};
  grid.points = {{4096, 1, 100, 1, {10'000, 20'000, 40'000}},
                 {4096, 4, 100, 1, {40'000, 80'000, 160'000}},
                 {65536, 1, 100, 1, {40'000, 80'000, 160'000}}};
  auto made = ReadGridModel::Make(grid, "test");
  ASSERT_TRUE(made.ok()) << made.status().message();
  const ReadGridModel& m = made.value();
  EXPECT_EQ(m.LatencyNs(4096, 1, 0.5), 20'000);
  EXPECT_EQ(m.LatencyNs(4096, 1, 0.25), 15'000);  // linear between knots
  EXPECT_EQ(m.LatencyNs(4096, 2, 0.5), 40'000);   // linear between depths 1 and 4
  EXPECT_EQ(m.LatencyNs(4096, 8, 0.5), 160'000);  // past depth 4: saturated, x 8 / 4
  EXPECT_EQ(m.LatencyNs(16384, 1, 0.5), 32'000);  // linear between sizes: 20 + 60 x 12/60 us
  EXPECT_EQ(m.LatencyNs(131072, 1, 0.5), 160'000);  // past the largest size: x size ratio
  EXPECT_EQ(m.LatencyNs(4096, 1, 0.0), 10'000);
  // Monotone in u.
  TimeNs last = 0;
  for (double u = 0; u < 1; u += 0.01) {
    const TimeNs l = m.LatencyNs(24576, 3, u);
    EXPECT_GE(l, last);
    last = l;
  }
}

TEST(ReadGridTest, ModelRejectsBadGrids) {
  ReadGrid grid;
  grid.quantiles = {0.0, 1.0};
  EXPECT_FALSE(ReadGridModel::Make(grid, "t").ok()) << "no points";
  grid.points = {{4096, 2, 1, 1, {1, 2}}};
  EXPECT_FALSE(ReadGridModel::Make(grid, "t").ok()) << "no depth 1";
  grid.points = {{4096, 1, 1, 1, {2, 1}}};
  EXPECT_FALSE(ReadGridModel::Make(grid, "t").ok()) << "decreasing";
  grid.points = {{4096, 1, 1, 1, {1, 2, 3}}};
  EXPECT_FALSE(ReadGridModel::Make(grid, "t").ok()) << "one latency per quantile";
  grid.points = {{4096, 1, 1, 1, {1, 2}}};
  grid.quantiles = {0.0, 0.9};
  EXPECT_FALSE(ReadGridModel::Make(grid, "t").ok()) << "quantiles end at 1";
}

// A known modelled drive, "measured" on a grid, is recovered by the grid
// model within the noise of two measurements of the drive itself, at every
// grid point; between grid points it stays close.
TEST(ReadGridTest, RecoversAKnownDriveWithinItsNoise) {
  const NvmeProfile drive = KnownDrive();
  const std::vector<uint64_t> sizes = {4096, 65536, 1 << 20};
  const std::vector<uint32_t> depths = {1, 2, 4, 8, 16};
  constexpr uint64_t kReads = 3000;
  NvmeProfile fitted = drive;
  fitted.read_grid = MeasureGrid(drive, sizes, depths, kReads, 1000);
  for (uint64_t size : sizes) {
    for (uint32_t depth : depths) {
      auto again = SimulateClosedLoopReads(drive, size, depth, kReads, 77);     // the drive, measured again
      auto modelled = SimulateClosedLoopReads(fitted, size, depth, kReads, 78);  // the grid model
      ASSERT_TRUE(again.ok() && modelled.ok());
      const auto& measured_point = *std::find_if(fitted.read_grid.points.begin(), fitted.read_grid.points.end(),
                                                 [&](const ReadGridPoint& p) {
                                                   return p.read_bytes == size && p.queue_depth == depth;
                                                 });
      const double throughput_noise = std::abs(RelativeError(static_cast<double>(again.value().bytes_per_s),
                                                             static_cast<double>(measured_point.bytes_per_s)));
      const double throughput_error = std::abs(RelativeError(static_cast<double>(modelled.value().bytes_per_s),
                                                             static_cast<double>(measured_point.bytes_per_s)));
      EXPECT_LE(throughput_error, std::max(0.03, 2 * throughput_noise)) << size << " bytes at depth " << depth;
      for (double q : {0.5, 0.99}) {
        const double reference = static_cast<double>(Quantile(again.value().latencies_ns, q));
        const double predicted = static_cast<double>(Quantile(modelled.value().latencies_ns, q));
        EXPECT_LE(std::abs(RelativeError(predicted, reference)), 0.08)
            << "p" << q * 100 << " at " << size << " bytes, depth " << depth;
      }
    }
  }
  // Off the grid: between sizes and depths, the interpolation stays near the drive.
  for (auto [size, depth] : {std::pair<uint64_t, uint32_t>{262144, 3}, {16384, 6}, {2 << 20, 4}}) {
    auto truth = SimulateClosedLoopReads(drive, size, depth, kReads, 5);
    auto modelled = SimulateClosedLoopReads(fitted, size, depth, kReads, 6);
    ASSERT_TRUE(truth.ok() && modelled.ok());
    EXPECT_LE(std::abs(RelativeError(static_cast<double>(modelled.value().bytes_per_s),
                                     static_cast<double>(truth.value().bytes_per_s))),
              0.20)
        << size << " bytes at depth " << depth;
  }
}

TEST(ReadGridTest, ChannelFitRecoversTheLink) {
  const NvmeProfile drive = KnownDrive();
  const ReadGrid grid = MeasureGrid(drive, {4096, 65536, 1 << 20, 4 << 20}, {1, 4, 16, 32}, 2000, 9);
  auto fit = FitChannelModel(grid);
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_NEAR(static_cast<double>(fit.value().read_bytes_per_s), 1.6e9, 0.05 * 1.6e9);
  EXPECT_NEAR(static_cast<double>(fit.value().channel_read_bytes_per_s), 5e8, 0.10 * 5e8);
  // The depth-1 intercept: per op + the added latency's median.
  EXPECT_NEAR(static_cast<double>(fit.value().per_op_ns + fit.value().read_latency.p50_ns), 50'000, 5'000);
  EXPECT_GE(fit.value().channels, 1u);
}

TEST(ReadGridTest, ProfileRoundTripAndErrors) {
  NvmeProfile p = KnownDrive();
  for (const char* field : {"channels", "queue_depth", "per_op_ns", "channel_read_bytes_per_s", "read_bytes_per_s",
                            "read_latency_p50_ns", "read_latency_p99_ns"}) {
    p.figures.push_back(Figure{field, Basis::kDerived, "fitted to the grid", "the channel fit"});
  }
  p.read_grid = MeasureGrid(p, {4096, 65536}, {1, 4}, 200, 3);
  auto text = NvmeProfileJson(p);
  ASSERT_TRUE(text.ok()) << text.status().message();
  auto back = ParseNvmeProfile(text.value(), "measured.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back.value().read_grid.quantiles, p.read_grid.quantiles);
  ASSERT_EQ(back.value().read_grid.points.size(), p.read_grid.points.size());
  for (size_t i = 0; i < p.read_grid.points.size(); ++i) {
    EXPECT_EQ(back.value().read_grid.points[i].latency_ns, p.read_grid.points[i].latency_ns);
    EXPECT_EQ(back.value().read_grid.points[i].bytes_per_s, p.read_grid.points[i].bytes_per_s);
  }
  EXPECT_EQ(back.value().read_grid.points[0].submit_ns, 0) << "not measured: absent from the file";
  p.read_grid.points[0].submit_ns = 1'234;
  auto with_submit = ParseNvmeProfile(NvmeProfileJson(p).value(), "measured.json");
  ASSERT_TRUE(with_submit.ok()) << with_submit.status().message();
  EXPECT_EQ(with_submit.value().read_grid.points[0].submit_ns, 1'234);
  p.read_grid.points[0].submit_ns = 0;
  EXPECT_EQ(back.value().read_grid.figure.source, "the test's closed loop");
  EXPECT_EQ(back.value().read_grid.burst, ReadGridBurst::kIndependent);
  p.read_grid.burst = ReadGridBurst::kShared;
  auto shared = ParseNvmeProfile(NvmeProfileJson(p).value(), "measured.json");
  ASSERT_TRUE(shared.ok()) << shared.status().message();
  EXPECT_EQ(shared.value().read_grid.burst, ReadGridBurst::kShared);

  const Json good = Json::parse(text.value());
  auto refused = [&](Json doc, const std::string& part) {
    auto parsed = ParseNvmeProfile(doc.dump(), "bad.json");
    ASSERT_FALSE(parsed.ok()) << part;
    EXPECT_NE(parsed.status().message().find("bad.json: "), std::string::npos) << parsed.status().message();
    EXPECT_NE(parsed.status().message().find(part), std::string::npos) << parsed.status().message();
  };
  Json doc = good;
  doc["read_grid"]["points"][1]["latency_ns"][3] = 1;
  refused(doc, "read_grid.points[1].latency_ns[3]");  // below the knot before it
  doc = good;
  doc["read_grid"]["quantiles"][0] = 0.1;
  refused(doc, "read_grid.quantiles");
  doc = good;
  doc["read_grid"]["points"][0]["read_bytes"] = 5000;
  refused(doc, "read_grid.points[0].read_bytes");
  doc = good;
  doc["read_grid"]["points"].erase(0);  // 4096 bytes at depth 1
  refused(doc, "queue_depth 1");
  doc = good;
  doc["read_grid"]["points"][0]["submit_ns"] = -5;
  refused(doc, "read_grid.points[0].submit_ns");
  doc = good;
  doc["read_grid"]["surprise"] = 1;
  refused(doc, "unknown field read_grid.surprise");
  doc = good;
  doc["read_grid"].erase("source");
  refused(doc, "read_grid.source");
  doc = good;
  doc["read_grid"]["burst"] = "sometimes";
  refused(doc, "read_grid.burst");
  doc = good;
  doc["read_grid"].erase("burst");
  auto absent = ParseNvmeProfile(doc.dump(), "old.json");
  ASSERT_TRUE(absent.ok()) << absent.status().message();
  EXPECT_EQ(absent.value().read_grid.burst, ReadGridBurst::kIndependent) << "documented: absent is independent";
}

// A burst issued at one instant: with "shared", every read of it draws the
// drive's one uniform, so the burst's span is the grid's latency at its size
// and depth for that uniform, burst after burst in the drive's seeded stream;
// "independent" draws one per read, and the span is the slowest of them.
TEST(ReadGridTest, ASharedBurstDrawsOneUniform) {
  NvmeProfile p = KnownDrive();
  p.read_grid = MeasureGrid(p, {65536}, {1, 2, 4, 8}, 400, 5);
  auto model = ReadGridModel::Make(p.read_grid, "test");
  ASSERT_TRUE(model.ok()) << model.status().message();
  constexpr uint64_t kSeed = 11;
  p.read_grid.burst = ReadGridBurst::kShared;
  auto shared = SimulateReadBursts(p, 65536, 4, 50, kSeed);
  ASSERT_TRUE(shared.ok()) << shared.status().message();
  Rng stream(DeriveSeed(kSeed, "sim_storage"));
  for (size_t b = 0; b < shared.value().size(); ++b) {
    const double u = stream.NextDouble();
    TimeNs slowest = 0;
    for (uint32_t n = 1; n <= 4; ++n) slowest = std::max(slowest, model.value().LatencyNs(65536, n, u));
    EXPECT_EQ(shared.value()[b], slowest) << "burst " << b;
  }
  p.read_grid.burst = ReadGridBurst::kIndependent;
  auto independent = SimulateReadBursts(p, 65536, 4, 50, kSeed);
  ASSERT_TRUE(independent.ok()) << independent.status().message();
  stream = Rng(DeriveSeed(kSeed, "sim_storage"));
  for (size_t b = 0; b < independent.value().size(); ++b) {
    TimeNs slowest = 0;
    for (uint32_t n = 1; n <= 4; ++n) slowest = std::max(slowest, model.value().LatencyNs(65536, n, stream.NextDouble()));
    EXPECT_EQ(independent.value()[b], slowest) << "burst " << b;
  }
  EXPECT_FALSE(SimulateReadBursts(p, 65536, 0, 50, kSeed).ok());
  EXPECT_FALSE(SimulateReadBursts(p, 5000, 4, 50, kSeed).ok());
}

// The submission cost per read: per measured size linear in the depth
// between measured depths (the nearest outside them), then linear in the size
// between sizes, flat below the smallest, along the last slope above the
// largest; points without it are ignored.
TEST(ReadGridTest, ReadSubmitNsInterpolatesSizeAndDepth) {
  ReadGrid grid;
  EXPECT_EQ(ReadSubmitNs(grid, 1 << 20, 1), 0) << "nothing measured";
  auto point = [](uint64_t bytes, uint32_t depth, TimeNs submit) {
    ReadGridPoint p;
    p.read_bytes = bytes;
    p.queue_depth = depth;
    p.submit_ns = submit;
    return p;
  };
  grid.points = {point(1 << 20, 1, 30'000), point(1 << 20, 4, 12'000), point(4 << 20, 1, 90'000),
                 point(16 << 20, 1, 0), point(8 << 20, 1, 130'000)};
  EXPECT_EQ(ReadSubmitNs(grid, 4096, 1), 30'000);
  EXPECT_EQ(ReadSubmitNs(grid, 1 << 20, 1), 30'000);
  EXPECT_EQ(ReadSubmitNs(grid, 1 << 20, 2), 24'000);   // a third of the way from depth 1 to 4
  EXPECT_EQ(ReadSubmitNs(grid, 1 << 20, 32), 12'000);  // past the deepest measured: its cost
  EXPECT_EQ(ReadSubmitNs(grid, 2 << 20, 1), 50'000);   // a third of the way from 1 to 4 MiB
  EXPECT_EQ(ReadSubmitNs(grid, 4 << 20, 1), 90'000);
  EXPECT_EQ(ReadSubmitNs(grid, 4 << 20, 8), 90'000) << "4 MiB measured at depth 1 only";
  EXPECT_EQ(ReadSubmitNs(grid, 6 << 20, 1), 110'000);
  EXPECT_EQ(ReadSubmitNs(grid, 12 << 20, 1), 170'000);  // the 4-8 MiB slope, 10 us per MiB
  grid.points = {point(1 << 20, 1, 30'000)};
  EXPECT_EQ(ReadSubmitNs(grid, 12 << 20, 1), 30'000) << "one size: its cost";
}

}  // namespace
}  // namespace colibri::sim
