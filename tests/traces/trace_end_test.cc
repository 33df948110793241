// Format v2's end marker: complete, torn and corrupt told apart; v1 refused
// and upgraded; special files refused by type; one writer per output.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <thread>

#include "colibri/traces/edit.h"
#include "test_util.h"
#include "wire.h"

namespace colibri::traces {
namespace {

using testing::ReadFileBytes;
using testing::TempDir;
using testing::WriteFileBytes;

constexpr size_t kEnd = 41;  // the 0x00 end frame + the 40-byte trailer

std::vector<TraceRecord> Records(const ModelShape& shape, size_t n) {
  std::mt19937_64 rng(11);
  std::vector<TraceRecord> out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(testing::RandomRecord(shape, rng, i / 8, i / 3, shape.moe_layer_ids[i % shape.moe_layer_ids.size()],
                                        1 + i % 3, i));
  }
  return out;
}

std::string Write(const TempDir& dir, const std::string& name, size_t n, Compression compression = Compression::kNone) {
  TraceHeader header;
  header.shape = testing::SmallShape();
  WriterOptions options;
  options.compression = compression;
  options.block_bytes = 300;
  const std::string path = dir.File(name);
  auto writer = TraceWriter::Create(path, header, options);
  EXPECT_TRUE(writer.ok()) << writer.status().message();
  for (const TraceRecord& r : Records(header.shape, n)) EXPECT_TRUE((*writer)->Append(r).ok());
  EXPECT_TRUE((*writer)->Close().ok());
  return path;
}

struct Outcome {
  Status status;  // the error, or OK
  uint64_t records = 0;
  TraceEnd end = TraceEnd::kNotReached;
  uint64_t tail_offset = 0;
};

Outcome ReadThrough(const std::string& path, bool allow_torn = false) {
  Outcome out;
  auto reader = TraceReader::Open(path, ReadOptions{.allow_torn = allow_torn});
  if (!reader.ok()) {
    out.status = reader.status();
    return out;
  }
  TraceRecord record;
  while (true) {
    auto more = (*reader)->Next(&record);
    if (!more.ok()) {
      out.status = more.status();
      break;
    }
    if (!more.value()) break;
  }
  out.records = (*reader)->records_read();
  out.end = (*reader)->end();
  out.tail_offset = (*reader)->tail_offset();
  return out;
}

std::string Variant(const TempDir& dir, const std::string& bytes) {
  static int n = 0;
  const std::string path = dir.File("variant-" + std::to_string(n++) + ".ctrace");
  WriteFileBytes(path, bytes);
  return path;
}

// Byte offsets where each frame starts (its length varint), up to the end marker.
std::vector<size_t> FrameStarts(const std::string& bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t at = 20 + wire::LoadFixed32(p + 12);
  std::vector<size_t> starts;
  while (at < bytes.size() - kEnd) {
    starts.push_back(at);
    const uint8_t* q = p + at;
    uint64_t length = 0;
    EXPECT_TRUE(wire::GetVarint(&q, p + bytes.size(), &length));
    at = static_cast<size_t>(q - p) + 4 + length;
  }
  EXPECT_EQ(at, bytes.size() - kEnd);
  return starts;
}

TEST(TraceEndTest, CompleteFileEndsComplete) {
  TempDir dir;
  for (Compression c : {Compression::kNone, Compression::kZstd}) {
    const Outcome o = ReadThrough(Write(dir, "t.ctrace", 40, c));
    EXPECT_TRUE(o.status.ok()) << o.status.message();
    EXPECT_EQ(o.end, TraceEnd::kComplete);
    EXPECT_EQ(o.records, 40u);
  }
  // An empty trace (header, no records) is complete too.
  const Outcome empty = ReadThrough(Write(dir, "empty.ctrace", 0));
  EXPECT_TRUE(empty.status.ok()) << empty.status.message();
  EXPECT_EQ(empty.end, TraceEnd::kComplete);
}

TEST(TraceEndTest, HeaderOnlyAndFrameBoundaryCutsAreTorn) {
  TempDir dir;
  const std::string bytes = ReadFileBytes(Write(dir, "t.ctrace", 30));
  const std::vector<size_t> starts = FrameStarts(bytes);
  // The header alone (the issue's `head -c 843`), every frame boundary, and the end marker without its trailer.
  std::vector<size_t> cuts = starts;
  cuts.push_back(bytes.size() - kEnd);
  cuts.push_back(bytes.size() - kEnd + 1);
  cuts.push_back(bytes.size() - 1);
  for (size_t cut : cuts) {
    const std::string path = Variant(dir, bytes.substr(0, cut));
    const Outcome strict = ReadThrough(path);
    EXPECT_EQ(strict.status.code(), StatusCode::kTruncated) << cut << ": " << strict.status.message();
    const Outcome lenient = ReadThrough(path, true);
    EXPECT_TRUE(lenient.status.ok()) << cut << ": " << lenient.status.message();
    EXPECT_EQ(lenient.end, TraceEnd::kTorn) << cut;
    EXPECT_LE(lenient.tail_offset, cut);
  }
}

TEST(TraceEndTest, EveryFlippedLengthBitIsCorruptionNotTorn) {
  TempDir dir;
  for (Compression c : {Compression::kNone, Compression::kZstd}) {
    const std::string bytes = ReadFileBytes(Write(dir, "t.ctrace", 30, c));
    for (size_t start : FrameStarts(bytes)) {
      for (int bit = 0; bit < 8; ++bit) {
        std::string damaged = bytes;
        damaged[start] = static_cast<char>(damaged[start] ^ (1 << bit));
        const Outcome o = ReadThrough(Variant(dir, damaged), true);
        EXPECT_EQ(o.status.code(), StatusCode::kCorruption)
            << "frame at " << start << " bit " << bit << ": " << o.status.message();
      }
    }
  }
}

TEST(TraceEndTest, DamagedEndIsCorruption) {
  TempDir dir;
  const std::string bytes = ReadFileBytes(Write(dir, "t.ctrace", 20));
  for (size_t at = bytes.size() - kEnd; at < bytes.size(); ++at) {  // the marker and every trailer byte
    std::string damaged = bytes;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x10);
    const Outcome o = ReadThrough(Variant(dir, damaged), true);
    EXPECT_EQ(o.status.code(), StatusCode::kCorruption) << at << ": " << o.status.message();
  }
  // Garbage after the trailer.
  for (const std::string& tail : {std::string(1, 'x'), std::string(100, '\0'), std::string(41, '\xff')}) {
    const Outcome o = ReadThrough(Variant(dir, bytes + tail), true);
    EXPECT_EQ(o.status.code(), StatusCode::kCorruption) << o.status.message();
    EXPECT_NE(o.status.message().find("after the trailer"), std::string::npos) << o.status.message();
  }
  // A whole frame removed: the trailer no longer matches the frames.
  const std::vector<size_t> starts = FrameStarts(bytes);
  const std::string removed = bytes.substr(0, starts[3]) + bytes.substr(starts[4]);
  const Outcome o = ReadThrough(Variant(dir, removed), true);
  EXPECT_EQ(o.status.code(), StatusCode::kCorruption) << o.status.message();
  EXPECT_NE(o.status.message().find("trailer"), std::string::npos) << o.status.message();
}

