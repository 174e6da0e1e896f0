// Names of the reduction operators and which dtypes each accepts.
#include "comm/reduce_op.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "comm/errors.h"

namespace loom::comm {

std::string_view reduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kProduct:
      return "product";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kBand:
      return "band";
    case ReduceOp::kBor:
      return "bor";
    case ReduceOp::kBxor:
      return "bxor";
  }
  return "?";
}

absl::Status checkReduceOpSupports(ReduceOp op, DType dtype) {
  const bool bitwise = op == ReduceOp::kBand || op == ReduceOp::kBor || op == ReduceOp::kBxor;
  if (bitwise && isFloatingPoint(dtype)) {
    return invalidArgumentError(absl::StrCat(
        "reduce op ", std::string(reduceOpName(op)), " needs an integer or bool tensor; got ",
        std::string(dtypeName(dtype)), "; use sum/product/min/max/avg for floating-point tensors"));
  }
  if (op == ReduceOp::kAvg && dtype == DType::kBool) {
    return invalidArgumentError(
        "reduce op avg is not defined on bool tensors; use band, bor, min or max");
  }
  return absl::OkStatus();
}

}  // namespace loom::comm
