// Tests of the f16/bf16 conversions the mpi backend's reduction ops use.
#include "comm/half_float.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace loom::comm {
namespace {

TEST(HalfFloatTest, Float16KnownEncodings) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);  // the largest finite half
  EXPECT_EQ(floatToHalf(1e6f), 0x7c00);      // overflows to infinity
  EXPECT_EQ(halfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(HalfFloatTest, Float16RoundsToNearestEven) {
  // 2049 lies halfway between the halves 2048 and 2050; even wins.
  EXPECT_EQ(halfToFloat(floatToHalf(2049.0f)), 2048.0f);
  EXPECT_EQ(halfToFloat(floatToHalf(2051.0f)), 2052.0f);
}

TEST(HalfFloatTest, Bfloat16KnownEncodingsAndRounding) {
  EXPECT_EQ(floatToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBfloat16(-3.0f), 0xc040);
  EXPECT_EQ(bfloat16ToFloat(0x4049), 3.140625f);
  // 257 is halfway between 256 and 258 (8 mantissa bits); even wins.
  EXPECT_EQ(bfloat16ToFloat(floatToBfloat16(257.0f)), 256.0f);
  EXPECT_EQ(bfloat16ToFloat(floatToBfloat16(259.0f)), 260.0f);
  EXPECT_EQ(bfloat16ToFloat(floatToBfloat16(std::numeric_limits<float>::max())),
            std::numeric_limits<float>::infinity());
}

TEST(HalfFloatTest, Bfloat16KeepsNaNsQuietWhenTruncatingWouldMakeAnInfinity) {
  // A NaN whose payload sits only in the low 16 bits.
  const float nan = std::bit_cast<float>(uint32_t{0x7f800001});
  ASSERT_TRUE(std::isnan(nan));
  EXPECT_TRUE(std::isnan(bfloat16ToFloat(floatToBfloat16(nan))));
}

TEST(HalfFloatTest, EverySmallIntegerRoundTrips) {
  for (int i = -256; i <= 256; ++i) {
    EXPECT_EQ(halfToFloat(floatToHalf(static_cast<float>(i))), i);
    EXPECT_EQ(bfloat16ToFloat(floatToBfloat16(static_cast<float>(i))), i);
  }
}

}  // namespace
}  // namespace loom::comm
