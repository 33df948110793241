// The run store (colibri/reports/run_store.h) and its sample codec: every
// field round-trips; databases at every older schema version open and take
// new runs; a newer or non-SQLite file is refused; a process killed at every
// stage of FinishRun (and before BeginRun commits, and after FinishRun)
// leaves either nothing, an incomplete run without results, or a complete
// run; several processes write runs at once; malformed blobs are errors,
// never crashes. DISABLED_FinishRunTenMillionSamples measures the issue's
// benchmark (run it with --gtest_also_run_disabled_tests).
#include "colibri/reports/run_store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <thread>
#include <tuple>

#include "run_store_test_util.h"
#include "sample_codec.h"

namespace colibri::reports {
namespace {

using namespace store_testing;  // NOLINT: the suite's helpers

using RunStoreTest = StoreDirTest;

using RunStoreMigrationTest = RunStoreTest;

// ---- Codec ----

TEST(SampleCodecTest, RoundTripsEdgeAndRandomValues) {
  std::mt19937_64 rng(7);
  std::vector<int64_t> values = {0, 0, 1, -1, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(),
                                 0, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  for (int i = 0; i < 10000; ++i) values.push_back(static_cast<int64_t>(rng()));
  for (int64_t v = 1'000'000; v > 0; v -= 997) values.push_back(v);  // descending
  for (const std::vector<int64_t>& input : {std::vector<int64_t>{}, std::vector<int64_t>{42}, values}) {
    auto blob = EncodeSamples(input);
    ASSERT_TRUE(blob.ok()) << blob.status().message();
    auto back = DecodeSamples(*blob);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(*back, input);
  }
}

TEST(SampleCodecTest, RoundTripsCounts) {
  const std::vector<uint64_t> counts = {0, 7, std::numeric_limits<uint64_t>::max(), 3, 1ull << 63, 0, 12};
  auto blob = EncodeCounts(counts);
  ASSERT_TRUE(blob.ok()) << blob.status().message();
  auto back = DecodeCounts(*blob);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, counts);
}

TEST(SampleCodecTest, SlowlyVaryingSamplesTakeAboutTwoBytes) {
  const std::vector<int64_t> values = RandomSamples(100'000, 3);
  auto blob = EncodeSamples(values);
  ASSERT_TRUE(blob.ok());
  EXPECT_LT(blob->size(), values.size() * 3) << blob->size() << " bytes";
}

TEST(SampleCodecTest, RejectsMalformedHeaders) {
  auto valid = EncodeSamples(RandomSamples(10, 4));
  ASSERT_TRUE(valid.ok());
  const auto message_of = [](const std::string& blob) {
    auto decoded = DecodeSamples(blob);
    EXPECT_FALSE(decoded.ok());
    EXPECT_EQ(decoded.status().code(), StatusCode::kCorruption);
    return decoded.status().message();
  };
  const auto with_u64 = [&](size_t at, uint64_t value) {
    std::string blob = *valid;
    std::memcpy(blob.data() + at, &value, 8);
    return blob;
  };
  EXPECT_TRUE(Contains(message_of(""), "shorter than the 20-byte header"));
  EXPECT_TRUE(Contains(message_of("XXXX" + valid->substr(4)), "magic"));
  EXPECT_TRUE(Contains(message_of(with_u64(4, 1ull << 60)), "cannot take"));
  EXPECT_TRUE(Contains(message_of(with_u64(12, 1ull << 40)), "cannot come from a zstd frame"));
  EXPECT_TRUE(Contains(message_of(*valid + "trailing"), "zstd"));
}

// Every truncation and a few hundred bit flips: an error or a decode, never a crash.
TEST(SampleCodecTest, SurvivesTruncationAndBitFlips) {
  auto valid = EncodeSamples(RandomSamples(200, 5));
  ASSERT_TRUE(valid.ok());
  const auto check = [](const std::string& blob) {
    auto decoded = DecodeSamples(blob);
    if (!decoded.ok()) {
      EXPECT_EQ(decoded.status().code(), StatusCode::kCorruption) << decoded.status().message();
    }
  };
  for (size_t size = 0; size < valid->size(); ++size) check(valid->substr(0, size));
  std::mt19937_64 rng(6);
  for (int i = 0; i < 400; ++i) {
    std::string blob = *valid;
    blob[rng() % blob.size()] ^= static_cast<char>(1u << (rng() % 8));
    check(blob);
  }
}

// ---- Store ----

TEST_F(RunStoreTest, RoundTripsEveryField) {
  std::vector<WriteStage> stages;
  RunStore::Options options;
  options.on_write_stage = [&stages](WriteStage stage) { stages.push_back(stage); };
  auto store = MustOpen(Path(), options);
  ASSERT_TRUE(store);
  EXPECT_EQ(store->schema_version(), kSchemaVersion);
  RunInfo info = FullInfo();
  info.status = "complete";  // the store decides
  auto run_id = store->BeginRun(info);
  ASSERT_TRUE(run_id.ok()) << run_id.status().message();
  auto begun = store->Info(*run_id);
  ASSERT_TRUE(begun.ok());
  EXPECT_EQ(begun->status, "incomplete");

  const RunResults results = FullResults();
  const Status finished = store->FinishRun(*run_id, results, 1'700'000'009'999);
  ASSERT_TRUE(finished.ok()) << finished.message();
  EXPECT_EQ(stages, std::vector<WriteStage>(std::begin(kAllStages), std::end(kAllStages)));

  store.reset();
  store = MustOpen(Path());
  ASSERT_TRUE(store);
  RunInfo want = FullInfo();
  want.run_id = *run_id;
  want.status = "complete";
  want.ended_at_ms = 1'700'000'009'999;
  auto back = store->Info(*run_id);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ExpectSameInfo(*back, want);
  for (const bool with_samples : {true, false}) {
    SCOPED_TRACE(with_samples);
    auto stored = store->Results(*run_id, with_samples);
    ASSERT_TRUE(stored.ok()) << stored.status().message();
    ExpectSameResults(*stored, results, with_samples);
  }
}

TEST_F(RunStoreTest, NanScalarReadsBackAsNan) {
  auto store = MustOpen(Path());
  ASSERT_TRUE(store);
  auto run_id = store->BeginRun(FullInfo());
  ASSERT_TRUE(run_id.ok());
  RunResults results;
  results.scalars["undefined"] = std::numeric_limits<double>::quiet_NaN();
  ASSERT_TRUE(store->FinishRun(*run_id, results, 1).ok());
  auto back = store->Results(*run_id);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(std::isnan(back->scalars.at("undefined")));
}

TEST_F(RunStoreTest, ListsNewestFirstAndDeletesWithResults) {
  auto store = MustOpen(Path());
  ASSERT_TRUE(store);
  std::vector<int64_t> ids;
  for (int i = 0; i < 3; ++i) {
    auto run_id = store->BeginRun(FullInfo());
    ASSERT_TRUE(run_id.ok());
    ASSERT_TRUE(store->FinishRun(*run_id, FullResults(), i).ok());
    ids.push_back(*run_id);
  }
  auto runs = store->List();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 3u);
  EXPECT_EQ((*runs)[0].run_id, ids[2]);
  EXPECT_EQ((*runs)[2].run_id, ids[0]);

  ASSERT_TRUE(store->Delete(ids[1]).ok());
  RawDb raw(Path());
  EXPECT_EQ(raw.ResultRows(ids[1]), 0);
  EXPECT_GT(raw.ResultRows(ids[0]), 0);
  EXPECT_EQ(raw.Int("SELECT COUNT(*) FROM runs"), 2);
  EXPECT_EQ(store->Delete(ids[1]).code(), StatusCode::kNotFound);
}

TEST_F(RunStoreTest, FinishesAndFailsOnlyIncompleteRuns) {
  auto store = MustOpen(Path());
  ASSERT_TRUE(store);
  auto failed = store->BeginRun(FullInfo());
  ASSERT_TRUE(failed.ok());
  ASSERT_TRUE(store->FailRun(*failed, "trace ended early", 77).ok());
  auto info = store->Info(*failed);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->status, "failed");
  EXPECT_EQ(info->error, "trace ended early");
  EXPECT_EQ(info->ended_at_ms, 77);
  const Status finish_failed = store->FinishRun(*failed, FullResults(), 1);
  EXPECT_EQ(finish_failed.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(finish_failed.message(), "failed run")) << finish_failed.message();