TEST(TraceEndTest, HugeFrameLengthInAWholeFileIsCorruption) {
  TempDir dir;
  const std::string bytes = ReadFileBytes(Write(dir, "t.ctrace", 5));
  const size_t first = FrameStarts(bytes).front();
  // Replace the first frame's one-byte length with a 5-byte varint of 2^30 + 1 (over the limit) and of 2^29 (past the end).
  for (const std::string& length : {std::string("\x81\x80\x80\x80\x04", 5), std::string("\x80\x80\x80\x80\x02", 5)}) {
    const std::string damaged = bytes.substr(0, first) + length + bytes.substr(first + 1);
    const Outcome o = ReadThrough(Variant(dir, damaged), true);
    EXPECT_EQ(o.status.code(), StatusCode::kCorruption) << o.status.message();
  }
}

TEST(TraceEndTest, VersionOneIsRefusedWithTheUpgradeHintAndUpgrades) {
  TempDir dir;
  const std::string path = Write(dir, "t.ctrace", 25, Compression::kZstd);
  std::string v1 = ReadFileBytes(path);
  v1.resize(v1.size() - kEnd);
  v1[8] = 1;
  const std::string v1_path = Variant(dir, v1);
  const Outcome refused = ReadThrough(v1_path, true);
  EXPECT_EQ(refused.status.code(), StatusCode::kUnsupported);
  EXPECT_NE(refused.status.message().find("colibri trace upgrade"), std::string::npos) << refused.status.message();

  const std::string upgraded = dir.File("up.ctrace");
  auto report = UpgradeTrace(v1_path, upgraded, false);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->input_version, 1u);
  EXPECT_EQ(report->records, 25u);
  EXPECT_FALSE(report->torn);
  EXPECT_EQ(testing::ReadAll(upgraded), testing::ReadAll(path));
  EXPECT_EQ(ReadThrough(upgraded).end, TraceEnd::kComplete);

  // A torn v1 file: refused, or its prefix with allow_torn.
  const std::string torn_v1 = Variant(dir, v1.substr(0, v1.size() - 3));
  auto refused_torn = UpgradeTrace(torn_v1, dir.File("up2.ctrace"), false);
  EXPECT_EQ(refused_torn.status().code(), StatusCode::kTruncated);
  EXPECT_FALSE(std::filesystem::exists(dir.File("up2.ctrace")));
  auto salvaged = UpgradeTrace(torn_v1, dir.File("up3.ctrace"), true);
  ASSERT_TRUE(salvaged.ok()) << salvaged.status().message();
  EXPECT_TRUE(salvaged->torn);
  EXPECT_LT(salvaged->records, 25u);
  const Outcome up3 = ReadThrough(dir.File("up3.ctrace"));
  EXPECT_EQ(up3.end, TraceEnd::kComplete);
  EXPECT_EQ(up3.records, salvaged->records);

  // A corrupt input writes nothing.
  std::string corrupt = v1;
  corrupt[corrupt.size() / 2] ^= 0x5a;
  EXPECT_FALSE(UpgradeTrace(Variant(dir, corrupt), dir.File("up4.ctrace"), true).ok());
  EXPECT_FALSE(std::filesystem::exists(dir.File("up4.ctrace")));
}

