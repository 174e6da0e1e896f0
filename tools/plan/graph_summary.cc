// Builds and prints the summary of an `nn` model graph.
#include "tools/plan/graph_summary.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/Operation.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/dialect/nn/ir/nn_interfaces.h"
#include "planner/dialect/nn/ir/nn_ops.h"

namespace loom::tools::plan {
namespace {

namespace nn = ::loom::planner::nn;

constexpr char kUnnamed[] = "(unnamed)";

int64_t tensorBytes(mlir::Type type) {
  auto tensor = llvm::cast<mlir::RankedTensorType>(type);
  return tensor.getNumElements() * tensor.getElementTypeBitWidth() / 8;
}

int64_t numElements(mlir::Type type) {
  return llvm::cast<mlir::RankedTensorType>(type).getNumElements();
}

std::string layerOfOp(mlir::Operation* op) {
  if (auto name = op->getLoc()->findInstanceOf<mlir::NameLoc>()) {
    return layerOf(name.getName().getValue().str());
  }
  return kUnnamed;
}

std::string describe(mlir::Operation* op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "'" << op->getName() << "' at " << op->getLoc();
  return text;
}

// Rows in order of first use; `row` creates a missing one at the end.
class Rows {
 public:
  LayerSummary& row(const std::string& name) {
    auto [it, inserted] = index_.try_emplace(name, rows_.size());
    if (inserted) rows_.push_back({.name = name});
    return rows_[it->second];
  }
  std::vector<LayerSummary> take() { return std::move(rows_); }

 private:
  std::map<std::string, size_t> index_;
  std::vector<LayerSummary> rows_;
};

// A numbered block such as "layers.3": its last component is a number.
bool isBlock(std::string_view name) {
  const std::string_view last = name.substr(name.rfind('.') + 1);
  return !last.empty() && std::all_of(last.begin(), last.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
}

// "1,234,567".
std::string withCommas(int64_t value) {
  std::string digits = absl::StrCat(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

// Four significant digits with an SI prefix ("16.49 G"), or binary prefixes
// for bytes ("1.5 GiB").
std::string compact(double value, bool binary = false) {
  static constexpr const char* kDecimal[] = {"", " K", " M", " G", " T", " P", " E"};
  static constexpr const char* kBinary[] = {" B", " KiB", " MiB", " GiB", " TiB", " PiB", " EiB"};
  const double base = binary ? 1024.0 : 1000.0;
  size_t unit = 0;
  while (std::abs(value) >= base && unit + 1 < std::size(kDecimal)) {
    value /= base;
    ++unit;
  }
  return absl::StrFormat("%.4g%s", value, binary ? kBinary[unit] : kDecimal[unit]);
}

}  // namespace

std::string layerOf(std::string_view module_path) {
  size_t end = std::string_view::npos;
  size_t start = 0;
  while (start <= module_path.size()) {
    size_t dot = module_path.find('.', start);
    if (dot == std::string_view::npos) dot = module_path.size();
    const std::string_view part = module_path.substr(start, dot - start);
    if (!part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c));
        })) {
      end = dot;
    }
    start = dot + 1;
  }
  return std::string(module_path.substr(0, end));
}

