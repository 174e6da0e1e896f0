// The plan pipeline: from a verified nn module to the per-rank program with
// its collectives, schedule, optimizer steps and memory plan, as one
// registered pass pipeline (`plan-opt --plan-pipeline="mesh=fsdp=2 ..."`)
// that //tools:plan runs too.
#ifndef LOOM_PLANNER_PIPELINE_PLAN_PIPELINE_H_
#define LOOM_PLANNER_PIPELINE_PLAN_PIPELINE_H_

#include <cstdint>
#include <string>

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace loom::planner::pipeline {

// The options of the passes the pipeline runs, under their pass options'
// names (defaults as the passes').
struct PlanPipelineOptions : public mlir::PassPipelineOptions<PlanPipelineOptions> {
  Option<std::string> mesh{*this, "mesh",
                           llvm::cl::desc("plan-placement's mesh, e.g. fsdp=2,tp=2")};
  Option<std::string> axes{*this, "axes",
                           llvm::cl::desc("plan-placement's strategy per mesh axis, e.g. fsdp,tp "
                                          "(default: the axis names)")};
  Option<int64_t> devices{
      *this, "devices",
      llvm::cl::desc("plan-placement: the device count the mesh must fill (0: any)"),
      llvm::cl::init(0)};
  Option<bool> sequenceParallel{
      *this, "sequence-parallel",
      llvm::cl::desc("plan-placement: Megatron sequence parallelism on the tp axis"),
      llvm::cl::init(false)};
  Option<std::string> recompute{
      *this, "recompute",
      llvm::cl::desc("plan-recompute: none, full or selective activation recompute"),
      llvm::cl::init("none")};
  Option<int64_t> recomputeEvery{
      *this, "recompute-every",
      llvm::cl::desc("plan-recompute: recompute every k-th layer (1: every layer)"),
      llvm::cl::init(1)};
  Option<std::string> recomputeLayers{
      *this, "recompute-layers",
      llvm::cl::desc("plan-recompute: per-layer modes as mode:count runs, e.g. "
                     "full:4,selective:10 (the later layers take recompute)"),
      llvm::cl::init("")};
  Option<int64_t> virtualStages{
      *this, "virtual-stages",
      llvm::cl::desc("plan-stages: model chunks per pipeline stage (with a pp mesh axis)"),
      llvm::cl::init(1)};
  Option<std::string> stageLayers{
      *this, "stage-layers",
      llvm::cl::desc("plan-stages: layers per chunk, e.g. 3,5,5,3 (default: balanced by FLOPs)"),
      llvm::cl::init("")};
  Option<std::string> schedule{
      *this, "schedule",
      llvm::cl::desc("plan-split-stages: gpipe, 1f1b or interleaved-1f1b (default: 1f1b, "
                     "interleaved-1f1b with virtual-stages > 1)"),
      llvm::cl::init("")};
  Option<bool> reshardAfterForward{
      *this, "reshard-after-forward",
      llvm::cl::desc("plan-insert-collectives: gather parameters again for the backward pass"),
      llvm::cl::init(true)};
  Option<std::string> gradReduceDtype{
      *this, "grad-reduce-dtype",
      llvm::cl::desc("plan-insert-collectives: the type gradients are reduced in (bf16, f32; "
                     "default: the parameter's)")};
  Option<int64_t> microSteps{
      *this, "micro-steps",
      llvm::cl::desc("plan-accumulate: micro-steps per optimizer step (gradient accumulation)"),
      llvm::cl::init(1)};
  Option<bool> keepGathered{
      *this, "keep-gathered",
      llvm::cl::desc("plan-accumulate: gather parameters in the first micro-step only and keep "
                     "them (implies reshard-after-forward=false)"),
      llvm::cl::init(false)};
  Option<bool> deferGradSync{
      *this, "defer-grad-sync",
      llvm::cl::desc("plan-accumulate: reduce gradients in the last micro-step only"),
      llvm::cl::init(false)};
  Option<int64_t> bucketMb{
      *this, "bucket-mb", llvm::cl::desc("plan-bucketing: largest bucket in MiB (0: one per unit)"),
      llvm::cl::init(0)};
  Option<int64_t> prefetch{*this, "prefetch",
                           llvm::cl::desc("plan-schedule: gather steps prefetched ahead"),
                           llvm::cl::init(1)};
  Option<double> memoryGb{*this, "memory-gb",
                          llvm::cl::desc("plan-memory-plan: device memory in GiB (0: no check)"),
                          llvm::cl::init(0)};
  Option<double> hostMemoryGb{
      *this, "host-memory-gb",
      llvm::cl::desc("plan-memory-plan: host memory per rank for offloaded buffers in GiB (0: no "
                     "check)"),
      llvm::cl::init(0)};
  Option<std::string> offload{
      *this, "offload",
      llvm::cl::desc("plan-offload: what lives in host memory: none or optimizer (the AdamW "
                     "states, stepped on the host)"),
      llvm::cl::init("none")};
  Option<double> lr{*this, "lr", llvm::cl::desc("plan-optimizer-step: AdamW learning rate"),
                    llvm::cl::init(1e-3)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("plan-optimizer-step: AdamW beta1"),
                       llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("plan-optimizer-step: AdamW beta2"),
                       llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::desc("plan-optimizer-step: AdamW eps"),
                     llvm::cl::init(1e-8)};
  Option<double> weightDecay{*this, "weight-decay",
                             llvm::cl::desc("plan-optimizer-step: AdamW weight decay"),
                             llvm::cl::init(0.01)};
};

// Adds plan-autodiff -> plan-placement -> plan-recompute -> plan-stages ->
// plan-split-stages (both only with a pp mesh axis) -> plan-insert-collectives ->
// plan-bucketing -> plan-schedule -> plan-verify-spmd -> plan-accumulate ->
// plan-optimizer-step -> plan-offload -> plan-memory-plan to `pm` (a module
// pass manager): the placement stage, then the program stage.
void addPlanPipeline(mlir::OpPassManager& pm, const PlanPipelineOptions& options);

// The pipeline's two stages. The placement stage (autodiff, placement)
// depends on the model and the mesh only; the program stage (recompute,
// pipeline stages, collectives onwards) adds what recompute, the stages,
// reshard-after-forward, bucket-mb, prefetch and offload choose.
// The mesh search places a model once per mesh shape and runs the program
// stage on a copy per knob setting.
void addPlacementStage(mlir::OpPassManager& pm, const PlanPipelineOptions& options);
void addProgramStage(mlir::OpPassManager& pm, const PlanPipelineOptions& options);

// Registers `plan-pipeline` with the global pass registry.
void registerPlanPipeline();

}  // namespace loom::planner::pipeline

#endif  // LOOM_PLANNER_PIPELINE_PLAN_PIPELINE_H_
