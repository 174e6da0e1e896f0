// plan-stages: assigns each op of a training step to a pipeline chunk of
// whole layers, balanced by FLOPs (see passes.td and
// docs/planner_stages.md).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/dialect/nn/ir/module_path.h"
#include "planner/dialect/nn/ir/nn_interfaces.h"
#include "planner/transforms/autodiff/passes.h"
#include "planner/transforms/autodiff/phases.h"
#include "planner/transforms/layers/layer_stack.h"
#include "planner/transforms/stages/balance.h"
#include "planner/transforms/stages/passes.h"
#include "planner/transforms/stages/pipeline_axis.h"

namespace loom::planner::stages {

#define GEN_PASS_DEF_PLANSTAGES
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/stages/passes.h.inc"
#pragma GCC diagnostic pop

namespace {

int64_t flopsOf(mlir::Operation* op) {
  auto cost = llvm::dyn_cast<nn::CostOpInterface>(op);
  return cost ? cost.getFlops() : 0;
}

// "3,5,5,3" -> {3, 5, 5, 3}; the error names the entry.
absl::StatusOr<std::vector<int64_t>> parseCounts(llvm::StringRef text) {
  std::vector<int64_t> counts;
  llvm::SmallVector<llvm::StringRef> parts;
  text.split(parts, ',');
  for (llvm::StringRef part : parts) {
    int64_t count = 0;
    if (part.trim().getAsInteger(10, count) || count < 1) {
      return absl::InvalidArgumentError("plan-stages layers: '" + part.str() +
                                        "' is not a layer count >= 1; give one count per chunk "
                                        "in model order, e.g. layers=3,5,5,3");
    }
    counts.push_back(count);
  }
  return counts;
}

// Where an op outside the stack belongs: before the layers (the
// embedding), after them (norm, head, loss), or nowhere (located at no
// module path).
enum class Side { kBefore, kAfter, kNowhere };

class Stager {
 public:
  Stager(mlir::func::FuncOp func, int64_t stages, int64_t chunks, std::vector<int64_t> counts)
      : func_(func), stages_(stages), chunks_(chunks), counts_(std::move(counts)) {}

  mlir::LogicalResult run();

 private:
  mlir::LogicalResult check();
  // The side of each op outside the stack, by the module paths seen in the
  // forward before the first layer op.
  Side sideOf(mlir::Operation* op) const;
  mlir::LogicalResult chooseCounts();
  void assign();

