#include <gtest/gtest.h>

#include "colibri/traces/crc32c.h"
#include <google/protobuf/unknown_field_set.h>

#include "colibri_trace.pb.h"
#include "record_codec.h"
#include "test_util.h"

namespace colibri::traces {
namespace {

using testing::ReadAll;
using testing::ReadFileBytes;
using testing::TempDir;
using testing::WriteFileBytes;

std::vector<TraceRecord> MakeRecords(const ModelShape& shape, size_t n, uint64_t seed = 7) {
  std::mt19937_64 rng(seed);
  std::vector<TraceRecord> records;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t layer = shape.moe_layer_ids[i % shape.moe_layer_ids.size()];
    const size_t tokens = (i % 5 == 0) ? 7 : 1;
    records.push_back(testing::RandomRecord(shape, rng, i / 10, i / 3, layer, tokens, i));
  }
  return records;
}

std::string WriteTrace(const TempDir& dir, const std::vector<TraceRecord>& records, const ModelShape& shape,
                       Compression compression = Compression::kNone, size_t block_bytes = 1 << 20) {
  const std::string path = dir.File(compression == Compression::kZstd ? "z.ctrace" : "t.ctrace");
  TraceHeader header;
  header.shape = shape;
  header.provenance.importer = "test";
  WriterOptions options;
  options.compression = compression;
  options.block_bytes = block_bytes;
  auto writer = TraceWriter::Create(path, header, options);
  EXPECT_TRUE(writer.ok()) << writer.status().message();
  for (const TraceRecord& r : records) EXPECT_TRUE((*writer)->Append(r).ok());
  EXPECT_TRUE((*writer)->Close().ok());
  return path;
}

TEST(Crc32cTest, KnownVectors) {
  // RFC 3720 B.4 test vectors.
  std::string zeros(32, '\0');
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  std::string ones(32, '\xff');
  EXPECT_EQ(Crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32cExtend(Crc32c("1234", 4), "56789", 5), 0xE3069283u);
}

TEST(ReaderWriterTest, RoundTripUncompressedAndZstd) {
  TempDir dir;
  const ModelShape shape = testing::SmallShape();
  auto records = MakeRecords(shape, 500);
  records[3].gate_weights.assign(records[3].expert_ids.size(), 0.25f);
  records[4].token_ids = {42};
  records[4].arrival_ns = 0;  // present-but-zero must survive
  records[4].end_ns = 123456789;
  records[6].cache_outcomes.assign(records[6].expert_ids.size(), 2);
  ASSERT_EQ(records[5].token_count(), 7u);
  records[5].positions = {5, 9, 11, 12, 20, 21, 30};  // non-contiguous prefill
  records[5].physical_expert_ids = records[5].expert_ids;
  for (Compression c : {Compression::kNone, Compression::kZstd}) {
    const std::string path = WriteTrace(dir, records, shape, c, 4096);
    auto back = ReadAll(path);
    ASSERT_EQ(back.size(), records.size());
    for (size_t i = 0; i < records.size(); ++i) EXPECT_TRUE(back[i] == records[i]) << "record " << i;
    auto reader = TraceReader::Open(path);
    ASSERT_TRUE(reader.ok());
    EXPECT_EQ((*reader)->header().shape.moe_layer_ids, shape.moe_layer_ids);
    EXPECT_EQ((*reader)->header().compression, c);
  }
}

TEST(ReaderWriterTest, HandCodecMatchesLibprotobuf) {
  const ModelShape shape = testing::SmallShape(300, 3);  // 2-byte ids
  std::mt19937_64 rng(3);
  TraceRecord r = testing::RandomRecord(shape, rng, 9, 4, 3, 4, 100);
  r.gate_weights = {0.5f, 0.25f, 0.125f, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  r.token_ids = {1, 300, 70000, 5};
  r.start_ns = 77;
  std::string encoded;
  EncodeRecord(r, 2, &encoded);
  colibri::trace::v1::Record pb;
  ASSERT_TRUE(pb.ParseFromString(encoded));
  EXPECT_EQ(pb.request_id(), 9u);
  EXPECT_EQ(pb.pass_id(), 4u);
  EXPECT_EQ(pb.layer(), 3u);
  EXPECT_EQ(pb.first_position(), 100u);
  EXPECT_EQ(pb.token_count(), 4u);
  EXPECT_EQ(pb.gate_weights_size(), 12);
  EXPECT_EQ(pb.token_ids(2), 70000u);
  EXPECT_TRUE(pb.has_start_ns());
  EXPECT_FALSE(pb.has_end_ns());
  EXPECT_EQ(pb.expert_ids().size(), 24u);
  // And back: libprotobuf's (canonical) encoding decodes to the same record.
  std::string canonical;
  ASSERT_TRUE(pb.SerializeToString(&canonical));
  TraceRecord back;
  ASSERT_TRUE(DecodeRecord(reinterpret_cast<const uint8_t*>(canonical.data()), canonical.size(), 2, &back).ok());
  EXPECT_TRUE(back == r);
  // Unknown fields (from a newer writer) are skipped.
  pb.GetReflection()->MutableUnknownFields(&pb)->AddVarint(99, 5);
  pb.GetReflection()->MutableUnknownFields(&pb)->AddLengthDelimited(100, "future");
  ASSERT_TRUE(pb.SerializeToString(&canonical));
  ASSERT_TRUE(DecodeRecord(reinterpret_cast<const uint8_t*>(canonical.data()), canonical.size(), 2, &back).ok());
  EXPECT_TRUE(back == r);
}

TEST(ReaderWriterTest, TruncatedTailKeepsCompleteRecords) {
  TempDir dir;
  const ModelShape shape = testing::SmallShape();
  const auto records = MakeRecords(shape, 50);
  for (Compression c : {Compression::kNone, Compression::kZstd}) {
    const std::string path = WriteTrace(dir, records, shape, c, 512);
    const std::string bytes = ReadFileBytes(path);
    size_t complete_seen = 0;
    for (size_t cut = bytes.size() - 1; cut > bytes.size() - 300; cut -= 7) {
      const std::string cut_path = dir.File("cut.ctrace");
      WriteFileBytes(cut_path, bytes.substr(0, cut));
      auto reader = TraceReader::Open(cut_path, ReadOptions{.allow_torn = true});
      ASSERT_TRUE(reader.ok()) << reader.status().message();
      TraceRecord r;
      size_t n = 0;
      while (true) {
        auto more = (*reader)->Next(&r);
        ASSERT_TRUE(more.ok()) << more.status().message();
        if (!more.value()) break;
        EXPECT_TRUE(r == records[n]);
        ++n;
      }
      // Every cut is torn (the trailer is gone), at a frame boundary too.
      EXPECT_TRUE((*reader)->truncated()) << cut;
      EXPECT_EQ((*reader)->end(), TraceEnd::kTorn);
      EXPECT_LE((*reader)->tail_offset(), cut);
      if (cut < bytes.size() - 41) EXPECT_LT(n, records.size());  // 41: the end marker and trailer
      // Without allow_torn the same file is an error naming the offset and the prefix.
      auto strict = TraceReader::Open(cut_path);
      ASSERT_TRUE(strict.ok());
      Status error;
      while (true) {
        auto more = (*strict)->Next(&r);
        if (!more.ok()) {
          error = more.status();
          break;
        }
        ASSERT_TRUE(more.value()) << "a torn file read as whole";
      }
      EXPECT_EQ(error.code(), StatusCode::kTruncated);
      EXPECT_NE(error.message().find("torn at byte offset " + std::to_string((*reader)->tail_offset())),
                std::string::npos)
          << error.message();
      EXPECT_NE(error.message().find("a prefix of " + std::to_string(n) + " whole records"), std::string::npos)
          << error.message();
      complete_seen = std::max(complete_seen, n);
    }
    EXPECT_GT(complete_seen, 0u);
  }
}

TEST(ReaderWriterTest, FlippedByteIsCorruptionWithOffsetAndIndex) {
  TempDir dir;
  const ModelShape shape = testing::SmallShape();
  const auto records = MakeRecords(shape, 40);
  const std::string path = WriteTrace(dir, records, shape);
  std::string bytes = ReadFileBytes(path);
  bytes[bytes.size() / 2] ^= 0x40;
  const std::string bad = dir.File("bad.ctrace");
  WriteFileBytes(bad, bytes);
  auto reader = TraceReader::Open(bad);
  ASSERT_TRUE(reader.ok());
  TraceRecord r;
  Status error;
  while (true) {
    auto more = (*reader)->Next(&r);
    if (!more.ok()) {
      error = more.status();
      break;
    }
    ASSERT_TRUE(more.value()) << "corruption went unnoticed";
  }
  EXPECT_EQ(error.code(), StatusCode::kCorruption);
  EXPECT_NE(error.message().find("byte offset"), std::string::npos) << error.message();
  EXPECT_NE(error.message().find("record index"), std::string::npos) << error.message();
}

TEST(ReaderWriterTest, BadMagicVersionEmptyAndHugeLength) {
  TempDir dir;
  const ModelShape shape = testing::SmallShape();
  const std::string path = WriteTrace(dir, MakeRecords(shape, 3), shape);
  const std::string good = ReadFileBytes(path);

  const std::string empty = dir.File("empty");
  WriteFileBytes(empty, "");
  auto r1 = TraceReader::Open(empty);
  ASSERT_FALSE(r1.ok());
  EXPECT_NE(r1.status().message().find("empty file"), std::string::npos);

  const std::string csv = dir.File("not.ctrace");
  WriteFileBytes(csv, "turn,phase,step\n0,0,0\n");
  auto r2 = TraceReader::Open(csv);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("not a Colibri trace"), std::string::npos);

  std::string v3 = good;
  v3[8] = 3;
  const std::string vpath = dir.File("v3.ctrace");
  WriteFileBytes(vpath, v3);
  auto r3 = TraceReader::Open(vpath);
  ASSERT_FALSE(r3.ok());
  EXPECT_EQ(r3.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r3.status().message().find("version 3"), std::string::npos);

  // A frame whose length prefix claims 2^40 bytes.
  auto header = ReadTraceHeader(path);
  ASSERT_TRUE(header.ok());
  std::string huge = good.substr(0, good.size());
  const size_t first_frame = 20 + (static_cast<uint8_t>(good[12]) | (static_cast<uint8_t>(good[13]) << 8));
  huge.resize(first_frame);
  huge += "\x80\x80\x80\x80\x80\x80\x01";  // varint 2^42
  huge += std::string(16, 'x');
  const std::string hpath = dir.File("huge.ctrace");
  WriteFileBytes(hpath, huge);
  auto r4 = TraceReader::Open(hpath);
  ASSERT_TRUE(r4.ok());
  TraceRecord rec;
  auto more = (*r4)->Next(&rec);
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.status().code(), StatusCode::kCorruption);
  EXPECT_NE(more.status().message().find("exceeds"), std::string::npos);
}

