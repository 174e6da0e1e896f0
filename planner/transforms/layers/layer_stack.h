// A function's repeated layers: the numbered stack of module paths
// ("layers" in "layers.3.attention.wq", "transformer.h" in
// "transformer.h.3.mlp.c_fc") that holds the most forward ops, and each of
// its layers' forward ops in program order. plan-recompute and plan-stages
// both work per layer of it.
#ifndef LOOM_PLANNER_TRANSFORMS_LAYERS_LAYER_STACK_H_
#define LOOM_PLANNER_TRANSFORMS_LAYERS_LAYER_STACK_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Operation.h"

namespace loom::planner::layers {

struct LayerStack {
  // The path up to the layer number ("layers", "transformer.h").
  std::string name;
  // Layer number -> its forward ops, in program order; numbers ascending.
  std::map<int64_t, std::vector<mlir::Operation*>> layers;
  // Every forward op of a layer -> its number.
  llvm::DenseMap<mlir::Operation*, int64_t> layer_of;
};

// The stack of `func`'s forward ops (those before `backward`'s first op in
// program order; all of them for a forward graph); nullopt where no op is
// located at a numbered block.
std::optional<LayerStack> findLayerStack(mlir::func::FuncOp func,
                                         const llvm::DenseSet<mlir::Operation*>& backward);

// The layer number of `op` in `stack` from its module path (a backward op
// has its forward op's location, so it has its layer too); nullopt for an
// op outside the stack.
std::optional<int64_t> layerIndexOf(const LayerStack& stack, mlir::Operation* op);

}  // namespace loom::planner::layers

#endif  // LOOM_PLANNER_TRANSFORMS_LAYERS_LAYER_STACK_H_