  auto complete = store->BeginRun(FullInfo());
  ASSERT_TRUE(complete.ok());
  ASSERT_TRUE(store->FinishRun(*complete, FullResults(), 1).ok());
  EXPECT_EQ(store->FinishRun(*complete, FullResults(), 2).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->FailRun(*complete, "late", 2).code(), StatusCode::kInvalidArgument);
}

TEST_F(RunStoreTest, UnknownRunIsNotFound) {
  auto store = MustOpen(Path());
  ASSERT_TRUE(store);
  const Status finish = store->FinishRun(42, FullResults(), 1);
  EXPECT_EQ(finish.code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(finish.message(), "run 42: no such run in ")) << finish.message();
  EXPECT_TRUE(Contains(finish.message(), "runs.db")) << finish.message();
  EXPECT_EQ(store->FailRun(42, "x", 1).code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Info(42).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Results(42).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Delete(42).code(), StatusCode::kNotFound);
}

// A write refused half-way (a trigger) rolls every result back; the run stays incomplete.
TEST_F(RunStoreTest, FailedFinishRollsBack) {
  auto store = MustOpen(Path());
  ASSERT_TRUE(store);
  auto run_id = store->BeginRun(FullInfo());
  ASSERT_TRUE(run_id.ok());
  RawDb raw(Path());
  raw.Exec("CREATE TRIGGER refuse_tiers BEFORE INSERT ON run_tiers BEGIN SELECT RAISE(ABORT, 'tiers refused'); END");
  const Status refused = store->FinishRun(*run_id, FullResults(), 1);
  EXPECT_EQ(refused.code(), StatusCode::kIoError);
  EXPECT_TRUE(Contains(refused.message(), "runs.db: INSERT INTO run_tiers")) << refused.message();
  EXPECT_TRUE(Contains(refused.message(), "tiers refused")) << refused.message();
  EXPECT_EQ(raw.ResultRows(*run_id), 0);
  EXPECT_EQ(store->Info(*run_id)->status, "incomplete");

  raw.Exec("DROP TRIGGER refuse_tiers");
  EXPECT_TRUE(store->FinishRun(*run_id, FullResults(), 1).ok());
}

TEST_F(RunStoreTest, CrashAtEveryStageLeavesIncompleteRunWithoutResults) {
  for (const WriteStage crash_at : kAllStages) {
    const std::string path = Path("stage" + std::to_string(static_cast<int>(crash_at)) + ".db");
    SCOPED_TRACE(path);
    const int status = RunChild([&] {
      RunStore::Options options;
      options.on_write_stage = [crash_at](WriteStage stage) {
        if (stage == crash_at) ::raise(SIGKILL);
      };
      auto store = RunStore::Open(path, options);
      if (!store.ok()) return 2;
      auto run_id = (*store)->BeginRun(FullInfo());
      if (!run_id.ok()) return 3;
      (void)(*store)->FinishRun(*run_id, FullResults(), 1);
      return 4;  // not killed
    });
    ASSERT_TRUE(KilledBySigkill(status)) << "wait status " << status;
    auto store = MustOpen(path);
    ASSERT_TRUE(store);
    auto runs = store->List();
    ASSERT_TRUE(runs.ok());
    ASSERT_EQ(runs->size(), 1u);
    EXPECT_EQ((*runs)[0].status, "incomplete");
    RawDb raw(path);
    EXPECT_EQ(raw.ResultRows((*runs)[0].run_id), 0);
  }
}

// The child waits in BeginRun for the write lock the parent holds, and is killed there.
TEST_F(RunStoreTest, CrashBeforeBeginRunCommitsLeavesNothing) {
  ASSERT_TRUE(MustOpen(Path()));
  int ready[2], go[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(go), 0);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto store = RunStore::Open(Path());
    char byte = 'r';
    if (!store.ok() || ::write(ready[1], &byte, 1) != 1 || ::read(go[0], &byte, 1) != 1) ::_exit(2);
    ::_exit((*store)->BeginRun(FullInfo()).ok() ? 0 : 3);
  }
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  {
    RawDb lock(Path());
    lock.Exec("BEGIN IMMEDIATE");
    ASSERT_EQ(::write(go[1], &byte, 1), 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(KilledBySigkill(status)) << "wait status " << status;
    lock.Exec("ROLLBACK");
  }
  for (int fd : {ready[0], ready[1], go[0], go[1]}) ::close(fd);
  auto store = MustOpen(Path());
  ASSERT_TRUE(store);
  EXPECT_TRUE(store->List()->empty());
}

TEST_F(RunStoreTest, CrashAfterFinishRunLeavesCompleteRun) {
  const int status = RunChild([&] {
    auto store = RunStore::Open(Path());
    if (!store.ok()) return 2;
    auto run_id = (*store)->BeginRun(FullInfo());
    if (!run_id.ok() || !(*store)->FinishRun(*run_id, FullResults(), 5).ok()) return 3;
    ::raise(SIGKILL);
    return 4;
  });
  ASSERT_TRUE(KilledBySigkill(status)) << "wait status " << status;
  auto store = MustOpen(Path());
  ASSERT_TRUE(store);
  auto runs = store->List();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].status, "complete");
  auto results = store->Results((*runs)[0].run_id);
  ASSERT_TRUE(results.ok()) << results.status().message();
  ExpectSameResults(*results, FullResults(), true);
}

