// Phases, collectives and re-pricing of a planned function (see timeline.h).
#include "planner/export/timeline.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "planner/cost/plan_price.h"
#include "planner/dialect/dist/ir/dist_ops.h"
#include "planner/dialect/dist/ir/dist_types.h"
#include "planner/transforms/autodiff/passes.h"
#include "planner/transforms/autodiff/phases.h"
#include "planner/transforms/optimizer/passes.h"

namespace loom::planner::exporter {
namespace {

int64_t elements(mlir::Type type) {
  if (auto future = llvm::dyn_cast<dist::FutureType>(type)) type = future.getValueType();
  return llvm::cast<mlir::RankedTensorType>(type).getNumElements();
}

}  // namespace

std::vector<Phase> assignPhases(mlir::func::FuncOp func) {
  mlir::Block& body = func.getBody().front();
  mlir::Operation* terminator = body.getTerminator();
  mlir::Operation* loss = nullptr;
  bool training = false;
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    if (func.getResultAttr(i, autodiff::kGradOfAttrName)) {
      training = true;
    } else if (!loss) {
      loss = terminator->getOperand(i).getDefiningOp();
      // A scheduled plan returns the wait of the loss's all-reduce, placed
      // at the end; the forward phase ends at the collective it waits for.
      if (auto wait = llvm::dyn_cast_or_null<dist::WaitOp>(loss)) {
        loss = wait.getFuture().getDefiningOp();
      }
    }
  }
  // A pipeline chunk before the last returns no loss: its backward starts
  // at the gradient it receives (autodiff's backward root).
  mlir::Operation* backwardStart =
      training && !loss ? autodiff::firstBackwardOp(func) : nullptr;
  std::vector<Phase> phases;
  Phase current = Phase::kForward;
  bool optimizer = false;
  for (mlir::Operation& op : body) {
    // From the first op of the optimizer phase on (a tied gradient's
    // exchange, the steps), the ops are the optimizer's: offload's copies
    // of updated parameters and their waits follow the steps.
    optimizer |= optimizer::inOptimizerPhase(&op);
    if (optimizer) {
      phases.push_back(Phase::kOptimizer);
      continue;
    }
    if (&op == backwardStart) current = Phase::kBackward;
    phases.push_back(current);
    if (training && &op == loss) current = Phase::kBackward;
  }
  return phases;
}

absl::StatusOr<mesh::DeviceMesh> meshOf(mlir::ModuleOp module) {
  for (auto meshOp : module.getOps<dist::MeshOp>()) {
    std::vector<std::string> names;
    for (llvm::StringRef name : meshOp.getAxes().getAsValueRange<mlir::StringAttr>()) {
      names.push_back(name.str());
    }
    return mesh::DeviceMesh::create(
        std::vector<int64_t>(meshOp.getShape().begin(), meshOp.getShape().end()), names);
  }
  return absl::InvalidArgumentError(
      "the module has no dist.mesh; run --plan-placement and --plan-insert-collectives first");
}

std::optional<CollectiveInfo> describeCollective(mlir::Operation* op,
                                                 const mesh::DeviceMesh& mesh) {
  llvm::StringRef name = op->getName().getStringRef();
  if (!name.consume_front("dist.")) return std::nullopt;
  CollectiveInfo info;
  info.async = name.consume_back("_start");
  if (name != "all_gather" && name != "reduce_scatter" && name != "all_reduce" &&
      name != "all_to_all") {
    return std::nullopt;
  }
  info.kind = name.str();
  for (llvm::StringRef axis :
       op->getAttrOfType<mlir::ArrayAttr>("mesh_axes").getAsValueRange<mlir::StringAttr>()) {
    info.axes.push_back(axis.str());
    info.group_size *= *mesh.axisSize(axis);
  }
  const int64_t g = info.group_size;
  const mlir::Type wire = op->getAttrOfType<mlir::TypeAttr>("wire_type").getValue();
  const int64_t e = (wire.getIntOrFloatBitWidth() + 7) / 8;
  const int64_t in = elements(op->getOperand(0).getType());
  const int64_t out = elements(op->getResult(0).getType());
  info.steps = g - 1;
  if (info.kind == "all_gather") {
    info.bytes = (g - 1) * in * e;
  } else if (info.kind == "reduce_scatter") {
    info.bytes = (g - 1) * out * e;
  } else if (info.kind == "all_reduce") {
    info.bytes = 2 * (g - 1) * ((in + g - 1) / g) * e;
    info.steps = 2 * (g - 1);
  } else {
    info.bytes = (g - 1) * (in / g) * e;
  }
  return info;
}

absl::Status repricePlan(const mesh::Topology& topology, const TimelineOptions& options,
                         plan::Plan& plan) {
  if (options.compute_efficiency <= 0 || options.compute_efficiency > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("compute efficiency must be in (0, 1], got: ", options.compute_efficiency));
  }
  cost::Efficiency efficiency;
  efficiency.gemm = options.compute_efficiency;
  absl::StatusOr<cost::CostModel> model =
      cost::CostModel::create(topology, efficiency, options.profile);
  if (!model.ok()) return model.status();
  return cost::recordPrice(*model, plan);
}

}  // namespace loom::planner::exporter
