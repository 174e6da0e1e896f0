// How the nccl backend maps dtypes and reduce ops onto NCCL's, kept apart
// from the backend so that the mapping is tested on machines without a GPU.
#ifndef LOOM_COMM_NCCL_NCCL_TYPES_H_
#define LOOM_COMM_NCCL_NCCL_TYPES_H_

#include <nccl.h>

#include "absl/status/statusor.h"
#include "comm/reduce_op.h"
#include "comm/tensor.h"
#include "comm/work.h"

namespace loom::comm::nccl {

// NCCL's datatype for `dtype`; bool tensors travel as ncclUint8.
ncclDataType_t ncclDataType(DType dtype);

// NCCL's op for `op` on `dtype`. AVG is ncclAvg (integer tensors divide with
// truncation, floating-point ones pre-multiply by 1/size). Bool tensors use
// max for sum and max and min for product, min and avg: the logical or/and
// that the other backends compute. NCCL has no bitwise reductions: band, bor
// and bxor fail with "backend nccl does not support reduce op band" naming
// the call `info`.
absl::StatusOr<ncclRedOp_t> ncclReduceOp(ReduceOp op, DType dtype, const CollectiveInfo& info);

}  // namespace loom::comm::nccl

#endif  // LOOM_COMM_NCCL_NCCL_TYPES_H_
