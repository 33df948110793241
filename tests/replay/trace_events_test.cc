// TraceEventWriter: a replay's timeline as a Trace Event Format file. The file
// parses as JSON; every complete event has ts >= 0 and dur >= 0; the read
// spans add up to the run's bytes read and the layer batches to its simulated
// time; spans never overlap within a thread (lanes); two machines are two
// processes in one file; the output is deterministic; the digest is the same
// with and without the sink; truncation and I/O errors behave.
#include "colibri/replay/trace_events.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "colibri/replay/replay_run.h"
#include "replay_test_util.h"

namespace colibri::replay {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int64_t Ns(const Json& micros) { return std::llround(micros.get<double>() * 1000.0); }

class TraceEventsTest : public testing::ReplayTest {
 protected:
  TraceEventsTest() : ReplayTest("trace-events") {}

  // Two requests decoding together: `passes` passes of two tokens over 2 MoE layers, 16 experts, top-4.
  std::string WriteTrace(int passes) const {
    return Write("t.ctrace", testing::TestTrace{2, passes, 0, 7, std::nullopt, true, 4});
  }

  ReplayConfig Config(const std::string& trace, const std::string& machine) const {
    ReplayConfig c = ReplayTest::Config(trace, machine);
    c.l2_bytes = 6u * 196608;  // misses, so reads and copies
    c.l1_bytes = 3u * 196608;
    c.staging_slots = 4;       // reads overlap
    return c;
  }

  // Replays `trace` on each machine into one file at `out`; returns the runs' results.
  std::vector<ReplayResult> ReplayTo(const std::string& trace, const std::vector<std::string>& machines,
                                     const std::string& out, uint64_t max_events = TraceEventWriter::kDefaultMaxEvents) {
    std::vector<ReplayResult> results;
    auto writer = TraceEventWriter::Create(out, machines.at(0), max_events);
    EXPECT_TRUE(writer.ok()) << writer.status().message();
    if (!writer.ok()) return results;
    for (size_t i = 0; i < machines.size(); ++i) {
      if (i > 0) {
        EXPECT_EQ(writer.value()->BeginProcess(machines[i]), static_cast<int>(i) + 1);
      }
      ReplayConfig c = Config(trace, machines[i]);
      c.event_sink = writer.value().get();
      auto r = RunReplay(c);
      EXPECT_TRUE(r.ok()) << r.status().message();
      if (r.ok()) results.push_back(std::move(r).value());
    }
    const Status finished = writer.value()->Finish();
    EXPECT_TRUE(finished.ok()) << finished.message();
    return results;
  }
};

TEST_F(TraceEventsTest, TwoMachinesTimelineMatchesTheRuns) {
  const std::string trace = WriteTrace(30);
  const std::vector<std::string> machines = {"a100-pm9a3-gen4", "h100-p5800x-gen5"};
  const std::string out = Path("timeline.json");
  const std::vector<ReplayResult> runs = ReplayTo(trace, machines, out);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_FALSE(fs::exists(out + ".partial"));
  const Json j = Json::parse(ReadAll(out));  // throws (fails the test) on invalid JSON
  ASSERT_TRUE(j.at("traceEvents").is_array());
  EXPECT_EQ(j.at("otherData").at("truncated"), false);

  struct PerProcess {
    uint64_t spans = 0, read_bytes = 0, reads = 0, copies = 0, kernels = 0, batches = 0;
    int64_t batch_ns = 0;
    std::string name;
  };
  std::map<int64_t, PerProcess> procs;
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>> threads;  // (pid, tid) -> spans
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names;
  for (const Json& e : j.at("traceEvents")) {
    const std::string ph = e.at("ph");
    const int64_t pid = e.at("pid");
    if (ph == "M") {
      if (e.at("name") == "process_name") procs[pid].name = e.at("args").at("name");
      if (e.at("name") == "thread_name") thread_names[{pid, e.at("tid").get<int64_t>()}] = e.at("args").at("name");
      continue;
    }
    ASSERT_EQ(ph, "X") << e.dump();
    ASSERT_TRUE(e.at("name").is_string() && e.at("cat").is_string() && e.at("args").is_object()) << e.dump();
    const int64_t ts = Ns(e.at("ts")), dur = Ns(e.at("dur"));
    EXPECT_GE(ts, 0) << e.dump();
    EXPECT_GE(dur, 0) << e.dump();
    threads[{pid, e.at("tid").get<int64_t>()}].emplace_back(ts, ts + dur);
    PerProcess& p = procs[pid];
    ++p.spans;
    const std::string cat = e.at("cat");
    if (cat == "nvme") {
      ++p.reads;
      p.read_bytes += e.at("args").at("bytes").get<uint64_t>();
      EXPECT_TRUE(e.at("args").contains("offset"));
    } else if (cat == "pcie") {
      ++p.copies;
      EXPECT_TRUE(e.at("args").contains("tag") && e.at("args").contains("bytes"));
    } else if (cat == "compute") {
      ++p.kernels;
      EXPECT_GT(e.at("args").at("tokens").get<uint64_t>(), 0u);
    } else if (cat == "replay") {
      ++p.batches;
      p.batch_ns += dur;
      EXPECT_EQ(e.at("name"), "layer " + std::to_string(e.at("args").at("layer").get<uint32_t>()));
      EXPECT_GT(e.at("args").at("tokens").get<uint64_t>(), 0u);
    }
  }
  ASSERT_EQ(procs.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const PerProcess& p = procs.at(static_cast<int64_t>(i) + 1);
    const ReplayResult& r = runs[i];
    EXPECT_EQ(p.name, machines[i]);
    EXPECT_EQ(p.spans, r.events);  // every digested event is a span
    EXPECT_EQ(p.reads, r.reads);
    EXPECT_EQ(p.read_bytes, r.read_bytes);
    EXPECT_GT(p.reads, 0u);
    EXPECT_GT(p.copies, 0u);
    EXPECT_GT(p.kernels, 0u);
    EXPECT_EQ(p.batches, r.layer_batches);
    EXPECT_EQ(p.batch_ns, r.elapsed_ns);  // closed loop: the layer batches tile the run
  }
  size_t read_lanes = 0;
  for (auto& [key, spans] : threads) {
    EXPECT_TRUE(thread_names.count(key)) << "tid " << key.second << " has no thread_name";
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) {
      EXPECT_LE(spans[i - 1].second, spans[i].first) << "overlap in tid " << key.second;
    }
    if (key.first == 1 && thread_names[key].rfind("nvme reads", 0) == 0) ++read_lanes;
  }
  EXPECT_GE(read_lanes, 2u);  // reads overlapped and were spread over lanes
  std::set<int64_t> tids;
  for (const auto& [key, spans] : threads) EXPECT_TRUE(tids.insert(key.second).second) << "tid reused across pids";
}

