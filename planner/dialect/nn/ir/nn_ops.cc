// Shape inference and verifiers of the `nn` ops. Every diagnostic names the
// op, shows the offending values and says how to fix the IR.
#include "planner/dialect/nn/ir/nn_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <utility>

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/TypeRange.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define GET_OP_CLASSES
#include "planner/dialect/nn/ir/nn_ops.cpp.inc"
#pragma GCC diagnostic pop

namespace loom::planner::nn {

using ::llvm::ArrayRef;
using ::llvm::SmallVector;
using ::llvm::SmallVectorImpl;
using ::mlir::LogicalResult;
using ::mlir::RankedTensorType;
using ::mlir::Type;
using ::mlir::Value;

namespace {

// "[2, 16, 64]".
std::string formatShape(ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << '[';
  llvm::interleaveComma(shape, os);
  os << ']';
  return text;
}

// Reports the failures of one op's shape inference as "'nn.<op>' op ..." at
// the op's location (inference without a location stays silent).
class ShapeChecker {
 public:
  ShapeChecker(llvm::StringRef opName, std::optional<mlir::Location> loc)
      : opName_(opName), loc_(loc) {}

  template <typename... Args>
  LogicalResult fail(Args&&... args) const {
    return mlir::emitOptionalError(loc_, "'", opName_, "' op ", std::forward<Args>(args)...);
  }

  // The operand as a ranked tensor; ODS guarantees it for parsed IR, this
  // guards builders.
  mlir::FailureOr<RankedTensorType> tensor(Value value, llvm::StringRef role) const {
    auto type = llvm::dyn_cast_or_null<RankedTensorType>(value ? value.getType() : Type());
    if (!type || !type.hasStaticShape()) {
      return fail(role,
                  " must be a statically shaped tensor, got: ", value ? value.getType() : Type(),
                  "; give every dimension a size");
    }
    return type;
  }

  LogicalResult rankAtLeast(RankedTensorType type, llvm::StringRef role, int64_t rank,
                            llvm::StringRef layout) const {
    if (type.getRank() >= rank) return mlir::success();
    return fail(role, " must be ", layout, " with rank >= ", rank, ", got: rank ", type.getRank(),
                " (", type, "); add the missing leading dims");
  }

  LogicalResult rankIs(RankedTensorType type, llvm::StringRef role, int64_t rank,
                       llvm::StringRef layout) const {
    if (type.getRank() == rank) return mlir::success();
    return fail(role, " must be ", layout, ", got: rank ", type.getRank(), " (", type,
                "); reshape it to rank ", rank);
  }

  LogicalResult sameElementType(RankedTensorType a, llvm::StringRef aRole, RankedTensorType b,
                                llvm::StringRef bRole) const {
    if (a.getElementType() == b.getElementType()) return mlir::success();
    return fail("operands must share one element type, got: ", a.getElementType(), " (", aRole,
                ") != ", b.getElementType(), " (", bRole, "); convert them to one type");
  }

  LogicalResult sameType(RankedTensorType a, llvm::StringRef aRole, RankedTensorType b,
                         llvm::StringRef bRole, llvm::StringRef fix) const {
    if (a == b) return mlir::success();
    return fail(bRole, " must have the type of ", aRole, ", got: ", b, " != ", a, "; ", fix);
  }

