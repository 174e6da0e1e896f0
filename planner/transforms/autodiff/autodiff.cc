// plan-autodiff: rewrites a forward model graph into one training step by
// appending, in reverse order, the backward ops of every op's VJP.
#include <string>
#include <utility>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Value.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/dialect/nn/ir/nn_interfaces.h"
#include "planner/dialect/nn/ir/nn_ops.h"
#include "planner/transforms/autodiff/passes.h"

namespace loom::planner::autodiff {

#define GEN_PASS_DEF_PLANAUTODIFF
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/autodiff/passes.h.inc"
#pragma GCC diagnostic pop

namespace {

using ::mlir::BlockArgument;
using ::mlir::Operation;
using ::mlir::Value;

// "#3 'layers.0.attention.wq.weight'" or "#3" for an unnamed parameter.
std::string describeParam(mlir::func::FuncOp func, unsigned index) {
  std::string text = "#" + std::to_string(index);
  if (auto name = func.getArgAttrOfType<mlir::StringAttr>(index, nn::NnDialect::kNameAttrName)) {
    text += " '" + name.str() + "'";
  }
  return text;
}

// Checks the input contract; the diagnostics say what to change.
mlir::LogicalResult checkForward(mlir::func::FuncOp func) {
  if (func->hasAttr(kLossGradArgAttrName)) {
    return func.emitOpError() << "is already a training step (it has '" << kLossGradArgAttrName
                              << "'); run plan-autodiff once, on the forward function";
  }
  const mlir::Type loss =
      mlir::RankedTensorType::get({}, mlir::Float32Type::get(func.getContext()));
  if (func.getResultTypes() != mlir::TypeRange(loss)) {
    return func.emitOpError() << "must return one scalar loss of type " << loss
                              << " to be differentiated, got: (" << func.getResultTypes()
                              << "); return the nn.cross_entropy result alone";
  }
  if (!func.getBody().hasOneBlock()) {
    return func.emitOpError() << "has " << func.getBody().getBlocks().size()
                              << " blocks, but plan-autodiff differentiates straight-line "
                                 "graphs; write the model as one block of nn ops";
  }
  if (llvm::none_of(func.getArguments(), [&](BlockArgument arg) {
        return func.getArgAttr(arg.getArgNumber(), nn::NnDialect::kParamAttrName);
      })) {
    return func.emitOpError() << "has no parameter to differentiate; mark the trainable "
                                 "arguments with {"
                              << nn::NnDialect::kParamAttrName << "}";
  }
  return mlir::success();
}

// The values the parameters influence: only their cotangents are built.
llvm::DenseSet<Value> paramDependentValues(mlir::func::FuncOp func) {
  llvm::DenseSet<Value> active;
  for (BlockArgument arg : func.getArguments()) {
    if (func.getArgAttr(arg.getArgNumber(), nn::NnDialect::kParamAttrName)) {
      active.insert(arg);
    }
  }
  for (Operation& op : func.getBody().front()) {
    if (llvm::any_of(op.getOperands(), [&](Value v) { return active.contains(v); })) {
      active.insert(op.result_begin(), op.result_end());
    }
  }
  return active;
}

// Builds the backward graph of one function before its return op.
class BackwardBuilder {
 public:
  BackwardBuilder(mlir::func::ReturnOp ret, llvm::DenseSet<Value> active)
      : builder_(ret), active_(std::move(active)) {}

  // Adds `cotangent` to the cotangent of `value`, with an nn.add when the
  // value already has one (it is used several times).
  void accumulate(Value value, Value cotangent, mlir::Location loc) {
    if (!active_.contains(value)) return;
    auto [it, inserted] = cotangents_.try_emplace(value, cotangent);
    if (!inserted) {
      it->second = nn::AddOp::create(builder_, loc, it->second, cotangent);
    }
  }

  // Builds `op`'s VJP when one of its results has a cotangent and
  // accumulates the cotangents of its parameter-dependent operands.
  mlir::LogicalResult differentiate(Operation& op) {
    llvm::SmallVector<Value> resultCotangents;
    for (Value result : op.getResults()) {
      resultCotangents.push_back(cotangents_.lookup(result));
    }
    if (llvm::none_of(resultCotangents, [](Value v) { return bool(v); })) {
      return mlir::success();
    }
    auto vjp = llvm::dyn_cast<nn::VjpOpInterface>(op);
    if (!vjp) {
      return op.emitOpError() << "has no vector-Jacobian product (VjpOpInterface), but the "
                                 "loss depends on a parameter through it; build the forward "
                                 "graph from differentiable nn ops";
    }
    // A result without a cotangent (an unused result of a multi-result op)
    // stays null, and buildVjp reports it: nn has no op to build zeros.
    mlir::FailureOr<llvm::SmallVector<Value>> operandCotangents =
        vjp.buildVjp(builder_, resultCotangents);
    if (failed(operandCotangents)) return mlir::failure();
    for (auto [index, operand, cotangent] : llvm::enumerate(op.getOperands(), *operandCotangents)) {
      if (active_.contains(operand) && !cotangent) {
        return op.emitOpError() << "operand #" << index
                                << " depends on a parameter, but the op's VJP gives it no "
                                   "cotangent; only ids and labels may be non-differentiable";
      }
      accumulate(operand, cotangent, op.getLoc());
    }
    return mlir::success();
  }

