// The dtype and reduce-op tables of the nccl backend.
#include "comm/nccl/nccl_types.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "comm/errors.h"

namespace loom::comm::nccl {

ncclDataType_t ncclDataType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kFloat64:
      return ncclFloat64;
    case DType::kFloat16:
      return ncclFloat16;
    case DType::kBFloat16:
      return ncclBfloat16;
    case DType::kInt8:
      return ncclInt8;
    case DType::kUInt8:
    case DType::kBool:
      return ncclUint8;
    case DType::kInt32:
      return ncclInt32;
    case DType::kInt64:
      return ncclInt64;
  }
  return ncclUint8;
}

absl::StatusOr<ncclRedOp_t> ncclReduceOp(ReduceOp op, DType dtype, const CollectiveInfo& info) {
  if (op == ReduceOp::kBand || op == ReduceOp::kBor || op == ReduceOp::kBxor) {
    return makeError(
        ErrorKind::kBackend, absl::StatusCode::kUnimplemented,
        absl::StrCat("backend nccl does not support reduce op ", std::string(reduceOpName(op)),
                     " (", info.describe(),
                     "): NCCL has no bitwise reductions; reduce these tensors with the gloo or "
                     "mpi backend"));
  }
  if (absl::Status status = checkReduceOpSupports(op, dtype); !status.ok()) return status;
  if (dtype == DType::kBool) {
    return op == ReduceOp::kSum || op == ReduceOp::kMax ? ncclMax : ncclMin;
  }
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kProduct:
      return ncclProd;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    default:
      return ncclAvg;
  }
}

}  // namespace loom::comm::nccl
