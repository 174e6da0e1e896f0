// plan-recompute: repeats each chosen layer's forward ops in the backward
// pass instead of keeping their results (see passes.td and
// docs/planner_recompute.md).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "plan/scope.h"
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/dialect/nn/ir/module_path.h"
#include "planner/dialect/nn/ir/nn_ops.h"
#include "planner/transforms/autodiff/passes.h"
#include "planner/transforms/autodiff/phases.h"
#include "planner/transforms/recompute/passes.h"

namespace loom::planner::recompute {

#define GEN_PASS_DEF_PLANRECOMPUTE
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/recompute/passes.h.inc"
#pragma GCC diagnostic pop

std::optional<Mode> parseMode(llvm::StringRef text) {
  if (text == "none") return Mode::kNone;
  if (text == "full") return Mode::kFull;
  if (text == "selective") return Mode::kSelective;
  return std::nullopt;
}

const char* modeName(Mode mode) {
  switch (mode) {
    case Mode::kFull:
      return "full";
    case Mode::kSelective:
      return "selective";
    default:
      return "none";
  }
}

namespace {

// The ops whose results selective recompute keeps: they hold the FLOPs.
bool keptBySelective(mlir::Operation* op) {
  return llvm::isa<nn::LinearOp, nn::MatmulOp, nn::AttentionOp>(op);
}

// The forward ops of one repeated block, in program order.
struct Layer {
  int64_t index = 0;
  std::vector<mlir::Operation*> ops;
};

class Recomputer {
 public:
  Recomputer(mlir::func::FuncOp func, Mode mode, int64_t every)
      : func_(func), mode_(mode), every_(every) {}

  mlir::LogicalResult run();

 private:
  mlir::LogicalResult findLayers();
  void recomputeLayer(const Layer& layer);

