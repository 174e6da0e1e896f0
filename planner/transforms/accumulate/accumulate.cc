// plan-accumulate: one micro-step of an optimizer step that accumulates
// gradients over several (see passes.td and docs/planner_accumulate.md).
#include <cstdint>

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/dialect/dist/ir/dist_ops.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/transforms/accumulate/micro_steps.h"
#include "planner/transforms/accumulate/passes.h"
#include "planner/transforms/autodiff/passes.h"

namespace loom::planner::accumulate {

#define GEN_PASS_DEF_PLANACCUMULATE
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/accumulate/passes.h.inc"
#pragma GCC diagnostic pop

plan::MicroStep microStepOf(mlir::Operation* op) {
  auto attr = op->getAttrOfType<mlir::StringAttr>(kMicroStepAttrName);
  if (!attr) return plan::MicroStep::kEvery;
  return attr.getValue() == "first" ? plan::MicroStep::kFirst : plan::MicroStep::kLast;
}

int64_t microStepsOf(mlir::func::FuncOp func) {
  auto attr = func->getAttrOfType<mlir::IntegerAttr>(kMicroStepsAttrName);
  return attr ? attr.getInt() : 1;
}

bool isCarried(mlir::Value value) {
  mlir::Operation* def = value.getDefiningOp();
  if (def == nullptr) return false;
  if (llvm::isa<dist::AccumulateOp>(def)) return true;
  if (microStepOf(def) != plan::MicroStep::kFirst) return false;
  // A free ends the value; it does not read it.
  return llvm::any_of(value.getUsers(), [](mlir::Operation* user) {
    return !llvm::isa<dist::FreeOp>(user) && microStepOf(user) != plan::MicroStep::kFirst;
  });
}

namespace {

bool isDistOp(mlir::Operation* op) {
  return llvm::isa<dist::DistDialect>(op->getDialect()) &&
         !llvm::isa<dist::AccumulateOp, dist::OptimizerStepOp>(op);
}

class Accumulator {
 public:
  Accumulator(mlir::func::FuncOp func, bool keepGathered, bool deferGradSync)
      : func_(func),
        body_(func.getBody().front()),
        keepGathered_(keepGathered),
        deferGradSync_(deferGradSync) {}

  mlir::LogicalResult run(int64_t microSteps);

 private:
  llvm::SmallVector<mlir::OpOperand*> returnedGrads();
  llvm::SetVector<mlir::Operation*> syncChain();
  void accumulateAt(llvm::ArrayRef<mlir::OpOperand*> uses);
  void markKeptGathers(const llvm::SetVector<mlir::Operation*>& chain);

