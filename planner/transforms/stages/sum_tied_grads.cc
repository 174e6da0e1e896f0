// plan-sum-tied-grads: the gradient of a tied parameter, summed across the
// pipeline stages that hold its replicas once per optimizer step (see
// passes.td and docs/planner_stages.md, "Tied parameters").
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "llvm/ADT/STLExtras.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "planner/dialect/dist/ir/dist_ops.h"
#include "planner/dialect/dist/ir/dist_types.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/dialect/nn/ir/nn_ops.h"
#include "planner/transforms/autodiff/passes.h"
#include "planner/transforms/optimizer/passes.h"
#include "planner/transforms/placement/passes.h"
#include "planner/transforms/stages/passes.h"
#include "planner/transforms/stages/pipeline_axis.h"

namespace loom::planner::stages {

#define GEN_PASS_DEF_PLANSUMTIEDGRADS
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/stages/passes.h.inc"
#pragma GCC diagnostic pop

namespace {

// One replica of a tied parameter: the chunk function holding it, its
// stage, the parameter's argument and the result returning the chunk's
// gradient of it.
struct Holder {
  mlir::func::FuncOp func;
  int64_t stage = 0;
  unsigned arg = 0;
  unsigned result = 0;
};

// Every replica of one tied parameter, and the stages that hold it.
struct Tie {
  std::vector<Holder> holders;
  llvm::SmallVector<int64_t> stages;
};

// (from stage, to stage) -> the tag of that transfer of one tie.
using Tags = std::map<std::pair<int64_t, int64_t>, int64_t>;

std::string paramName(mlir::func::FuncOp func, unsigned arg) {
  auto name = func.getArgAttrOfType<mlir::StringAttr>(arg, nn::NnDialect::kNameAttrName);
  return name ? name.getValue().str() : "";
}

// The ties of the module's chunk functions, by the parameter's argument
// number in the step they were split from.
mlir::FailureOr<std::map<int64_t, Tie>> findTies(mlir::ModuleOp module) {
  std::map<int64_t, Tie> ties;
  for (auto func : module.getOps<mlir::func::FuncOp>()) {
    auto stage = func->getAttrOfType<mlir::IntegerAttr>(kPipelineStageAttrName);
    for (mlir::BlockArgument arg : func.getArguments()) {
      const unsigned n = arg.getArgNumber();
      auto stages = func.getArgAttrOfType<mlir::DenseI64ArrayAttr>(n, kTiedStagesAttrName);
      if (!stages) continue;
      auto stepArg = func.getArgAttrOfType<mlir::IntegerAttr>(n, kPipelineArgAttrName);
      if (!stage || !stepArg) {
        return func.emitError() << "argument " << n << " has " << kTiedStagesAttrName << " but @"
                                << func.getSymName() << " is not a pipeline chunk (no "
                                << kPipelineStageAttrName << " or " << kPipelineArgAttrName
                                << "); make chunks with --plan-split-stages";
      }
      std::optional<unsigned> result;
      for (unsigned r = 0; r < func.getNumResults(); ++r) {
        auto of = func.getResultAttrOfType<mlir::IntegerAttr>(r, autodiff::kGradOfAttrName);
        if (of && of.getInt() == n) result = r;
      }
      if (!result) {
        return func.emitError() << "tied parameter " << paramName(func, n) << " (argument " << n
                                << ") has no gradient among @" << func.getSymName()
                                << "'s results; run --plan-split-stages on a training step";
      }
      Tie& tie = ties[stepArg.getInt()];
      tie.stages.assign(stages.asArrayRef().begin(), stages.asArrayRef().end());
      tie.holders.push_back({func, stage.getInt(), n, *result});
    }
  }
  for (auto& [stepArg, tie] : ties) {
    llvm::sort(tie.holders, [](const Holder& a, const Holder& b) { return a.stage < b.stage; });
    llvm::SmallVector<int64_t> held;
    for (const Holder& h : tie.holders) held.push_back(h.stage);
    if (held != tie.stages) {
      Holder h = tie.holders.front();
      mlir::InFlightDiagnostic diag = h.func.emitError();
      diag << "tied parameter " << paramName(h.func, h.arg) << " lists stages [";
      llvm::interleaveComma(tie.stages, diag);
      diag << "] in " << kTiedStagesAttrName << ", but chunk functions on stages [";
      llvm::interleaveComma(held, diag);
      return diag << "] hold it; run --plan-split-stages again";
    }
  }
  return ties;
}

// The first tag after every transfer the module already has.
int64_t nextTag(mlir::ModuleOp module) {
  int64_t next = 0;
  module.walk([&](mlir::Operation* op) {
    if (!llvm::isa<dist::SendOp, dist::SendStartOp, dist::RecvOp, dist::RecvStartOp>(op)) return;
    next = std::max(next, op->getAttrOfType<mlir::IntegerAttr>("tag").getInt() + 1);
  });
  return next;
}

// Marks `op` as the optimizer phase's.
void mark(mlir::Operation* op) {
  op->setAttr(optimizer::kOptimizerPhaseAttrName, mlir::UnitAttr::get(op->getContext()));
}

// Marks `op` as the optimizer phase's, with the placements of its operands
// and results (the gradient's, on every axis); a wait keeps its start's.
void mark(mlir::Operation* op, mlir::Attribute placement, unsigned operands, unsigned results) {
  mlir::Builder b(op->getContext());
  mark(op);
  op->setAttr(placement::kOperandPlacementsAttrName,
              b.getArrayAttr(llvm::SmallVector<mlir::Attribute>(operands, placement)));
  op->setAttr(placement::kResultPlacementsAttrName,
              b.getArrayAttr(llvm::SmallVector<mlir::Attribute>(results, placement)));
}

// At the end of `h`'s function: every receive from the other holders
// posted, then every send started, so that no send waits for a stage that
// is itself waiting; then the replicas' gradients summed in stage order
// (the lowest first), the same operands in the same order on every holder,
// so that every replica gets the same bits. The function returns the sum.
void exchange(Holder h, const Tie& tie, const Tags& tags, const PipelineAxis& axis) {
  mlir::Operation* ret = h.func.front().getTerminator();
  const mlir::Value own = ret->getOperand(h.result);
  const mlir::Attribute placement = h.func.getResultAttr(h.result, placement::kPlacementAttrName);
  const auto type = llvm::cast<mlir::RankedTensorType>(own.getType());
  const auto future = dist::FutureType::get(h.func.getContext(), type);
  const mlir::Location loc = own.getLoc();
  mlir::OpBuilder b(ret);
  std::map<int64_t, mlir::Value> received, sent;
  for (int64_t peer : tie.stages) {
    if (peer == h.stage) continue;
    auto start =
        dist::RecvStartOp::create(b, loc, future, axis.mesh, axis.name, static_cast<uint64_t>(peer),
                                  static_cast<uint64_t>(tags.at({peer, h.stage})));
    mark(start, placement, 0, 1);
    received[peer] = start.getResult();
  }
  for (int64_t peer : tie.stages) {
    if (peer == h.stage) continue;
    auto start = dist::SendStartOp::create(b, loc, future, own, axis.mesh, axis.name,
                                           static_cast<uint64_t>(peer),
                                           static_cast<uint64_t>(tags.at({h.stage, peer})));
    mark(start, placement, 1, 0);
    sent[peer] = start.getResult();
  }
  std::map<int64_t, mlir::Value> replica{{h.stage, own}};
  for (auto& [peer, future] : received) {
    auto wait = dist::WaitOp::create(b, loc, type, future);
    mark(wait);
    replica[peer] = wait.getResult();
  }
  mlir::Value sum = replica.begin()->second;
  for (mlir::Value next : llvm::make_second_range(llvm::drop_begin(replica))) {
    auto add = nn::AddOp::create(b, loc, sum, next);
    mark(add, placement, 2, 1);
    sum = add.getResult();
  }
  for (auto& [peer, future] : sent) mark(dist::WaitOp::create(b, loc, type, future));
  ret->setOperand(h.result, sum);
}

class PlanSumTiedGradsPass : public impl::PlanSumTiedGradsBase<PlanSumTiedGradsPass> {
 public:
  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    mlir::FailureOr<std::map<int64_t, Tie>> ties = findTies(module);
    if (mlir::failed(ties)) return signalPassFailure();
    if (ties->empty()) return;
    for (auto func : module.getOps<mlir::func::FuncOp>()) {
      if (func.isExternal()) continue;
      for (mlir::Operation& op : func.front()) {
        if (!optimizer::inOptimizerPhase(&op)) continue;
        op.emitOpError() << "is already in the optimizer phase; run --plan-sum-tied-grads once, "
                            "before --plan-optimizer-step (whose steps read the summed gradient)";
        return signalPassFailure();
      }
    }
    std::optional<PipelineAxis> axis = findPipelineAxis(module);
    if (!axis) {
      module.emitError() << "the module has tied parameters but its dist.mesh has no pp axis; "
                            "plan with a pp axis and --plan-split-stages";
      return signalPassFailure();
    }
    int64_t tag = nextTag(module);
    for (auto& [stepArg, tie] : *ties) {
      for (Holder h : tie.holders) {
        if (h.func.getResultAttr(h.result, placement::kPlacementAttrName)) continue;
        h.func.emitError() << "the gradient of tied parameter " << paramName(h.func, h.arg)
                           << " (result " << h.result << ") has no "
                           << placement::kPlacementAttrName
                           << "; run --plan-insert-collectives before --plan-sum-tied-grads";
        return signalPassFailure();
      }
      Tags tags;
      for (int64_t from : tie.stages) {
        for (int64_t to : tie.stages) {
          if (from != to) tags[{from, to}] = tag++;
        }
      }
      for (const Holder& h : tie.holders) exchange(h, tie, tags, *axis);
    }
  }
};

}  // namespace

}  // namespace loom::planner::stages
