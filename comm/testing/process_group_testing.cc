// Typed test buffers and the thread-per-rank runner.
#include "comm/testing/process_group_testing.h"

#include <cmath>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/all_backends.h"
#include "comm/gloo/gloo_reduce.h"
#include "comm/hash_store.h"
#include "gloo/types.h"
#include "gtest/gtest.h"

namespace loom::comm::testing {
namespace {

template <typename T>
T load(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

template <typename T>
void store(uint8_t* p, T value) {
  std::memcpy(p, &value, sizeof(T));
}

}  // namespace

Buffer::Buffer(DType dtype, std::vector<int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)), numel_(1) {
  for (int64_t size : shape_) numel_ *= size;
  bytes_.assign(static_cast<size_t>(numel_) * dtypeSize(dtype_), 0);
}

Buffer Buffer::of(DType dtype, const std::vector<double>& values) {
  Buffer buffer(dtype, std::vector<int64_t>{static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) buffer.set(static_cast<int64_t>(i), values[i]);
  return buffer;
}

Tensor Buffer::tensor() const { return Tensor(bytes_.data(), dtype_, shape_); }

double Buffer::at(int64_t i) const {
  const uint8_t* p = bytes_.data() + static_cast<size_t>(i) * dtypeSize(dtype_);
  switch (dtype_) {
    case DType::kFloat32:
      return load<float>(p);
    case DType::kFloat64:
      return load<double>(p);
    case DType::kFloat16: {
      ::gloo::float16 half;
      half.x = load<uint16_t>(p);
      return ::gloo::cpu_half2float(half);
    }
    case DType::kBFloat16:
      return gloo::bf16ToFloat(load<gloo::BFloat16>(p));
    case DType::kInt8:
      return load<int8_t>(p);
    case DType::kUInt8:
      return load<uint8_t>(p);
    case DType::kInt32:
      return load<int32_t>(p);
    case DType::kInt64:
      return static_cast<double>(load<int64_t>(p));
    case DType::kBool:
      return load<uint8_t>(p) != 0 ? 1 : 0;
  }
  return 0;
}

void Buffer::set(int64_t i, double value) {
  uint8_t* p = bytes_.data() + static_cast<size_t>(i) * dtypeSize(dtype_);
  switch (dtype_) {
    case DType::kFloat32:
      return store<float>(p, static_cast<float>(value));
    case DType::kFloat64:
      return store<double>(p, value);
    case DType::kFloat16:
      return store<uint16_t>(p, ::gloo::cpu_float2half_rn(static_cast<float>(value)).x);
    case DType::kBFloat16:
      return store<gloo::BFloat16>(p, gloo::floatToBf16(static_cast<float>(value)));
    case DType::kInt8:
      return store<int8_t>(p, static_cast<int8_t>(value));
    case DType::kUInt8:
      return store<uint8_t>(p, static_cast<uint8_t>(value));
    case DType::kInt32:
      return store<int32_t>(p, static_cast<int32_t>(value));
    case DType::kInt64:
      return store<int64_t>(p, static_cast<int64_t>(value));
    case DType::kBool:
      return store<uint8_t>(p, value != 0 ? 1 : 0);
  }
}

std::vector<double> Buffer::values() const {
  std::vector<double> result;
  for (int64_t i = 0; i < numel_; ++i) result.push_back(at(i));
  return result;
}

std::string describe(const Buffer& buffer) {
  return absl::StrCat(std::string(dtypeName(buffer.dtype())), "[",
                      absl::StrJoin(buffer.values(), ", "), "]");
}

double testValue(DType dtype, int rank, int64_t i, int salt) {
  const int64_t mix = (rank * 7 + i * 3 + salt * 5) % 7;
  switch (dtype) {
    case DType::kBool:
      return static_cast<double>(mix % 2);
    case DType::kUInt8:
      return static_cast<double>(mix % 4);
    default:
      return static_cast<double>(mix - 3);
  }
}

void runRanks(int size, const std::function<void(ProcessGroup&)>& body,
              ProcessGroupOptions options) {
  runRanks(size, std::make_shared<HashStore>(absl::Seconds(30)), body, std::move(options));
}

void runRanks(int size, const std::shared_ptr<Store>& store,
              const std::function<void(ProcessGroup&)>& body, ProcessGroupOptions options) {
  runRanksShared(
      size, [&](std::shared_ptr<ProcessGroup> group) { body(*group); }, std::move(options), store);
}

void runRanksShared(int size, const std::function<void(std::shared_ptr<ProcessGroup>)>& body,
                    ProcessGroupOptions options) {
  runRanksShared(size, body, std::move(options), std::make_shared<HashStore>(absl::Seconds(30)));
}

void runRanksShared(int size, const std::function<void(std::shared_ptr<ProcessGroup>)>& body,
                    ProcessGroupOptions options, const std::shared_ptr<Store>& store) {
  registerAllBackends();
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < size; ++rank) {
    ranks.emplace_back([&, rank] {
      absl::StatusOr<std::shared_ptr<ProcessGroup>> group =
          ProcessGroup::create(store, rank, size, options);
      if (!group.ok()) {
        ADD_FAILURE() << "rank " << rank << ": " << group.status();
        return;
      }
      body(*std::move(group));
    });
  }
  for (std::thread& rank : ranks) rank.join();
}

}  // namespace loom::comm::testing
