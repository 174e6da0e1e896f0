// Tests of plan-insert-collectives on the model zoo's Llama 3 8B training
// step under fsdp=8: the collectives it inserts move exactly the ZeRO-3
// volume per rank, counted by comm_volume.
#include <cstdint>
#include <cstdio>

#include "gtest/gtest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/PassManager.h"
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/dialect/dist/ir/dist_ops.h"
#include "mesh/shard_math.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/models/model_config.h"
#include "planner/models/zoo_builder.h"
#include "planner/transforms/autodiff/passes.h"
#include "planner/transforms/collectives/comm_volume.h"
#include "planner/transforms/collectives/passes.h"
#include "planner/transforms/placement/passes.h"

namespace loom::planner::collectives {
namespace {

constexpr int64_t kRanks = 8;
constexpr int64_t kF32Bytes = 4;

// The padded shard of a parameter stored shard<0> on kRanks ranks, in
// elements: shardSize(dim 0) * the other dims.
int64_t shardElements(mlir::RankedTensorType type) {
  int64_t elements = mesh::shardSize(type.getDimSize(0), kRanks);
  for (int64_t dim : type.getShape().drop_front()) elements *= dim;
  return elements;
}

TEST(InsertCollectivesTest, Llama3_8bUnderFsdp8MovesTheZero3Volume) {
  mlir::MLIRContext context;
  context.loadDialect<dist::DistDialect>();
  auto config = models::publishedConfig("llama3-8b");
  ASSERT_TRUE(config.ok()) << config.status();
  auto built = models::buildModel(context, *config, {8, 16}, mlir::Float32Type::get(&context));
  ASSERT_TRUE(built.ok()) << built.status();
  mlir::OwningOpRef<mlir::ModuleOp> module = std::move(*built);
  auto func = *module->getOps<mlir::func::FuncOp>().begin();

  // Per parameter, before the pass localizes the types: its padded shard
  // and whether the backward pass reads it (all but the embedding table,
  // whose gradient needs only the ids).
  int64_t params = 0;
  int64_t shardSum = 0;
  int64_t embeddingShard = 0;
  for (int64_t arg = 0; arg < func.getNumArguments(); ++arg) {
    if (!func.getArgAttr(arg, nn::NnDialect::kParamAttrName)) continue;
    auto type = llvm::cast<mlir::RankedTensorType>(func.getArgument(arg).getType());
    ++params;
    shardSum += shardElements(type);
    auto name = func.getArgAttrOfType<mlir::StringAttr>(arg, nn::NnDialect::kNameAttrName);
    if (name && name.getValue() == "tok_embeddings.weight") {
      embeddingShard = shardElements(type);
    }
  }
  ASSERT_GT(params, 0);
  ASSERT_GT(embeddingShard, 0);

  mlir::PassManager pm(&context);
  pm.addNestedPass<mlir::func::FuncOp>(autodiff::createPlanAutodiff());
  pm.addPass(placement::createPlanPlacement(placement::PlanPlacementOptions{"fsdp=8", "fsdp", 0}));
  pm.addPass(createPlanInsertCollectives());
  ASSERT_TRUE(succeeded(pm.run(*module)));
  func = *module->getOps<mlir::func::FuncOp>().begin();

  const CommVolume volume = computeCommVolume(func);
  const CommVolume::Entry gathers = volume.of(CollectiveKind::kAllGather);
  const CommVolume::Entry scatters = volume.of(CollectiveKind::kReduceScatter);
  const CommVolume::Entry reduces = volume.of(CollectiveKind::kAllReduce);
  // ZeRO-3: every parameter gathered before its forward use and again
  // before its backward use, every gradient reduce-scattered once. Per
  // rank, a gather receives (n - 1) padded shards and a reduce-scatter
  // sends (n - 1) of them: (n - 1) * S * 4 bytes for S = sum of padded
  // shard elements. The embedding table has no backward use.
  EXPECT_EQ(gathers.count, 2 * params - 1);
  EXPECT_EQ(gathers.bytes, (kRanks - 1) * (2 * shardSum - embeddingShard) * kF32Bytes);
  EXPECT_EQ(scatters.count, params);
  EXPECT_EQ(scatters.bytes, (kRanks - 1) * shardSum * kF32Bytes);
  // The loss: one all-reduce avg of a scalar, 2 * (n - 1) * ceil(1 / n)
  // elements.
  EXPECT_EQ(reduces.count, 1);
  EXPECT_EQ(reduces.bytes, 2 * (kRanks - 1) * kF32Bytes);
  EXPECT_EQ(volume.of(CollectiveKind::kAllToAll).count, 0);
  EXPECT_EQ(volume.totalBytes(), gathers.bytes + scatters.bytes + reduces.bytes);
  // Every gathered copy is freed once per segment.
  int64_t frees = 0;
  func.walk([&](dist::FreeOp) { ++frees; });
  EXPECT_EQ(frees, gathers.count);
  std::printf(
      "llama3-8b fsdp=8: %lld params, all_gather %lld bytes, "
      "reduce_scatter %lld bytes per rank\n",
      static_cast<long long>(params), static_cast<long long>(gathers.bytes),
      static_cast<long long>(scatters.bytes));
}

}  // namespace
}  // namespace loom::planner::collectives
