// Tests of plan-bucketing on the model zoo's Llama 3 8B training step under
// fsdp=8: one gather per unit and pass, one reduce-scatter per unit, and
// exactly the bytes of the unbucketed plan (no dim is uneven, buckets have
// no gaps).
#include <cstdint>
#include <cstdio>

#include "gtest/gtest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/dialect/dist/ir/dist_ops.h"
#include "planner/models/model_config.h"
#include "planner/models/zoo_builder.h"
#include "planner/transforms/autodiff/passes.h"
#include "planner/transforms/bucketing/passes.h"
#include "planner/transforms/collectives/comm_volume.h"
#include "planner/transforms/collectives/passes.h"
#include "planner/transforms/placement/passes.h"

namespace loom::planner::bucketing {
namespace {

using collectives::CollectiveKind;
using collectives::CommVolume;

TEST(BucketingTest, UnitOfNames) {
  EXPECT_EQ(unitOf("layers.3.attention.wq.weight"), "layers.3");
  EXPECT_EQ(unitOf("transformer.h.11.mlp.c_fc.weight"), "transformer.h.11");
  EXPECT_EQ(unitOf("tok_embeddings.weight"), "root");
  EXPECT_EQ(unitOf("3.weight"), "root");
}

// The llama3-8b step under fsdp=8, with or without plan-bucketing.
CommVolume plan(mlir::MLIRContext& context, bool bucket) {
  auto config = models::publishedConfig("llama3-8b");
  EXPECT_TRUE(config.ok()) << config.status();
  auto built = models::buildModel(context, *config, {8, 16},
                                  mlir::Float32Type::get(&context));
  EXPECT_TRUE(built.ok()) << built.status();
  mlir::OwningOpRef<mlir::ModuleOp> module = std::move(*built);
  mlir::PassManager pm(&context);
  pm.addNestedPass<mlir::func::FuncOp>(autodiff::createPlanAutodiff());
  pm.addPass(placement::createPlanPlacement(
      placement::PlanPlacementOptions{"fsdp=8", "fsdp", 0}));
  pm.addPass(collectives::createPlanInsertCollectives());
  if (bucket) pm.addPass(createPlanBucketing());
  EXPECT_TRUE(succeeded(pm.run(*module)));
  EXPECT_TRUE(succeeded(mlir::verify(*module)));
  return collectives::computeCommVolume(
      *module->getOps<mlir::func::FuncOp>().begin());
}

TEST(BucketingTest, Llama3_8bUnderFsdp8KeepsTheVolumeInOneCollectivePerUnit) {
  mlir::MLIRContext context;
  context.loadDialect<dist::DistDialect>();
  const CommVolume flat = plan(context, false);
  const CommVolume bucketed = plan(context, true);
  // 32 layer units and "root" (embedding, final norm, head): forward 33
  // gathers; backward 32 + 1 (root without the embedding table); 33
  // gradient buckets; the loss all-reduce stays.
  EXPECT_EQ(bucketed.of(CollectiveKind::kAllGather).count, 66);
  EXPECT_EQ(bucketed.of(CollectiveKind::kReduceScatter).count, 33);
  EXPECT_EQ(bucketed.of(CollectiveKind::kAllReduce).count, 1);
  // No llama3-8b dim is uneven over 8 and buckets are packed without gaps:
  // the bytes are those of the per-tensor plan exactly.
  EXPECT_EQ(bucketed.of(CollectiveKind::kAllGather).bytes,
            flat.of(CollectiveKind::kAllGather).bytes);
  EXPECT_EQ(bucketed.of(CollectiveKind::kAllGather).bytes, 54373150720);
  EXPECT_EQ(bucketed.of(CollectiveKind::kReduceScatter).bytes,
            flat.of(CollectiveKind::kReduceScatter).bytes);
  EXPECT_EQ(bucketed.of(CollectiveKind::kReduceScatter).bytes, 28105914368);
  EXPECT_EQ(bucketed.totalBytes(), flat.totalBytes());
  std::printf("llama3-8b fsdp=8 bucketed: %lld gathers, %lld reduce-scatters, "
              "%lld bytes per rank (unbucketed %lld)\n",
              static_cast<long long>(bucketed.of(CollectiveKind::kAllGather).count),
              static_cast<long long>(
                  bucketed.of(CollectiveKind::kReduceScatter).count),
              static_cast<long long>(bucketed.totalBytes()),
              static_cast<long long>(flat.totalBytes()));
}

}  // namespace
}  // namespace loom::planner::bucketing