  mlir::func::FuncOp func_;
  const Mode mode_;
  const int64_t every_;
  // The backward pass before any clone is made.
  llvm::DenseSet<mlir::Operation*> backward_;
  std::string stack_;
  std::map<int64_t, Layer> layers_;
  llvm::DenseMap<mlir::Operation*, int64_t> layerOf_;
};

mlir::LogicalResult Recomputer::findLayers() {
  std::map<std::string, int64_t> counts;
  std::vector<std::pair<mlir::Operation*, plan::RepeatedBlock>> scoped;
  for (mlir::Operation& op : func_.front().without_terminator()) {
    if (backward_.contains(&op)) break;
    std::optional<plan::RepeatedBlock> block = plan::repeatedBlockOf(nn::modulePathOf(op.getLoc()));
    if (!block) continue;
    ++counts[block->stack];
    scoped.emplace_back(&op, *block);
  }
  if (counts.empty()) {
    return func_.emitError()
           << "plan-recompute found no repeated layers in @" << func_.getSymName()
           << ": no forward op is located at a numbered block such as 'layers.3.attention.wq'; "
              "recompute works per layer, so give the ops module-path locations (the zoo and "
              "the PyTorch importer do) or plan with recompute none";
  }
  stack_ = std::max_element(counts.begin(), counts.end(), [](const auto& a, const auto& b) {
             return a.second < b.second;
           })->first;
  for (const auto& [op, block] : scoped) {
    if (block.stack != stack_) continue;
    Layer& layer = layers_[block.index];
    layer.index = block.index;
    layer.ops.push_back(op);
    layerOf_[op] = block.index;
  }
  return mlir::success();
}

// Clones what the backward reads from `layer` (and what that needs, back to
// the layer's boundary and, under selective, its kept results) just before
// the first backward op that reads any of it, and points the backward's
// reads at the clones.
void Recomputer::recomputeLayer(const Layer& layer) {
  auto inLayer = [&](mlir::Value v) {
    mlir::Operation* producer = v.getDefiningOp();
    auto it = producer ? layerOf_.find(producer) : layerOf_.end();
    return it != layerOf_.end() && it->second == layer.index;
  };
  // A result read outside the layer's forward ops and the backward is a
  // boundary value (the next layer's input): kept.
  auto boundary = [&](mlir::Value v) {
    for (mlir::Operation* user : v.getUsers()) {
      if (backward_.contains(user)) continue;
      auto it = layerOf_.find(user);
      if (it == layerOf_.end() || it->second != layer.index) return true;
    }
    return false;
  };
  auto recomputable = [&](mlir::Operation* op) {
    if (mode_ == Mode::kSelective && keptBySelective(op)) return false;
    return llvm::none_of(op->getResults(), boundary);
  };
  // The ops to clone: those whose results the backward reads, and their
  // recomputable producers inside the layer.
  llvm::DenseSet<mlir::Operation*> needed;
  std::vector<mlir::Operation*> work;
  for (mlir::Operation* op : layer.ops) {
    if (!recomputable(op)) continue;
    const bool read = llvm::any_of(op->getUsers(),
                                   [&](mlir::Operation* user) { return backward_.contains(user); });
    if (read && needed.insert(op).second) work.push_back(op);
  }
  while (!work.empty()) {
    mlir::Operation* op = work.back();
    work.pop_back();
    for (mlir::Value operand : op->getOperands()) {
      if (!inLayer(operand)) continue;
      mlir::Operation* producer = operand.getDefiningOp();
      if (recomputable(producer) && needed.insert(producer).second) work.push_back(producer);
    }
  }
  if (needed.empty()) return;
  // The backward's reads of the originals, and the first of them.
  mlir::Operation* first = nullptr;
  llvm::SmallVector<mlir::OpOperand*> reads;
  for (mlir::Operation* op : layer.ops) {
    if (!needed.contains(op)) continue;
    for (mlir::OpOperand& use : op->getUses()) {
      if (!backward_.contains(use.getOwner())) continue;
      reads.push_back(&use);
      if (!first || use.getOwner()->isBeforeInBlock(first)) first = use.getOwner();
    }
  }
  mlir::OpBuilder builder(first);
  mlir::IRMapping clones;
  for (mlir::Operation* op : layer.ops) {
    if (!needed.contains(op)) continue;
    mlir::Operation* clone = builder.clone(*op, clones);
    clone->setAttr(autodiff::kRecomputeAttrName, builder.getUnitAttr());
  }
  for (mlir::OpOperand* use : reads) use->set(clones.lookup(use->get()));
}

mlir::LogicalResult Recomputer::run() {
  if (!func_->hasAttr(autodiff::kLossGradArgAttrName)) {
    return func_.emitError() << "plan-recompute needs a training step, but @" << func_.getSymName()
                             << " has no " << autodiff::kLossGradArgAttrName
                             << "; run --plan-autodiff first";
  }
  for (mlir::Operation& op : func_.front()) {
    if (llvm::isa<dist::DistDialect>(op.getDialect())) {
      return op.emitOpError() << "is a dist op, but plan-recompute runs before "
                                 "--plan-insert-collectives: recompute the nn ops first, so "
                                 "the clones get their collectives";
    }
  }
  backward_ = autodiff::backwardOps(func_);
  if (mlir::failed(findLayers())) return mlir::failure();
  for (const auto& [index, layer] : layers_) {
    if (index % every_ == 0) recomputeLayer(layer);
  }
  return mlir::success();
}

class PlanRecomputePass : public impl::PlanRecomputeBase<PlanRecomputePass> {
 public:
  using PlanRecomputeBase::PlanRecomputeBase;

  void runOnOperation() override {
    const std::optional<Mode> parsed = parseMode(mode);
    if (!parsed) {
      getOperation().emitError() << "plan-recompute mode '" << mode
                                 << "' is not none, full or selective";
      return signalPassFailure();
    }
    if (every < 1) {
      getOperation().emitError() << "plan-recompute every=" << static_cast<int64_t>(every)
                                 << " must be >= 1 (1: every layer)";
      return signalPassFailure();
    }
    if (*parsed == Mode::kNone) return;
    for (auto func : getOperation().getOps<mlir::func::FuncOp>()) {
      if (func.isExternal()) continue;
      if (mlir::failed(Recomputer(func, *parsed, every).run())) return signalPassFailure();
    }
  }
};

}  // namespace

}  // namespace loom::planner::recompute