absl::StatusOr<GraphSummary> summarizeGraph(mlir::func::FuncOp func) {
  GraphSummary summary;
  summary.function = func.getSymName().str();
  Rows rows;
  for (mlir::Operation& op : func.getBody().getOps()) {
    if (llvm::isa<mlir::func::ReturnOp>(op)) continue;
    auto cost = llvm::dyn_cast<nn::CostOpInterface>(op);
    if (!cost) {
      return absl::InvalidArgumentError(
          absl::StrCat(describe(&op),
                       " has no cost model; the graph summary covers nn ops only, so "
                       "give a function of nn ops (docs/planner_nn.md)"));
    }
    LayerSummary& row = rows.row(layerOfOp(&op));
    ++row.ops;
    row.flops += cost.getFlops();
    for (mlir::Type type : op.getResultTypes()) row.activation_bytes += tensorBytes(type);
    if (summary.tokens == 0) {
      if (auto embedding = llvm::dyn_cast<nn::EmbeddingOp>(op)) {
        summary.tokens = numElements(embedding.getIds().getType());
      }
    }
  }
  if (summary.tokens == 0) {
    for (auto loss : func.getBody().getOps<nn::CrossEntropyOp>()) {
      summary.tokens = numElements(loss.getLabels().getType());
      break;
    }
  }
  for (mlir::BlockArgument arg : func.getArguments()) {
    const unsigned index = arg.getArgNumber();
    if (!func.getArgAttr(index, nn::NnDialect::kParamAttrName)) continue;
    std::string layer;
    if (auto name = func.getArgAttrOfType<mlir::StringAttr>(index, nn::NnDialect::kNameAttrName)) {
      const std::string_view path(name.getValue().data(), name.getValue().size());
      const size_t dot = path.rfind('.');
      layer = layerOf(dot == std::string_view::npos ? path : path.substr(0, dot));
    } else {
      layer = arg.use_empty() ? kUnnamed : layerOfOp(*arg.getUsers().begin());
    }
    const int64_t count = numElements(arg.getType());
    rows.row(layer).parameters += count;
    summary.parameters += count;
    summary.parameter_bytes += tensorBytes(arg.getType());
    const bool embedded = llvm::any_of(arg.getUses(), [](mlir::OpOperand& use) {
      auto embedding = llvm::dyn_cast<nn::EmbeddingOp>(use.getOwner());
      return embedding && use.get() == embedding.getTable();
    });
    if (embedded) summary.embedding_parameters += count;
  }
  summary.layers = rows.take();
  for (const LayerSummary& row : summary.layers) {
    summary.ops += row.ops;
    summary.forward_flops += row.flops;
    summary.activation_bytes += row.activation_bytes;
    if (isBlock(row.name)) {
      ++summary.num_blocks;
      summary.block_parameters += row.parameters;
    }
  }
  return summary;
}

std::string formatSummary(const GraphSummary& s) {
  std::string out =
      absl::StrCat("model @", s.function, ": ", s.num_blocks, " blocks, ", withCommas(s.ops),
                   " ops, ", withCommas(s.tokens), " tokens per step\n");
  absl::StrAppend(&out, "parameters: ", withCommas(s.parameters), " (", compact(s.parameters), ", ",
                  compact(s.parameter_bytes, /*binary=*/true), ")\n");
  absl::StrAppend(&out, "  embedding tables: ", withCommas(s.embedding_parameters), "\n");
  if (s.num_blocks > 0) {
    int64_t smallest = std::numeric_limits<int64_t>::max();
    int64_t largest = 0;
    for (const LayerSummary& row : s.layers) {
      if (!isBlock(row.name)) continue;
      smallest = std::min(smallest, row.parameters);
      largest = std::max(largest, row.parameters);
    }
    absl::StrAppend(&out, "  blocks: ", withCommas(s.block_parameters), " (", s.num_blocks, " x ",
                    smallest == largest
                        ? withCommas(largest)
                        : absl::StrCat(withCommas(smallest), " .. ", withCommas(largest)),
                    ")\n");
  }
  absl::StrAppend(&out, "  other: ",
                  withCommas(s.parameters - s.embedding_parameters - s.block_parameters), "\n");
  const double tokens = static_cast<double>(s.tokens);
  if (s.tokens > 0) {
    absl::StrAppend(&out, "FLOPs per token, forward: ", compact(s.forward_flops / tokens),
                    " (2 x parameters = ", compact(2.0 * s.parameters), ")\n");
    absl::StrAppend(&out, "FLOPs per token, forward + backward (3 x forward): ",
                    compact(3.0 * s.forward_flops / tokens), "\n");
  } else {
    absl::StrAppend(&out, "FLOPs per step, forward: ", compact(s.forward_flops),
                    " (no nn.embedding or nn.cross_entropy, so no token count)\n");
  }
  absl::StrAppend(&out, "activations, forward (every op result): ",
                  compact(s.activation_bytes, /*binary=*/true), "\n\n");

  int width = 5;
  for (const LayerSummary& row : s.layers) {
    width = std::max(width, static_cast<int>(row.name.size()));
  }
  const std::string flops_header = s.tokens > 0 ? "FLOPs/token" : "FLOPs";
  absl::StrAppend(&out, absl::StrFormat("%-*s %6s %15s %12s %12s\n", width, "layer", "ops",
                                        "params", flops_header, "act bytes"));
  for (const LayerSummary& row : s.layers) {
    const double flops = s.tokens > 0 ? row.flops / tokens : static_cast<double>(row.flops);
    absl::StrAppend(&out, absl::StrFormat("%-*s %6d %15s %12s %12s\n", width, row.name, row.ops,
                                          withCommas(row.parameters), compact(flops),
                                          compact(row.activation_bytes, /*binary=*/true)));
  }
  return out;
}

}  // namespace loom::tools::plan
