// Tests of the Gloo backend's reduction arithmetic: bf16 rounding, the
// function chosen for each (op, dtype), its in-place form, and AVG's
// division.
#include "comm/gloo/gloo_reduce.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "comm/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::comm::gloo {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(GlooReduceTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(floatToBf16(1.0f).bits, 0x3F80);
  EXPECT_EQ(bf16ToFloat(BFloat16{0x3F80}), 1.0f);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even one.
  EXPECT_EQ(floatToBf16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3F80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up.
  EXPECT_EQ(floatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3F82);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(GlooReduceTest, EveryOpOnIntegers) {
  const std::vector<int32_t> a = {6, -3, 5};
  const std::vector<int32_t> b = {3, 4, -5};
  auto apply = [&](ReduceOp op) {
    std::vector<int32_t> out(3);
    ReduceFn fn = *reduceFunction(op, DType::kInt32);
    fn(out.data(), a.data(), b.data(), out.size());
    return out;
  };
  EXPECT_THAT(apply(ReduceOp::kSum), ElementsAre(9, 1, 0));
  EXPECT_THAT(apply(ReduceOp::kAvg), ElementsAre(9, 1, 0));  // the division comes later
  EXPECT_THAT(apply(ReduceOp::kProduct), ElementsAre(18, -12, -25));
  EXPECT_THAT(apply(ReduceOp::kMin), ElementsAre(3, -3, -5));
  EXPECT_THAT(apply(ReduceOp::kMax), ElementsAre(6, 4, 5));
  EXPECT_THAT(apply(ReduceOp::kBand), ElementsAre(6 & 3, -3 & 4, 5 & -5));
  EXPECT_THAT(apply(ReduceOp::kBor), ElementsAre(6 | 3, -3 | 4, 5 | -5));
  EXPECT_THAT(apply(ReduceOp::kBxor), ElementsAre(6 ^ 3, -3 ^ 4, 5 ^ -5));
}

TEST(GlooReduceTest, BoolOpsAreLogical) {
  const bool a[] = {true, true, false, false};
  const bool b[] = {true, false, true, false};
  auto apply = [&](ReduceOp op) {
    std::vector<uint8_t> out(4);
    (*reduceFunction(op, DType::kBool))(out.data(), a, b, 4);
    return out;
  };
  EXPECT_THAT(apply(ReduceOp::kSum), ElementsAre(1, 1, 1, 0));
  EXPECT_THAT(apply(ReduceOp::kProduct), ElementsAre(1, 0, 0, 0));
  EXPECT_THAT(apply(ReduceOp::kMin), ElementsAre(1, 0, 0, 0));
  EXPECT_THAT(apply(ReduceOp::kMax), ElementsAre(1, 1, 1, 0));
  EXPECT_THAT(apply(ReduceOp::kBxor), ElementsAre(0, 1, 1, 0));
}

TEST(GlooReduceTest, Bf16ArithmeticRoundsEachResult) {
  const BFloat16 a[] = {floatToBf16(1.0f), floatToBf16(3.0f)};
  const BFloat16 b[] = {floatToBf16(std::ldexp(1.0f, -8)), floatToBf16(-2.0f)};
  BFloat16 out[2];
  (*reduceFunction(ReduceOp::kSum, DType::kBFloat16))(out, a, b, 2);
  EXPECT_EQ(bf16ToFloat(out[0]), 1.0f);  // 1 + 2^-8 rounds back to 1
  EXPECT_EQ(bf16ToFloat(out[1]), 1.0f);
  (*reduceFunction(ReduceOp::kMin, DType::kBFloat16))(out, a, b, 2);
  EXPECT_EQ(bf16ToFloat(out[1]), -2.0f);
  (*reduceFunction(ReduceOp::kProduct, DType::kBFloat16))(out, a, b, 2);
  EXPECT_EQ(bf16ToFloat(out[1]), -6.0f);
}

TEST(GlooReduceTest, BitwiseOpsOnFloatsAreRefused) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    EXPECT_THAT(
        reduceFunction(ReduceOp::kBxor, dtype).status(),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs an integer or bool tensor")));
  }
}

TEST(GlooReduceTest, AverageDividesInTheDtypesArithmetic) {
  std::vector<int32_t> ints = {7, -7, 8};
  ASSERT_TRUE(divideInPlace(ints.data(), DType::kInt32, 3, 2).ok());
  EXPECT_THAT(ints, ElementsAre(3, -3, 4));  // truncation toward zero
  std::vector<float> floats = {1, 2};
  ASSERT_TRUE(divideInPlace(floats.data(), DType::kFloat32, 2, 3).ok());
  EXPECT_EQ(floats[0], 1.0f / 3.0f);
  BFloat16 bf[] = {floatToBf16(3.0f)};
  ASSERT_TRUE(divideInPlace(bf, DType::kBFloat16, 1, 2).ok());
  EXPECT_EQ(bf16ToFloat(bf[0]), 1.5f);
  bool flags[] = {true};
  EXPECT_THAT(
      divideInPlace(flags, DType::kBool, 1, 2),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("avg is not defined on bool")));
}

}  // namespace
}  // namespace loom::comm::gloo