  Value cotangentOf(Value value) const { return cotangents_.lookup(value); }

 private:
  mlir::OpBuilder builder_;
  const llvm::DenseSet<Value> active_;
  llvm::DenseMap<Value, Value> cotangents_;
};

// VJPs build the cotangents of all their operands; those of values no
// parameter influences (the first layer's input) feed nothing. Backward ops
// are pure, so the unused ones are erased, last first, up to `lastForward`.
void eraseUnusedBackwardOps(mlir::func::ReturnOp ret, Operation* lastForward) {
  Operation* op = ret->getPrevNode();
  while (op != lastForward) {
    Operation* prev = op->getPrevNode();
    if (op->use_empty()) op->erase();
    op = prev;
  }
}

mlir::LogicalResult differentiate(mlir::func::FuncOp func) {
  mlir::Block& body = func.getBody().front();
  auto ret = llvm::cast<mlir::func::ReturnOp>(body.getTerminator());
  const Value loss = ret.getOperand(0);
  llvm::SmallVector<Operation*> forward;
  for (Operation& op : body.without_terminator()) forward.push_back(&op);
  Operation* lastForward = forward.empty() ? nullptr : forward.back();

  const unsigned seedIndex = func.getNumArguments();
  if (failed(func.insertArgument(seedIndex, loss.getType(),
                                 /*argAttrs=*/nullptr, func.getLoc()))) {
    return mlir::failure();
  }

  // Reverse op order: every use of a result comes after the op, so its
  // cotangent is complete when the op's VJP is built.
  BackwardBuilder backward(ret, paramDependentValues(func));
  backward.accumulate(loss, func.getArgument(seedIndex), loss.getLoc());
  for (Operation* op : llvm::reverse(forward)) {
    if (failed(backward.differentiate(*op))) return mlir::failure();
  }

  llvm::SmallVector<Value> results = {loss};
  llvm::SmallVector<mlir::DictionaryAttr> resultAttrs = {func.getResultAttrDict(0)};
  mlir::Builder builder(func.getContext());
  for (BlockArgument arg : func.getArguments().drop_back()) {
    const unsigned index = arg.getArgNumber();
    if (!func.getArgAttr(index, nn::NnDialect::kParamAttrName)) continue;
    const Value grad = backward.cotangentOf(arg);
    if (!grad) {
      return mlir::emitError(arg.getLoc())
             << "the loss does not depend on parameter " << describeParam(func, index)
             << ", so its gradient is zero and nn has no op to build it; "
                "use the parameter or drop its {"
             << nn::NnDialect::kParamAttrName << "}";
    }
    results.push_back(grad);
    mlir::NamedAttrList gradAttrs;
    gradAttrs.set(kGradOfAttrName, builder.getI64IntegerAttr(index));
    if (mlir::Attribute name = func.getArgAttr(index, nn::NnDialect::kNameAttrName)) {
      gradAttrs.set(nn::NnDialect::kNameAttrName, name);
    }
    resultAttrs.push_back(gradAttrs.getDictionary(func.getContext()));
  }

  ret->setOperands(results);
  func.setType(
      builder.getFunctionType(func.getArgumentTypes(), mlir::ValueRange(results).getTypes()));
  func.setAllResultAttrs(resultAttrs);
  func->setAttr(kLossGradArgAttrName, builder.getI64IntegerAttr(seedIndex));
  eraseUnusedBackwardOps(ret, lastForward);
  return mlir::success();
}

class PlanAutodiffPass : public impl::PlanAutodiffBase<PlanAutodiffPass> {
 public:
  void runOnOperation() override {
    mlir::func::FuncOp func = getOperation();
    if (func.isExternal()) return;
    if (failed(checkForward(func)) || failed(differentiate(func))) {
      signalPassFailure();
    }
  }
};

}  // namespace
}  // namespace loom::planner::autodiff
