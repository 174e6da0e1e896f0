#include "planner/transforms/layers/layer_stack.h"

#include <algorithm>
#include <utility>

#include "plan/scope.h"
#include "planner/dialect/nn/ir/module_path.h"

namespace loom::planner::layers {

std::optional<LayerStack> findLayerStack(mlir::func::FuncOp func,
                                         const llvm::DenseSet<mlir::Operation*>& backward) {
  std::map<std::string, int64_t> counts;
  std::vector<std::pair<mlir::Operation*, plan::RepeatedBlock>> scoped;
  for (mlir::Operation& op : func.front().without_terminator()) {
    if (backward.contains(&op)) break;
    std::optional<plan::RepeatedBlock> block = plan::repeatedBlockOf(nn::modulePathOf(op.getLoc()));
    if (!block) continue;
    ++counts[block->stack];
    scoped.emplace_back(&op, *std::move(block));
  }
  if (counts.empty()) return std::nullopt;
  LayerStack stack;
  // The most ops; among equals the first name in order, so the choice
  // never depends on the map's iteration beyond that.
  stack.name = std::max_element(counts.begin(), counts.end(), [](const auto& a, const auto& b) {
                 return a.second < b.second;
               })->first;
  for (const auto& [op, block] : scoped) {
    if (block.stack != stack.name) continue;
    stack.layers[block.index].push_back(op);
    stack.layer_of[op] = block.index;
  }
  return stack;
}

std::optional<int64_t> layerIndexOf(const LayerStack& stack, mlir::Operation* op) {
  std::optional<plan::RepeatedBlock> block = plan::repeatedBlockOf(nn::modulePathOf(op->getLoc()));
  if (!block || block->stack != stack.name || !stack.layers.count(block->index)) return std::nullopt;
  return block->index;
}

}  // namespace loom::planner::layers