TEST(ReaderWriterTest, WriterRejectsInvalidRecords) {
  TempDir dir;
  const ModelShape shape = testing::SmallShape();
  TraceHeader header;
  header.shape = shape;
  auto writer = TraceWriter::Create(dir.File("w.ctrace"), header);
  ASSERT_TRUE(writer.ok());
  TraceRecord r;
  r.layer = 1;
  r.positions = {0};
  r.expert_ids = {3, 3};
  EXPECT_NE((*writer)->Append(r).message().find("chosen twice"), std::string::npos);
  r.expert_ids = {3, 16};
  EXPECT_NE((*writer)->Append(r).message().find("out of range"), std::string::npos);
  r.expert_ids = {3, 4};
  r.layer = 2;
  EXPECT_NE((*writer)->Append(r).message().find("not a MoE layer"), std::string::npos);
}

TEST(ReaderWriterTest, WriterLeavesNothingOnAbandon) {
  TempDir dir;
  TraceHeader header;
  header.shape = testing::SmallShape();
  const std::string path = dir.File("a.ctrace");
  {
    auto writer = TraceWriter::Create(path, header);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Append(MakeRecords(header.shape, 1)[0]).ok());
    ASSERT_TRUE((*writer)->Flush().ok());
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "an abandoned writer left files";
}

}  // namespace
}  // namespace colibri::traces
