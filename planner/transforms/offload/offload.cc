// plan-offload: the optimizer states in host memory, their AdamW steps on
// the host, the gradients copied there and the updated parameters copied
// back (see passes.td and docs/planner_offload.md).
#include <string>
#include <utility>
#include <vector>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"
#include "planner/dialect/dist/ir/dist_ops.h"
#include "planner/dialect/dist/ir/dist_types.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/transforms/accumulate/micro_steps.h"
#include "planner/transforms/offload/passes.h"
#include "planner/transforms/optimizer/passes.h"

namespace loom::planner::offload {

#define GEN_PASS_DEF_PLANOFFLOAD
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/offload/passes.h.inc"
#pragma GCC diagnostic pop

namespace {

// One parameter whose optimizer states go to the host.
struct Offloaded {
  dist::OptimizerStepOp step;
  mlir::BlockArgument param;
  mlir::Value grad;       // on the device, as the backward pass leaves it
  mlir::Value hostGrad;   // its copy's wait
  mlir::Value master;     // the f32 master copy, in host memory
};

// The offload of one function's optimizer steps.
class FunctionOffload {
 public:
  explicit FunctionOffload(mlir::func::FuncOp func)
      : func_(func), body_(func.getBody().front()), builder_(func.getContext()) {}

  // Fails with a diagnostic at the offending op.
  mlir::LogicalResult run();

 private:
  mlir::LogicalResult collect();
  mlir::LogicalResult moveStates();
  void copyGradients();
  void stepOnHost();
  // Marks a copy of a gradient that only the last micro-step has whole.
  void lastMicroStep(mlir::Operation* op);
  void setHost(mlir::Value arg);

