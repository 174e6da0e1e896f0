// Registration of the `nn` dialect and the verifier of its argument
// attributes (`nn.param`, `nn.name`, `nn.init`).
#include "planner/dialect/nn/ir/nn_dialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "planner/dialect/nn/ir/nn_ops.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/dialect/nn/ir/nn_dialect.cpp.inc"
#pragma GCC diagnostic pop

namespace loom::planner::nn {
namespace {

// `nn.init`: {kind = "normal" | "zeros" | "ones", mean = f64, std = f64} on
// a float tensor argument; a normal init has a positive std.
mlir::LogicalResult verifyInit(mlir::Operation* op, unsigned argIndex,
                               mlir::FunctionOpInterface func, mlir::NamedAttribute attribute) {
  const llvm::StringRef name = attribute.getName().getValue();
  auto fix = [&] {
    return op->emitOpError() << "'" << name << "' on argument #" << argIndex << " must be {kind = "
                             << "\"normal\" | \"zeros\" | \"ones\", mean = f64, std = f64}, got: "
                             << attribute.getValue() << "; e.g. {" << name
                             << " = {kind = \"normal\", mean = 0.0, std = 0.02}}";
  };
  auto dict = llvm::dyn_cast<mlir::DictionaryAttr>(attribute.getValue());
  if (!dict || dict.size() != 3) return fix();
  auto kind = dict.getAs<mlir::StringAttr>("kind");
  auto mean = dict.getAs<mlir::FloatAttr>("mean");
  auto stddev = dict.getAs<mlir::FloatAttr>("std");
  if (!kind || !mean || !stddev ||
      !llvm::is_contained({"normal", "zeros", "ones"}, kind.getValue())) {
    return fix();
  }
  if (kind.getValue() == "normal" && !(stddev.getValueAsDouble() > 0)) {
    return op->emitOpError() << "'" << name << "' on argument #" << argIndex
                             << " is a normal init with std " << stddev.getValueAsDouble()
                             << "; give it a positive std, or use kind \"zeros\"";
  }
  const mlir::Type type = func.getArgumentTypes()[argIndex];
  auto tensor = llvm::dyn_cast<mlir::RankedTensorType>(type);
  if (!tensor || !llvm::isa<mlir::FloatType>(tensor.getElementType())) {
    return op->emitOpError() << "'" << name << "' on argument #" << argIndex << " of type " << type
                             << " initialises a value that is not a float tensor; drop it from "
                                "token ids and labels";
  }
  return mlir::success();
}

}  // namespace

void NnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "planner/dialect/nn/ir/nn_ops.cpp.inc"
      >();
}

mlir::LogicalResult NnDialect::verifyRegionArgAttribute(mlir::Operation* op,
                                                        unsigned /*regionIndex*/, unsigned argIndex,
                                                        mlir::NamedAttribute attribute) {
  const llvm::StringRef name = attribute.getName().getValue();
  auto func = llvm::dyn_cast<mlir::FunctionOpInterface>(op);
  if (!func) {
    return op->emitOpError() << "carries '" << name << "' on region argument #" << argIndex
                             << ", but nn argument attributes mark function arguments only; "
                                "move it to a func.func argument";
  }
  if (name == kParamAttrName) {
    if (!llvm::isa<mlir::UnitAttr>(attribute.getValue())) {
      return op->emitOpError() << "'" << name << "' on argument #" << argIndex
                               << " must be a unit attribute, got: " << attribute.getValue()
                               << "; write it as {" << name << "}";
    }
    const mlir::Type type = func.getArgumentTypes()[argIndex];
    auto tensor = llvm::dyn_cast<mlir::RankedTensorType>(type);
    if (!tensor || !llvm::isa<mlir::FloatType>(tensor.getElementType())) {
      return op->emitOpError() << "'" << name << "' marks argument #" << argIndex << " of type "
                               << type
                               << ", but parameters are float tensors; drop it from token ids "
                                  "and labels";
    }
    return mlir::success();
  }
  if (name == kNameAttrName) {
    auto text = llvm::dyn_cast<mlir::StringAttr>(attribute.getValue());
    if (!text || text.getValue().empty()) {
      return op->emitOpError() << "'" << name << "' on argument #" << argIndex
                               << " must be a non-empty string, got: " << attribute.getValue()
                               << "; write it as {" << name << " = \"layers.0.attn.wq\"}";
    }
    if (!func.getArgAttr(argIndex, kParamAttrName)) {
      return op->emitOpError() << "'" << name << "' on argument #" << argIndex
                               << " names a value that is not a parameter; add {" << kParamAttrName
                               << "} to the argument or drop the name";
    }
    return mlir::success();
  }
  if (name == kInitAttrName) return verifyInit(op, argIndex, func, attribute);
  return op->emitOpError() << "unknown argument attribute '" << name << "' on argument #"
                           << argIndex << "; the nn dialect defines '" << kParamAttrName << "', '"
                           << kNameAttrName << "' and '" << kInitAttrName << "'";
}

}  // namespace loom::planner::nn