 private:
  llvm::StringRef opName_;
  std::optional<mlir::Location> loc_;
};

// Checks a norm's input [T..., hidden] and its [hidden] gamma/beta.
LogicalResult checkNorm(const ShapeChecker& check, RankedTensorType input,
                        ArrayRef<std::pair<Value, llvm::StringRef>> perFeature) {
  if (failed(check.rankAtLeast(input, "input", 1, "[tokens..., hidden]"))) {
    return mlir::failure();
  }
  const int64_t hidden = input.getShape().back();
  for (const auto& [value, role] : perFeature) {
    auto type = check.tensor(value, role);
    if (failed(type)) return mlir::failure();
    if (type->getShape() != ArrayRef<int64_t>{hidden}) {
      return check.fail(role, " must be [hidden] = [", hidden,
                        "], got: ", formatShape(type->getShape()),
                        "; pass one value per feature of the input's last dim");
    }
    if (failed(check.sameElementType(input, "input", *type, role))) {
      return mlir::failure();
    }
  }
  return mlir::success();
}

// Checks attention's query/key/value layouts and grouped-query heads.
LogicalResult checkAttention(const ShapeChecker& check, Value queryValue, Value keyValue,
                             Value valueValue) {
  auto query = check.tensor(queryValue, "query");
  auto key = check.tensor(keyValue, "key");
  auto value = check.tensor(valueValue, "value");
  if (failed(query) || failed(key) || failed(value)) return mlir::failure();
  if (failed(check.rankIs(*query, "query", 4, "[batch, seq, heads, head_dim]")) ||
      failed(check.rankIs(*key, "key", 4, "[batch, seq, kv_heads, head_dim]")) ||
      failed(check.rankIs(*value, "value", 4, "[batch, seq, kv_heads, head_dim]"))) {
    return mlir::failure();
  }
  if (key->getShape() != value->getShape()) {
    return check.fail("key and value must have one shape, got: ", formatShape(key->getShape()),
                      " != ", formatShape(value->getShape()),
                      "; project both to [batch, seq, kv_heads, head_dim]");
  }
  const ArrayRef<int64_t> q = query->getShape();
  const ArrayRef<int64_t> k = key->getShape();
  if (q[0] != k[0]) {
    return check.fail("query and key batch sizes differ, got: ", q[0], " != ", k[0],
                      "; use one batch for all three");
  }
  if (q[1] != k[1]) {
    return check.fail("query and key sequence lengths differ, got: ", q[1], " != ", k[1],
                      "; causal self-attention reads queries and keys of one sequence");
  }
  if (q[3] != k[3]) {
    return check.fail("query and key head_dim differ, got: ", q[3], " != ", k[3],
                      "; use one head_dim for query, key and value");
  }
  if (q[2] % k[2] != 0) {
    return check.fail("query heads must be a multiple of kv heads, got: ", q[2], " % ", k[2], " = ",
                      q[2] % k[2], "; choose kv_heads that divide heads");
  }
  if (failed(check.sameElementType(*query, "query", *key, "key")) ||
      failed(check.sameElementType(*query, "query", *value, "value"))) {
    return mlir::failure();
  }
  return mlir::success();
}

// Checks cross-entropy logits [T..., vocab] against labels [T...].
LogicalResult checkCrossEntropy(const ShapeChecker& check, RankedTensorType logits,
                                RankedTensorType labels) {
  if (failed(check.rankAtLeast(logits, "logits", 2, "[tokens..., vocab]"))) {
    return mlir::failure();
  }
  const ArrayRef<int64_t> tokens = logits.getShape().drop_back();
  if (labels.getShape() != tokens) {
    return check.fail("labels must be ", formatShape(tokens),
                      " (the logits without the vocab dim), got: ", formatShape(labels.getShape()),
                      "; give one label per token");
  }
  return mlir::success();
}

LogicalResult checkPositive(mlir::Operation* op, llvm::StringRef name, double value,
                            llvm::StringRef example) {
  if (value > 0.0 && std::isfinite(value)) return mlir::success();
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format("%g", value);
  return op->emitOpError() << name << " must be positive and finite, got: " << text
                           << "; use a value such as " << example;
}

}  // namespace

ReshapeRefinement refineReshape(ArrayRef<int64_t> input, ArrayRef<int64_t> result) {
  // In row-major order dim k of a shape covers the cumulative products
  // (c[k-1], c[k]]. The factor boundaries are the cumulative products of
  // both shapes merged; the shapes refine into one factor list exactly when
  // every boundary divides the next.
  auto cumulative = [](ArrayRef<int64_t> shape) {
    SmallVector<int64_t> products;
    int64_t product = 1;
    for (int64_t size : shape) products.push_back(product *= size);
    return products;
  };
  const SmallVector<int64_t> inputEnds = cumulative(input);
  const SmallVector<int64_t> resultEnds = cumulative(result);
  SmallVector<int64_t> boundaries;
  std::merge(inputEnds.begin(), inputEnds.end(), resultEnds.begin(), resultEnds.end(),
             std::back_inserter(boundaries));
  boundaries.erase(std::unique(boundaries.begin(), boundaries.end()), boundaries.end());
  llvm::erase(boundaries, 1);

  ReshapeRefinement refinement;
  int64_t previous = 1;
  for (int64_t boundary : boundaries) {
    if (boundary % previous == 0) {
      refinement.factorSizes.push_back(boundary / previous);
      previous = boundary;
      continue;
    }
    // The smallest group of equal product around the failing boundary lies
    // between the common boundaries of both shapes.
    auto isCommon = [&](int64_t b) {
      return llvm::is_contained(inputEnds, b) && llvm::is_contained(resultEnds, b);
    };
    int64_t low = 1;
    for (int64_t b : boundaries) {
      if (b < boundary && isCommon(b)) low = b;
    }
    const int64_t high =
        *llvm::find_if(boundaries, [&](int64_t b) { return b > boundary && isCommon(b); });
    auto dimRange = [&](ArrayRef<int64_t> ends) {
      size_t begin = 0;
      while (begin < ends.size() && ends[begin] <= low) ++begin;
      size_t end = begin;
      while (end < ends.size() && ends[end] <= high) ++end;
      return std::make_pair(begin, end);
    };
    const auto [inputBegin, inputEnd] = dimRange(inputEnds);
    const auto [resultBegin, resultEnd] = dimRange(resultEnds);
    refinement.mismatch =
        ReshapeRefinement::Mismatch{inputBegin, inputEnd, resultBegin, resultEnd, high / low};
    return refinement;
  }
  auto assign = [&](ArrayRef<int64_t> ends, TensorFactors& dims) {
    int64_t begin = 1;
    for (int64_t end : ends) {
      DimFactors& factors = dims.emplace_back();
      for (auto [index, b] : llvm::enumerate(boundaries)) {
        if (b > begin && b <= end) factors.push_back(index);
      }
      begin = end;
    }
  };
  assign(inputEnds, refinement.input);
  assign(resultEnds, refinement.result);
  return refinement;
}

mlir::LogicalResult verifyInferredTypes(mlir::Operation* op) {
  auto inference = llvm::cast<mlir::InferTypeOpInterface>(op);
  SmallVector<Type> inferred;
  if (failed(inference.inferReturnTypes(op->getContext(), op->getLoc(), op->getOperands(),
                                        op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
                                        op->getRegions(), inferred))) {
    return mlir::failure();
  }
  for (auto [index, declared, expected] : llvm::enumerate(op->getResultTypes(), inferred)) {
    if (declared != expected) {
      return op->emitOpError() << "result #" << index << " has type " << declared
                               << ", but the operands give " << expected
                               << "; declare the result as " << expected;
    }
  }
  return mlir::success();
}

LogicalResult EmbeddingOp::inferReturnTypes(mlir::MLIRContext*, std::optional<mlir::Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type>& inferred) {
  const ShapeChecker check(getOperationName(), loc);
  auto ids = check.tensor(adaptor.getIds(), "ids");
  auto table = check.tensor(adaptor.getTable(), "table");
  if (failed(ids) || failed(table) || failed(check.rankIs(*table, "table", 2, "[vocab, hidden]"))) {
    return mlir::failure();
  }
  SmallVector<int64_t> shape(ids->getShape());
  shape.push_back(table->getShape()[1]);
  inferred.push_back(RankedTensorType::get(shape, table->getElementType()));
  return mlir::success();
}

LogicalResult LinearOp::inferReturnTypes(mlir::MLIRContext*, std::optional<mlir::Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type>& inferred) {
  const ShapeChecker check(getOperationName(), loc);
  auto input = check.tensor(adaptor.getInput(), "input");
  auto weight = check.tensor(adaptor.getWeight(), "weight");
  if (failed(input) || failed(weight) ||
      failed(check.rankAtLeast(*input, "input", 2, "[tokens..., in]")) ||
      failed(check.sameElementType(*input, "input", *weight, "weight"))) {
    return mlir::failure();
  }
  if (weight->getRank() != 2) {
    return check.fail("weight must be [in, out], got: rank ", weight->getRank(), " (", *weight,
                      "); pass a rank-2 weight (a PyTorch [out, in] weight "
                      "is transposed on import)");
  }
  const int64_t in = input->getShape().back();
  const int64_t out = weight->getShape()[1];
  if (in != weight->getShape()[0]) {
    return check.fail("input features do not match the weight, got: ", in,
                      " != ", weight->getShape()[0],
                      " (input's last dim vs weight dim 0); the weight must "
                      "be [in, out] with in = the input's last dim");
  }
  if (Value biasValue = adaptor.getBias()) {
    auto bias = check.tensor(biasValue, "bias");
    if (failed(bias) || failed(check.sameElementType(*input, "input", *bias, "bias"))) {
      return mlir::failure();
    }
    if (bias->getShape() != ArrayRef<int64_t>{out}) {
      return check.fail("bias must be [out] = [", out, "], got: ", formatShape(bias->getShape()),
                        "; pass one bias per output feature");
    }
  }
  SmallVector<int64_t> shape(input->getShape().drop_back());
  shape.push_back(out);
  inferred.push_back(RankedTensorType::get(shape, input->getElementType()));
  return mlir::success();
}

LogicalResult BiasAddOp::inferReturnTypes(mlir::MLIRContext*, std::optional<mlir::Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type>& inferred) {
  const ShapeChecker check(getOperationName(), loc);
  auto input = check.tensor(adaptor.getInput(), "input");
  auto bias = check.tensor(adaptor.getBias(), "bias");
  if (failed(input) || failed(bias) ||
      failed(check.rankAtLeast(*input, "input", 1, "[tokens..., out]")) ||
      failed(check.sameElementType(*input, "input", *bias, "bias"))) {
    return mlir::failure();
  }
  const int64_t out = input->getShape().back();
  if (bias->getShape() != ArrayRef<int64_t>{out}) {
    return check.fail("bias must be [out] = [", out, "], got: ", formatShape(bias->getShape()),
                      "; pass one bias per feature of the input's last dim");
  }
  inferred.push_back(*input);
  return mlir::success();
}

LogicalResult MatmulOp::inferReturnTypes(mlir::MLIRContext*, std::optional<mlir::Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type>& inferred) {
  const ShapeChecker check(getOperationName(), loc);
  auto lhs = check.tensor(adaptor.getLhs(), "lhs");
  auto rhs = check.tensor(adaptor.getRhs(), "rhs");
  if (failed(lhs) || failed(rhs)) return mlir::failure();
  if (adaptor.getTransposeLhs() && adaptor.getTransposeRhs()) {
    return check.fail(
        "transpose_lhs and transpose_rhs cannot both be set; set at most "
        "one of them");
  }
  if (failed(check.rankAtLeast(*lhs, "lhs", 2, "[tokens..., x]")) ||
      failed(check.sameElementType(*lhs, "lhs", *rhs, "rhs"))) {
    return mlir::failure();
  }
  const ArrayRef<int64_t> a = lhs->getShape();
  const ArrayRef<int64_t> b = rhs->getShape();
  SmallVector<int64_t> shape;
  if (adaptor.getTransposeLhs()) {
    if (a.drop_back() != b.drop_back()) {
      return check.fail(
          "with transpose_lhs, lhs and rhs must share their leading dims, "
          "got: ",
          formatShape(a.drop_back()), " != ", formatShape(b.drop_back()),
          "; pass lhs [T..., m] and rhs [T..., n]");
    }
    shape = {a.back(), b.back()};
  } else {
    if (rhs->getRank() != 2) {
      return check.fail("rhs must be rank 2, got: rank ", rhs->getRank(), " (", *rhs,
                        "); only transpose_lhs takes a rhs with leading dims");
    }
    const int64_t contracting = adaptor.getTransposeRhs() ? b[1] : b[0];
    if (a.back() != contracting) {
      return check.fail("contracting dims differ, got: ", a.back(), " != ", contracting,
                        adaptor.getTransposeRhs()
                            ? " (lhs's last dim vs rhs dim 1); with transpose_rhs, rhs "
                              "must be [n, k] with k = the lhs's last dim"
                            : " (lhs's last dim vs rhs dim 0); rhs must be [k, n] with "
                              "k = the lhs's last dim");
    }
    shape.assign(a.begin(), a.end() - 1);
    shape.push_back(adaptor.getTransposeRhs() ? b[0] : b[1]);
  }
  inferred.push_back(RankedTensorType::get(shape, lhs->getElementType()));
  return mlir::success();
}

LogicalResult RmsNormOp::inferReturnTypes(mlir::MLIRContext*, std::optional<mlir::Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type>& inferred) {
  const ShapeChecker check(getOperationName(), loc);
  auto input = check.tensor(adaptor.getInput(), "input");
  if (failed(input) || failed(checkNorm(check, *input, {{adaptor.getGamma(), "gamma"}}))) {
    return mlir::failure();
  }
  inferred.push_back(*input);
  return mlir::success();
}

LogicalResult RmsNormOp::verify() {
  return checkPositive(*this, "epsilon", getEpsilon().convertToDouble(), "1e-05");
}

LogicalResult LayerNormOp::inferReturnTypes(mlir::MLIRContext*, std::optional<mlir::Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type>& inferred) {
  const ShapeChecker check(getOperationName(), loc);
  auto input = check.tensor(adaptor.getInput(), "input");
  if (failed(input) ||
      failed(
          checkNorm(check, *input, {{adaptor.getGamma(), "gamma"}, {adaptor.getBeta(), "beta"}}))) {
    return mlir::failure();
  }
  inferred.push_back(*input);
  return mlir::success();
}

LogicalResult LayerNormOp::verify() {
  return checkPositive(*this, "epsilon", getEpsilon().convertToDouble(), "1e-05");
}

LogicalResult RopeOp::inferReturnTypes(mlir::MLIRContext*, std::optional<mlir::Location> loc,
                                       Adaptor adaptor, SmallVectorImpl<Type>& inferred) {
  const ShapeChecker check(getOperationName(), loc);
  auto input = check.tensor(adaptor.getInput(), "input");
  if (failed(input) || failed(check.rankIs(*input, "input", 4, "[batch, seq, heads, head_dim]"))) {
    return mlir::failure();
  }
  const int64_t headDim = input->getShape()[3];
  if (headDim % 2 != 0) {
    return check.fail("head_dim must be even, got: ", headDim,
                      "; rope rotates pairs of features (i, i + head_dim/2)");
  }
  inferred.push_back(*input);
  return mlir::success();
}

LogicalResult RopeOp::verify() {
  if (failed(checkPositive(*this, "theta", getTheta().convertToDouble(), "10000.0"))) {
    return mlir::failure();
  }
  if (auto factor = getScalingFactorAttr();
      factor && failed(checkPositive(*this, "scaling_factor", factor.getValueAsDouble(), "8.0"))) {
    return mlir::failure();
  }
  // The assembly format keeps the three band attributes together; a
  // generic attribute dictionary could still split them.
  const int bands = static_cast<int>(static_cast<bool>(getLowFreqFactorAttr())) +
                    static_cast<bool>(getHighFreqFactorAttr()) +
                    static_cast<bool>(getOriginalMaxPositionsAttr());
  if (bands == 0) return mlir::success();
  if (bands != 3 || !getScalingFactorAttr()) {
    return emitOpError() << "llama3 scaling needs scaling_factor, low_freq_factor, "
                            "high_freq_factor and original_max_positions together, got: "
                         << (getScalingFactorAttr() ? 1 : 0) + bands
                         << " of the 4; give all four, or scaling_factor alone for linear scaling";
  }
  const double low = getLowFreqFactorAttr().getValueAsDouble();
  const double high = getHighFreqFactorAttr().getValueAsDouble();
  if (failed(checkPositive(*this, "low_freq_factor", low, "1.0"))) return mlir::failure();
  if (!(high > low) || !std::isfinite(high)) {
    std::string text;
    llvm::raw_string_ostream(text) << llvm::format("%g <= %g", high, low);
    return emitOpError() << "high_freq_factor must be finite and above low_freq_factor, got: "
                         << text << "; Llama 3.1 uses 4.0 and 1.0";
  }
  if (const int64_t original = getOriginalMaxPositionsAttr().getInt(); original < 1) {
    return emitOpError() << "original_max_positions must be positive, got: " << original
                         << "; it is the context length the model was trained with, e.g. 8192";
  }
  return mlir::success();
}

void RopeOp::build(mlir::OpBuilder& builder, mlir::OperationState& state, Value input,
                   mlir::FloatAttr theta, bool inverse, const loom::plan::RopeScaling& scaling) {
  const bool bands = scaling.original_max_positions > 0;
  auto f64 = [&](double value) { return builder.getF64FloatAttr(value); };
  build(builder, state, input, theta, inverse ? builder.getUnitAttr() : nullptr,
        bands || scaling.factor != 1.0 ? f64(scaling.factor) : nullptr,
        bands ? f64(scaling.low_freq_factor) : nullptr,
        bands ? f64(scaling.high_freq_factor) : nullptr,
        bands ? builder.getI64IntegerAttr(scaling.original_max_positions) : nullptr);
}

loom::plan::RopeScaling RopeOp::getScaling() {
  loom::plan::RopeScaling scaling;
  if (auto factor = getScalingFactorAttr()) scaling.factor = factor.getValueAsDouble();
  if (auto original = getOriginalMaxPositionsAttr()) {
    scaling.low_freq_factor = getLowFreqFactorAttr().getValueAsDouble();
    scaling.high_freq_factor = getHighFreqFactorAttr().getValueAsDouble();
    scaling.original_max_positions = original.getInt();
  }
  return scaling;
}

LogicalResult AttentionOp::inferReturnTypes(mlir::MLIRContext*, std::optional<mlir::Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type>& inferred) {
  const ShapeChecker check(getOperationName(), loc);
  if (failed(checkAttention(check, adaptor.getQuery(), adaptor.getKey(), adaptor.getValue()))) {
    return mlir::failure();
  }
  inferred.push_back(adaptor.getQuery().getType());
  return mlir::success();
}

// Elementwise ops with one operand keep its type.
template <typename OpT>
LogicalResult inferSameAsInput(std::optional<mlir::Location> loc, Value inputValue,
                               SmallVectorImpl<Type>& inferred) {
  const ShapeChecker check(OpT::getOperationName(), loc);
  auto input = check.tensor(inputValue, "input");
  if (failed(input)) return mlir::failure();
  inferred.push_back(*input);
  return mlir::success();
}

LogicalResult SiluOp::inferReturnTypes(mlir::MLIRContext*, std::optional<mlir::Location> loc,
                                       Adaptor adaptor, SmallVectorImpl<Type>& inferred) {
  return inferSameAsInput<SiluOp>(loc, adaptor.getInput(), inferred);
}

LogicalResult GeluOp::inferReturnTypes(mlir::MLIRContext*, std::optional<mlir::Location> loc,
                                       Adaptor adaptor, SmallVectorImpl<Type>& inferred) {
  return inferSameAsInput<GeluOp>(loc, adaptor.getInput(), inferred);
}

// Elementwise ops with two operands of one type (no broadcasting).
template <typename OpT>
LogicalResult inferBinarySameType(std::optional<mlir::Location> loc, Value lhsValue,
                                  llvm::StringRef lhsRole, Value rhsValue, llvm::StringRef rhsRole,
                                  llvm::StringRef fix, SmallVectorImpl<Type>& inferred) {
  const ShapeChecker check(OpT::getOperationName(), loc);
  auto lhs = check.tensor(lhsValue, lhsRole);
  auto rhs = check.tensor(rhsValue, rhsRole);
  if (failed(lhs) || failed(rhs) || failed(check.sameType(*lhs, lhsRole, *rhs, rhsRole, fix))) {
    return mlir::failure();
  }
  inferred.push_back(*lhs);
  return mlir::success();
}

LogicalResult AddOp::inferReturnTypes(mlir::MLIRContext*, std::optional<mlir::Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type>& inferred) {
  return inferBinarySameType<AddOp>(
      loc, adaptor.getLhs(), "lhs", adaptor.getRhs(), "rhs",
      "nn.add does not broadcast, give both operands one shape and type", inferred);
}

LogicalResult MulOp::inferReturnTypes(mlir::MLIRContext*, std::optional<mlir::Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type>& inferred) {
  return inferBinarySameType<MulOp>(
      loc, adaptor.getLhs(), "lhs", adaptor.getRhs(), "rhs",
      "nn.mul does not broadcast, give both operands one shape and type", inferred);
}

LogicalResult SoftmaxOp::inferReturnTypes(mlir::MLIRContext*, std::optional<mlir::Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type>& inferred) {
  const ShapeChecker check(getOperationName(), loc);
  auto input = check.tensor(adaptor.getInput(), "input");
  if (failed(input) || failed(check.rankAtLeast(*input, "input", 1, "[rows..., n]"))) {
    return mlir::failure();
  }
  inferred.push_back(*input);
  return mlir::success();
}

LogicalResult ReshapeOp::verify() {
  const RankedTensorType input = getInput().getType();
  const RankedTensorType result = getResult().getType();
  if (input.getElementType() != result.getElementType()) {
    return emitOpError() << "changes the element type, got: " << input.getElementType() << " -> "
                         << result.getElementType() << "; a reshape keeps the element type";
  }
  if (input.getNumElements() != result.getNumElements()) {
    return emitOpError() << "changes the element count, got: " << input.getNumElements() << " "
                         << formatShape(input.getShape()) << " != " << result.getNumElements()
                         << " " << formatShape(result.getShape())
                         << "; the two shapes must have equal products";
  }
  const ReshapeRefinement refinement = refineReshape(input.getShape(), result.getShape());
  if (const auto& mismatch = refinement.mismatch) {
    const ArrayRef<int64_t> from =
        input.getShape().slice(mismatch->inputBegin, mismatch->inputEnd - mismatch->inputBegin);
    const ArrayRef<int64_t> to =
        result.getShape().slice(mismatch->resultBegin, mismatch->resultEnd - mismatch->resultBegin);
    return emitOpError() << "does not only split and merge dims, got: " << formatShape(from)
                         << " -> " << formatShape(to) << "; reshape through the merged shape ["
                         << mismatch->product << "] with two reshapes";
  }
  return mlir::success();
}

LogicalResult TransposeOp::inferReturnTypes(mlir::MLIRContext*, std::optional<mlir::Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type>& inferred) {
  const ShapeChecker check(getOperationName(), loc);
  auto input = check.tensor(adaptor.getInput(), "input");
  if (failed(input)) return mlir::failure();
  const ArrayRef<int64_t> permutation = adaptor.getPermutation();
  const int64_t rank = input->getRank();
  SmallVector<bool> seen(rank, false);
  bool valid = static_cast<int64_t>(permutation.size()) == rank;
  for (int64_t dim : permutation) {
    valid = valid && dim >= 0 && dim < rank && !seen[dim];
    if (valid) seen[dim] = true;
  }
  if (!valid) {
    return check.fail("permutation must list each dim of [0, ", rank,
                      ") once, got: ", formatShape(permutation), "; give one entry per input dim");
  }
  SmallVector<int64_t> shape;
  for (int64_t dim : permutation) shape.push_back(input->getShape()[dim]);
  inferred.push_back(RankedTensorType::get(shape, input->getElementType()));
  return mlir::success();
}

LogicalResult CrossEntropyOp::inferReturnTypes(mlir::MLIRContext* context,
                                               std::optional<mlir::Location> loc, Adaptor adaptor,
                                               SmallVectorImpl<Type>& inferred) {
  const ShapeChecker check(getOperationName(), loc);
  auto logits = check.tensor(adaptor.getLogits(), "logits");
  auto labels = check.tensor(adaptor.getLabels(), "labels");
  if (failed(logits) || failed(labels) || failed(checkCrossEntropy(check, *logits, *labels))) {
    return mlir::failure();
  }
  inferred.push_back(RankedTensorType::get({}, mlir::Float32Type::get(context)));
  return mlir::success();
}

LogicalResult EmbeddingGradOp::verify() {
  const ArrayRef<int64_t> ids = getIds().getType().getShape();
  const RankedTensorType resultGrad = getResultGrad().getType();
  const RankedTensorType result = getResult().getType();
  const ArrayRef<int64_t> grad = resultGrad.getShape();
  if (grad.empty() || grad.drop_back() != ids) {
    return emitOpError() << "result_grad must be [ids..., hidden] with ids " << formatShape(ids)
                         << ", got: " << formatShape(grad)
                         << "; pass the cotangent of nn.embedding's result";
  }
  if (result.getRank() != 2 || result.getShape()[1] != grad.back()) {
    return emitOpError() << "result must be [vocab, " << grad.back()
                         << "], got: " << formatShape(result.getShape())
                         << "; declare the embedding table's type";
  }
  if (result.getElementType() != resultGrad.getElementType()) {
    return emitOpError() << "result must have result_grad's element type, "
                            "got: "
                         << result.getElementType() << " != " << resultGrad.getElementType()
                         << "; declare the result with " << resultGrad.getElementType();
  }
  return mlir::success();
}

LogicalResult ReduceSumOp::inferReturnTypes(mlir::MLIRContext*, std::optional<mlir::Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type>& inferred) {
  const ShapeChecker check(getOperationName(), loc);
  auto input = check.tensor(adaptor.getInput(), "input");
  if (failed(input)) return mlir::failure();
  const ArrayRef<int64_t> dims = adaptor.getDims();
  const int64_t rank = input->getRank();
  bool valid = true;
  for (auto [index, dim] : llvm::enumerate(dims)) {
    valid = valid && dim >= 0 && dim < rank && (index == 0 || dims[index - 1] < dim);
  }
  if (!valid) {
    return check.fail("dims must be strictly increasing and in [0, ", rank,
                      "), got: ", formatShape(dims), "; sort them and drop repeats");
  }
  SmallVector<int64_t> shape;
  for (auto [dim, size] : llvm::enumerate(input->getShape())) {
    if (!llvm::is_contained(dims, static_cast<int64_t>(dim))) {
      shape.push_back(size);
    }
  }
  inferred.push_back(RankedTensorType::get(shape, input->getElementType()));
  return mlir::success();
}

// The backward ops of the norms: input/gamma as in the forward op plus a
// result_grad of the input's type.
template <typename OpT>
LogicalResult inferNormGrad(std::optional<mlir::Location> loc, Value inputValue, Value gammaValue,
                            Value resultGradValue, int64_t numPerFeatureResults,
                            SmallVectorImpl<Type>& inferred) {
  const ShapeChecker check(OpT::getOperationName(), loc);
  auto input = check.tensor(inputValue, "input");
  auto resultGrad = check.tensor(resultGradValue, "result_grad");
  if (failed(input) || failed(resultGrad) ||
      failed(checkNorm(check, *input, {{gammaValue, "gamma"}})) ||
      failed(check.sameType(*input, "input", *resultGrad, "result_grad",
                            "pass the cotangent of the norm's result"))) {
    return mlir::failure();
  }
  inferred.push_back(*input);
  for (int64_t i = 0; i < numPerFeatureResults; ++i) {
    inferred.push_back(gammaValue.getType());
  }
  return mlir::success();
}

LogicalResult RmsNormGradOp::inferReturnTypes(mlir::MLIRContext*, std::optional<mlir::Location> loc,
                                              Adaptor adaptor, SmallVectorImpl<Type>& inferred) {
  return inferNormGrad<RmsNormGradOp>(loc, adaptor.getInput(), adaptor.getGamma(),
                                      adaptor.getResultGrad(), 1, inferred);
}

LogicalResult RmsNormGradOp::verify() {
  return checkPositive(*this, "epsilon", getEpsilon().convertToDouble(), "1e-05");
}

LogicalResult LayerNormGradOp::inferReturnTypes(mlir::MLIRContext*,
                                                std::optional<mlir::Location> loc, Adaptor adaptor,
                                                SmallVectorImpl<Type>& inferred) {
  return inferNormGrad<LayerNormGradOp>(loc, adaptor.getInput(), adaptor.getGamma(),
                                        adaptor.getResultGrad(), 2, inferred);
}

LogicalResult LayerNormGradOp::verify() {
  return checkPositive(*this, "epsilon", getEpsilon().convertToDouble(), "1e-05");
}

LogicalResult AttentionGradOp::inferReturnTypes(mlir::MLIRContext*,
                                                std::optional<mlir::Location> loc, Adaptor adaptor,
                                                SmallVectorImpl<Type>& inferred) {
  const ShapeChecker check(getOperationName(), loc);
  if (failed(checkAttention(check, adaptor.getQuery(), adaptor.getKey(), adaptor.getValue()))) {
    return mlir::failure();
  }
  auto resultGrad = check.tensor(adaptor.getResultGrad(), "result_grad");
  if (failed(resultGrad) ||
      failed(check.sameType(llvm::cast<RankedTensorType>(adaptor.getQuery().getType()), "query",
                            *resultGrad, "result_grad",
                            "pass the cotangent of nn.attention's result"))) {
    return mlir::failure();
  }
  inferred.append(
      {adaptor.getQuery().getType(), adaptor.getKey().getType(), adaptor.getValue().getType()});
  return mlir::success();
}

LogicalResult SoftmaxGradOp::inferReturnTypes(mlir::MLIRContext*, std::optional<mlir::Location> loc,
                                              Adaptor adaptor, SmallVectorImpl<Type>& inferred) {
  const ShapeChecker check(getOperationName(), loc);
  auto output = check.tensor(adaptor.getOutput(), "output");
  if (failed(output) || failed(check.rankAtLeast(*output, "output", 1, "[rows..., n]"))) {
    return mlir::failure();
  }
  return inferBinarySameType<SoftmaxGradOp>(loc, adaptor.getOutput(), "output",
                                            adaptor.getResultGrad(), "result_grad",
                                            "pass the cotangent of nn.softmax's result", inferred);
}

LogicalResult SiluGradOp::inferReturnTypes(mlir::MLIRContext*, std::optional<mlir::Location> loc,
                                           Adaptor adaptor, SmallVectorImpl<Type>& inferred) {
  return inferBinarySameType<SiluGradOp>(loc, adaptor.getInput(), "input", adaptor.getResultGrad(),
                                         "result_grad", "pass the cotangent of nn.silu's result",
                                         inferred);
}

LogicalResult GeluGradOp::inferReturnTypes(mlir::MLIRContext*, std::optional<mlir::Location> loc,
                                           Adaptor adaptor, SmallVectorImpl<Type>& inferred) {
  return inferBinarySameType<GeluGradOp>(loc, adaptor.getInput(), "input", adaptor.getResultGrad(),
                                         "result_grad", "pass the cotangent of nn.gelu's result",
                                         inferred);
}

LogicalResult CrossEntropyGradOp::inferReturnTypes(mlir::MLIRContext*,
                                                   std::optional<mlir::Location> loc,
                                                   Adaptor adaptor,
                                                   SmallVectorImpl<Type>& inferred) {
  const ShapeChecker check(getOperationName(), loc);
  auto logits = check.tensor(adaptor.getLogits(), "logits");
  auto labels = check.tensor(adaptor.getLabels(), "labels");
  if (failed(logits) || failed(labels) || failed(checkCrossEntropy(check, *logits, *labels))) {
    return mlir::failure();
  }
  inferred.push_back(*logits);
  return mlir::success();
}

LogicalResult CrossEntropyGradOp::verify() {
  return checkPositive(*this, "scale", getScale().convertToDouble(), "1 / number of tokens");
}

namespace {

// The vocab-parallel cross-entropy ops: logits [T..., V] with V <= vocab
// (a shard of a vocab-sharded graph holds ceil(vocab / g) rows).
LogicalResult checkVocabLogits(const ShapeChecker& check, RankedTensorType logits, int64_t vocab) {
  if (failed(check.rankAtLeast(logits, "logits", 2, "[tokens..., vocab]"))) {
    return mlir::failure();
  }
  if (vocab < 1 || logits.getShape().back() > vocab) {
    return check.fail("vocab must be at least the logits' last dim ", logits.getShape().back(),
                      ", got: ", vocab,
                      "; set it to the global vocab size (the logits' last "
                      "dim before sharding)");
  }
  return mlir::success();
}

// A [T...] f32 operand of the vocab-parallel ops (labels' shape).
LogicalResult checkPerToken(const ShapeChecker& check, Value value, llvm::StringRef role,
                            ArrayRef<int64_t> tokens, llvm::StringRef fix) {
  auto type = check.tensor(value, role);
  if (failed(type)) return mlir::failure();
  if (type->getShape() != tokens) {
    return check.fail(role, " must be ", formatShape(tokens),
                      " (one value per token), got: ", formatShape(type->getShape()), "; ", fix);
  }
  return mlir::success();
}

// The [T..., 2] statistics of nn.vocab_stats.
LogicalResult checkStats(const ShapeChecker& check, Value value, ArrayRef<int64_t> tokens) {
  SmallVector<int64_t> expected(tokens);
  expected.push_back(2);
  auto type = check.tensor(value, "stats");
  if (failed(type)) return mlir::failure();
  if (type->getShape() != ArrayRef<int64_t>(expected)) {
    return check.fail("stats must be ", formatShape(expected),
                      " (sum of exponentials, label logit per token), got: ",
                      formatShape(type->getShape()), "; pass the result of nn.vocab_stats");
  }
  return mlir::success();
}

// The operands nn.vocab_stats and nn.vocab_cross_entropy_grad share: vocab
// logits, their labels and the per-token max. The logits' type on success.
mlir::FailureOr<RankedTensorType> checkLogitsLabelsMax(const ShapeChecker& check, Value logits,
                                                       Value labels, Value max, int64_t vocab) {
  auto logitsType = check.tensor(logits, "logits");
  auto labelsType = check.tensor(labels, "labels");
  if (failed(logitsType) || failed(labelsType) ||
      failed(checkVocabLogits(check, *logitsType, vocab)) ||
      failed(checkCrossEntropy(check, *logitsType, *labelsType)) ||
      failed(checkPerToken(check, max, "max", logitsType->getShape().drop_back(),
                           "pass the result of nn.vocab_max"))) {
    return mlir::failure();
  }
  return *logitsType;
}

}  // namespace

LogicalResult VocabMaxOp::inferReturnTypes(mlir::MLIRContext* context,
                                           std::optional<mlir::Location> loc, Adaptor adaptor,
                                           SmallVectorImpl<Type>& inferred) {
  const ShapeChecker check(getOperationName(), loc);
  auto logits = check.tensor(adaptor.getLogits(), "logits");
  if (failed(logits) || failed(checkVocabLogits(check, *logits, adaptor.getVocab()))) {
    return mlir::failure();
  }
  inferred.push_back(
      RankedTensorType::get(logits->getShape().drop_back(), mlir::Float32Type::get(context)));
  return mlir::success();
}

LogicalResult VocabStatsOp::inferReturnTypes(mlir::MLIRContext* context,
                                             std::optional<mlir::Location> loc, Adaptor adaptor,
                                             SmallVectorImpl<Type>& inferred) {
  const ShapeChecker check(getOperationName(), loc);
  auto logits = checkLogitsLabelsMax(check, adaptor.getLogits(), adaptor.getLabels(),
                                     adaptor.getMax(), adaptor.getVocab());
  if (failed(logits)) return mlir::failure();
  SmallVector<int64_t> shape(logits->getShape().drop_back());
  shape.push_back(2);
  inferred.push_back(RankedTensorType::get(shape, mlir::Float32Type::get(context)));
  return mlir::success();
}

LogicalResult VocabCrossEntropyOp::inferReturnTypes(mlir::MLIRContext* context,
                                                    std::optional<mlir::Location> loc,
                                                    Adaptor adaptor,
                                                    SmallVectorImpl<Type>& inferred) {
  const ShapeChecker check(getOperationName(), loc);
  auto stats = check.tensor(adaptor.getStats(), "stats");
  if (failed(stats) || failed(check.rankAtLeast(*stats, "stats", 2, "[tokens..., 2]")) ||
      failed(checkStats(check, adaptor.getStats(), stats->getShape().drop_back()))) {
    return mlir::failure();
  }
  inferred.push_back(RankedTensorType::get({}, mlir::Float32Type::get(context)));
  return mlir::success();
}

LogicalResult VocabCrossEntropyGradOp::inferReturnTypes(mlir::MLIRContext*,
                                                        std::optional<mlir::Location> loc,
                                                        Adaptor adaptor,
                                                        SmallVectorImpl<Type>& inferred) {
  const ShapeChecker check(getOperationName(), loc);
  auto logits = checkLogitsLabelsMax(check, adaptor.getLogits(), adaptor.getLabels(),
                                     adaptor.getMax(), adaptor.getVocab());
  if (failed(logits) ||
      failed(checkStats(check, adaptor.getStats(), logits->getShape().drop_back()))) {
    return mlir::failure();
  }
  inferred.push_back(*logits);
  return mlir::success();
}

LogicalResult VocabCrossEntropyGradOp::verify() {
  return checkPositive(*this, "scale", getScale().convertToDouble(), "1 / number of tokens");
}

}  // namespace loom::planner::nn
