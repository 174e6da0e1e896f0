// Tests of plan-bucketing on the model zoo's Llama 3 8B training step under
// fsdp=8: one gather per unit and pass, one reduce-scatter per unit, and
// exactly the bytes of the unbucketed plan (no dim is uneven, buckets have
// no gaps).
#include <cstdint>
#include <cstdio>
#include <string>

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

// The step of `model` (a published name or a tiny spec) for `batch`
// sequences of `seq` tokens under `mesh` (fsdp axes only), with or without
// plan-bucketing; `perTensor` counts the parameter gathers and gradient
// reduce-scatters left unbucketed that move padding.
CommVolume plan(mlir::MLIRContext& context, bool bucket, const std::string& model = "llama3-8b",
                int64_t batch = 8, int64_t seq = 16, const std::string& mesh = "fsdp=8",
                int64_t* perTensor = nullptr) {
  auto config = models::configFromSpec(model);
  EXPECT_TRUE(config.ok()) << config.status();
  auto built = models::buildModel(context, *config, {batch, seq}, mlir::Float32Type::get(&context));
  EXPECT_TRUE(built.ok()) << built.status();
  mlir::OwningOpRef<mlir::ModuleOp> module = std::move(*built);
  mlir::PassManager pm(&context);
  pm.addNestedPass<mlir::func::FuncOp>(autodiff::createPlanAutodiff());
  pm.addPass(placement::createPlanPlacement(placement::PlanPlacementOptions{mesh, "fsdp", 0}));
  pm.addPass(collectives::createPlanInsertCollectives());
  if (bucket) pm.addPass(createPlanBucketing());
  EXPECT_TRUE(succeeded(pm.run(*module)));
  EXPECT_TRUE(succeeded(mlir::verify(*module)));
  auto func = *module->getOps<mlir::func::FuncOp>().begin();
  if (perTensor) {
    *perTensor = 0;
    func.walk([&](mlir::Operation* op) {
      if (auto gather = llvm::dyn_cast<dist::AllGatherOp>(op)) {
        *perTensor += gather.getPadded() ? 1 : 0;
      } else if (auto scatter = llvm::dyn_cast<dist::ReduceScatterOp>(op)) {
        *perTensor += scatter.getPadded() ? 1 : 0;
      }
    });
  }
  return collectives::computeCommVolume(func);
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
  std::printf(
      "llama3-8b fsdp=8 bucketed: %lld gathers, %lld reduce-scatters, "
      "%lld bytes per rank (unbucketed %lld)\n",
      static_cast<long long>(bucketed.of(CollectiveKind::kAllGather).count),
      static_cast<long long>(bucketed.of(CollectiveKind::kReduceScatter).count),
      static_cast<long long>(bucketed.totalBytes()), static_cast<long long>(flat.totalBytes()));
}

// A tiny GPT-2 whose hidden size (10), MLP width (18) and vocab (30) do not
// divide by fsdp=4: every padded parameter is bucketed too, one gather per
// unit and pass and one reduce-scatter per unit, and the bytes are those of
// the per-tensor padded collectives (a bucket packs the padded shards).
TEST(BucketingTest, PaddedParametersShareTheirUnitsBucket) {
  mlir::MLIRContext context;
  context.loadDialect<dist::DistDialect>();
  const std::string model = "tiny:family=gpt2,layers=2,hidden=10,heads=2,ffn=18,vocab=30,seq=8";
  int64_t paddedFlat = 0;
  int64_t paddedBucketed = 0;
  const CommVolume flat = plan(context, false, model, 4, 8, "fsdp=4", &paddedFlat);
  const CommVolume bucketed = plan(context, true, model, 4, 8, "fsdp=4", &paddedBucketed);
  EXPECT_GT(paddedFlat, 0);
  EXPECT_EQ(paddedBucketed, 0);
  // Units root (wte, wpe, ln_f), transformer.h.0 and transformer.h.1:
  // forward 3 gathers, backward 3 (root's holds ln_f and the tied wte);
  // 3 gradient buckets and the loss all-reduce.
  EXPECT_EQ(bucketed.of(CollectiveKind::kAllGather).count, 6);
  EXPECT_EQ(bucketed.of(CollectiveKind::kReduceScatter).count, 3);
  EXPECT_EQ(bucketed.of(CollectiveKind::kAllReduce).count, 1);
  EXPECT_EQ(bucketed.of(CollectiveKind::kAllGather).bytes,
            flat.of(CollectiveKind::kAllGather).bytes);
  EXPECT_EQ(bucketed.of(CollectiveKind::kReduceScatter).bytes,
            flat.of(CollectiveKind::kReduceScatter).bytes);
}

}  // namespace
}  // namespace loom::planner::bucketing