  mlir::func::FuncOp func_;
  mlir::Block& body_;
  bool keepGathered_;
  bool deferGradSync_;
};

// The return's gradient operands (results marked nn.grad_of).
llvm::SmallVector<mlir::OpOperand*> Accumulator::returnedGrads() {
  llvm::SmallVector<mlir::OpOperand*> uses;
  mlir::Operation* terminator = body_.getTerminator();
  for (mlir::OpOperand& operand : terminator->getOpOperands()) {
    if (func_.getResultAttr(operand.getOperandNumber(), autodiff::kGradOfAttrName)) {
      uses.push_back(&operand);
    }
  }
  return uses;
}

// The dist ops between the local gradients and the returned ones, walked
// back from the return: reductions, buckets, waits, slices, and the frees
// of their values. An op whose result is also read outside the chain
// stays out of it with everything it reads, so every op left in the chain
// serves the returned gradients only.
llvm::SetVector<mlir::Operation*> Accumulator::syncChain() {
  llvm::SetVector<mlir::Operation*> chain;
  llvm::SmallVector<mlir::Operation*> work;
  for (mlir::OpOperand* use : returnedGrads()) {
    if (mlir::Operation* def = use->get().getDefiningOp()) work.push_back(def);
  }
  while (!work.empty()) {
    mlir::Operation* op = work.pop_back_val();
    if (!isDistOp(op) || !chain.insert(op)) continue;
    for (mlir::Value operand : op->getOperands()) {
      if (mlir::Operation* def = operand.getDefiningOp()) work.push_back(def);
    }
  }
  mlir::Operation* terminator = body_.getTerminator();
  auto servesChain = [&](mlir::Operation* op) {
    for (mlir::Value result : op->getResults()) {
      for (mlir::Operation* user : result.getUsers()) {
        if (user != terminator && !chain.contains(user) && !llvm::isa<dist::FreeOp>(user))
          return false;
      }
    }
    return true;
  };
  // Drop an op read from outside, and with it what it reads in the chain.
  for (bool changed = true; changed;) {
    changed = false;
    for (mlir::Operation* op : chain) {
      if (servesChain(op)) continue;
      llvm::SmallVector<mlir::Operation*> upstream{op};
      llvm::DenseSet<mlir::Operation*> dropped;
      while (!upstream.empty()) {
        mlir::Operation* next = upstream.pop_back_val();
        if (!dropped.insert(next).second) continue;
        for (mlir::Value operand : next->getOperands()) {
          mlir::Operation* def = operand.getDefiningOp();
          if (def && chain.contains(def)) upstream.push_back(def);
        }
      }
      chain.remove_if([&](mlir::Operation* other) { return dropped.contains(other); });
      changed = true;
      break;
    }
  }
  for (dist::FreeOp free : body_.getOps<dist::FreeOp>()) {
    mlir::Operation* def = free.getBuffer().getDefiningOp();
    if (def && chain.contains(def)) chain.insert(free);
  }
  return chain;
}

// Sums each used value over the micro-steps right where it is made: the
// uses read the sum instead.
void Accumulator::accumulateAt(llvm::ArrayRef<mlir::OpOperand*> uses) {
  llvm::MapVector<mlir::Value, llvm::SmallVector<mlir::OpOperand*>> byValue;
  for (mlir::OpOperand* use : uses) byValue[use->get()].push_back(use);
  mlir::OpBuilder builder(func_.getContext());
  for (auto& [value, valueUses] : byValue) {
    if (mlir::Operation* def = value.getDefiningOp()) {
      builder.setInsertionPointAfter(def);
    } else {
      builder.setInsertionPointToStart(&body_);
    }
    auto sum = dist::AccumulateOp::create(builder, value.getLoc(), value.getType(), value);
    for (mlir::OpOperand* use : valueUses) use->set(sum.getResult());
  }
}

// The dist ops that make values from parameters only run in the first
// micro-step; a free of a copy read later runs in the last.
void Accumulator::markKeptGathers(const llvm::SetVector<mlir::Operation*>& chain) {
  llvm::DenseSet<mlir::Value> fromParams;
  for (mlir::BlockArgument arg : func_.getArguments()) {
    if (func_.getArgAttr(arg.getArgNumber(), nn::NnDialect::kParamAttrName)) fromParams.insert(arg);
  }
  mlir::Builder b(func_.getContext());
  llvm::SmallVector<dist::FreeOp> frees;
  for (mlir::Operation& op : body_) {
    if (!isDistOp(&op) || chain.contains(&op) || op.getNumOperands() == 0) continue;
    if (!llvm::all_of(op.getOperands(), [&](mlir::Value v) { return fromParams.contains(v); }))
      continue;
    if (auto free = llvm::dyn_cast<dist::FreeOp>(op)) {
      frees.push_back(free);
      continue;
    }
    op.setAttr(kMicroStepAttrName, b.getStringAttr("first"));
    for (mlir::Value result : op.getResults()) fromParams.insert(result);
  }
  for (dist::FreeOp free : frees) {
    mlir::Operation* def = free.getBuffer().getDefiningOp();
    if (def == nullptr || microStepOf(def) != plan::MicroStep::kFirst) continue;
    free->setAttr(kMicroStepAttrName,
                  b.getStringAttr(isCarried(free.getBuffer()) ? "last" : "first"));
  }
}

mlir::LogicalResult Accumulator::run(int64_t microSteps) {
  if (!body_.getOps<dist::OptimizerStepOp>().empty()) {
    return func_.emitError() << "has dist.optimizer_step ops; run --plan-accumulate before "
                                "--plan-optimizer-step, which must read the accumulated gradients";
  }
  if (!body_.getOps<dist::AccumulateOp>().empty()) {
    return func_.emitError() << "already accumulates gradients; run --plan-accumulate once";
  }
  if (returnedGrads().empty()) {
    return func_.emitError() << "returns no gradients (nn.grad_of); accumulation needs a "
                                "training step from --plan-autodiff";
  }
  llvm::SetVector<mlir::Operation*> chain;
  if (deferGradSync_) chain = syncChain();
  // What the chain reads from outside it, and the returned gradients
  // made outside it: the values each micro-step adds to the sums.
  llvm::SmallVector<mlir::OpOperand*> summed;
  for (mlir::Operation* op : chain) {
    if (llvm::isa<dist::FreeOp>(op)) continue;
    for (mlir::OpOperand& operand : op->getOpOperands()) {
      mlir::Operation* def = operand.get().getDefiningOp();
      if (def == nullptr || !chain.contains(def)) summed.push_back(&operand);
    }
  }
  for (mlir::OpOperand* use : returnedGrads()) {
    mlir::Operation* def = use->get().getDefiningOp();
    if (def == nullptr || !chain.contains(def)) summed.push_back(use);
  }
  accumulateAt(summed);
  mlir::Builder b(func_.getContext());
  for (mlir::Operation* op : chain) op->setAttr(kMicroStepAttrName, b.getStringAttr("last"));
  if (keepGathered_) markKeptGathers(chain);
  func_->setAttr(kMicroStepsAttrName, b.getI64IntegerAttr(microSteps));
  return mlir::success();
}

class PlanAccumulatePass : public impl::PlanAccumulateBase<PlanAccumulatePass> {
 public:
  using PlanAccumulateBase::PlanAccumulateBase;

  void runOnOperation() override {
    if (microSteps < 1) {
      getOperation().emitError() << "plan-accumulate micro-steps="
                                 << static_cast<int64_t>(microSteps) << " must be >= 1";
      return signalPassFailure();
    }
    if (microSteps == 1) {
      if (keepGathered || deferGradSync) {
        getOperation().emitError()
            << "plan-accumulate: keep-gathered and defer-grad-sync act between micro-steps; "
               "set micro-steps > 1 or drop them";
        return signalPassFailure();
      }
      return;
    }
    for (auto func : getOperation().getOps<mlir::func::FuncOp>()) {
      if (func.isExternal()) continue;
      if (mlir::failed(Accumulator(func, keepGathered, deferGradSync).run(microSteps)))
        return signalPassFailure();
    }
  }
};

}  // namespace

}  // namespace loom::planner::accumulate