// Several processes create the database and write runs to it at once.
TEST_F(RunStoreTest, ConcurrentWritersAllSucceed) {
  constexpr int kWriters = 3, kRunsEach = 20, kSamples = 2000;
  std::vector<pid_t> children;
  std::fflush(nullptr);
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto store = RunStore::Open(Path());
      if (!store.ok()) {
        std::fprintf(stderr, "writer %d: %s\n", w, store.status().message().c_str());
        ::_exit(2);
      }
      for (int i = 0; i < kRunsEach; ++i) {
        RunResults results;
        results.distributions["step_latency_ns"] = Samples::FromRaw(RandomSamples(kSamples, w * 100 + i));
        auto run_id = (*store)->BeginRun(FullInfo());
        const Status finished = run_id.ok() ? (*store)->FinishRun(*run_id, results, i) : run_id.status();
        if (!finished.ok()) {
          std::fprintf(stderr, "writer %d run %d: %s\n", w, i, finished.message().c_str());
          ::_exit(3);
        }
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(ExitedZero(status)) << "wait status " << status;
  }
  auto store = MustOpen(Path());
  ASSERT_TRUE(store);
  auto runs = store->List();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), static_cast<size_t>(kWriters * kRunsEach));
  for (const RunInfo& run : *runs) {
    EXPECT_EQ(run.status, "complete");
    auto results = store->Results(run.run_id);
    ASSERT_TRUE(results.ok()) << results.status().message();
    EXPECT_EQ(results->distributions.at("step_latency_ns").raw().size(), static_cast<size_t>(kSamples));
  }
}

