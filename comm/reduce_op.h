// Reduction operators of all_reduce, reduce and reduce_scatter, with
// torch.distributed.ReduceOp's meaning.
#ifndef LOOM_COMM_REDUCE_OP_H_
#define LOOM_COMM_REDUCE_OP_H_

#include <string_view>

#include "absl/status/status.h"
#include "comm/tensor.h"

namespace loom::comm {

enum class ReduceOp : uint8_t {
  kSum,
  kProduct,
  kMin,
  kMax,
  // SUM divided by the group size; integer tensors use integer division
  // (PyTorch's gloo backend rejects AVG; ours computes it, see docs).
  kAvg,
  // Bitwise and/or/xor: integer and bool tensors only.
  kBand,
  kBor,
  kBxor,
};

inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin,
                                             ReduceOp::kMax, ReduceOp::kAvg,     ReduceOp::kBand,
                                             ReduceOp::kBor, ReduceOp::kBxor};

// "sum", "product", "min", "max", "avg", "band", "bor", "bxor".
std::string_view reduceOpName(ReduceOp op);

// OK when `op` is defined on `dtype`; otherwise an invalid-argument error
// such as "reduce op band needs an integer or bool tensor; got f32". AVG is
// not defined on bool.
absl::Status checkReduceOpSupports(ReduceOp op, DType dtype);

}  // namespace loom::comm

#endif  // LOOM_COMM_REDUCE_OP_H_
