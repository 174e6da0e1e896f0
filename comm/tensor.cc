// Tensor views and dtype facts for the communication layer.
#include "comm/tensor.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/errors.h"

namespace loom::comm {

size_t dtypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool:
      return 1;
  }
  return 0;
}

std::string_view dtypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "f32";
    case DType::kFloat64:
      return "f64";
    case DType::kFloat16:
      return "f16";
    case DType::kBFloat16:
      return "bf16";
    case DType::kInt8:
      return "i8";
    case DType::kUInt8:
      return "u8";
    case DType::kInt32:
      return "i32";
    case DType::kInt64:
      return "i64";
    case DType::kBool:
      return "bool";
  }
  return "?";
}

absl::StatusOr<DType> dtypeFromName(std::string_view name) {
  for (DType dtype : kAllDTypes) {
    if (dtypeName(dtype) == name) return dtype;
  }
  return invalidArgumentError(absl::StrCat("unknown dtype '", std::string(name),
                                           "'; known dtypes are f32, f64, f16, bf16, i8, u8, "
                                           "i32, i64, bool"));
}

bool isFloatingPoint(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kFloat16 ||
         dtype == DType::kBFloat16;
}

std::string Device::toString() const { return isCuda() ? absl::StrCat("cuda:", index) : "cpu"; }

Tensor::Tensor(void* data, DType dtype, std::vector<int64_t> shape, Device device)
    : data_(data), dtype_(dtype), shape_(std::move(shape)), device_(device), numel_(1) {
  for (int64_t size : shape_) numel_ *= size;
}

Tensor Tensor::constView(const void* data, DType dtype, std::vector<int64_t> shape, Device device) {
  // The view never writes through the pointer: writable_ false makes every
  // collective refuse it as an output.
  Tensor tensor(const_cast<void*>(data), dtype, std::move(shape), device);
  tensor.writable_ = false;
  return tensor;
}

absl::Status Tensor::checkViewFits(size_t count, DType dtype, const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t size : shape) {
    if (size < 0) {
      return invalidArgumentError(absl::StrCat("shape [", absl::StrJoin(shape, ", "),
                                               "] has a negative dim; dims must be at least 0"));
    }
    numel *= size;
  }
  if (numel != static_cast<int64_t>(count)) {
    return invalidArgumentError(absl::StrCat("a ", std::string(dtypeName(dtype)), "[",
                                             absl::StrJoin(shape, ", "), "] view needs ", numel,
                                             " elements but the data has ", count,
                                             "; pass a shape whose dims multiply to ", count));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Tensor::narrow(int64_t start, int64_t length) const {
  if (shape_.empty()) {
    return invalidArgumentError(
        absl::StrCat("cannot narrow the 0-d tensor ", toString(), "; give it at least one dim"));
  }
  if (start < 0 || length < 0 || start + length > shape_[0]) {
    return invalidArgumentError(absl::StrCat("narrow [", start, ", ", start + length,
                                             ") is outside dim 0 of ", toString(),
                                             "; rows run from 0 to ", shape_[0]));
  }
  std::vector<int64_t> shape = shape_;
  shape[0] = length;
  const int64_t row_elements = shape_[0] == 0 ? 0 : numel_ / shape_[0];
  char* base =
      static_cast<char*>(data_) + static_cast<size_t>(start * row_elements) * dtypeSize(dtype_);
  Tensor slice(base, dtype_, std::move(shape), device_);
  slice.writable_ = writable_;
  return slice;
}

Tensor Tensor::flat() const {
  Tensor flat(data_, dtype_, {numel_}, device_);
  flat.writable_ = writable_;
  return flat;
}

std::string Tensor::toString() const {
  return absl::StrCat(std::string(dtypeName(dtype_)), "[", absl::StrJoin(shape_, ", "), "] on ",
                      device_.toString());
}

OwnedTensor::OwnedTensor(DType dtype, std::vector<int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)), numel_(1) {
  for (int64_t& size : shape_) {
    size = std::max<int64_t>(size, 0);
    numel_ *= size;
  }
  // Value-initialised: zeros. One byte at least, so that an empty tensor
  // still has a non-null pointer.
  bytes_ = std::make_unique<std::byte[]>(std::max<size_t>(nbytes(), 1));
}

absl::Status OwnedTensor::checkElementType(DType requested) const {
  if (requested == dtype_) return absl::OkStatus();
  return invalidArgumentError(absl::StrCat("the tensor holds ", std::string(dtypeName(dtype_)),
                                           " elements, not ", std::string(dtypeName(requested)),
                                           "; read it as its own element type"));
}

std::ostream& operator<<(std::ostream& os, const Tensor& tensor) { return os << tensor.toString(); }

absl::Status checkTensor(const Tensor& tensor, std::string_view what, DType dtype, int64_t numel,
                         Device device) {
  if (tensor.dtype() != dtype || tensor.numel() != numel || !(tensor.device() == device)) {
    return invalidArgumentError(absl::StrCat(
        std::string(what), " is ", tensor.toString(), " (", tensor.numel(),
        " elements) but must be ", std::string(dtypeName(dtype)), " with ", numel, " elements on ",
        device.toString(), "; pass a tensor of that dtype, size and device"));
  }
  if (tensor.data() == nullptr && numel > 0) {
    return invalidArgumentError(
        absl::StrCat(std::string(what), " has no memory (null data pointer)"));
  }
  return absl::OkStatus();
}

}  // namespace loom::comm