  mlir::func::FuncOp func_;
  mlir::Block& body_;
  mlir::OpBuilder builder_;
  std::vector<Offloaded> offloaded_;
};

mlir::LogicalResult FunctionOffload::run() {
  if (failed(collect()) || failed(moveStates())) return mlir::failure();
  copyGradients();
  stepOnHost();
  return mlir::verify(func_);
}

mlir::LogicalResult FunctionOffload::collect() {
  for (auto step : body_.getOps<dist::OptimizerStepOp>()) {
    if (dist::onHost(step.getParam())) {
      return step.emitOpError() << "already runs on the host; run --plan-offload once";
    }
    for (mlir::OpResult result : step->getResults()) {
      if (!result.use_empty()) {
        return step.emitOpError()
               << "result #" << result.getResultNumber()
               << " is used; plan-offload moves the step, so run it right after "
                  "--plan-optimizer-step";
      }
    }
    for (mlir::Value value : {step.getParam(), step.getExpAvg(), step.getExpAvgSq(),
                              step.getMaster()}) {
      if (value && !llvm::isa<mlir::BlockArgument>(value)) {
        return step.emitOpError() << "updates a value that is no argument of @"
                                  << func_.getSymName()
                                  << "; parameters and states must be arguments, as "
                                     "--plan-optimizer-step makes them";
      }
    }
    offloaded_.push_back({.step = step,
                          .param = llvm::cast<mlir::BlockArgument>(step.getParam()),
                          .grad = step.getGrad(),
                          .hostGrad = nullptr,
                          .master = step.getMaster()});
  }
  return mlir::success();
}

void FunctionOffload::setHost(mlir::Value arg) {
  func_.setArgAttr(llvm::cast<mlir::BlockArgument>(arg).getArgNumber(), dist::kMemoryAttrName,
                   builder_.getStringAttr("host"));
}

// The states go to the host; an f32 parameter gets a master copy there,
// from its own init, which the host updates in its place.
mlir::LogicalResult FunctionOffload::moveStates() {
  for (Offloaded& o : offloaded_) {
    if (!o.master) {
      mlir::Attribute init =
          func_.getArgAttr(o.param.getArgNumber(), nn::NnDialect::kInitAttrName);
      o.master = optimizer::addState(func_, o.param, "master", init);
      if (!o.master) {
        return func_.emitError() << "cannot add the host master copy of argument #"
                                 << o.param.getArgNumber() << " to the signature";
      }
    }
    for (mlir::Value state : {mlir::Value(o.step.getExpAvg()), mlir::Value(o.step.getExpAvgSq()),
                              o.master}) {
      setHost(state);
    }
  }
  return mlir::success();
}

void FunctionOffload::lastMicroStep(mlir::Operation* op) {
  if (accumulate::microStepsOf(func_) > 1) {
    op->setAttr(accumulate::kMicroStepAttrName, builder_.getStringAttr("last"));
  }
}

// Each gradient starts for the host right after the op that defines it; the
// waits of one defining op's copies come before the next one's copies start
// (the last before the optimizer steps). The step and the return read the
// host copies.
void FunctionOffload::copyGradients() {
  // The gradients by defining op (null: an argument), in body order.
  llvm::SmallVector<std::pair<mlir::Operation*, llvm::SmallVector<Offloaded*>>> groups;
  llvm::DenseMap<mlir::Operation*, size_t> groupOf;
  for (Offloaded& o : offloaded_) {
    mlir::Operation* def = o.grad.getDefiningOp();
    auto [it, added] = groupOf.try_emplace(def, groups.size());
    if (added) groups.push_back({def, {}});
    groups[it->second].second.push_back(&o);
  }
  llvm::stable_sort(groups, [](const auto& a, const auto& b) {
    return a.first == nullptr ? b.first != nullptr
                              : b.first != nullptr && a.first->isBeforeInBlock(b.first);
  });
  mlir::Operation* terminator = body_.getTerminator();
  mlir::Operation* firstStep = offloaded_.front().step;
  llvm::SmallVector<std::pair<Offloaded*, dist::CopyToHostStartOp>> inFlight;
  auto waitInFlight = [&](mlir::Operation* before) {
    builder_.setInsertionPoint(before);
    for (auto& [o, start] : inFlight) {
      auto wait = dist::WaitOp::create(builder_, start.getLoc(), o->grad.getType(),
                                       start.getResult());
      lastMicroStep(wait);
      o->hostGrad = wait.getResult();
    }
    inFlight.clear();
  };
  for (auto& [def, members] : groups) {
    mlir::Operation* after = def;
    for (Offloaded* o : members) {
      if (after) {
        builder_.setInsertionPointAfter(after);
      } else {
        builder_.setInsertionPointToStart(&body_);
      }
      auto type = llvm::cast<mlir::RankedTensorType>(o->grad.getType());
      auto start = dist::CopyToHostStartOp::create(
          builder_, o->grad.getLoc(), dist::FutureType::get(builder_.getContext(), type), o->grad);
      lastMicroStep(start);
      if (members.front() == o) waitInFlight(start);
      inFlight.push_back(std::make_pair(o, start));
      after = start;
    }
  }
  waitInFlight(firstStep);
  for (Offloaded& o : offloaded_) {
    o.step.getGradMutable().assign(o.hostGrad);
    terminator->replaceUsesOfWith(o.grad, o.hostGrad);
  }
}

// The steps on the host masters, each followed by the copy of its result
// into the parameter; a copy's wait comes before the next copy starts.
void FunctionOffload::stepOnHost() {
  builder_.setInsertionPoint(body_.getTerminator());
  dist::CopyIntoDeviceStartOp pending;
  auto waitPending = [&](mlir::Location loc) {
    if (pending) dist::WaitOp::create(builder_, loc, pending.getDest().getType(), pending);
  };
  for (Offloaded& o : offloaded_) {
    dist::OptimizerStepOp old = o.step;
    auto step = dist::OptimizerStepOp::create(
        builder_, old.getLoc(), o.master, o.hostGrad, old.getExpAvg(), old.getExpAvgSq(),
        /*master=*/nullptr, old.getLrAttr(), old.getBeta1Attr(), old.getBeta2Attr(),
        old.getEpsAttr(), old.getWeightDecayAttr());
    waitPending(old.getLoc());
    auto type = llvm::cast<mlir::RankedTensorType>(o.param.getType());
    pending = dist::CopyIntoDeviceStartOp::create(
        builder_, old.getLoc(), dist::FutureType::get(builder_.getContext(), type),
        step.getNewParam(), o.param);
    old.erase();
  }
  waitPending(func_.getLoc());
}

class PlanOffloadPass : public impl::PlanOffloadBase<PlanOffloadPass> {
 public:
  using PlanOffloadBase::PlanOffloadBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    if (mode == "none") return;
    if (mode != "optimizer") {
      module.emitError() << "plan-offload: mode '" << mode
                         << "' is not an offload; use none or optimizer (the AdamW states in "
                            "host memory, stepped there)";
      return signalPassFailure();
    }
    bool any = false;
    for (auto func : module.getOps<mlir::func::FuncOp>()) {
      if (func.isExternal() || func.getBody().front().getOps<dist::OptimizerStepOp>().empty()) {
        continue;
      }
      any = true;
      if (failed(FunctionOffload(func).run())) return signalPassFailure();
    }
    if (!any) {
      module.emitError() << "plan-offload: mode 'optimizer' but no function has "
                            "dist.optimizer_step ops; run --plan-optimizer-step first";
      return signalPassFailure();
    }
  }
};

}  // namespace
}  // namespace loom::planner::offload
