// Registration of the planner's dialects and passes.
#include "planner/register.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/pipeline/plan_pipeline.h"
#include "planner/transforms/autodiff/passes.h"
#include "planner/transforms/bucketing/passes.h"
#include "planner/transforms/collectives/passes.h"
#include "planner/transforms/memory/passes.h"
#include "planner/transforms/offload/passes.h"
#include "planner/transforms/optimizer/passes.h"
#include "planner/transforms/placement/passes.h"
#include "planner/transforms/accumulate/passes.h"
#include "planner/transforms/recompute/passes.h"
#include "planner/transforms/schedule/passes.h"
#include "planner/transforms/stages/passes.h"

namespace loom::planner {

void registerAllDialects(mlir::DialectRegistry& registry) {
  registry.insert<mlir::func::FuncDialect>();
  registry.insert<nn::NnDialect>();
  registry.insert<dist::DistDialect>();
}

void registerAllPasses() {
  // The upstream clean-ups planner pipelines run between their own passes.
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  autodiff::registerAutodiffPasses();
  placement::registerPlacementPasses();
  recompute::registerRecomputePasses();
  stages::registerStagesPasses();
  accumulate::registerAccumulatePasses();
  collectives::registerCollectivesPasses();
  bucketing::registerBucketingPasses();
  memory::registerMemoryPasses();
  schedule::registerSchedulePasses();
  optimizer::registerOptimizerPasses();
  offload::registerOffloadPasses();
  pipeline::registerPlanPipeline();
}

}  // namespace loom::planner