TEST_F(RunStoreTest, DefaultDbPathHonoursColibriDb) {
  const char* before = std::getenv("COLIBRI_DB");
  const std::string saved = before != nullptr ? before : "";
  ::setenv("COLIBRI_DB", "/data/runs.db", 1);
  EXPECT_EQ(DefaultDbPath(), "/data/runs.db");
  ::setenv("COLIBRI_DB", "", 1);
  EXPECT_EQ(DefaultDbPath(), "./colibri-runs.db");
  ::unsetenv("COLIBRI_DB");
  EXPECT_EQ(DefaultDbPath(), "./colibri-runs.db");
  if (before != nullptr) ::setenv("COLIBRI_DB", saved.c_str(), 1);
}

// The benchmark: FinishRun of 10 M raw step-latency samples (8 x 1.25 M).
TEST_F(RunStoreTest, DISABLED_FinishRunTenMillionSamples) {
  RunResults results;
  for (int d = 0; d < 8; ++d) {
    results.distributions["step_latency_ns." + std::to_string(d)] = Samples::FromRaw(RandomSamples(1'250'000, d));
  }
  auto store = MustOpen(Path());
  ASSERT_TRUE(store);
  auto run_id = store->BeginRun(FullInfo());
  ASSERT_TRUE(run_id.ok());
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(store->FinishRun(*run_id, results, 1).ok());
  const auto finished = std::chrono::steady_clock::now();
  auto back = store->Results(*run_id);
  ASSERT_TRUE(back.ok());
  const auto loaded = std::chrono::steady_clock::now();
  EXPECT_EQ(back->distributions.at("step_latency_ns.7").raw(), results.distributions.at("step_latency_ns.7").raw());
  const auto seconds = [](auto d) { return std::chrono::duration<double>(d).count(); };
  RawDb raw(Path());
  std::printf("FinishRun of 10 M samples: %.2f s; Results: %.2f s; raw blobs %lld bytes, histograms %lld bytes\n",
              seconds(finished - start), seconds(loaded - finished),
              static_cast<long long>(raw.Int("SELECT SUM(LENGTH(raw)) FROM run_distributions")),
              static_cast<long long>(raw.Int("SELECT SUM(LENGTH(histogram)) FROM run_distributions")));
  EXPECT_LT(seconds(finished - start), 10.0);
}