TEST_F(TraceEventsTest, SinkDoesNotChangeTheDigestAndOutputIsDeterministic) {
  const std::string trace = WriteTrace(20);
  auto plain = RunReplay(Config(trace, "a100-pm9a3-gen4"));
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  const std::vector<ReplayResult> a = ReplayTo(trace, {"a100-pm9a3-gen4"}, Path("a.json"));
  const std::vector<ReplayResult> b = ReplayTo(trace, {"a100-pm9a3-gen4"}, Path("b.json"));
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].event_digest, plain.value().event_digest);
  EXPECT_EQ(a[0].events, plain.value().events);
  const std::string text = ReadAll(Path("a.json"));
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(text, ReadAll(Path("b.json")));
}

TEST_F(TraceEventsTest, TruncatesAtMaxEventsAndSaysSo) {
  const std::string trace = WriteTrace(10);
  const std::string out = Path("small.json");
  auto writer = TraceEventWriter::Create(out, "a100-pm9a3-gen4", 25);
  ASSERT_TRUE(writer.ok());
  ReplayConfig c = Config(trace, "a100-pm9a3-gen4");
  c.event_sink = writer.value().get();
  auto r = RunReplay(c);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(writer.value()->truncated());
  EXPECT_EQ(writer.value()->spans_written(), 25u);
  EXPECT_EQ(writer.value()->spans_dropped(), r.value().events - 25);
  ASSERT_TRUE(writer.value()->Finish().ok());
  const Json j = Json::parse(ReadAll(out));
  size_t complete = 0, instants = 0;
  std::string process;
  for (const Json& e : j.at("traceEvents")) {
    if (e.at("ph") == "X") ++complete;
    if (e.at("ph") == "i") ++instants;
    if (e.at("ph") == "M" && e.at("name") == "process_name") process = e.at("args").at("name");
  }
  EXPECT_EQ(complete, 25u);
  EXPECT_EQ(instants, 1u);
  EXPECT_EQ(process, "a100-pm9a3-gen4 (truncated)");
  const Json& other = j.at("otherData");
  EXPECT_EQ(other.at("truncated"), true);
  EXPECT_EQ(other.at("max_events"), 25u);
  EXPECT_EQ(other.at("spans_written"), 25u);
  EXPECT_EQ(other.at("spans_dropped"), r.value().events - 25);
}

