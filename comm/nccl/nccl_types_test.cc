// Tests of the nccl backend's dtype and reduce-op mapping; no GPU needed.
#include "comm/nccl/nccl_types.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::comm::nccl {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

const CollectiveInfo kInfo{
    .group = "tp", .rank = 1, .group_size = 4, .seq = 9, .op = "all_reduce", .peer = -1};

TEST(NcclTypesTest, DtypesMapOntoNcclsOwn) {
  EXPECT_EQ(ncclDataType(DType::kFloat32), ncclFloat32);
  EXPECT_EQ(ncclDataType(DType::kFloat64), ncclFloat64);
  EXPECT_EQ(ncclDataType(DType::kFloat16), ncclFloat16);
  EXPECT_EQ(ncclDataType(DType::kBFloat16), ncclBfloat16);
  EXPECT_EQ(ncclDataType(DType::kInt8), ncclInt8);
  EXPECT_EQ(ncclDataType(DType::kUInt8), ncclUint8);
  EXPECT_EQ(ncclDataType(DType::kInt32), ncclInt32);
  EXPECT_EQ(ncclDataType(DType::kInt64), ncclInt64);
  EXPECT_EQ(ncclDataType(DType::kBool), ncclUint8);
}

TEST(NcclTypesTest, ArithmeticOpsMapOntoNcclsOwnIncludingAvg) {
  EXPECT_EQ(*ncclReduceOp(ReduceOp::kSum, DType::kFloat32, kInfo), ncclSum);
  EXPECT_EQ(*ncclReduceOp(ReduceOp::kProduct, DType::kInt64, kInfo), ncclProd);
  EXPECT_EQ(*ncclReduceOp(ReduceOp::kMin, DType::kBFloat16, kInfo), ncclMin);
  EXPECT_EQ(*ncclReduceOp(ReduceOp::kMax, DType::kUInt8, kInfo), ncclMax);
  EXPECT_EQ(*ncclReduceOp(ReduceOp::kAvg, DType::kFloat16, kInfo), ncclAvg);
  EXPECT_EQ(*ncclReduceOp(ReduceOp::kAvg, DType::kInt32, kInfo), ncclAvg);
}

TEST(NcclTypesTest, BoolReducesAsLogicalOrAndAnd) {
  EXPECT_EQ(*ncclReduceOp(ReduceOp::kSum, DType::kBool, kInfo), ncclMax);
  EXPECT_EQ(*ncclReduceOp(ReduceOp::kMax, DType::kBool, kInfo), ncclMax);
  EXPECT_EQ(*ncclReduceOp(ReduceOp::kProduct, DType::kBool, kInfo), ncclMin);
  EXPECT_EQ(*ncclReduceOp(ReduceOp::kMin, DType::kBool, kInfo), ncclMin);
  EXPECT_THAT(
      ncclReduceOp(ReduceOp::kAvg, DType::kBool, kInfo).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("avg is not defined on bool")));
}

TEST(NcclTypesTest, BitwiseOpsAreUnsupportedOnEveryDtypeAndSaySo) {
  for (ReduceOp op : {ReduceOp::kBand, ReduceOp::kBor, ReduceOp::kBxor}) {
    for (DType dtype : {DType::kInt32, DType::kBool, DType::kFloat32}) {
      EXPECT_THAT(ncclReduceOp(op, dtype, kInfo).status(),
                  StatusIs(absl::StatusCode::kUnimplemented,
                           AllOf(HasSubstr(absl::StrCat("backend nccl does not support reduce op ",
                                                        std::string(reduceOpName(op)))),
                                 HasSubstr("all_reduce #9 in group tp (rank 1 of 4)"))));
    }
  }
}

}  // namespace
}  // namespace loom::comm::nccl
