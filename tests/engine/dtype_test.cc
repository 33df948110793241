#include "colibri/engine/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "colibri/engine/expert_layout.h"

namespace colibri::engine {
namespace {

TEST(DTypeTest, NamesRoundTrip) {
  for (DType d : {DType::kFp32, DType::kBf16, DType::kFp16, DType::kInt8}) EXPECT_EQ(ParseDType(DTypeName(d)).value(), d);
  EXPECT_FALSE(ParseDType("fp8").ok());
}

TEST(DTypeTest, Fp16EveryValueRoundTrips) {
  for (uint32_t v = 0; v < 65536; ++v) {
    const float f = Fp16ToFloat(static_cast<uint16_t>(v));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Fp16ToFloat(FloatToFp16(f))));
      continue;
    }
    EXPECT_EQ(FloatToFp16(f), v) << "half bits " << v;
  }
  EXPECT_EQ(Fp16ToFloat(0x3C00), 1.0f);
  EXPECT_EQ(Fp16ToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(FloatToFp16(65520.0f), 0x7C00);                 // rounds to infinity
  EXPECT_EQ(FloatToFp16(65504.0f), 0x7BFF);                 // largest finite
  EXPECT_EQ(FloatToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie rounds to even
  EXPECT_EQ(FloatToFp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
}

TEST(DTypeTest, Bf16RoundsToNearestEven) {
  for (uint32_t v = 0; v < 65536; v += 7) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(v));
    if (!std::isnan(f)) {
      EXPECT_EQ(FloatToBf16(f), v);
    }
  }
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);  // tie to even
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(ExpertLayoutTest, MatricesAlignedBlockPadded) {
  const ExpertLayout l = ExpertLayout::Make(DType::kBf16, 2048, 768);
  EXPECT_EQ(l.gate_offset, 0u);
  EXPECT_EQ(l.up_offset, 2048u * 768 * 2);
  EXPECT_EQ(l.down_offset, 2u * 2048 * 768 * 2);
  EXPECT_EQ(l.payload_bytes, 3u * 2048 * 768 * 2);
  EXPECT_EQ(l.block_bytes % 4096, 0u);
  const ExpertLayout q = ExpertLayout::Make(DType::kInt8, 100, 30);
  EXPECT_EQ(q.up_offset % 64, 0u);
  EXPECT_GT(q.gate_scales_offset, q.down_offset);
  EXPECT_EQ(q.payload_bytes, q.down_scales_offset + 4 * 100);
  EXPECT_EQ(q.payload_bytes, 9680u);  // 3 matrices of 3000 bytes and 3 scale arrays, each 64-byte aligned
  EXPECT_EQ(q.block_bytes, 12288u);
  EXPECT_EQ(l.MacsPerToken(), 3ull * 2048 * 768);
}

}  // namespace
}  // namespace colibri::engine
