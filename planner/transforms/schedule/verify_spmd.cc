// plan-verify-spmd: refuses plans in which ranks could issue different
// collectives or reduce one gradient differently along different mesh axes.
#include <optional>
#include <string>

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/dialect/dist/ir/dist_ops.h"
#include "planner/transforms/schedule/passes.h"

namespace loom::planner::schedule {

#define GEN_PASS_DEF_PLANVERIFYSPMD
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/schedule/passes.h.inc"
#pragma GCC diagnostic pop

namespace {

// The axes and dtypes of a reduction, blocking or started.
struct Reduction {
  mlir::ArrayAttr axes;
  mlir::Type wire;
  mlir::Type accum;
};

std::optional<Reduction> reductionOf(mlir::Operation* op) {
  if (auto scatter = llvm::dyn_cast<dist::ReduceScatterOp>(op)) {
    return Reduction{scatter.getMeshAxes(), scatter.getWireType(), scatter.getAccumType()};
  }
  if (auto scatter = llvm::dyn_cast<dist::ReduceScatterStartOp>(op)) {
    return Reduction{scatter.getMeshAxes(), scatter.getWireType(), scatter.getAccumType()};
  }
  if (auto reduce = llvm::dyn_cast<dist::AllReduceOp>(op)) {
    return Reduction{reduce.getMeshAxes(), reduce.getWireType(), reduce.getAccumType()};
  }
  if (auto reduce = llvm::dyn_cast<dist::AllReduceStartOp>(op)) {
    return Reduction{reduce.getMeshAxes(), reduce.getWireType(), reduce.getAccumType()};
  }
  return std::nullopt;
}

// The op whose communication produced `value`: a blocking collective, or
// the start of the wait that yields it.
mlir::Operation* communicatedBy(mlir::Value value) {
  mlir::Operation* producer = value.getDefiningOp();
  if (auto wait = llvm::dyn_cast_or_null<dist::WaitOp>(producer)) {
    return wait.getFuture().getDefiningOp();
  }
  return producer;
}

// A type as the IR spells it (diagnostics quote types otherwise).
std::string text(mlir::Type type) {
  std::string out;
  llvm::raw_string_ostream os(out);
  type.print(os);
  return out;
}

bool isScheduled(mlir::Operation* op) {
  return llvm::isa<dist::AllGatherOp, dist::AllGatherStartOp, dist::ReduceScatterOp,
                   dist::ReduceScatterStartOp, dist::AllReduceOp, dist::AllReduceStartOp,
                   dist::AllToAllOp, dist::AllToAllStartOp, dist::WaitOp, dist::FreeOp>(op);
}

class PlanVerifySpmdPass : public impl::PlanVerifySpmdBase<PlanVerifySpmdPass> {
 public:
  using PlanVerifySpmdBase::PlanVerifySpmdBase;

  void runOnOperation() override {
    bool failed = false;
    getOperation().walk([&](mlir::Operation* op) {
      if (isScheduled(op)) failed |= mlir::failed(verifyPlacement(op));
      if (reductionOf(op)) failed |= mlir::failed(verifyDtypes(op));
    });
    if (failed) signalPassFailure();
  }

 private:
  // Collectives, waits and frees run unconditionally, in the entry block
  // of their function.
  static mlir::LogicalResult verifyPlacement(mlir::Operation* op) {
    mlir::Operation* parent = op->getParentOp();
    if (!llvm::isa<mlir::func::FuncOp>(parent)) {
      mlir::InFlightDiagnostic diag = op->emitOpError()
                                      << "is inside a region of '" << parent->getName()
                                      << "'; ranks that take different paths would issue different "
                                         "collectives, so move it into the function body";
      diag.attachNote(parent->getLoc()) << "the region holder";
      return diag;
    }
    mlir::Block* entry = &op->getParentRegion()->front();
    if (op->getBlock() != entry) {
      const int64_t index =
          std::distance(op->getParentRegion()->begin(), op->getBlock()->getIterator());
      return op->emitOpError() << "is in block " << index
                               << " of its function; ranks that branch differently would "
                                  "issue different collectives, so keep it in the entry block";
    }
    return mlir::success();
  }

  // A reduction of another reduction's result (HSDP: fsdp, then dp) uses
  // the same wire and accumulation types.
  static mlir::LogicalResult verifyDtypes(mlir::Operation* op) {
    mlir::Operation* producer = communicatedBy(op->getOperand(0));
    if (!producer) return mlir::success();
    std::optional<Reduction> before = reductionOf(producer);
    if (!before) return mlir::success();
    const Reduction now = *reductionOf(op);
    if (now.wire == before->wire && now.accum == before->accum) {
      return mlir::success();
    }
    mlir::InFlightDiagnostic diag =
        op->emitOpError() << "reduces over " << now.axes << " with wire = " << text(now.wire)
                          << " accum = " << text(now.accum) << ", but its operand was reduced over "
                          << before->axes << " with wire = " << text(before->wire)
                          << " accum = " << text(before->accum)
                          << "; use the same wire and accumulation types on every mesh axis";
    diag.attachNote(producer->getLoc()) << "the first reduction";
    return diag;
  }
};

}  // namespace
}  // namespace loom::planner::schedule
