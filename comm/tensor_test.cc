// Tests of tensor views, dtype facts and reduce-op validity.
#include "comm/tensor.h"

#include <cstdint>
#include <vector>

#include "comm/reduce_op.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::comm {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(DTypeTest, SizesNamesAndRoundTrip) {
  EXPECT_EQ(dtypeSize(DType::kBFloat16), 2u);
  EXPECT_EQ(dtypeSize(DType::kInt64), 8u);
  EXPECT_EQ(dtypeSize(DType::kBool), 1u);
  for (DType dtype : kAllDTypes) EXPECT_EQ(*dtypeFromName(dtypeName(dtype)), dtype);
  EXPECT_THAT(dtypeFromName("f8").status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                                     AllOf(HasSubstr("'f8'"), HasSubstr("bf16"))));
  EXPECT_TRUE(isFloatingPoint(DType::kFloat16));
  EXPECT_FALSE(isFloatingPoint(DType::kBool));
}

TEST(TensorTest, ViewFacts) {
  std::vector<float> values(12);
  Tensor t(values.data(), DType::kFloat32, {3, 4});
  EXPECT_EQ(t.numel(), 12);
  EXPECT_EQ(t.nbytes(), 48u);
  EXPECT_EQ(t.toString(), "f32[3, 4] on cpu");
  EXPECT_EQ(t.flat().shape(), std::vector<int64_t>{12});
  EXPECT_EQ(Tensor(nullptr, DType::kBFloat16, {2}, Device::cuda(3)).toString(),
            "bf16[2] on cuda:3");
}

TEST(TensorTest, NarrowSharesMemoryAlongDimZero) {
  std::vector<int32_t> values = {0, 1, 2, 3, 4, 5, 6, 7};
  Tensor t(values.data(), DType::kInt32, {4, 2});
  absl::StatusOr<Tensor> rows = t.narrow(1, 2);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(rows->dataAs<int32_t>()[0], 2);
  EXPECT_EQ(rows->dataAs<int32_t>(), values.data() + 2);
  EXPECT_THAT(t.narrow(3, 2).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[3, 5)")));
  float scalar = 0;
  EXPECT_THAT(Tensor(&scalar, DType::kFloat32, {}).narrow(0, 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("0-d")));
}

// A vector's view takes its dtype from the element type, so it covers
// exactly the vector's bytes (a float vector once could be declared i64 and
// read past its end).
template <typename T>
void expectViewCoversTheVector(DType want) {
  std::vector<T> values(3);
  const Tensor view = Tensor::of(values);
  EXPECT_EQ(view.dtype(), want);
  EXPECT_EQ(view.data(), values.data());
  EXPECT_EQ(view.numel(), 3);
  EXPECT_EQ(view.nbytes(), sizeof(T) * values.size());
}

TEST(TensorTest, AVectorsViewHasItsElementTypesDtype) {
  expectViewCoversTheVector<float>(DType::kFloat32);
  expectViewCoversTheVector<double>(DType::kFloat64);
  expectViewCoversTheVector<int8_t>(DType::kInt8);
  expectViewCoversTheVector<uint8_t>(DType::kUInt8);
  expectViewCoversTheVector<int32_t>(DType::kInt32);
  expectViewCoversTheVector<int64_t>(DType::kInt64);
}

TEST(TensorTest, CheckTensorNamesBothSides) {
  std::vector<float> values(4);
  Tensor t = Tensor::of(values);
  EXPECT_TRUE(checkTensor(t, "input", DType::kFloat32, 4, Device::cpu()).ok());
  EXPECT_THAT(checkTensor(t, "all_gather output 2", DType::kFloat32, 8, Device::cpu()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("all_gather output 2"), HasSubstr("4 elements"),
                             HasSubstr("8 elements"))));
  EXPECT_THAT(checkTensor(t, "input", DType::kInt32, 4, Device::cpu()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must be i32")));
  EXPECT_THAT(checkTensor(t, "input", DType::kFloat32, 4, Device::cuda(0)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cuda:0")));
  EXPECT_THAT(checkTensor(Tensor(nullptr, DType::kFloat32, {4}), "input", DType::kFloat32, 4,
                          Device::cpu()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("null data pointer")));
}

TEST(ReduceOpTest, BitwiseOpsNeedIntegers) {
  for (ReduceOp op : kAllReduceOps) {
    EXPECT_TRUE(checkReduceOpSupports(op, DType::kInt32).ok()) << reduceOpName(op);
    if (op != ReduceOp::kAvg) {
      EXPECT_TRUE(checkReduceOpSupports(op, DType::kBool).ok()) << reduceOpName(op);
    }
  }
  EXPECT_THAT(
      checkReduceOpSupports(ReduceOp::kAvg, DType::kBool),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("avg is not defined on bool")));
  for (ReduceOp op : {ReduceOp::kBand, ReduceOp::kBor, ReduceOp::kBxor}) {
    EXPECT_THAT(checkReduceOpSupports(op, DType::kFloat32),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr(std::string(reduceOpName(op))), HasSubstr("got f32"))));
  }
  EXPECT_TRUE(checkReduceOpSupports(ReduceOp::kAvg, DType::kBFloat16).ok());
}

}  // namespace
}  // namespace loom::comm
