// Helpers of the run store's tests: scratch directories, raw SQLite
// connections, a forked child, and a run with every field set.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <random>
#include <tuple>

#include "colibri/reports/run_store.h"

namespace colibri::reports::store_testing {

constexpr WriteStage kAllStages[] = {WriteStage::kScalars,    WriteStage::kDistributions, WriteStage::kTiers,
                                     WriteStage::kExpertLoad, WriteStage::kSeries,        WriteStage::kFaults,
                                     WriteStage::kStatus};
constexpr const char* kResultTables[] = {"run_scalars",     "run_texts",    "run_distributions", "run_tiers",
                                         "run_expert_load", "run_hit_rate", "run_faults"};

// A fresh directory under the test temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "colibri-run-store-XXXXXX";
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    if (!path_.empty()) std::filesystem::remove_all(path_);
  }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A raw sqlite3 connection for building and inspecting databases directly.
class RawDb {
 public:
  explicit RawDb(const std::string& path) { EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK) << path; }
  ~RawDb() { sqlite3_close(db_); }
  sqlite3* get() const { return db_; }
  void Exec(const std::string& sql) {
    char* error = nullptr;
    EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
        << (error != nullptr ? error : "") << " in " << sql;
    sqlite3_free(error);
  }
  // The first column of the first row of `sql`; -1 on an error.
  int64_t Int(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    int64_t value = -1;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW) {
      value = sqlite3_column_int64(stmt, 0);
    }
    EXPECT_NE(value, -1) << sqlite3_errmsg(db_) << " in " << sql;
    sqlite3_finalize(stmt);
    return value;
  }
  int64_t ResultRows(int64_t run_id) {
    int64_t rows = 0;
    for (const char* table : kResultTables) {
      rows += Int(std::string("SELECT COUNT(*) FROM ") + table + " WHERE run_id = " + std::to_string(run_id));
    }
    return rows;
  }

 private:
  sqlite3* db_ = nullptr;
};

// Runs `body` in a forked child that exits with its result; returns the wait status.
inline int RunChild(const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  EXPECT_GT(pid, 0) << "fork failed";
  int status = 0;
  if (pid > 0) {
    EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  }
  return status;
}

