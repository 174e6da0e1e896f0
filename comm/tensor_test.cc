// Tests of tensor views, dtype facts and reduce-op validity.
#include "comm/tensor.h"

#include <cstdint>
#include <span>
#include <utility>
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

// Views of temporaries would dangle, so they do not compile.
template <typename V>
concept Viewable = requires(V&& values) { Tensor::of(std::forward<V>(values)); };
static_assert(Viewable<std::vector<float>&>);
static_assert(Viewable<const std::vector<float>&>);
static_assert(!Viewable<std::vector<float>>);
static_assert(!Viewable<const std::vector<float>>);

TEST(TensorTest, ConstDataGivesReadOnlyViews) {
  std::vector<int32_t> values = {1, 2, 3, 4};
  const std::vector<int32_t>& read_only = values;
  EXPECT_TRUE(Tensor::of(values).writable());
  EXPECT_FALSE(Tensor::of(read_only).writable());
  EXPECT_EQ(Tensor::of(read_only).data(), values.data());
  // Slices and flat views keep the flag.
  absl::StatusOr<Tensor> rows = Tensor::view(read_only, {2, 2});
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_FALSE(rows->writable());
  EXPECT_FALSE(rows->narrow(1, 1)->writable());
  EXPECT_FALSE(rows->flat().writable());
  EXPECT_FALSE(Tensor::constView(values.data(), DType::kInt32, {4}).writable());
  EXPECT_TRUE(Tensor::view(values, {4})->narrow(0, 2)->writable());
}

TEST(TensorTest, ViewsCheckTheirShapeAgainstTheData) {
  std::vector<double> values(6);
  absl::StatusOr<Tensor> matrix = Tensor::view(values, {2, 3});
  ASSERT_TRUE(matrix.ok()) << matrix.status();
  EXPECT_EQ(matrix->toString(), "f64[2, 3] on cpu");
  EXPECT_EQ(matrix->nbytes(), sizeof(double) * 6);
  EXPECT_THAT(
      Tensor::view(values, {4, 2}).status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("f64[4, 2] view needs 8 elements"), HasSubstr("the data has 6"))));
  EXPECT_THAT(Tensor::view(values, {-2, -3}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("negative dim")));
  const double scalar = 1.5;
  absl::StatusOr<Tensor> zero_d = Tensor::view(std::span<const double>(&scalar, 1), {});
  ASSERT_TRUE(zero_d.ok()) << zero_d.status();
  EXPECT_EQ(zero_d->numel(), 1);
  EXPECT_FALSE(zero_d->writable());
}

TEST(OwnedTensorTest, OwnsZeroedMemoryAndChecksItsElementType) {
  OwnedTensor tensor(DType::kInt64, {2, 3});
  EXPECT_EQ(tensor.numel(), 6);
  EXPECT_EQ(tensor.nbytes(), 48u);
  EXPECT_EQ(tensor.view().toString(), "i64[2, 3] on cpu");
  EXPECT_TRUE(tensor.view().writable());
  EXPECT_FALSE(std::as_const(tensor).view().writable());
  absl::StatusOr<std::span<int64_t>> values = tensor.values<int64_t>();
  ASSERT_TRUE(values.ok()) << values.status();
  for (int64_t v : *values) EXPECT_EQ(v, 0);
  (*values)[5] = 7;
  EXPECT_EQ(tensor.view().dataAs<int64_t>()[5], 7);
  EXPECT_THAT(tensor.values<float>().status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("holds i64 elements, not f32"))));
  EXPECT_EQ(tensor.bytes().size(), 48u);

  const OwnedTensor copied = OwnedTensor::of(std::vector<float>{1.5f, -2});
  EXPECT_EQ(copied.dtype(), DType::kFloat32);
  EXPECT_EQ((*copied.values<float>())[1], -2);
  OwnedTensor moved = OwnedTensor::of(std::vector<uint8_t>{});
  EXPECT_EQ(moved.numel(), 0);
  EXPECT_NE(moved.view().data(), nullptr);
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
