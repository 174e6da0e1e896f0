// Verifiers of the `dist` ops and the generated code of the ops. Checks that
// need only the op run in `verify`; checks against the mesh (axis names and
// sizes) run in `verifySymbolUses`, once the whole module is known to be
// well-formed.
#include "planner/dialect/dist/ir/dist_ops.h"

#include <cstdint>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "planner/dialect/dist/ir/local_shape.h"
#include "mesh/shard_math.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define GET_OP_CLASSES
#include "planner/dialect/dist/ir/dist_ops.cpp.inc"
#pragma GCC diagnostic pop

namespace loom::planner::dist {

namespace {

// "[4, 16]", for diagnostics.
std::string formatShape(llvm::ArrayRef<int64_t> shape) {
  return "[" +
         llvm::join(llvm::map_range(shape, [](int64_t size) { return std::to_string(size); }),
                    ", ") +
         "]";
}

// "0.5", "1", "1e-08": as a user would write the value, for diagnostics.
std::string formatDouble(double value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

bool isIdentifier(llvm::StringRef name) {
  if (name.empty() || llvm::isDigit(name.front())) return false;
  return llvm::all_of(name, [](char c) { return llvm::isAlnum(c) || c == '_'; });
}

// Float and integer values do not convert into each other on the wire.
bool sameKind(mlir::Type a, mlir::Type b) {
  return (llvm::isa<mlir::FloatType>(a) && llvm::isa<mlir::FloatType>(b)) ||
         (llvm::isa<mlir::IntegerType>(a) && llvm::isa<mlir::IntegerType>(b));
}

mlir::FailureOr<MeshOp> lookupMesh(mlir::Operation* op, mlir::FlatSymbolRefAttr ref,
                                   mlir::SymbolTableCollection& tables) {
  auto mesh = tables.lookupNearestSymbolFrom<MeshOp>(op, ref);
  if (!mesh) {
    op->emitOpError() << ref << " does not name a dist.mesh; declare it with "
                      << "`dist.mesh " << ref
                      << " shape = [...] axes = [...]` in the enclosing module";
    return mlir::failure();
  }
  return mesh;
}

// The ranks of one collective group: the mesh axes it spans and their sizes.
struct Group {
  int64_t size = 1;
  // "dp=2, tp=4", for diagnostics.
  std::string axes;
};

mlir::FailureOr<Group> resolveGroup(mlir::Operation* op, MeshOp mesh, mlir::ArrayAttr axes) {
  Group group;
  for (llvm::StringRef name : axes.getAsValueRange<mlir::StringAttr>()) {
    const std::optional<int64_t> size = mesh.axisSize(name);
    if (!size) {
      mlir::InFlightDiagnostic diag = op->emitOpError()
                                      << "mesh axis \"" << name << "\" is not an axis of @"
                                      << mesh.getSymName() << " (" << mesh.describe()
                                      << "); use one of its axes";
      diag.attachNote(mesh.getLoc()) << "mesh @" << mesh.getSymName() << " declared here";
      return mlir::failure();
    }
    group.size *= *size;
    if (!group.axes.empty()) group.axes += ", ";
    group.axes += name.str() + "=" + std::to_string(*size);
  }
  return group;
}

mlir::FailureOr<Group> resolveGroup(mlir::Operation* op, mlir::FlatSymbolRefAttr mesh_ref,
                                    mlir::ArrayAttr axes, mlir::SymbolTableCollection& tables) {
  mlir::FailureOr<MeshOp> mesh = lookupMesh(op, mesh_ref, tables);
  if (mlir::failed(mesh)) return mlir::failure();
  return resolveGroup(op, *mesh, axes);
}

mlir::LogicalResult verifyAxesList(mlir::Operation* op, mlir::ArrayAttr axes) {
  if (axes.empty()) {
    return op->emitOpError() << "names no mesh axes; list at least one axis in `axes`";
  }
  llvm::SmallDenseSet<llvm::StringRef> seen;
  for (llvm::StringRef name : axes.getAsValueRange<mlir::StringAttr>()) {
    if (!seen.insert(name).second) {
      return op->emitOpError() << "lists mesh axis \"" << name << "\" twice; list each axis once";
    }
  }
  return mlir::success();
}

mlir::LogicalResult verifyDimInRange(mlir::Operation* op, llvm::StringRef what, int64_t dim,
                                     int64_t rank) {
  if (dim < 0 || dim >= rank) {
    return op->emitOpError() << what << " " << dim << " is out of range for a rank-" << rank
                             << " operand; use a dim in [0, " << rank << ")";
  }
  return mlir::success();
}

// `kind` names the op in the fix: "collective" or "slice".
mlir::LogicalResult verifySameRank(mlir::Operation* op, mlir::RankedTensorType input,
                                   mlir::RankedTensorType result,
                                   llvm::StringRef kind = "collective") {
  if (input.getRank() != result.getRank()) {
    return op->emitOpError() << "result rank " << result.getRank() << " != operand rank "
                             << input.getRank() << "; the " << kind << " keeps the rank";
  }
  return mlir::success();
}

// Checks every dim but `dim` is unchanged by the collective.
mlir::LogicalResult verifyOtherDims(mlir::Operation* op, llvm::StringRef what, int64_t dim,
                                    mlir::RankedTensorType input, mlir::RankedTensorType result) {
  for (int64_t i = 0; i < input.getRank(); ++i) {
    if (i != dim && input.getDimSize(i) != result.getDimSize(i)) {
      return op->emitOpError() << "result dim " << i << " of size " << result.getDimSize(i)
                               << " != operand dim " << i << " of size " << input.getDimSize(i)
                               << "; only " << what << " " << dim << " changes";
    }
  }
  return mlir::success();
}

mlir::LogicalResult verifyWireType(mlir::Operation* op, mlir::Type element, mlir::Type wire) {
  if (!sameKind(element, wire)) {
    return op->emitOpError() << "wire type " << wire << " cannot carry " << element
                             << " values; use a wire type of the same kind (float or integer)";
  }
  return mlir::success();
}

// Collectives without a reduction deliver what was sent: the wire type.
mlir::LogicalResult verifyDeliversWireType(mlir::Operation* op, mlir::Type element,
                                           mlir::Type wire) {
  if (element != wire) {
    return op->emitOpError() << "result element type " << element << " != wire type " << wire
                             << "; the result arrives in the wire type";
  }
  return mlir::success();
}

mlir::LogicalResult verifyReductionTypes(mlir::Operation* op, mlir::Type input, mlir::Type result,
                                         mlir::Type wire, mlir::Type accum,
                                         ReductionKind reduction) {
  if (mlir::failed(verifyWireType(op, input, wire))) return mlir::failure();
  if (!sameKind(wire, accum)) {
    return op->emitOpError() << "accum type " << accum << " and wire type " << wire
                             << " must both be float or both be integer";
  }
  if (accum.getIntOrFloatBitWidth() < wire.getIntOrFloatBitWidth()) {
    return op->emitOpError() << "accum type " << accum << " (" << accum.getIntOrFloatBitWidth()
                             << " bits) is narrower than wire type " << wire << " ("
                             << wire.getIntOrFloatBitWidth() << " bits); accumulate in at least "
                             << wire.getIntOrFloatBitWidth() << " bits";
  }
  if (reduction == ReductionKind::Avg && !llvm::isa<mlir::FloatType>(accum)) {
    return op->emitOpError() << "reduction avg needs a float accum type, got: " << accum
                             << "; use sum or a float accum type";
  }
  if (result != wire && result != accum) {
    return op->emitOpError() << "result element type " << result << " must be the wire type "
                             << wire << " or the accum type " << accum;
  }
  return mlir::success();
}

// A future is consumed by exactly one dist.wait, in the block of its start,
// so every start has one static completion point the runtime can schedule.
mlir::LogicalResult verifyFutureUse(mlir::Operation* start) {
  mlir::Value future = start->getResult(0);
  const auto uses = static_cast<int64_t>(std::distance(future.use_begin(), future.use_end()));
  if (uses != 1) {
    return start->emitOpError() << "future has " << uses
                                << " uses; consume it with exactly one "
                                   "dist.wait";
  }
  mlir::Operation* user = *future.user_begin();
  if (!llvm::isa<WaitOp>(user)) {
    mlir::InFlightDiagnostic diag = start->emitOpError() << "future is used by '" << user->getName()
                                                         << "'; only dist.wait may consume it";
    diag.attachNote(user->getLoc()) << "used here";
    return diag;
  }
  if (user->getBlock() != start->getBlock()) {
    mlir::InFlightDiagnostic diag = start->emitOpError()
                                    << "future is waited on in another block; wait "
                                       "in the block of the start";
    diag.attachNote(user->getLoc()) << "dist.wait here";
    return diag;
  }
  return mlir::success();
}

//===----------------------------------------------------------------------===//
// Shared checks of each collective, for its blocking and its start form.
//===----------------------------------------------------------------------===//

template <typename OpT>
mlir::LogicalResult verifyAllGather(OpT op) {
  mlir::Operation* o = op.getOperation();
  mlir::RankedTensorType input = op.getInput().getType();
  mlir::RankedTensorType result = op.getResultTensorType();
  if (mlir::failed(verifyAxesList(o, op.getMeshAxes())) ||
      mlir::failed(verifyDimInRange(o, "gather_dim", op.getGatherDim(), input.getRank())) ||
      mlir::failed(verifySameRank(o, input, result)) ||
      mlir::failed(verifyOtherDims(o, "gather_dim", op.getGatherDim(), input, result)) ||
      mlir::failed(verifyWireType(o, input.getElementType(), op.getWireType())) ||
      mlir::failed(verifyDeliversWireType(o, result.getElementType(), op.getWireType()))) {
    return mlir::failure();
  }
  return mlir::success();
}

template <typename OpT>
mlir::LogicalResult verifyAllGatherGroup(OpT op, mlir::SymbolTableCollection& tables) {
  mlir::Operation* o = op.getOperation();
  mlir::FailureOr<Group> group = resolveGroup(o, op.getMeshAttr(), op.getMeshAxes(), tables);
  if (mlir::failed(group)) return mlir::failure();
  const int64_t dim = op.getGatherDim();
  const int64_t in = op.getInput().getType().getDimSize(dim);
  const int64_t out = op.getResultTensorType().getDimSize(dim);
  if (!op.getPadded()) {
    if (out != in * group->size) {
      return op.emitOpError() << "result dim " << dim << " of size " << out
                              << " != " << in * group->size << ", operand dim " << dim << " (" << in
                              << ") times group size " << group->size << " (over " << group->axes
                              << "); set it to " << in * group->size;
    }
    return mlir::success();
  }
  if (out % group->size == 0) {
    return op.emitOpError() << "result dim " << dim << " of size " << out
                            << " divides by group size " << group->size << " (over " << group->axes
                            << "), so nothing is padded; drop `padded`";
  }
  if (mesh::shardSize(out, group->size) != in) {
    return op.emitOpError() << "padded result dim " << dim << " of size " << out << " needs ceil("
                            << out << " / " << group->size
                            << ") = " << mesh::shardSize(out, group->size)
                            << " rows per rank, but operand dim " << dim << " has " << in
                            << "; use a size in [" << (in - 1) * group->size + 1 << ", "
                            << in * group->size - 1 << "]";
  }
  return mlir::success();
}

template <typename OpT>
mlir::LogicalResult verifyReduceScatter(OpT op) {
  mlir::Operation* o = op.getOperation();
  mlir::RankedTensorType input = op.getInput().getType();
  mlir::RankedTensorType result = op.getResultTensorType();
  if (mlir::failed(verifyAxesList(o, op.getMeshAxes())) ||
      mlir::failed(verifyDimInRange(o, "scatter_dim", op.getScatterDim(), input.getRank())) ||
      mlir::failed(verifySameRank(o, input, result)) ||
      mlir::failed(verifyOtherDims(o, "scatter_dim", op.getScatterDim(), input, result)) ||
      mlir::failed(verifyReductionTypes(o, input.getElementType(), result.getElementType(),
                                        op.getWireType(), op.getAccumType(), op.getReduction()))) {
    return mlir::failure();
  }
  return mlir::success();
}

// Checks that `dim` of size `in` splits over `group` into `out` rows per
// rank by the padding rule: `padded` exactly when the group does not divide
// it. Shared by dist.reduce_scatter and dist.slice, which keep a rank's chunk.
mlir::LogicalResult verifySplitDim(mlir::Operation* op, int64_t dim, int64_t in, int64_t out,
                                   bool padded, const Group& group) {
  const bool divides = in % group.size == 0;
  if (!padded && !divides) {
    return op->emitOpError() << "operand dim " << dim << " of size " << in
                             << " does not divide by group size " << group.size << " (over "
                             << group.axes << "), got: " << in << " % " << group.size << " = "
                             << in % group.size
                             << "; mark the op `padded` (each rank then keeps ceil(" << in << " / "
                             << group.size << ") = " << mesh::shardSize(in, group.size)
                             << " rows) or make the dim divisible";
  }
  if (padded && divides) {
    return op->emitOpError() << "operand dim " << dim << " of size " << in
                             << " divides by group size " << group.size << " (over " << group.axes
                             << "), so nothing is padded; drop `padded`";
  }
  const int64_t expected = mesh::shardSize(in, group.size);
  if (out != expected) {
    return op->emitOpError() << "result dim " << dim << " of size " << out << " != " << expected
                             << ", the rows each rank keeps of operand dim " << dim << " (" << in
                             << " over group size " << group.size << "); set it to " << expected;
  }
  return mlir::success();
}

template <typename OpT>
mlir::LogicalResult verifyReduceScatterGroup(OpT op, mlir::SymbolTableCollection& tables) {
  mlir::Operation* o = op.getOperation();
  mlir::FailureOr<Group> group = resolveGroup(o, op.getMeshAttr(), op.getMeshAxes(), tables);
  if (mlir::failed(group)) return mlir::failure();
  const int64_t dim = op.getScatterDim();
  return verifySplitDim(o, dim, op.getInput().getType().getDimSize(dim),
                        op.getResultTensorType().getDimSize(dim), op.getPadded(), *group);
}

template <typename OpT>
mlir::LogicalResult verifyAllReduce(OpT op) {
  mlir::Operation* o = op.getOperation();
  mlir::RankedTensorType input = op.getInput().getType();
  mlir::RankedTensorType result = op.getResultTensorType();
  if (mlir::failed(verifyAxesList(o, op.getMeshAxes()))) {
    return mlir::failure();
  }
  if (input.getShape() != result.getShape()) {
    return op.emitOpError() << "result shape " << formatShape(result.getShape())
                            << " != operand shape " << formatShape(input.getShape())
                            << "; all-reduce keeps the shape";
  }
  return verifyReductionTypes(o, input.getElementType(), result.getElementType(), op.getWireType(),
                              op.getAccumType(), op.getReduction());
}

template <typename OpT>
mlir::LogicalResult verifyAllToAll(OpT op) {
  mlir::Operation* o = op.getOperation();
  mlir::RankedTensorType input = op.getInput().getType();
  mlir::RankedTensorType result = op.getResultTensorType();
  if (mlir::failed(verifyAxesList(o, op.getMeshAxes())) ||
      mlir::failed(verifyDimInRange(o, "split_dim", op.getSplitDim(), input.getRank())) ||
      mlir::failed(verifyDimInRange(o, "concat_dim", op.getConcatDim(), input.getRank())) ||
      mlir::failed(verifySameRank(o, input, result)) ||
      mlir::failed(verifyWireType(o, input.getElementType(), op.getWireType())) ||
      mlir::failed(verifyDeliversWireType(o, result.getElementType(), op.getWireType()))) {
    return mlir::failure();
  }
  return mlir::success();
}

template <typename OpT>
mlir::LogicalResult verifyAllToAllGroup(OpT op, mlir::SymbolTableCollection& tables) {
  mlir::Operation* o = op.getOperation();
  mlir::FailureOr<Group> group = resolveGroup(o, op.getMeshAttr(), op.getMeshAxes(), tables);
  if (mlir::failed(group)) return mlir::failure();
  mlir::RankedTensorType input = op.getInput().getType();
  const int64_t split = op.getSplitDim();
  const int64_t concat = op.getConcatDim();
  const int64_t in = input.getDimSize(split);
  if (in % group->size != 0) {
    return op.emitOpError() << "split_dim " << split << " of size " << in
                            << " does not divide by group size " << group->size << " (over "
                            << group->axes << "), got: " << in << " % " << group->size << " = "
                            << in % group->size << "; make it divisible";
  }
  llvm::SmallVector<int64_t> expected(input.getShape());
  expected[split] /= group->size;
  expected[concat] *= group->size;
  const llvm::ArrayRef<int64_t> got = op.getResultTensorType().getShape();
  if (got != llvm::ArrayRef<int64_t>(expected)) {
    return op.emitOpError() << "result shape " << formatShape(got)
                            << " != " << formatShape(expected) << " (split_dim " << split
                            << " divided and concat_dim " << concat << " multiplied by group "
                            << "size " << group->size << "); set the result shape to "
                            << formatShape(expected);
  }
  return mlir::success();
}

// Shared by dist.bucket and dist.unbucket: `entries` are the tensors packed
// into (or read from) the 1-d `buffer`, each split along its entry of
// `splitDims` (all 0 when absent); `padded` lets a split dim that does not
// divide by `chunks` use the padding rule, and is refused when none needs it.
mlir::LogicalResult verifyBucketLayout(mlir::Operation* op, mlir::RankedTensorType buffer,
                                       mlir::TypeRange entries, llvm::ArrayRef<int64_t> offsets,
                                       int64_t chunks,
                                       std::optional<llvm::ArrayRef<int64_t>> splitDims,
                                       bool padded) {
  if (entries.empty()) {
    return op->emitOpError() << "has no entries; give at least one tensor";
  }
  if (offsets.size() != entries.size()) {
    return op->emitOpError() << "got " << offsets.size() << " offsets for " << entries.size()
                             << " entries; give one offset per entry";
  }
  if (splitDims && splitDims->size() != entries.size()) {
    return op->emitOpError() << "got " << splitDims->size() << " split_dims for " << entries.size()
                             << " entries; give one split dim per entry or omit split_dims";
  }
  if (chunks < 1) {
    return op->emitOpError() << "chunks must be at least 1, got: " << chunks
                             << "; use 1 for a bucket of whole tensors";
  }
  if (buffer.getRank() != 1) {
    return op->emitOpError() << "buffer must be a 1-d tensor, got: " << buffer << "; flatten it";
  }
  const int64_t size = buffer.getDimSize(0);
  if (size % chunks != 0) {
    return op->emitOpError() << "buffer of " << size << " elements does not split into " << chunks
                             << " chunks, got: " << size << " % " << chunks << " = "
                             << size % chunks << "; make its size a multiple of " << chunks;
  }
  const int64_t chunk_size = size / chunks;
  int64_t end = 0;
  bool unevenEntries = false;
  for (const auto& [index, type, offset] : llvm::enumerate(entries, offsets)) {
    auto entry = llvm::cast<mlir::RankedTensorType>(type);
    if (entry.getElementType() != buffer.getElementType()) {
      return op->emitOpError() << "entry " << index << " has element type "
                               << entry.getElementType() << " but the buffer holds "
                               << buffer.getElementType()
                               << "; convert it or put it in another bucket";
    }
    if (chunks > 1 && entry.getRank() == 0) {
      return op->emitOpError() << "entry " << index << " is 0-d and cannot split into " << chunks
                               << " chunks; reshape it to 1-d or use chunks = 1";
    }
    const int64_t dim = splitDims ? (*splitDims)[index] : 0;
    if (splitDims && entry.getRank() > 0 && (dim < 0 || dim >= entry.getRank())) {
      return op->emitOpError() << "entry " << index << " has split dim " << dim
                               << " out of range for its rank " << entry.getRank()
                               << "; use a dim in [0, " << entry.getRank() << ")";
    }
    // Elements of one part: ceil(n / chunks) rows of the split dim (the
    // padding rule when n does not divide), every other dim whole.
    int64_t partElements = entry.getNumElements();
    if (chunks > 1) {
      const int64_t rows = entry.getDimSize(dim);
      if (rows % chunks != 0) {
        if (!padded) {
          return op->emitOpError()
                 << "entry " << index << " has dim " << dim << " of size " << rows
                 << ", which does not split into " << chunks << " chunks, got: " << rows << " % "
                 << chunks << " = " << rows % chunks << "; mark the op `padded` (parts of ceil("
                 << rows << " / " << chunks << ") = " << (rows + chunks - 1) / chunks
                 << " rows, zero-filled) or pad it to a multiple of " << chunks;
        }
        unevenEntries = true;
      }
      partElements = rows == 0 ? 0 : partElements / rows * ((rows + chunks - 1) / chunks);
    }
    if (offset < 0) {
      return op->emitOpError() << "entry " << index << " has negative offset " << offset
                               << "; offsets count from 0";
    }
    if (offset < end) {
      return op->emitOpError() << "entry " << index << " at offset " << offset
                               << " overlaps the entries before it, which end at " << end
                               << "; list entries in offset order and use an offset of at "
                                  "least "
                               << end;
    }
    end = offset + partElements;
    if (end > chunk_size) {
      return op->emitOpError() << "entry " << index << " ends at " << end << " but each of the "
                               << chunks << " chunks holds " << chunk_size
                               << " elements; grow the buffer to at least " << end * chunks
                               << " elements";
    }
  }
  if (padded && !unevenEntries) {
    return op->emitOpError() << "is marked `padded`, but every entry's split dim divides into "
                             << chunks << " chunks; drop `padded`";
  }
  return mlir::success();
}

}  // namespace

//===----------------------------------------------------------------------===//
// dist.mesh
//===----------------------------------------------------------------------===//

std::optional<int64_t> MeshOp::axisSize(llvm::StringRef name) {
  for (const auto& [axis, size] :
       llvm::zip(getAxes().getAsValueRange<mlir::StringAttr>(), getShape())) {
    if (axis == name) return size;
  }
  return std::nullopt;
}

std::string MeshOp::describe() {
  std::string text;
  for (const auto& [axis, size] :
       llvm::zip(getAxes().getAsValueRange<mlir::StringAttr>(), getShape())) {
    if (!text.empty()) text += ", ";
    text += axis.str() + "=" + std::to_string(size);
  }
  return text;
}

mlir::LogicalResult MeshOp::verify() {
  const llvm::ArrayRef<int64_t> shape = getShape();
  if (shape.size() != getAxes().size()) {
    return emitOpError() << "has " << shape.size() << " axis sizes but " << getAxes().size()
                         << " axis names; give one name per axis";
  }
  llvm::SmallDenseSet<llvm::StringRef> seen;
  for (const auto& [name, size] : llvm::zip(getAxes().getAsValueRange<mlir::StringAttr>(), shape)) {
    if (!isIdentifier(name)) {
      return emitOpError() << "axis name \"" << name
                           << "\" is not an identifier; use letters, digits "
                              "and '_', not starting with a digit";
    }
    if (!seen.insert(name).second) {
      return emitOpError() << "axis name \"" << name
                           << "\" is repeated; give each axis a unique name";
    }
    if (size < 1) {
      return emitOpError() << "axis \"" << name << "\" has size " << size
                           << "; every axis needs at least 1 rank";
    }
  }
  return mlir::success();
}

//===----------------------------------------------------------------------===//
// dist.annotate
//===----------------------------------------------------------------------===//

mlir::LogicalResult AnnotateOp::verify() {
  mlir::RankedTensorType local = getInput().getType();
  mlir::RankedTensorType global = getGlobalType();
  if (local.getRank() != global.getRank() || local.getElementType() != global.getElementType()) {
    return emitOpError() << "local type " << local
                         << " must have the rank and element type of global "
                            "type "
                         << global << "; a placement changes sizes only";
  }
  return mlir::success();
}

mlir::LogicalResult AnnotateOp::verifySymbolUses(mlir::SymbolTableCollection& tables) {
  mlir::FailureOr<MeshOp> mesh = lookupMesh(*this, getPlacement().getMesh(), tables);
  if (mlir::failed(mesh)) return mlir::failure();
  mlir::RankedTensorType global = getGlobalType();
  mlir::FailureOr<llvm::SmallVector<int64_t>> local =
      computeLocalShape(global.getShape(), getPlacement(), *mesh, [&] { return emitOpError(); });
  if (mlir::failed(local)) return mlir::failure();
  if (getInput().getType().getShape() != llvm::ArrayRef<int64_t>(*local)) {
    return emitOpError() << "local shape " << formatShape(getInput().getType().getShape())
                         << " does not match global type " << global
                         << " under this placement; expected " << formatShape(*local);
  }
  return mlir::success();
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

mlir::LogicalResult AllGatherOp::verify() { return verifyAllGather(*this); }
mlir::LogicalResult AllGatherOp::verifySymbolUses(mlir::SymbolTableCollection& tables) {
  return verifyAllGatherGroup(*this, tables);
}

mlir::LogicalResult AllGatherStartOp::verify() {
  if (mlir::failed(verifyAllGather(*this))) return mlir::failure();
  return verifyFutureUse(*this);
}
mlir::LogicalResult AllGatherStartOp::verifySymbolUses(mlir::SymbolTableCollection& tables) {
  return verifyAllGatherGroup(*this, tables);
}

mlir::LogicalResult ReduceScatterOp::verify() { return verifyReduceScatter(*this); }
mlir::LogicalResult ReduceScatterOp::verifySymbolUses(mlir::SymbolTableCollection& tables) {
  return verifyReduceScatterGroup(*this, tables);
}

mlir::LogicalResult ReduceScatterStartOp::verify() {
  if (mlir::failed(verifyReduceScatter(*this))) return mlir::failure();
  return verifyFutureUse(*this);
}
mlir::LogicalResult ReduceScatterStartOp::verifySymbolUses(mlir::SymbolTableCollection& tables) {
  return verifyReduceScatterGroup(*this, tables);
}

mlir::LogicalResult AllReduceOp::verify() { return verifyAllReduce(*this); }
mlir::LogicalResult AllReduceOp::verifySymbolUses(mlir::SymbolTableCollection& tables) {
  return resolveGroup(*this, getMeshAttr(), getMeshAxes(), tables);
}

mlir::LogicalResult AllReduceStartOp::verify() {
  if (mlir::failed(verifyAllReduce(*this))) return mlir::failure();
  return verifyFutureUse(*this);
}
mlir::LogicalResult AllReduceStartOp::verifySymbolUses(mlir::SymbolTableCollection& tables) {
  return resolveGroup(*this, getMeshAttr(), getMeshAxes(), tables);
}

mlir::LogicalResult AllToAllOp::verify() { return verifyAllToAll(*this); }
mlir::LogicalResult AllToAllOp::verifySymbolUses(mlir::SymbolTableCollection& tables) {
  return verifyAllToAllGroup(*this, tables);
}

mlir::LogicalResult AllToAllStartOp::verify() {
  if (mlir::failed(verifyAllToAll(*this))) return mlir::failure();
  return verifyFutureUse(*this);
}
mlir::LogicalResult AllToAllStartOp::verifySymbolUses(mlir::SymbolTableCollection& tables) {
  return verifyAllToAllGroup(*this, tables);
}

//===----------------------------------------------------------------------===//
// Point-to-point
//===----------------------------------------------------------------------===//

namespace {

// Checks shared by the four point-to-point ops: a non-negative peer and tag.
mlir::LogicalResult verifyPeerAndTag(mlir::Operation* op, int64_t peer, int64_t tag) {
  if (peer < 0) {
    return op->emitOpError() << "peer " << peer
                             << " is negative; name the peer by its coordinate along the axis";
  }
  if (tag < 0) {
    return op->emitOpError() << "tag " << tag << " is negative; use a tag >= 0";
  }
  return mlir::success();
}

// The axis is one of the mesh's and the peer a coordinate along it.
mlir::LogicalResult verifyPeerOnMesh(mlir::Operation* op, mlir::FlatSymbolRefAttr mesh_ref,
                                     llvm::StringRef axis, int64_t peer,
                                     mlir::SymbolTableCollection& tables) {
  mlir::FailureOr<MeshOp> mesh = lookupMesh(op, mesh_ref, tables);
  if (mlir::failed(mesh)) return mlir::failure();
  const std::optional<int64_t> size = mesh->axisSize(axis);
  if (!size) {
    mlir::InFlightDiagnostic diag = op->emitOpError()
                                    << "mesh axis \"" << axis << "\" is not an axis of @"
                                    << mesh->getSymName() << " (" << mesh->describe()
                                    << "); use one of its axes";
    diag.attachNote(mesh->getLoc()) << "mesh @" << mesh->getSymName() << " declared here";
    return diag;
  }
  if (peer >= *size) {
    return op->emitOpError() << "peer " << peer << " is outside axis \"" << axis << "\" of size "
                             << *size << "; use a coordinate in [0, " << *size << ")";
  }
  return mlir::success();
}

// The future of a start op carries a static tensor: `expected` (a send's
// operand type) when given.
mlir::LogicalResult verifyP2PFuture(mlir::Operation* op, mlir::Type future_type,
                                    mlir::Type expected) {
  auto carried =
      llvm::dyn_cast<mlir::RankedTensorType>(llvm::cast<FutureType>(future_type).getValueType());
  if (!carried || !carried.hasStaticShape()) {
    return op->emitOpError() << "future carries "
                             << llvm::cast<FutureType>(future_type).getValueType()
                             << "; it must carry a tensor of static shape";
  }
  if (expected && carried != expected) {
    return op->emitOpError() << "future carries " << carried << " but the sent tensor is "
                             << expected << "; a send's future carries the sent tensor's type";
  }
  return verifyFutureUse(op);
}

}  // namespace

mlir::LogicalResult SendOp::verify() { return verifyPeerAndTag(*this, getPeer(), getTag()); }
mlir::LogicalResult SendOp::verifySymbolUses(mlir::SymbolTableCollection& tables) {
  return verifyPeerOnMesh(*this, getMeshAttr(), getAxis(), getPeer(), tables);
}

mlir::LogicalResult SendStartOp::verify() {
  if (mlir::failed(verifyPeerAndTag(*this, getPeer(), getTag()))) return mlir::failure();
  return verifyP2PFuture(*this, getResult().getType(), getInput().getType());
}
mlir::LogicalResult SendStartOp::verifySymbolUses(mlir::SymbolTableCollection& tables) {
  return verifyPeerOnMesh(*this, getMeshAttr(), getAxis(), getPeer(), tables);
}

mlir::LogicalResult RecvOp::verify() { return verifyPeerAndTag(*this, getPeer(), getTag()); }
mlir::LogicalResult RecvOp::verifySymbolUses(mlir::SymbolTableCollection& tables) {
  return verifyPeerOnMesh(*this, getMeshAttr(), getAxis(), getPeer(), tables);
}

mlir::LogicalResult RecvStartOp::verify() {
  if (mlir::failed(verifyPeerAndTag(*this, getPeer(), getTag()))) return mlir::failure();
  return verifyP2PFuture(*this, getResult().getType(), nullptr);
}
mlir::LogicalResult RecvStartOp::verifySymbolUses(mlir::SymbolTableCollection& tables) {
  return verifyPeerOnMesh(*this, getMeshAttr(), getAxis(), getPeer(), tables);
}

mlir::LogicalResult WaitOp::verify() {
  mlir::Operation* start = getFuture().getDefiningOp();
  if (!start ||
      !llvm::isa<AllGatherStartOp, ReduceScatterStartOp, AllReduceStartOp, AllToAllStartOp,
                 SendStartOp, RecvStartOp, CopyToHostStartOp, CopyIntoDeviceStartOp>(start)) {
    return emitOpError() << "waits on a future that no dist.*_start op "
                            "produced; wait on the result of a start op in "
                            "this block";
  }
  return mlir::success();
}

//===----------------------------------------------------------------------===//
// Copies between device and host memory
//===----------------------------------------------------------------------===//

bool onHost(mlir::Value value) {
  if (auto arg = llvm::dyn_cast<mlir::BlockArgument>(value)) {
    auto func = llvm::dyn_cast_or_null<mlir::FunctionOpInterface>(arg.getOwner()->getParentOp());
    if (!func || arg.getOwner() != &func.getFunctionBody().front()) return false;
    auto memory = func.getArgAttrOfType<mlir::StringAttr>(arg.getArgNumber(), kMemoryAttrName);
    return memory && memory.getValue() == "host";
  }
  mlir::Operation* def = value.getDefiningOp();
  if (llvm::isa<CopyToHostStartOp>(def)) return true;
  if (auto wait = llvm::dyn_cast<WaitOp>(def)) return onHost(wait.getFuture());
  if (auto step = llvm::dyn_cast<OptimizerStepOp>(def)) {
    return onHost(step.getInPlaceOperand(llvm::cast<mlir::OpResult>(value).getResultNumber()));
  }
  return false;
}

namespace {

// "host memory" or "device memory", for diagnostics.
const char* memoryOf(mlir::Value value) { return onHost(value) ? "host memory" : "device memory"; }

}  // namespace

mlir::LogicalResult CopyToHostStartOp::verify() {
  if (onHost(getInput())) {
    return emitOpError() << "copies a tensor that is already in host memory; copy a device "
                            "tensor, or use the host tensor as it is";
  }
  auto carried = llvm::cast<FutureType>(getResult().getType()).getValueType();
  if (carried != getInput().getType()) {
    return emitOpError() << "future carries " << carried << " but the copied tensor is "
                         << getInput().getType()
                         << "; a copy to the host keeps the tensor's type";
  }
  return verifyFutureUse(*this);
}

mlir::LogicalResult CopyIntoDeviceStartOp::verify() {
  for (auto [what, value, host] :
       {std::tuple{"source", getSource(), true}, std::tuple{"dest", getDest(), false}}) {
    if (onHost(value) != host) {
      return emitOpError() << what << " is in " << memoryOf(value) << "; the copy reads host "
                           << "memory into device memory";
    }
  }
  if (getSource().getType().getShape() != getDest().getType().getShape()) {
    return emitOpError() << "source shape " << formatShape(getSource().getType().getShape())
                         << " != dest shape " << formatShape(getDest().getType().getShape())
                         << "; the copy overwrites dest element for element";
  }
  auto carried = llvm::cast<FutureType>(getResult().getType()).getValueType();
  if (carried != getDest().getType()) {
    return emitOpError() << "future carries " << carried << " but dest is " << getDest().getType()
                         << "; its wait yields dest's new value";
  }
  return verifyFutureUse(*this);
}

//===----------------------------------------------------------------------===//
// dist.slice
//===----------------------------------------------------------------------===//

mlir::LogicalResult SliceOp::verify() {
  mlir::Operation* o = getOperation();
  mlir::RankedTensorType input = getInput().getType();
  mlir::RankedTensorType result = getResult().getType();
  if (mlir::failed(verifyAxesList(o, getMeshAxes())) ||
      mlir::failed(verifyDimInRange(o, "slice_dim", getSliceDim(), input.getRank())) ||
      mlir::failed(verifySameRank(o, input, result, "slice")) ||
      mlir::failed(verifyOtherDims(o, "slice_dim", getSliceDim(), input, result))) {
    return mlir::failure();
  }
  if (input.getElementType() != result.getElementType()) {
    return emitOpError() << "result element type " << result.getElementType()
                         << " != operand element type " << input.getElementType()
                         << "; a slice keeps the element type, set it to "
                         << input.getElementType();
  }
  return mlir::success();
}

mlir::LogicalResult SliceOp::verifySymbolUses(mlir::SymbolTableCollection& tables) {
  mlir::FailureOr<Group> group = resolveGroup(*this, getMeshAttr(), getMeshAxes(), tables);
  if (mlir::failed(group)) return mlir::failure();
  const int64_t dim = getSliceDim();
  return verifySplitDim(*this, dim, getInput().getType().getDimSize(dim),
                        getResult().getType().getDimSize(dim), getPadded(), *group);
}

//===----------------------------------------------------------------------===//
// Buffers and the optimizer
//===----------------------------------------------------------------------===//

mlir::LogicalResult FreeOp::verify() {
  mlir::Value buffer = getBuffer();
  mlir::Block* block = (*this)->getBlock();
  if (buffer.getParentBlock() != block) {
    return emitOpError() << "frees a buffer defined in another block; free it "
                            "in the block that defines it, so it is freed "
                            "exactly once";
  }
  for (mlir::Operation* user : buffer.getUsers()) {
    if (user == getOperation()) continue;
    mlir::Operation* ancestor = block->findAncestorOpInBlock(*user);
    if (ancestor && ancestor->isBeforeInBlock(getOperation())) continue;
    if (llvm::isa<FreeOp>(user)) {
      mlir::InFlightDiagnostic diag = emitOpError()
                                      << "frees a buffer that is freed again later; keep "
                                         "only the last dist.free";
      diag.attachNote(user->getLoc()) << "freed again here";
      return diag;
    }
    mlir::InFlightDiagnostic diag = emitOpError()
                                    << "frees a buffer that '" << user->getName()
                                    << "' uses later; move the free after the last use";
    diag.attachNote(user->getLoc()) << "used here";
    return diag;
  }
  return mlir::success();
}

mlir::LogicalResult BucketOp::verify() {
  return verifyBucketLayout(*this, getResult().getType(), getInputs().getTypes(), getOffsets(),
                            getChunks(), getSplitDims(), getPadded());
}

mlir::LogicalResult UnbucketOp::verify() {
  return verifyBucketLayout(*this, getInput().getType(), getResults().getTypes(), getOffsets(),
                            getChunks(), getSplitDims(), getPadded());
}

mlir::LogicalResult OptimizerStepOp::inferReturnTypes(mlir::MLIRContext*,
                                                      std::optional<mlir::Location>,
                                                      mlir::ValueRange operands,
                                                      mlir::DictionaryAttr, mlir::OpaqueProperties,
                                                      mlir::RegionRange,
                                                      llvm::SmallVectorImpl<mlir::Type>& inferred) {
  if (operands.size() < 4) return mlir::failure();
  // param, exp_avg, exp_avg_sq and the optional master, skipping the grad.
  for (auto [i, operand] : llvm::enumerate(operands)) {
    if (i != 1) inferred.push_back(operand.getType());
  }
  return mlir::success();
}

mlir::Value OptimizerStepOp::getInPlaceOperand(unsigned result) {
  // Results follow the operands without the grad.
  return getOperand(result == 0 ? 0 : result + 1);
}

mlir::LogicalResult OptimizerStepOp::verify() {
  const mlir::RankedTensorType param = getParam().getType();
  const llvm::ArrayRef<int64_t> shape = param.getShape();
  llvm::SmallVector<std::pair<llvm::StringRef, mlir::RankedTensorType>, 4> operands = {
      {"grad", getGrad().getType()},
      {"exp_avg", getExpAvg().getType()},
      {"exp_avg_sq", getExpAvgSq().getType()},
  };
  if (getMaster()) operands.push_back({"master", getMaster().getType()});
  for (const auto& [name, type] : operands) {
    if (type.getShape() != shape) {
      return emitOpError() << name << " shape " << formatShape(type.getShape())
                           << " != param shape " << formatShape(shape)
                           << "; every operand must have the param's shape";
    }
  }
  const bool host = onHost(getParam());
  for (mlir::OpOperand& use : getOperation()->getOpOperands()) {
    if (onHost(use.get()) == host) continue;
    return emitOpError() << "mixes host and device memory (operand #" << use.getOperandNumber()
                         << " is in " << memoryOf(use.get()) << ", the param in "
                         << memoryOf(getParam()) << "); copy the tensors to where the step runs";
  }
  const bool f32 = param.getElementType().isF32();
  if (!f32 && !getMaster()) {
    return emitOpError() << "updates a " << param.getElementType()
                         << " param without a master copy; add `master %m` "
                            "with an f32 tensor of the param's shape";
  }
  if (f32 && getMaster()) {
    return emitOpError() << "has a master copy of an f32 param; drop "
                            "`master`, the param is its own master";
  }
  if (getMaster() && !getMaster().getType().getElementType().isF32()) {
    return emitOpError() << "master must be f32, got: " << getMaster().getType().getElementType();
  }
  const double lr = getLr().convertToDouble();
  if (!(lr > 0.0)) {
    return emitOpError() << "lr must be positive, got: " << formatDouble(lr)
                         << "; use a learning rate such as 0.001";
  }
  const std::pair<llvm::StringRef, double> betas[] = {
      {"beta1", getBeta1().convertToDouble()},
      {"beta2", getBeta2().convertToDouble()},
  };
  for (const auto& [name, beta] : betas) {
    if (!(beta >= 0.0 && beta < 1.0)) {
      return emitOpError() << name << " must be in [0, 1), got: " << formatDouble(beta);
    }
  }
  const double eps = getEps().convertToDouble();
  if (!(eps > 0.0)) {
    return emitOpError() << "eps must be positive, got: " << formatDouble(eps)
                         << "; use a small value such as 1e-08";
  }
  const double weight_decay = getWeightDecay().convertToDouble();
  if (!(weight_decay >= 0.0)) {
    return emitOpError() << "weight_decay must be non-negative, got: " << formatDouble(weight_decay)
                         << "; use 0 to turn weight decay off";
  }
  return mlir::success();
}

}  // namespace loom::planner::dist
