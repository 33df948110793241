// int8 row quantization and `QuantizeModel`: conversions between every dtype
// and the error report they produce.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "colibri/engine/model.h"
#include "model_codec.h"
#include "model_test_util.h"

namespace colibri::engine {
namespace {

using model_detail::MatrixKind;
using ::testing::HasSubstr;
using testing_util::ReadBytes;
using testing_util::ScratchDir;
using testing_util::SmallShape;

TEST(QuantizeTest, Int8RowRoundsHalfToEvenWithOneScalePerRow) {
  const float row[] = {127.0f, 2.5f, 3.5f, -2.5f, -127.0f, 0.49f, -0.5f, 126.5f};
  int8_t q[8];
  EXPECT_EQ(model_detail::QuantizeInt8Row(row, 8, q), 1.0f);  // max |row| / 127
  EXPECT_THAT(std::vector<int>(q, q + 8), ::testing::ElementsAre(127, 2, 4, -2, -127, 0, 0, 126));

  const float zeros[] = {0.0f, -0.0f, 0.0f};
  int8_t qz[3] = {1, 1, 1};
  EXPECT_EQ(model_detail::QuantizeInt8Row(zeros, 3, qz), 0.0f);
  EXPECT_THAT(std::vector<int>(qz, qz + 3), ::testing::ElementsAre(0, 0, 0));
}

TEST(QuantizeTest, Int8RowsDecodeWithinHalfAScaleAndRefuseNonFinite) {
  const ExpertLayout layout = ExpertLayout::Make(DType::kInt8, 16, 8);
  std::vector<std::byte> block(layout.block_bytes);
  std::vector<float> row(8), decoded(8);
  for (uint32_t r = 0; r < 16; ++r) {
    for (uint32_t c = 0; c < 8; ++c) row[c] = std::sin(1.0f + r * 8.0f + c) * (1.0f + r);
    ASSERT_TRUE(model_detail::EncodeRow(layout, MatrixKind::kDown, r, row.data(), block.data()).ok());
    model_detail::DecodeRow(layout, MatrixKind::kDown, r, block.data(), decoded.data());
    float max_abs = 0;
    for (float v : row) max_abs = std::max(max_abs, std::fabs(v));
    for (uint32_t c = 0; c < 8; ++c) EXPECT_LE(std::fabs(decoded[c] - row[c]), max_abs / 254.0f * 1.0001f);
  }
  row[3] = std::numeric_limits<float>::infinity();
  const Status refused = model_detail::EncodeRow(layout, MatrixKind::kGate, 2, row.data(), block.data());
  EXPECT_THAT(refused.message(), HasSubstr("row 2 of gate holds a non-finite weight"));
}

TEST(QuantizeTest, Fp32ToInt8ReportsSaneErrors) {
  ScratchDir scratch;
  ASSERT_TRUE(SynthModel(SmallShape(DType::kFp32), 9, scratch.Path("fp32")).ok());
  auto report = QuantizeModel(scratch.Path("fp32"), DType::kInt8, scratch.Path("int8"), QuantizeOptions{});
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->source_dtype, DType::kFp32);
  EXPECT_EQ(report->config.dtype, DType::kInt8);
  EXPECT_EQ(report->config.source.at("quantized_from_dtype"), "fp32");
  EXPECT_EQ(report->config.source.at("seed"), "9");  // the source's provenance is kept
  for (int kind = 0; kind < 3; ++kind) {
    SCOPED_TRACE(kind);
    const WeightError& e = report->weights[kind];
    // Uniform weights in [-b, b]: rounding error ~ U(-scale/2, scale/2) with scale ~ b/127,
    // so relative RMS ~ (b / 127 / sqrt(12)) / (b / sqrt(3)) = 1/254.
    EXPECT_NEAR(e.relative_rms(), 1.0 / 254, 0.3 / 254);
    const double bound = std::sqrt(3.0 / (kind == 2 ? 32 : 64));
    EXPECT_GT(e.max_abs, 0.0);
    EXPECT_LE(e.max_abs, bound / 254 * 1.0001);
    EXPECT_NEAR(e.weight_rms, bound / std::sqrt(3.0), 0.1 * bound);
  }
  const OutputError& out = report->output;
  EXPECT_EQ(out.experts_checked, 2u * 2);
  EXPECT_EQ(out.tokens, 4u);
  EXPECT_GT(out.output_rms, 0.05);  // activations stay O(1) (a SwiGLU of unit-variance inputs)
  EXPECT_LT(out.output_rms, 2.0);
  EXPECT_GT(out.relative_rms(), 0.0);
  EXPECT_LT(out.relative_rms(), 0.02);
  EXPECT_TRUE(VerifyModel(scratch.Path("int8"), true)->ok());
}

// Synth rounds the same fp32 draws for every dtype, so converting the fp32
// model gives byte-identical expert blocks; same-dtype and widening
// conversions are exact.
TEST(QuantizeTest, ConversionsMatchSynthAndExactOnesReportZero) {
  ScratchDir scratch;
  ASSERT_TRUE(SynthModel(SmallShape(DType::kFp32), 4, scratch.Path("fp32")).ok());
  for (DType dtype : {DType::kBf16, DType::kFp16, DType::kInt8}) {
    SCOPED_TRACE(DTypeName(dtype));
    const std::string synth = scratch.Path(std::string("synth-") + DTypeName(dtype));
    const std::string converted = scratch.Path(std::string("conv-") + DTypeName(dtype));
    ASSERT_TRUE(SynthModel(SmallShape(dtype), 4, synth).ok());
    ASSERT_TRUE(QuantizeModel(scratch.Path("fp32"), dtype, converted, {}).ok());
    EXPECT_EQ(ReadBytes(synth + "/experts.bin"), ReadBytes(converted + "/experts.bin"));
    EXPECT_EQ(ReadBytes(synth + "/gating.bin"), ReadBytes(converted + "/gating.bin"));
  }
  for (auto [from, to] : {std::pair{"fp32", DType::kFp32}, std::pair{"synth-bf16", DType::kFp32},
                          std::pair{"synth-int8", DType::kFp32}}) {
    SCOPED_TRACE(from);
    auto report = QuantizeModel(scratch.Path(from), to, scratch.Path(std::string(from) + "-wide"), {});
    ASSERT_TRUE(report.ok()) << report.status().message();
    for (const WeightError& e : report->weights) {
      EXPECT_EQ(e.max_abs, 0.0);
      EXPECT_GT(e.weight_rms, 0.0);
    }
    EXPECT_EQ(report->output.max_abs, 0.0);
  }
}

TEST(QuantizeTest, RefusesCorruptSourceAndUsedOutput) {
  ScratchDir scratch;
  ASSERT_TRUE(SynthModel(SmallShape(DType::kBf16), 1, scratch.Path("m")).ok());
  auto used = QuantizeModel(scratch.Path("m"), DType::kInt8, scratch.Path("m"), {});
  ASSERT_FALSE(used.ok());
  EXPECT_THAT(used.status().message(), HasSubstr("not empty"));
  std::vector<char> bytes = ReadBytes(scratch.Path("m/gating.bin"));
  bytes[10] ^= 0x40;
  testing_util::WriteBytes(scratch.Path("m/gating.bin"), bytes);
  auto corrupt = QuantizeModel(scratch.Path("m"), DType::kInt8, scratch.Path("out"), {});
  ASSERT_FALSE(corrupt.ok());
  EXPECT_THAT(corrupt.status().message(), HasSubstr("gating.bin: sha256"));
  EXPECT_FALSE(std::filesystem::exists(scratch.Path("out")));
}

}  // namespace
}  // namespace colibri::engine