TEST(TraceEndTest, SpecialFilesAreRefusedByType) {
  TempDir dir;
  const std::string fifo = dir.File("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const struct {
    std::string path;
    const char* says;
  } cases[] = {{fifo, "FIFO"},
               {"/dev/zero", "character device"},
               {"/proc/self/status", "pseudo-file"},
               {dir.path(), "directory"},
               {dir.File("missing"), "no such file"}};
  for (const auto& c : cases) {
    auto reader = TraceReader::Open(c.path);  // must not block on the FIFO
    ASSERT_FALSE(reader.ok()) << c.path;
    EXPECT_NE(reader.status().message().find(c.says), std::string::npos) << reader.status().message();
  }
}

TEST(TraceEndTest, OneWriterPerOutputAndLeftoversSwept) {
  TempDir dir;
  TraceHeader header;
  header.shape = testing::SmallShape();
  const std::string path = dir.File("out.ctrace");
  // What a killed writer leaves: its temp file (no trailer) and an unlocked lock file.
  WriteFileBytes(path + ".partial-999999-0", "COLTRACE leftover");
  WriteFileBytes(path + ".lock", "");
  auto first = TraceWriter::Create(path, header);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_FALSE(std::filesystem::exists(path + ".partial-999999-0")) << "the leftover was not swept";
  auto second = TraceWriter::Create(path, header);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("another writer"), std::string::npos) << second.status().message();
  // The same from another thread (a separate open file description).
  std::thread([&] { EXPECT_FALSE(TraceWriter::Create(path, header).ok()); }).join();
  const auto records = Records(header.shape, 12);
  for (const TraceRecord& r : records) ASSERT_TRUE((*first)->Append(r).ok());
  ASSERT_TRUE((*first)->Close().ok());
  const Outcome whole = ReadThrough(path);
  EXPECT_TRUE(whole.status.ok()) << whole.status.message();
  EXPECT_EQ(whole.records, 12u);
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) names.push_back(entry.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{"out.ctrace"});  // no lock, no temp file left
  // Once the first is done, a new writer may replace it.
  auto third = TraceWriter::Create(path, header);
  ASSERT_TRUE(third.ok()) << third.status().message();
  ASSERT_TRUE((*third)->Close().ok());
  EXPECT_EQ(ReadThrough(path).records, 0u);
}

}  // namespace
}  // namespace colibri::traces
