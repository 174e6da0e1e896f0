// Parser, printer and verifier of #dist.placement, and the generated code of
// the dialect's enums and attributes.
#include "planner/dialect/dist/ir/dist_attrs.h"

#include <cstdint>
#include <optional>
#include <string>

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "planner/dialect/dist/ir/dist_dialect.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/dialect/dist/ir/dist_enums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "planner/dialect/dist/ir/dist_attrs.cpp.inc"
#pragma GCC diagnostic pop

namespace loom::planner::dist {

void DistDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "planner/dialect/dist/ir/dist_attrs.cpp.inc"
      >();
}

std::string AxisPlacement::toString() const {
  switch (kind) {
    case Kind::kReplicate:
      return "replicate";
    case Kind::kShard:
      return "shard<" + std::to_string(dim) + (padded ? ", padded>" : ">");
    case Kind::kPartial:
      return "partial<" + stringifyReductionKind(reduction).str() + ">";
  }
  llvm_unreachable("unknown placement kind");
}

llvm::hash_code hash_value(const AxisPlacement& placement) {
  return llvm::hash_combine(placement.kind, placement.dim, placement.padded, placement.reduction);
}

namespace {

// Parses one entry: `replicate`, `shard<D>`, `shard<D, padded>` or
// `partial<R>`.
mlir::ParseResult parseAxisPlacement(mlir::AsmParser& parser, AxisPlacement& result) {
  const llvm::SMLoc loc = parser.getCurrentLocation();
  llvm::StringRef keyword;
  if (parser.parseOptionalKeyword(&keyword)) {
    return parser.emitError(loc) << "expected a placement: replicate, shard<dim> or "
                                    "partial<reduction>";
  }
  if (keyword == "replicate") {
    result = AxisPlacement::replicate();
    return mlir::success();
  }
  if (keyword == "shard") {
    int64_t dim = 0;
    if (parser.parseLess() || parser.parseInteger(dim)) return mlir::failure();
    bool padded = false;
    if (mlir::succeeded(parser.parseOptionalComma())) {
      if (parser.parseKeyword("padded")) return mlir::failure();
      padded = true;
    }
    if (parser.parseGreater()) return mlir::failure();
    result = AxisPlacement::shard(dim, padded);
    return mlir::success();
  }
  if (keyword == "partial") {
    llvm::StringRef name;
    if (parser.parseLess()) return mlir::failure();
    const llvm::SMLoc name_loc = parser.getCurrentLocation();
    if (parser.parseKeyword(&name)) return mlir::failure();
    const std::optional<ReductionKind> reduction = symbolizeReductionKind(name);
    if (!reduction) {
      return parser.emitError(name_loc)
             << "unknown reduction '" << name << "'; use sum, avg, max or min";
    }
    if (parser.parseGreater()) return mlir::failure();
    result = AxisPlacement::partial(*reduction);
    return mlir::success();
  }
  return parser.emitError(loc) << "unknown placement '" << keyword
                               << "'; use replicate, shard<dim> or partial<reduction>";
}

}  // namespace

mlir::Attribute PlacementAttr::parse(mlir::AsmParser& parser, mlir::Type) {
  const llvm::SMLoc loc = parser.getCurrentLocation();
  mlir::FlatSymbolRefAttr mesh;
  llvm::SmallVector<AxisPlacement> axes;
  if (parser.parseLess() || parser.parseAttribute(mesh) || parser.parseComma() ||
      parser.parseCommaSeparatedList(
          mlir::AsmParser::Delimiter::Square,
          [&] { return parseAxisPlacement(parser, axes.emplace_back()); }) ||
      parser.parseGreater()) {
    return {};
  }
  return PlacementAttr::getChecked([&] { return parser.emitError(loc); }, parser.getContext(), mesh,
                                   axes);
}

void PlacementAttr::print(mlir::AsmPrinter& printer) const {
  printer << "<" << getMesh() << ", [";
  llvm::interleaveComma(getAxes(), printer,
                        [&](const AxisPlacement& axis) { printer << axis.toString(); });
  printer << "]>";
}

mlir::LogicalResult PlacementAttr::verify(llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
                                          mlir::FlatSymbolRefAttr,
                                          llvm::ArrayRef<AxisPlacement> axes) {
  for (const auto& [index, axis] : llvm::enumerate(axes)) {
    if (axis.isShard() && axis.dim < 0) {
      return emitError() << "placement entry " << index << " shards dim " << axis.dim
                         << "; use a non-negative dim";
    }
  }
  return mlir::success();
}

}  // namespace loom::planner::dist