// ---- Schema versions ----

// A database built at every older version (with a run where it has a runs
// table) opens at kSchemaVersion, keeps its run, and takes new runs.
TEST_F(RunStoreMigrationTest, OpensEveryOlderVersion) {
  for (int version = 0; version < kSchemaVersion; ++version) {
    const std::string path = Path("v" + std::to_string(version) + ".db");
    SCOPED_TRACE(path);
    {
      RawDb raw(path);
      const Status migrated = MigrateSchema(raw.get(), 0, version);
      ASSERT_TRUE(migrated.ok()) << migrated.message();
      EXPECT_EQ(raw.Int("PRAGMA user_version"), version);
      if (version >= 1) {
        raw.Exec("INSERT INTO runs (kind, status, label, seed, started_at_ms, ended_at_ms) "
                 "VALUES ('replay', 'complete', 'old machine', 7, 1000, 2000)");
      }
    }
    auto store = MustOpen(path);
    ASSERT_TRUE(store);
    EXPECT_EQ(store->schema_version(), kSchemaVersion);
    auto old_runs = store->List();
    ASSERT_TRUE(old_runs.ok()) << old_runs.status().message();
    ASSERT_EQ(old_runs->size(), version >= 1 ? 1u : 0u);
    if (version >= 1) {
      EXPECT_EQ((*old_runs)[0].label, "old machine");
      EXPECT_EQ((*old_runs)[0].status, "complete");
    }
    auto run_id = store->BeginRun(FullInfo());
    ASSERT_TRUE(run_id.ok()) << run_id.status().message();
    const Status finished = store->FinishRun(*run_id, FullResults(), 3);
    ASSERT_TRUE(finished.ok()) << finished.message();
    auto results = store->Results(*run_id);
    ASSERT_TRUE(results.ok()) << results.status().message();
    ExpectSameResults(*results, FullResults(), true);
    EXPECT_EQ(store->List()->size(), old_runs->size() + 1);
  }
}

TEST_F(RunStoreMigrationTest, RefusesNewerSchema) {
  {
    RawDb raw(Path());
    raw.Exec("PRAGMA user_version = " + std::to_string(kSchemaVersion + 1));
  }
  auto store = RunStore::Open(Path());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kUnsupported);
  const std::string& message = store.status().message();
  EXPECT_TRUE(Contains(message, "runs.db: schema version " + std::to_string(kSchemaVersion + 1) +
                                    " is newer than this build's " + std::to_string(kSchemaVersion)))
      << message;
}

TEST_F(RunStoreMigrationTest, RefusesGarbageFile) {
  std::ofstream(Path()) << std::string(8192, 'x');
  auto store = RunStore::Open(Path());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(store.status().message(), "runs.db: not an SQLite database")) << store.status().message();
}

TEST_F(RunStoreMigrationTest, RejectsVersionsOutOfRange) {
  RawDb raw(Path());
  EXPECT_EQ(MigrateSchema(raw.get(), 1, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MigrateSchema(raw.get(), -1, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MigrateSchema(raw.get(), 0, kSchemaVersion + 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(raw.Int("PRAGMA user_version"), 0);
}

}  // namespace
}  // namespace colibri::reports
