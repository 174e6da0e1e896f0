// Element-wise reduction functions for the Gloo backend, per dtype and op.
#include "comm/gloo/gloo_reduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "comm/errors.h"
#include "comm/half_float.h"
#include "gloo/math.h"

namespace loom::comm::gloo {
namespace {

template <typename T, typename Op>
void elementwise(void* out, const void* a, const void* b, size_t n, Op op) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = op(x[i], y[i]);
}

// bf16 arithmetic rounds once per operation, as c10::BFloat16's operators do.
void bf16Sum(void* out, const void* a, const void* b, size_t n) {
  elementwise<BFloat16>(out, a, b, n, [](BFloat16 x, BFloat16 y) {
    return floatToBf16(bf16ToFloat(x) + bf16ToFloat(y));
  });
}
void bf16Product(void* out, const void* a, const void* b, size_t n) {
  elementwise<BFloat16>(out, a, b, n, [](BFloat16 x, BFloat16 y) {
    return floatToBf16(bf16ToFloat(x) * bf16ToFloat(y));
  });
}
// std::min/std::max on the float values, so NaN handling matches what
// gloo::min/max<float> do for f32.
void bf16Min(void* out, const void* a, const void* b, size_t n) {
  elementwise<BFloat16>(
      out, a, b, n, [](BFloat16 x, BFloat16 y) { return bf16ToFloat(y) < bf16ToFloat(x) ? y : x; });
}
void bf16Max(void* out, const void* a, const void* b, size_t n) {
  elementwise<BFloat16>(
      out, a, b, n, [](BFloat16 x, BFloat16 y) { return bf16ToFloat(x) < bf16ToFloat(y) ? y : x; });
}

template <typename T, ReduceOp kOp>
void bitwise(void* out, const void* a, const void* b, size_t n) {
  elementwise<T>(out, a, b, n, [](T x, T y) -> T {
    if constexpr (kOp == ReduceOp::kBand) return static_cast<T>(x & y);
    if constexpr (kOp == ReduceOp::kBor) return static_cast<T>(x | y);
    return static_cast<T>(x ^ y);
  });
}

// The function of (T, op), known at compile time.
template <typename T, ReduceOp kOp>
constexpr ReduceFn fnOf() {
  constexpr bool kBf16 = std::is_same_v<T, BFloat16>;
  if constexpr (kOp == ReduceOp::kSum || kOp == ReduceOp::kAvg) {
    if constexpr (kBf16)
      return &bf16Sum;
    else
      return &::gloo::sum<T>;
  } else if constexpr (kOp == ReduceOp::kProduct) {
    if constexpr (kBf16)
      return &bf16Product;
    else
      return &::gloo::product<T>;
  } else if constexpr (kOp == ReduceOp::kMin) {
    if constexpr (kBf16)
      return &bf16Min;
    else
      return &::gloo::min<T>;
  } else if constexpr (kOp == ReduceOp::kMax) {
    if constexpr (kBf16)
      return &bf16Max;
    else
      return &::gloo::max<T>;
  } else if constexpr (std::is_integral_v<T>) {
    return &bitwise<T, kOp>;
  } else {
    return nullptr;
  }
}

template <typename T>
ReduceFn fnFor(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return fnOf<T, ReduceOp::kSum>();
    case ReduceOp::kProduct:
      return fnOf<T, ReduceOp::kProduct>();
    case ReduceOp::kMin:
      return fnOf<T, ReduceOp::kMin>();
    case ReduceOp::kMax:
      return fnOf<T, ReduceOp::kMax>();
    case ReduceOp::kAvg:
      return fnOf<T, ReduceOp::kAvg>();
    case ReduceOp::kBand:
      return fnOf<T, ReduceOp::kBand>();
    case ReduceOp::kBor:
      return fnOf<T, ReduceOp::kBor>();
    case ReduceOp::kBxor:
      return fnOf<T, ReduceOp::kBxor>();
  }
  return nullptr;
}

template <typename T>
void divideTyped(T* data, int64_t count, int divisor) {
  for (int64_t i = 0; i < count; ++i) {
    if constexpr (std::is_same_v<T, BFloat16>) {
      data[i] = floatToBf16(bf16ToFloat(data[i]) / static_cast<float>(divisor));
    } else if constexpr (std::is_same_v<T, ::gloo::float16>) {
      data[i] =
          ::gloo::cpu_float2half_rn(::gloo::cpu_half2float(data[i]) / static_cast<float>(divisor));
    } else {
      data[i] = static_cast<T>(data[i] / static_cast<T>(divisor));
    }
  }
}

}  // namespace

float bf16ToFloat(BFloat16 value) { return bfloat16ToFloat(value.bits); }

BFloat16 floatToBf16(float value) { return BFloat16{floatToBfloat16(value)}; }

absl::StatusOr<ReduceFn> reduceFunction(ReduceOp op, DType dtype) {
  const ReduceFn fn = visitDType(dtype, [op](auto tag) { return fnFor<decltype(tag)>(op); });
  if (fn == nullptr) {
    if (absl::Status status = checkReduceOpSupports(op, dtype); !status.ok()) return status;
    return invalidArgumentError(absl::StrCat("reduce op ", std::string(reduceOpName(op)),
                                             " is not defined on ", std::string(dtypeName(dtype))));
  }
  return fn;
}

absl::Status divideInPlace(void* data, DType dtype, int64_t count, int divisor) {
  if (dtype == DType::kBool) {
    return invalidArgumentError(
        "reduce op avg is not defined on bool tensors; use band, bor, min or max");
  }
  visitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    divideTyped(static_cast<T*>(data), count, divisor);
  });
  return absl::OkStatus();
}

}  // namespace loom::comm::gloo