inline bool KilledBySigkill(int status) { return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL; }
inline bool ExitedZero(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

inline std::unique_ptr<RunStore> MustOpen(const std::string& path, RunStore::Options options = {}) {
  auto store = RunStore::Open(path, std::move(options));
  EXPECT_TRUE(store.ok()) << store.status().message();
  return store.ok() ? std::move(store).value() : nullptr;
}

inline RunInfo FullInfo() {
  RunInfo info;
  info.kind = "replay";
  info.label = "phone-ufs";
  info.trace_path = "/traces/a.ctrace";
  info.trace_digest = "sha256:aa";
  info.routing_path = "/traces/a.routing";
  info.routing_digest = "sha256:bb";
  info.config_json = R"({"cache_mib":512})";
  info.hardware_json = R"({"nvme":"ufs"})";
  info.backends = "storage=sim transfer=sim compute=sim";
  info.command_json = R"(["colibri","replay","a.ctrace"])";
  info.seed = std::numeric_limits<uint64_t>::max() - 5;  // above INT64_MAX
  info.tool_version = "0.3.0";
  info.git_commit = "d2d6cbd";
  info.started_at_ms = 1'700'000'000'123;
  return info;
}

inline std::vector<int64_t> RandomSamples(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> latency(11.5, 0.6);  // around 100 us
  std::vector<int64_t> values(n);
  for (int64_t& v : values) v = static_cast<int64_t>(latency(rng));
  return values;
}

inline RunResults FullResults() {
  RunResults r;
  r.scalars = {{"elapsed_ns", 1.5e9}, {"tokens_per_s", 12.25}, {"inf", std::numeric_limits<double>::infinity()}};
  r.texts = {{"clock", "virtual"}, {"summary_json", R"({"a":1})"}, {"empty", ""}};
  std::vector<int64_t> raw = RandomSamples(5000, 1);
  raw.insert(raw.end(), {0, 1, int64_t{1} << 61, 7});  // the histogram's int64 sum must not overflow
  r.distributions["request_latency_ns"] = Samples::FromRaw(raw);
  Samples dropped;
  for (int64_t v : RandomSamples(3000, 2)) dropped.Add(v);
  dropped.DropRaw();
  r.distributions["step_latency_ns.nvme_read"] = dropped;
  r.distributions["step_latency_ns.empty"] = Samples{};
  r.tiers = {{"l1", 100, 80, 60, 50, 4096}, {"l2", 20, 10, 5, 2, 1 << 20}, {"all", 100, 90, 60, 52, 0}};
  r.expert_load = {{5, 0, 9, 1ull << 63, 2}, {}, {1, 2, 3, 4, 5, 6, 7, 8}};
  r.hit_rate = {{10, 1000, 20, 15}, {20, 2500, 40, 33}, {30, -1, 60, 51}};
  r.faults = {{500, "read_error", "expert 3 layer 1"}, {700, "slow_read", ""}};
  return r;
}

inline void ExpectSameInfo(const RunInfo& a, const RunInfo& b) {
  EXPECT_EQ(a.run_id, b.run_id);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.label, b.label);
  EXPECT_EQ(a.trace_path, b.trace_path);
  EXPECT_EQ(a.trace_digest, b.trace_digest);
  EXPECT_EQ(a.routing_path, b.routing_path);
  EXPECT_EQ(a.routing_digest, b.routing_digest);
  EXPECT_EQ(a.config_json, b.config_json);
  EXPECT_EQ(a.hardware_json, b.hardware_json);
  EXPECT_EQ(a.backends, b.backends);
  EXPECT_EQ(a.command_json, b.command_json);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.tool_version, b.tool_version);
  EXPECT_EQ(a.git_commit, b.git_commit);
  EXPECT_EQ(a.started_at_ms, b.started_at_ms);
  EXPECT_EQ(a.ended_at_ms, b.ended_at_ms);
}

inline auto Fields(const TierCounters& t) {
  return std::tie(t.tier, t.lookups, t.hits, t.decode_lookups, t.decode_hits, t.read_bytes);
}
inline auto Fields(const HitRatePoint& p) { return std::tie(p.layer_batch, p.elapsed_ns, p.lookups, p.served); }
inline auto Fields(const FaultRecord& f) { return std::tie(f.at_ns, f.kind, f.detail); }

template <typename T>
inline void ExpectSameRows(const std::vector<T>& got, const std::vector<T>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(Fields(got[i]), Fields(want[i])) << "row " << i;
}

// Everything but the distributions' raw values, which `with_samples` decides.
inline void ExpectSameResults(const RunResults& got, const RunResults& want, bool with_samples) {
  EXPECT_EQ(got.scalars, want.scalars);
  EXPECT_EQ(got.texts, want.texts);
  ASSERT_EQ(got.distributions.size(), want.distributions.size());
  for (const auto& [name, samples] : want.distributions) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(got.distributions.contains(name));
    const Samples& back = got.distributions.at(name);
    EXPECT_EQ(back.has_raw(), with_samples && samples.has_raw());
    if (back.has_raw()) {
      EXPECT_EQ(back.raw(), samples.raw());
    }
    EXPECT_EQ(back.count(), samples.count());
    EXPECT_EQ(back.histogram().Serialize(), samples.histogram().Serialize());
  }
  ExpectSameRows(got.tiers, want.tiers);
  EXPECT_EQ(got.expert_load, want.expert_load);
  ExpectSameRows(got.hit_rate, want.hit_rate);
  ExpectSameRows(got.faults, want.faults);
}

inline bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A test with a scratch directory for its databases.
class StoreDirTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name = "runs.db") const { return dir_.File(name); }
  TempDir dir_;
};

}  // namespace colibri::reports::store_testing
