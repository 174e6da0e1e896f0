// plan-optimizer-step: appends each parameter's AdamW states as arguments
// and updates them with one dist.optimizer_step (see passes.td).
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"
#include "planner/dialect/dist/ir/dist_ops.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/transforms/autodiff/passes.h"
#include "planner/transforms/collectives/passes.h"
#include "planner/transforms/optimizer/passes.h"
#include "planner/transforms/placement/passes.h"

namespace loom::planner::optimizer {

#define GEN_PASS_DEF_PLANOPTIMIZERSTEP
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/optimizer/passes.h.inc"
#pragma GCC diagnostic pop

namespace {

// The attributes of a state argument of `param`: its kind and init, and the
// parameter's placement and global shape (a state is laid out as its
// parameter).
mlir::DictionaryAttr stateAttrs(mlir::func::FuncOp func, unsigned param, llvm::StringRef kind,
                                mlir::Attribute init) {
  mlir::Builder b(func.getContext());
  mlir::NamedAttrList attrs;
  attrs.set(kOptimizerStateAttrName, b.getStringAttr(kind));
  if (init) attrs.set(nn::NnDialect::kInitAttrName, init);
  for (llvm::StringRef name : {llvm::StringRef(placement::kPlacementAttrName),
                               llvm::StringRef(collectives::kGlobalShapeAttrName)}) {
    if (mlir::Attribute attr = func.getArgAttr(param, name)) attrs.set(name, attr);
  }
  return attrs.getDictionary(func.getContext());
}

}  // namespace

mlir::Value addState(mlir::func::FuncOp func, mlir::BlockArgument param, llvm::StringRef kind,
                     mlir::Attribute init) {
  auto type = llvm::cast<mlir::RankedTensorType>(param.getType());
  const unsigned index = func.getNumArguments();
  auto state =
      mlir::RankedTensorType::get(type.getShape(), mlir::Float32Type::get(func.getContext()));
  if (failed(func.insertArgument(index, state, stateAttrs(func, param.getArgNumber(), kind, init),
                                 param.getLoc()))) {
    return nullptr;
  }
  return func.getArgument(index);
}

bool inOptimizerPhase(mlir::Operation* op) {
  return llvm::isa<dist::OptimizerStepOp>(op) || op->hasAttr(kOptimizerPhaseAttrName);
}

mlir::LogicalResult addOptimizerSteps(mlir::func::FuncOp func,
                                      const PlanOptimizerStepOptions& options) {
  mlir::Block& body = func.getBody().front();
  if (!body.getOps<dist::OptimizerStepOp>().empty()) {
    return func.emitError() << "already has dist.optimizer_step ops; run --plan-optimizer-step "
                               "once";
  }
  // The gradient of each parameter argument, by argument number.
  mlir::Operation* terminator = body.getTerminator();
  llvm::DenseMap<unsigned, mlir::Value> grads;
  for (auto [i, operand] : llvm::enumerate(terminator->getOperands())) {
    if (auto of = func.getResultAttrOfType<mlir::IntegerAttr>(i, autodiff::kGradOfAttrName)) {
      grads[of.getInt()] = operand;
    }
  }
  mlir::Builder b(func.getContext());
  const mlir::DictionaryAttr zeros = b.getDictionaryAttr(
      {b.getNamedAttr("kind", b.getStringAttr("zeros")),
       b.getNamedAttr("mean", b.getF64FloatAttr(0)), b.getNamedAttr("std", b.getF64FloatAttr(0))});
  // Parameters first, then their states: the loop appends arguments.
  llvm::SmallVector<mlir::BlockArgument> params;
  for (mlir::BlockArgument arg : func.getArguments()) {
    if (func.getArgAttr(arg.getArgNumber(), nn::NnDialect::kParamAttrName) &&
        grads.contains(arg.getArgNumber())) {
      params.push_back(arg);
    }
  }
  mlir::OpBuilder builder(terminator);
  for (mlir::BlockArgument param : params) {
    mlir::Attribute init = func.getArgAttr(param.getArgNumber(), nn::NnDialect::kInitAttrName);
    const bool f32 = llvm::cast<mlir::RankedTensorType>(param.getType()).getElementType().isF32();
    mlir::Value expAvg = addState(func, param, "exp_avg", zeros);
    mlir::Value expAvgSq = addState(func, param, "exp_avg_sq", zeros);
    // A parameter that is not f32 is updated through an f32 copy that
    // starts from the same values.
    mlir::Value master = f32 ? nullptr : addState(func, param, "master", init);
    if (!expAvg || !expAvgSq || (!f32 && !master)) {
      return func.emitError() << "cannot add the AdamW states of argument #" << param.getArgNumber()
                              << " to the signature";
    }
    auto step = dist::OptimizerStepOp::create(
        builder, param.getLoc(), param, grads.lookup(param.getArgNumber()), expAvg, expAvgSq,
        master, b.getF64FloatAttr(options.lr), b.getF64FloatAttr(options.beta1),
        b.getF64FloatAttr(options.beta2), b.getF64FloatAttr(options.eps),
        b.getF64FloatAttr(options.weightDecay));
    if (failed(mlir::verify(step))) return mlir::failure();
  }
  return mlir::success();
}

namespace {

class PlanOptimizerStepPass : public impl::PlanOptimizerStepBase<PlanOptimizerStepPass> {
 public:
  using PlanOptimizerStepBase::PlanOptimizerStepBase;

  void runOnOperation() override {
    const PlanOptimizerStepOptions options{lr, beta1, beta2, eps, weightDecay};
    for (auto func : getOperation().getOps<mlir::func::FuncOp>()) {
      if (func.isExternal()) continue;
      if (failed(addOptimizerSteps(func, options))) return signalPassFailure();
    }
  }
};

}  // namespace
}  // namespace loom::planner::optimizer
