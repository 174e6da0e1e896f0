// The tensor view collectives operate on: a pointer, a dtype, a contiguous
// shape and the device that holds the memory. The communication layer never
// owns tensor memory; callers (the runtime, tests) do.
#ifndef LOOM_COMM_TENSOR_H_
#define LOOM_COMM_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace loom::comm {

// The element types every backend understands (PyTorch's names in comments).
enum class DType : uint8_t {
  kFloat32,   // torch.float32
  kFloat64,   // torch.float64
  kFloat16,   // torch.float16 (IEEE binary16)
  kBFloat16,  // torch.bfloat16
  kInt8,      // torch.int8
  kUInt8,     // torch.uint8
  kInt32,     // torch.int32
  kInt64,     // torch.int64
  kBool,      // torch.bool, one byte per element
};

inline constexpr DType kAllDTypes[] = {DType::kFloat32,  DType::kFloat64, DType::kFloat16,
                                       DType::kBFloat16, DType::kInt8,    DType::kUInt8,
                                       DType::kInt32,    DType::kInt64,   DType::kBool};

size_t dtypeSize(DType dtype);
// "f32", "f64", "f16", "bf16", "i8", "u8", "i32", "i64", "bool".
std::string_view dtypeName(DType dtype);
absl::StatusOr<DType> dtypeFromName(std::string_view name);
bool isFloatingPoint(DType dtype);

// Where a tensor's memory lives. CUDA tensors carry their device index.
struct Device {
  enum class Type : uint8_t { kCpu, kCuda };
  Type type = Type::kCpu;
  int index = -1;

  static Device cpu() { return {}; }
  static Device cuda(int index) { return {Type::kCuda, index}; }
  bool isCuda() const { return type == Type::kCuda; }
  // "cpu" or "cuda:3".
  std::string toString() const;

  friend bool operator==(const Device&, const Device&) = default;
};

// The dtype whose elements are stored as C++ type T (float, double,
// int8_t, uint8_t, int32_t, int64_t). Other types, std::vector<bool>'s
// packed bits among them, do not compile.
template <typename T>
constexpr DType dtypeOf() {
  if constexpr (std::is_same_v<T, float>) {
    return DType::kFloat32;
  } else if constexpr (std::is_same_v<T, double>) {
    return DType::kFloat64;
  } else if constexpr (std::is_same_v<T, int8_t>) {
    return DType::kInt8;
  } else if constexpr (std::is_same_v<T, uint8_t>) {
    return DType::kUInt8;
  } else if constexpr (std::is_same_v<T, int32_t>) {
    return DType::kInt32;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return DType::kInt64;
  } else {
    static_assert(sizeof(T) == 0, "no comm::DType is stored as this C++ type");
  }
}

// A non-owning view of a contiguous, row-major tensor. Copies share memory.
class Tensor {
 public:
  Tensor() = default;
  Tensor(void* data, DType dtype, std::vector<int64_t> shape, Device device = Device::cpu());

  // A 1-d view of all of `values`, for tests and small tools. The dtype
  // comes from the element type, so the view can never reach past the
  // vector (a float vector cannot be read as i64).
  template <typename T>
  static Tensor of(std::vector<T>& values) {
    return Tensor(values.data(), dtypeOf<T>(), {static_cast<int64_t>(values.size())});
  }

  void* data() const { return data_; }
  template <typename T>
  T* dataAs() const {
    return static_cast<T*>(data_);
  }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  Device device() const { return device_; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtypeSize(dtype_); }

  // The contiguous slice [start, start + length) along dim 0 (a chunk of an
  // all-gather output or a reduce-scatter input). Requires ndim >= 1.
  absl::StatusOr<Tensor> narrow(int64_t start, int64_t length) const;
  // The same memory seen as a 1-d tensor of numel() elements.
  Tensor flat() const;

  // "f32[2, 3] on cpu".
  std::string toString() const;

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::kFloat32;
  std::vector<int64_t> shape_;
  Device device_;
  int64_t numel_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Tensor& tensor);

// Checks that `tensor` has `dtype`, `numel` elements and lives on `device`;
// the error names `what` (e.g. "all_gather output 2") and both sides.
absl::Status checkTensor(const Tensor& tensor, std::string_view what, DType dtype, int64_t numel,
                         Device device);

}  // namespace loom::comm

#endif  // LOOM_COMM_TENSOR_H_
