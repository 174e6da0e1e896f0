// Tests for computeLocalShape: even, multi-axis, padded and partial
// placements, and the diagnostics of placements that do not fit the mesh.
#include "planner/dialect/dist/ir/local_shape.h"

#include <cstdint>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"
#include "planner/dialect/dist/ir/dist_attrs.h"
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/dialect/dist/ir/dist_ops.h"

namespace loom::planner::dist {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class LocalShapeTest : public ::testing::Test {
 protected:
  LocalShapeTest() {
    context_.loadDialect<DistDialect>();
    module_ = mlir::parseSourceString<mlir::ModuleOp>(
        R"mlir(dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"])mlir", &context_);
    mesh_ = llvm::cast<MeshOp>(module_->getBody()->front());
  }

  // The local shape of `global` under `axes` on mesh<dp=2, tp=4>; a failure
  // leaves its message in `error_`.
  mlir::FailureOr<llvm::SmallVector<int64_t>> localShape(llvm::ArrayRef<int64_t> global,
                                                         llvm::ArrayRef<AxisPlacement> axes) {
    auto placement =
        PlacementAttr::get(&context_, mlir::FlatSymbolRefAttr::get(&context_, "mesh"), axes);
    mlir::ScopedDiagnosticHandler handler(&context_, [&](mlir::Diagnostic& diag) {
      if (diag.getSeverity() == mlir::DiagnosticSeverity::Error) {
        error_ = diag.str();
      }
      return mlir::success();
    });
    return computeLocalShape(global, placement, mesh_,
                             [&] { return mlir::emitError(mlir::UnknownLoc::get(&context_)); });
  }

  mlir::MLIRContext context_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
  MeshOp mesh_;
  std::string error_;
};

TEST_F(LocalShapeTest, ReplicatedKeepsTheGlobalShape) {
  auto local = localShape({8, 16}, {AxisPlacement::replicate(), AxisPlacement::replicate()});
  ASSERT_TRUE(mlir::succeeded(local));
  EXPECT_THAT(*local, ElementsAre(8, 16));
}

TEST_F(LocalShapeTest, ShardsDivideTheirDims) {
  auto local = localShape({8, 16}, {AxisPlacement::shard(0), AxisPlacement::shard(1)});
  ASSERT_TRUE(mlir::succeeded(local));
  EXPECT_THAT(*local, ElementsAre(4, 4));
}

TEST_F(LocalShapeTest, TwoAxesOnOneDimMultiply) {
  auto local = localShape({16, 3}, {AxisPlacement::shard(0), AxisPlacement::shard(0)});
  ASSERT_TRUE(mlir::succeeded(local));
  EXPECT_THAT(*local, ElementsAre(2, 3));
}

TEST_F(LocalShapeTest, PartialLeavesShapesAlone) {
  auto local = localShape({5, 7}, {AxisPlacement::partial(ReductionKind::Sum),
                                   AxisPlacement::partial(ReductionKind::Max)});
  ASSERT_TRUE(mlir::succeeded(local));
  EXPECT_THAT(*local, ElementsAre(5, 7));
}

TEST_F(LocalShapeTest, PaddedRoundsUp) {
  // 11 over dp=2 pads to 12 (6 rows each); 10 over tp=4 pads to 12 (3 rows).
  auto local = localShape({11, 10}, {AxisPlacement::shard(0, true), AxisPlacement::shard(1, true)});
  ASSERT_TRUE(mlir::succeeded(local));
  EXPECT_THAT(*local, ElementsAre(6, 3));
}

TEST_F(LocalShapeTest, PaddedOverTwoAxesUsesTheirProduct) {
  // 9 over dp x tp = 8 ranks: 2 rows each, padded to 16.
  auto local = localShape({9}, {AxisPlacement::shard(0, true), AxisPlacement::shard(0, true)});
  ASSERT_TRUE(mlir::succeeded(local));
  EXPECT_THAT(*local, ElementsAre(2));
}

TEST_F(LocalShapeTest, RefusesAnEntryCountOtherThanTheMeshRank) {
  EXPECT_TRUE(mlir::failed(localShape({8}, {AxisPlacement::shard(0)})));
  EXPECT_THAT(error_, HasSubstr("placement has 1 entries but @mesh has 2 axes "
                                "(dp=2, tp=4); give one entry per mesh axis"));
}

TEST_F(LocalShapeTest, RefusesADimOutOfRange) {
  EXPECT_TRUE(mlir::failed(localShape({8}, {AxisPlacement::replicate(), AxisPlacement::shard(1)})));
  EXPECT_THAT(error_, HasSubstr("mesh axis \"tp\" shards dim 1, out of range "
                                "for a rank-1 tensor"));
}

TEST_F(LocalShapeTest, RefusesAnUnevenDimWithoutPadding) {
  EXPECT_TRUE(
      mlir::failed(localShape({10}, {AxisPlacement::replicate(), AxisPlacement::shard(0)})));
  EXPECT_THAT(error_, HasSubstr("dim 0 of size 10 does not divide by the 4 ranks that "
                                "shard it (tp=4), got: 10 % 4 = 2"));
}

TEST_F(LocalShapeTest, RefusesNeedlessPadding) {
  EXPECT_TRUE(
      mlir::failed(localShape({8}, {AxisPlacement::shard(0, true), AxisPlacement::replicate()})));
  EXPECT_THAT(error_, HasSubstr("so nothing is padded; drop `padded`"));
}

TEST_F(LocalShapeTest, RefusesMixedPaddingOnOneDim) {
  EXPECT_TRUE(
      mlir::failed(localShape({9}, {AxisPlacement::shard(0, true), AxisPlacement::shard(0)})));
  EXPECT_THAT(error_, HasSubstr("shard entries of dim 0 disagree on `padded`"));
}

TEST(AxisPlacementTest, PrintsAsInIr) {
  EXPECT_EQ(AxisPlacement::replicate().toString(), "replicate");
  EXPECT_EQ(AxisPlacement::shard(1).toString(), "shard<1>");
  EXPECT_EQ(AxisPlacement::shard(0, true).toString(), "shard<0, padded>");
  EXPECT_EQ(AxisPlacement::partial(ReductionKind::Avg).toString(), "partial<avg>");
}

}  // namespace
}  // namespace loom::planner::dist
