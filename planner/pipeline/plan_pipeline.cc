// The plan pipeline (see plan_pipeline.h).
#include "planner/pipeline/plan_pipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "planner/transforms/accumulate/passes.h"
#include "planner/transforms/autodiff/passes.h"
#include "planner/transforms/bucketing/passes.h"
#include "planner/transforms/collectives/passes.h"
#include "planner/transforms/memory/passes.h"
#include "planner/transforms/offload/passes.h"
#include "planner/transforms/optimizer/passes.h"
#include "planner/transforms/placement/passes.h"
#include "planner/transforms/recompute/passes.h"
#include "planner/transforms/schedule/passes.h"
#include "planner/transforms/stages/passes.h"

namespace loom::planner::pipeline {

void addPlanPipeline(mlir::OpPassManager& pm, const PlanPipelineOptions& options) {
  addPlacementStage(pm, options);
  addProgramStage(pm, options);
}

void addPlacementStage(mlir::OpPassManager& pm, const PlanPipelineOptions& options) {
  pm.addNestedPass<mlir::func::FuncOp>(autodiff::createPlanAutodiff());
  placement::PlanPlacementOptions placementOptions{options.mesh, options.axes, options.devices};
  placementOptions.sequenceParallel = options.sequenceParallel;
  pm.addPass(placement::createPlanPlacement(placementOptions));
}

void addProgramStage(mlir::OpPassManager& pm, const PlanPipelineOptions& options) {
  // Recomputed forward ops are ordinary nn ops: collective insertion gives
  // them their backward gathers and tp collectives.
  pm.addPass(recompute::createPlanRecompute(
      recompute::PlanRecomputeOptions{options.recompute, options.recomputeEvery,
                                      options.recomputeLayers}));
  // Stages as many as the mesh's pp axis has ranks (none without one),
  // after recompute so that its clones weigh in the balance; each chunk
  // becomes a function whose collectives are its own.
  pm.addPass(stages::createPlanStages(
      stages::PlanStagesOptions{0, options.virtualStages, options.stageLayers}));
  pm.addPass(stages::createPlanSplitStages(stages::PlanSplitStagesOptions{options.schedule}));
  collectives::PlanInsertCollectivesOptions collectiveOptions;
  // Kept parameters serve the backward too: one copy, not two.
  collectiveOptions.reshardAfterForward = options.reshardAfterForward && !options.keepGathered;
  collectiveOptions.gradReduceDtype = options.gradReduceDtype;
  pm.addPass(collectives::createPlanInsertCollectives(collectiveOptions));
  // One collective per FSDP unit (or per bucket-mb), then async starts with
  // `prefetch` units of prefetch; the SPMD check runs on what the runtime
  // will execute. The optimizer steps come after the schedule, which
  // places gradient reductions by their only use, the return.
  pm.addPass(bucketing::createPlanBucketing(bucketing::PlanBucketingOptions{options.bucketMb}));
  pm.addPass(schedule::createPlanSchedule(schedule::PlanScheduleOptions{options.prefetch, 0}));
  pm.addPass(schedule::createPlanVerifySpmd());
  pm.addPass(accumulate::createPlanAccumulate(accumulate::PlanAccumulateOptions{
      options.microSteps, options.keepGathered, options.deferGradSync}));
  // A tied parameter's gradient, reduced and accumulated on each stage that
  // holds it, summed across them once per step, before its AdamW step.
  pm.addPass(stages::createPlanSumTiedGrads());
  pm.addPass(optimizer::createPlanOptimizerStep(optimizer::PlanOptimizerStepOptions{
      options.lr, options.beta1, options.beta2, options.eps, options.weightDecay}));
  // Offload moves the steps plan-optimizer-step made, and the memory plan
  // counts the host bytes it leaves apart from the device's.
  pm.addPass(offload::createPlanOffload(offload::PlanOffloadOptions{options.offload}));
  pm.addPass(memory::createPlanMemoryPlan(
      memory::PlanMemoryPlanOptions{options.memoryGb, options.hostMemoryGb}));
}

void registerPlanPipeline() {
  mlir::PassPipelineRegistration<PlanPipelineOptions>(
      "plan-pipeline",
      "plans a verified nn module: autodiff, placement, recompute, collectives, bucketing, "
      "schedule, SPMD check, accumulation, tied gradients across stages, optimizer steps, "
      "offload and the memory plan",
      addPlanPipeline);
}

}  // namespace loom::planner::pipeline
