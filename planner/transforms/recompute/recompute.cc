// plan-recompute: repeats each chosen layer's forward ops in the backward
// pass instead of keeping their results (see passes.td and
// docs/planner_recompute.md).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
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

absl::StatusOr<std::vector<LayerRun>> parseLayerRuns(llvm::StringRef text) {
  std::vector<LayerRun> runs;
  if (text.empty()) return runs;
  llvm::SmallVector<llvm::StringRef> parts;
  text.split(parts, ',');
  for (llvm::StringRef part : parts) {
    auto [modeText, countText] = part.split(':');
    const std::optional<Mode> mode = parseMode(modeText.trim());
    int64_t count = 0;
    if (!mode || countText.trim().getAsInteger(10, count) || count < 1) {
      return absl::InvalidArgumentError(
          "plan-recompute layers: '" + part.str() +
          "' is not mode:count (a mode of none, full or selective and a layer count >= 1), "
          "e.g. layers=full:4,selective:10");
    }
    runs.push_back({*mode, count});
  }
  return runs;
}

std::string layerRunsText(const std::vector<LayerRun>& runs) {
  std::string out;
  for (const LayerRun& run : runs) {
    if (!out.empty()) out += ",";
    out += std::string(modeName(run.mode)) + ":" + std::to_string(run.count);
  }
  return out;
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
  Recomputer(mlir::func::FuncOp func, Mode mode, int64_t every, std::vector<LayerRun> runs)
      : func_(func), mode_(mode), every_(every), runs_(std::move(runs)) {}

  mlir::LogicalResult run();

 private:
  mlir::LogicalResult findLayers();
  // The mode of the `position`-th layer (in index order).
  Mode modeOf(int64_t position, int64_t index) const;
  void recomputeLayer(const Layer& layer, Mode mode);

  mlir::func::FuncOp func_;
  const Mode mode_;
  const int64_t every_;
  const std::vector<LayerRun> runs_;
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
Mode Recomputer::modeOf(int64_t position, int64_t index) const {
  int64_t first = 0;
  for (const LayerRun& run : runs_) {
    if (position < first + run.count) return run.mode;
    first += run.count;
  }
  if (!runs_.empty()) return mode_;
  return index % every_ == 0 ? mode_ : Mode::kNone;
}

void Recomputer::recomputeLayer(const Layer& layer, Mode mode) {
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
    if (mode == Mode::kSelective && keptBySelective(op)) return false;
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
  int64_t listed = 0;
  for (const LayerRun& run : runs_) listed += run.count;
  if (listed > static_cast<int64_t>(layers_.size())) {
    return func_.emitError() << "plan-recompute layers=" << layerRunsText(runs_) << " names "
                             << listed << " layers, but @" << func_.getSymName() << " has "
                             << layers_.size() << " in its '" << stack_
                             << "' stack; give at most that many";
  }
  int64_t position = 0;
  for (const auto& [index, layer] : layers_) {
    const Mode mode = modeOf(position++, index);
    if (mode != Mode::kNone) recomputeLayer(layer, mode);
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
    absl::StatusOr<std::vector<LayerRun>> runs = parseLayerRuns(layers);
    if (!runs.ok()) {
      getOperation().emitError() << std::string(runs.status().message());
      return signalPassFailure();
    }
    if (!runs->empty() && every != 1) {
      getOperation().emitError() << "plan-recompute layers=" << layers
                                 << " gives each layer its mode, so it cannot go with every="
                                 << static_cast<int64_t>(every) << "; drop one of them";
      return signalPassFailure();
    }
    const bool any = *parsed != Mode::kNone || llvm::any_of(*runs, [](const LayerRun& run) {
      return run.mode != Mode::kNone;
    });
    if (!any) return;
    for (auto func : getOperation().getOps<mlir::func::FuncOp>()) {
      if (func.isExternal()) continue;
      if (mlir::failed(Recomputer(func, *parsed, every, *runs).run())) return signalPassFailure();
    }
  }
};

}  // namespace

}  // namespace loom::planner::recompute