TEST_F(TraceEventsTest, LanesTimesAndNamesOfDirectSpans) {
  const std::string out = Path("direct.json");
  auto writer = TraceEventWriter::Create(out, "");
  ASSERT_TRUE(writer.ok());
  sim::EventLog log, reference;
  log.set_sink(writer.value().get());
  // Reads arrive in end order; [5,6] takes lane 1, [0,10] lane 2, [7,12] lane 1 again, [10,20] lane 2.
  log.Append(5000, 6000, sim::EventKind::kRead, 4096, 4096);
  log.Append(0, 10000, sim::EventKind::kRead, 0, 8192);
  log.Append(7000, 12000, sim::EventKind::kRead, 8192, 4096);
  log.Append(10000, 20000, sim::EventKind::kRead, 12288, 4096);
  log.Append(1234567, 1235568, sim::EventKind::kCompute, 3, 1001);
  log.Span(2000000, 2000500, sim::EventKind::kDense, 7, 65536);  // sink only
  for (const auto& [s, e, k, a, b] : {std::tuple{5000, 6000, sim::EventKind::kRead, 4096, 4096},
                                      std::tuple{0, 10000, sim::EventKind::kRead, 0, 8192},
                                      std::tuple{7000, 12000, sim::EventKind::kRead, 8192, 4096},
                                      std::tuple{10000, 20000, sim::EventKind::kRead, 12288, 4096},
                                      std::tuple{1234567, 1235568, sim::EventKind::kCompute, 3, 1001}}) {
    reference.Append(s - 1, e, k, a, b);  // the start is not digested
  }
  EXPECT_EQ(log.digest(), reference.digest());
  EXPECT_EQ(log.events(), 5u);
  ASSERT_TRUE(writer.value()->Finish().ok());
  EXPECT_TRUE(writer.value()->Finish().ok());  // idempotent
  const std::string text = ReadAll(out);
  EXPECT_NE(text.find("\"ts\":1234.567,\"dur\":1.001,\"name\":\"expert ffn\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"ts\":2000.000,\"dur\":0.500,\"name\":\"dense 7\""), std::string::npos) << text;
  const Json j = Json::parse(text);
  std::vector<int64_t> read_tids;
  std::map<int64_t, std::string> names;
  for (const Json& e : j.at("traceEvents")) {
    EXPECT_EQ(e.at("pid"), 1);
    if (e.at("ph") == "X" && e.at("cat") == "nvme") read_tids.push_back(e.at("tid"));
    if (e.at("ph") == "M" && e.at("name") == "thread_name") names[e.at("tid")] = e.at("args").at("name");
    if (e.at("ph") == "M" && e.at("name") == "process_name") {
      EXPECT_EQ(e.at("args").at("name"), "colibri replay");
    }
  }
  ASSERT_EQ(read_tids.size(), 4u);
  EXPECT_EQ(read_tids[0], read_tids[2]);
  EXPECT_EQ(read_tids[1], read_tids[3]);
  EXPECT_NE(read_tids[0], read_tids[1]);
  EXPECT_EQ(names[read_tids[0]], "nvme reads #1");
  EXPECT_EQ(names[read_tids[1]], "nvme reads #2");
  std::set<std::string> all;
  for (const auto& [tid, name] : names) all.insert(name);
  EXPECT_EQ(all, (std::set<std::string>{"nvme reads #1", "nvme reads #2", "compute", "dense"}));
}

TEST_F(TraceEventsTest, ErrorsLeaveNoFile) {
  const std::string missing = Path("no-such-dir/out.json");
  auto bad = TraceEventWriter::Create(missing, "m");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kIoError);
  EXPECT_NE(bad.status().message().find("no-such-dir/out.json.partial"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(fs::exists(missing));
  EXPECT_FALSE(fs::exists(missing + ".partial"));

  // The rename fails (a directory is in the way): Finish says so and removes the partial file.
  const std::string blocked = Path("blocked.json");
  fs::create_directories(fs::path(blocked) / "inside");
  auto writer = TraceEventWriter::Create(blocked, "m");
  ASSERT_TRUE(writer.ok());
  writer.value()->OnSpan(0, 10, sim::EventKind::kRead, 0, 4096);
  const Status finished = writer.value()->Finish();
  EXPECT_FALSE(finished.ok());
  EXPECT_NE(finished.message().find("rename"), std::string::npos) << finished.message();
  EXPECT_FALSE(fs::exists(blocked + ".partial"));
  EXPECT_TRUE(fs::is_directory(blocked));

  // Destroyed without Finish (the replay failed): nothing is left.
  const std::string abandoned = Path("abandoned.json");
  {
    auto w = TraceEventWriter::Create(abandoned, "m");
    ASSERT_TRUE(w.ok());
    w.value()->OnSpan(0, 10, sim::EventKind::kRead, 0, 4096);
    EXPECT_TRUE(fs::exists(abandoned + ".partial"));
  }
  EXPECT_FALSE(fs::exists(abandoned));
  EXPECT_FALSE(fs::exists(abandoned + ".partial"));
}

}  // namespace
}  // namespace colibri::replay
