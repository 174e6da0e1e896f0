// The tensor view collectives operate on: a pointer, a dtype, a contiguous
// shape and the device that holds the memory, plus OwnedTensor, a CPU tensor
// that owns its bytes. Collectives take views; whoever made a view keeps the
// memory alive until the call completes.
#ifndef LOOM_COMM_TENSOR_H_
#define LOOM_COMM_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <span>
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
// A view made from const data is read-only: collectives accept it where
// they only read (inputs, a broadcast's root, a send) and refuse it where
// they would write.
class Tensor {
 public:
  Tensor() = default;
  // A view of raw memory (device memory among it) that the caller vouches
  // for: `data` must hold the shape's elements of `dtype`. Prefer of() and
  // view(), which check it.
  Tensor(void* data, DType dtype, std::vector<int64_t> shape, Device device = Device::cpu());
  // The read-only form of the constructor above.
  static Tensor constView(const void* data, DType dtype, std::vector<int64_t> shape,
                          Device device = Device::cpu());

  // A 1-d view of all of `values`. The dtype comes from the element type, so
  // the view can never reach past the vector (a float vector cannot be read
  // as i64); const vectors give read-only views, and temporaries, which
  // would leave the view dangling, do not compile.
  template <typename T>
  static Tensor of(std::vector<T>& values) {
    return Tensor(values.data(), dtypeOf<T>(), {static_cast<int64_t>(values.size())});
  }
  template <typename T>
  static Tensor of(const std::vector<T>& values) {
    return constView(values.data(), dtypeOf<T>(), {static_cast<int64_t>(values.size())});
  }
  template <typename T>
  static Tensor of(std::vector<T>&& values) = delete;
  template <typename T>
  static Tensor of(const std::vector<T>&& values) = delete;

  // A view of `values` with `shape`, whose elements must number exactly
  // values.size() (an error otherwise); read-only when T is const.
  template <typename T>
  static absl::StatusOr<Tensor> view(std::span<T> values, std::vector<int64_t> shape) {
    using Element = std::remove_const_t<T>;
    absl::Status fits = checkViewFits(values.size(), dtypeOf<Element>(), shape);
    if (!fits.ok()) return fits;
    if constexpr (std::is_const_v<T>) {
      return constView(values.data(), dtypeOf<Element>(), std::move(shape));
    } else {
      return Tensor(values.data(), dtypeOf<Element>(), std::move(shape));
    }
  }
  template <typename T>
  static absl::StatusOr<Tensor> view(std::vector<T>& values, std::vector<int64_t> shape) {
    return view(std::span<T>(values), std::move(shape));
  }
  template <typename T>
  static absl::StatusOr<Tensor> view(const std::vector<T>& values, std::vector<int64_t> shape) {
    return view(std::span<const T>(values), std::move(shape));
  }
  template <typename T>
  static absl::StatusOr<Tensor> view(std::vector<T>&& values, std::vector<int64_t> shape) = delete;

  // False for views of const data: collectives must not write through it.
  bool writable() const { return writable_; }
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
  bool writable_ = true;

  // OK when `count` elements of `dtype` are exactly what `shape` needs.
  static absl::Status checkViewFits(size_t count, DType dtype, const std::vector<int64_t>& shape);
};

// A contiguous CPU tensor that owns its memory (zero-filled), the comm
// counterpart of a torch.Tensor made on the CPU. Move-only; view() hands out
// the Tensor that collectives take, valid while the OwnedTensor lives.
class OwnedTensor {
 public:
  OwnedTensor() = default;
  // Every dim must be non-negative (a negative one counts as 0).
  OwnedTensor(DType dtype, std::vector<int64_t> shape);
  // A 1-d tensor holding `values`, its dtype from the element type.
  template <typename T>
  static OwnedTensor of(const std::vector<T>& values) {
    OwnedTensor tensor(dtypeOf<T>(), {static_cast<int64_t>(values.size())});
    if (!values.empty()) std::memcpy(tensor.bytes_.get(), values.data(), tensor.nbytes());
    return tensor;
  }

  Tensor view() { return Tensor(bytes_.get(), dtype_, shape_); }
  // Read-only.
  Tensor view() const { return Tensor::constView(bytes_.get(), dtype_, shape_); }

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtypeSize(dtype_); }

  // The elements as T; an error unless T is the dtype's storage type.
  template <typename T>
  absl::StatusOr<std::span<T>> values() {
    if (absl::Status s = checkElementType(dtypeOf<T>()); !s.ok()) return s;
    return std::span<T>(reinterpret_cast<T*>(bytes_.get()), static_cast<size_t>(numel_));
  }
  template <typename T>
  absl::StatusOr<std::span<const T>> values() const {
    if (absl::Status s = checkElementType(dtypeOf<T>()); !s.ok()) return s;
    return std::span<const T>(reinterpret_cast<const T*>(bytes_.get()),
                              static_cast<size_t>(numel_));
  }
  // The raw bytes, for the dtypes without a C++ storage type (f16, bf16,
  // bool).
  std::span<std::byte> bytes() { return {bytes_.get(), nbytes()}; }
  std::span<const std::byte> bytes() const { return {bytes_.get(), nbytes()}; }

 private:
  absl::Status checkElementType(DType requested) const;

  DType dtype_ = DType::kFloat32;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  std::unique_ptr<std::byte[]> bytes_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& tensor);

// Checks that `tensor` has `dtype`, `numel` elements and lives on `device`;
// the error names `what` (e.g. "all_gather output 2") and both sides.
absl::Status checkTensor(const Tensor& tensor, std::string_view what, DType dtype, int64_t numel,
                         Device device);

}  // namespace loom::comm

#endif  // LOOM_COMM_TENSOR_H_
