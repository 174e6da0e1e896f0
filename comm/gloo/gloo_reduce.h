// The arithmetic the Gloo backend hands to Gloo's algorithms: one
// element-wise function per (ReduceOp, DType) and the division that finishes
// AVG.
#ifndef LOOM_COMM_GLOO_GLOO_REDUCE_H_
#define LOOM_COMM_GLOO_GLOO_REDUCE_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "absl/status/statusor.h"
#include "comm/reduce_op.h"
#include "comm/tensor.h"
#include "gloo/types.h"

namespace loom::comm::gloo {

// bf16 storage; arithmetic goes through float, as c10::BFloat16 does, so
// results round the way PyTorch's do.
struct BFloat16 {
  uint16_t bits;
};
float bf16ToFloat(BFloat16 value);
// Round to nearest even; NaN stays NaN.
BFloat16 floatToBf16(float value);

// Gloo's element-wise function type: out[i] = a[i] (op) b[i] for n elements.
using ReduceFn = void (*)(void* out, const void* a, const void* b, size_t n);

// The function for `op` on `dtype`. AVG gives the sum (the caller divides
// afterwards, see divideInPlace). Sum, product, min and max are Gloo's own
// (gloo::sum<T>, ... with gloo::float16 for f16), exactly what PyTorch's
// Gloo backend calls; bf16 and the bitwise ops are ours. Bitwise ops on
// floating-point dtypes fail with an invalid-argument error.
absl::StatusOr<ReduceFn> reduceFunction(ReduceOp op, DType dtype);

// AVG's last step: data[i] /= divisor for `count` elements. Floating-point
// types divide (f16 and bf16 through float), integer types truncate toward
// zero as torch.div(..., rounding_mode="trunc"). Bool has no average.
absl::Status divideInPlace(void* data, DType dtype, int64_t count, int divisor);

// Calls `f` with a value of the C++ type that stores `dtype` (float,
// double, gloo::float16, BFloat16, int8_t, uint8_t, int32_t, int64_t, bool),
// so that typed Gloo templates can be instantiated once per dtype.
template <typename F>
decltype(auto) visitDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32:
      return f(float{});
    case DType::kFloat64:
      return f(double{});
    case DType::kFloat16:
      return f(::gloo::float16{});
    case DType::kBFloat16:
      return f(BFloat16{});
    case DType::kInt8:
      return f(int8_t{});
    case DType::kUInt8:
      return f(uint8_t{});
    case DType::kInt32:
      return f(int32_t{});
    case DType::kInt64:
      return f(int64_t{});
    case DType::kBool:
      return f(bool{});
  }
  return f(uint8_t{});
}

}  // namespace loom::comm::gloo

#endif  // LOOM_COMM_GLOO_GLOO_REDUCE_H_