  mlir::func::FuncOp func_;
  const int64_t stages_;
  const int64_t chunks_;
  std::vector<int64_t> counts_;
  std::optional<layers::LayerStack> stack_;
  std::set<std::string> before_;
  // Layer number -> its position in the stack (0-based).
  std::map<int64_t, int64_t> position_;
};

mlir::LogicalResult Stager::check() {
  if (!func_->hasAttr(autodiff::kLossGradArgAttrName)) {
    return func_.emitError() << "plan-stages needs a training step, but @" << func_.getSymName()
                             << " has no " << autodiff::kLossGradArgAttrName
                             << "; run --plan-autodiff first";
  }
  if (func_->hasAttr(kPipelineStagesAttrName)) {
    return func_.emitError() << "@" << func_.getSymName()
                             << " already has pipeline stages; run plan-stages once";
  }
  for (mlir::Operation& op : func_.front()) {
    if (llvm::isa<dist::DistDialect>(op.getDialect())) {
      return op.emitOpError() << "is a dist op, but plan-stages runs before "
                                 "--plan-insert-collectives, so that each stage's collectives "
                                 "are made for its own ops";
    }
  }
  return mlir::success();
}

Side Stager::sideOf(mlir::Operation* op) const {
  const std::string path = nn::modulePathOf(op->getLoc());
  if (path.empty()) return Side::kNowhere;
  return before_.count(path) ? Side::kBefore : Side::kAfter;
}

mlir::LogicalResult Stager::chooseCounts() {
  const int64_t layers = static_cast<int64_t>(stack_->layers.size());
  if (!counts_.empty()) {
    int64_t sum = 0;
    for (int64_t c : counts_) sum += c;
    if (static_cast<int64_t>(counts_.size()) != chunks_ || sum != layers) {
      return func_.emitError() << "plan-stages layers lists " << counts_.size()
                               << " chunks of " << sum << " layers in all, but @"
                               << func_.getSymName() << " is cut into " << chunks_
                               << " chunks (stages x virtual) of its " << layers << " '"
                               << stack_->name << "' layers; give " << chunks_
                               << " counts that sum to " << layers;
    }
    return mlir::success();
  }
  std::vector<int64_t> costs(layers, 0);
  int64_t first = 0, last = 0;
  for (mlir::Operation& op : func_.front().without_terminator()) {
    if (std::optional<int64_t> layer = layers::layerIndexOf(*stack_, &op)) {
      costs[position_.at(*layer)] += flopsOf(&op);
    } else if (sideOf(&op) == Side::kBefore) {
      first += flopsOf(&op);
    } else {
      last += flopsOf(&op);
    }
  }
  absl::StatusOr<std::vector<int64_t>> counts = balancedRuns(costs, chunks_, first, last);
  if (!counts.ok()) {
    return func_.emitError() << "plan-stages cannot cut the " << layers << " '" << stack_->name
                             << "' layers of @" << func_.getSymName() << " into " << chunks_
                             << " chunks (stages x virtual) of at least one layer each; use "
                                "fewer stages or virtual stages";
  }
  counts_ = *std::move(counts);
  return mlir::success();
}

void Stager::assign() {
  // Layer position -> chunk.
  std::vector<int64_t> chunkOfPosition;
  for (int64_t c = 0; c < chunks_; ++c) chunkOfPosition.insert(chunkOfPosition.end(), counts_[c], c);
  mlir::Builder builder(func_.getContext());
  llvm::DenseMap<mlir::Operation*, int64_t> chunkOf;
  std::vector<mlir::Operation*> nowhere;
  for (mlir::Operation& op : func_.front().without_terminator()) {
    std::optional<int64_t> chunk;
    if (std::optional<int64_t> layer = layers::layerIndexOf(*stack_, &op)) {
      chunk = chunkOfPosition[position_.at(*layer)];
    } else if (Side side = sideOf(&op); side != Side::kNowhere) {
      chunk = side == Side::kBefore ? 0 : chunks_ - 1;
    } else {
      for (mlir::Value operand : op.getOperands()) {
        auto it = chunkOf.find(operand.getDefiningOp());
        if (it != chunkOf.end()) {
          chunk = it->second;
          break;
        }
      }
    }
    if (chunk) {
      chunkOf[&op] = *chunk;
    } else {
      nowhere.push_back(&op);
    }
  }
  // Ops that read only arguments and constants, and locate nowhere: their
  // first user's chunk (users come later, so in reverse order every user is
  // placed first), the last chunk where nothing reads them.
  for (auto it = nowhere.rbegin(); it != nowhere.rend(); ++it) {
    int64_t chunk = chunks_ - 1;
    for (mlir::Operation* user : (*it)->getUsers()) {
      auto found = chunkOf.find(user);
      if (found != chunkOf.end()) {
        chunk = found->second;
        break;
      }
    }
    chunkOf[*it] = chunk;
  }
  for (mlir::Operation& op : func_.front().without_terminator()) {
    op.setAttr(kStageAttrName, builder.getI64IntegerAttr(chunkOf.at(&op)));
  }
  for (mlir::BlockArgument arg : func_.getArguments()) {
    std::set<int64_t> used;
    for (mlir::Operation* user : arg.getUsers()) {
      auto found = chunkOf.find(user);
      if (found != chunkOf.end()) used.insert(found->second);
    }
    if (used.empty()) continue;
    func_.setArgAttr(arg.getArgNumber(), kArgStagesAttrName,
                     builder.getDenseI64ArrayAttr(std::vector<int64_t>(used.begin(), used.end())));
  }
  func_->setAttr(kPipelineStagesAttrName, builder.getI64IntegerAttr(stages_));
  func_->setAttr(kStageLayersAttrName, builder.getDenseI64ArrayAttr(counts_));
}

mlir::LogicalResult Stager::run() {
  if (mlir::failed(check())) return mlir::failure();
  stack_ = layers::findLayerStack(func_, autodiff::backwardOps(func_));
  if (!stack_) {
    return func_.emitError()
           << "plan-stages found no repeated layers in @" << func_.getSymName()
           << ": no forward op is located at a numbered block such as 'layers.3.attention.wq'; "
              "stages hold whole layers, so give the ops module-path locations (the zoo and "
              "the PyTorch importer do) or plan with one stage";
  }
  for (const auto& [index, ops] : stack_->layers) {
    position_[index] = static_cast<int64_t>(position_.size());
  }
  // Module paths of the forward before the first layer op: the embedding's.
  for (mlir::Operation& op : func_.front().without_terminator()) {
    if (stack_->layer_of.count(&op)) break;
    const std::string path = nn::modulePathOf(op.getLoc());
    if (!path.empty()) before_.insert(path);
  }
  if (mlir::failed(chooseCounts())) return mlir::failure();
  assign();
  return mlir::success();
}

class PlanStagesPass : public impl::PlanStagesBase<PlanStagesPass> {
 public:
  using PlanStagesBase::PlanStagesBase;

  void runOnOperation() override {
    // stages=0: as many as the mesh's pp axis has ranks.
    int64_t count = stages;
    if (count == 0) {
      std::optional<PipelineAxis> axis = findPipelineAxis(getOperation());
      count = axis ? axis->size : 1;
    }
    if (count < 1 || virtualStages < 1) {
      getOperation().emitError() << "plan-stages stages=" << static_cast<int64_t>(stages)
                                 << " virtual=" << static_cast<int64_t>(virtualStages)
                                 << ": both must be >= 1 (stages=0: the pp axis's size)";
      return signalPassFailure();
    }
    if (count == 1 && virtualStages > 1) {
      getOperation().emitError() << "plan-stages virtual=" << static_cast<int64_t>(virtualStages)
                                 << " interleaves chunks over stages, but there is one stage; "
                                    "give stages >= 2 (a pp mesh axis) or drop virtual";
      return signalPassFailure();
    }
    std::vector<int64_t> counts;
    if (!layers.empty()) {
      absl::StatusOr<std::vector<int64_t>> parsed = parseCounts(layers);
      if (!parsed.ok()) {
        getOperation().emitError() << std::string(parsed.status().message());
        return signalPassFailure();
      }
      counts = *std::move(parsed);
    }
    if (count == 1) return;
    for (auto func : getOperation().getOps<mlir::func::FuncOp>()) {
      if (func.isExternal()) continue;
      if (mlir::failed(Stager(func, count, count * virtualStages, counts).run())) {
        return signalPassFailure();
      }
    }
  }
};

}  // namespace

}  // namespace loom::planner::stages
