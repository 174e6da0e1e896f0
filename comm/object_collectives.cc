// The byte-level exchanges under the object collectives: byte counts first,
// then the bytes (padded to the largest object where the collective needs
// equal sizes), as torch.distributed does. A failed serialization travels as
// its error message with a negative count, -1 - the message's length, so
// that every rank that receives the slot fails with the same words. Every
// exchange's buffers go through a Stage: the host vectors themselves on the
// CPU, device copies on a GPU.
#include "comm/object_collectives.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/errors.h"
#include "comm/nccl/device_buffer.h"

namespace loom::comm {

Device::Type objectDevice(const ProcessGroup& group) {
  return group.cpuBackend().empty() && group.cudaBackend() == "nccl" ? Device::Type::kCuda
                                                                     : Device::Type::kCpu;
}

namespace object_internal {
namespace {

std::string where(const ProcessGroup& group, std::string_view op) {
  return absl::StrCat(std::string(op), " in group ", group.name(), " (rank ", group.rank(), " of ",
                      group.size(), "): ");
}

// An error of one of the call's exchanges, with the object call named first.
absl::Status withOp(const ProcessGroup& group, std::string_view op, const absl::Status& status) {
  return makeError(errorKind(status), status.code(),
                   absl::StrCat(where(group, op), status.message()));
}

// One exchange's buffers on the device the objects travel through. On the
// CPU a view is the host memory itself. On a GPU each view is a device copy
// of its host bytes, made when the view is, and run() copies the ones the
// call writes back once the (synchronous) call has returned. The device
// memory lives as long as the Stage, one exchange.
class Stage {
 public:
  Stage(const ProcessGroup& group, std::string_view op, const ObjectOptions& options)
      : group_(group),
        op_(op),
        on_gpu_(options.device.value_or(objectDevice(group)) == Device::Type::kCuda) {}

  // `bytes` of host memory at `host` as a 1-d tensor of `dtype` on the
  // stage's device; `written`: the call writes it. A staging failure is
  // kept for run() to report, and the view is then empty.
  Tensor view(void* host, size_t bytes, DType dtype, bool written) {
    const int64_t numel = static_cast<int64_t>(bytes / dtypeSize(dtype));
    if (!on_gpu_) return Tensor(host, dtype, {numel});
    if (!error_.ok()) return Tensor();
    absl::StatusOr<std::unique_ptr<nccl::DeviceBuffer>> buffer =
        nccl::DeviceBuffer::allocate(bytes);
    if (buffer.ok()) error_ = (*buffer)->copyFromHost(host);
    if (!buffer.ok() || !error_.ok()) {
      if (error_.ok()) error_ = buffer.status();
      return Tensor();
    }
    Tensor tensor((*buffer)->data(), dtype, {numel}, Device::cuda((*buffer)->device()));
    copies_.push_back(Copy{host, *std::move(buffer), written});
    return tensor;
  }

  template <typename T>
  Tensor of(std::vector<T>& values, bool written) {
    return view(values.data(), values.size() * sizeof(T), dtypeOf<T>(), written);
  }

  // Runs `call` (a synchronous ProcessGroup call on the views), then copies
  // what it wrote back to the host; the first failure, naming the object
  // call.
  template <typename Call>
  absl::Status run(Call call) {
    if (!error_.ok()) return deviceError(error_);
    if (absl::Status s = call(); !s.ok()) return withOp(group_, op_, s);
    for (const Copy& copy : copies_) {
      if (!copy.written) continue;
      if (absl::Status s = copy.device->copyToHost(copy.host); !s.ok()) return deviceError(s);
    }
    return absl::OkStatus();
  }

 private:
  struct Copy {
    void* host;
    std::unique_ptr<nccl::DeviceBuffer> device;
    bool written;
  };

  absl::Status deviceError(const absl::Status& status) const {
    return makeError(
        errorKind(status), status.code(),
        absl::StrCat(where(group_, op_),
                     "the objects travel through the current CUDA device (as PyTorch's do on a "
                     "group whose backend is NCCL; this group's CPU backend is '",
                     group_.cpuBackend(), "' and its CUDA backend '", group_.cudaBackend(),
                     "'), but staging them there failed: ", status.message(),
                     "; run where a GPU is usable, or pass ObjectOptions{.device = "
                     "Device::Type::kCpu} on a group with a CPU backend"));
  }

  const ProcessGroup& group_;
  const std::string op_;
  const bool on_gpu_;
  absl::Status error_;
  std::vector<Copy> copies_;
};

constexpr bool kWritten = true;
constexpr bool kRead = false;

absl::Status checkRoot(const ProcessGroup& group, std::string_view op, std::string_view what,
                       int root) {
  if (root >= 0 && root < group.size()) return absl::OkStatus();
  return invalidArgumentError(absl::StrCat(where(group, op), std::string(what), " is ", root,
                                           " but the group has ranks 0 to ", group.size() - 1));
}

int64_t slotSize(const Serialized& object) {
  if (object.ok()) return static_cast<int64_t>(object->size());
  return -1 - static_cast<int64_t>(object.status().message().size());
}

std::string_view slotBytes(const Serialized& object) {
  if (object.ok()) return *object;
  return {object.status().message().data(), object.status().message().size()};
}

size_t slotLength(int64_t size) { return static_cast<size_t>(size >= 0 ? size : -1 - size); }

// The serialization failure a negative slot carries, as every rank reports it.
absl::Status serializeError(const ProcessGroup& group, std::string_view op, std::string_view object,
                            std::string_view message) {
  return invalidArgumentError(absl::StrCat(where(group, op), std::string(object),
                                           " failed to serialize: ", std::string(message)));
}

std::vector<uint8_t> concatenate(const std::vector<Serialized>& objects, size_t total) {
  std::vector<uint8_t> bytes(total);
  size_t offset = 0;
  for (const Serialized& object : objects) {
    const std::string_view slot = slotBytes(object);
    if (!slot.empty()) std::memcpy(bytes.data() + offset, slot.data(), slot.size());
    offset += slot.size();
  }
  return bytes;
}

// Splits `bytes` by `sizes`; the first negative slot becomes the error,
// `name(i)` saying whose object it was.
template <typename Name>
absl::StatusOr<std::vector<std::string>> split(const ProcessGroup& group, std::string_view op,
                                               const std::vector<int64_t>& sizes,
                                               const std::vector<uint8_t>& bytes, Name name) {
  std::vector<std::string> objects;
  size_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const size_t length = slotLength(sizes[i]);
    std::string slot(reinterpret_cast<const char*>(bytes.data()) + offset, length);
    offset += length;
    if (sizes[i] < 0) return serializeError(group, op, name(i), slot);
    objects.push_back(std::move(slot));
  }
  return objects;
}

size_t total(const std::vector<int64_t>& sizes) {
  size_t sum = 0;
  for (int64_t size : sizes) sum += slotLength(size);
  return sum;
}

size_t longest(const std::vector<int64_t>& sizes) {
  size_t most = 0;
  for (int64_t size : sizes) most = std::max(most, slotLength(size));
  return most;
}

std::string rankObject(size_t rank) { return absl::StrCat("rank ", rank, "'s object"); }

// Every rank's slot size, then every rank's bytes padded to the longest:
// all_gather_object's exchange, and gather_object's when an object failed.
absl::StatusOr<std::vector<std::string>> allGatherSlots(ProcessGroup& group, std::string_view op,
                                                        const Serialized& object,
                                                        const std::vector<int64_t>& sizes,
                                                        const ObjectOptions& options) {
  const size_t width = longest(sizes);
  std::vector<uint8_t> all(width * group.size());
  if (width > 0) {
    std::vector<uint8_t> mine(width);
    const std::string_view slot = slotBytes(object);
    if (!slot.empty()) std::memcpy(mine.data(), slot.data(), slot.size());
    Stage stage(group, op, options);
    const Tensor out = stage.of(all, kWritten);
    const Tensor in = stage.of(mine, kRead);
    if (absl::Status s = stage.run(
            [&] { return group.allGatherIntoTensorSync(out, in, {.timeout = options.timeout}); });
        !s.ok()) {
      return s;
    }
  }
  std::vector<uint8_t> packed;
  for (int r = 0; r < group.size(); ++r) {
    packed.insert(packed.end(), all.begin() + r * width,
                  all.begin() + r * width + slotLength(sizes[r]));
  }
  return split(group, op, sizes, packed, rankObject);
}

absl::StatusOr<std::vector<int64_t>> allGatherSizes(ProcessGroup& group, std::string_view op,
                                                    const Serialized& object,
                                                    const ObjectOptions& options) {
  std::vector<int64_t> sizes(group.size());
  std::vector<int64_t> mine = {slotSize(object)};
  Stage stage(group, op, options);
  const Tensor out = stage.of(sizes, kWritten);
  const Tensor in = stage.of(mine, kRead);
  if (absl::Status s = stage.run(
          [&] { return group.allGatherIntoTensorSync(out, in, {.timeout = options.timeout}); });
      !s.ok()) {
    return s;
  }
  return sizes;
}

template <typename T>
absl::Status broadcastStaged(ProcessGroup& group, std::string_view op, std::vector<T>& values,
                             const BroadcastOptions& broadcast, const ObjectOptions& options) {
  Stage stage(group, op, options);
  const Tensor tensor = stage.of(values, kWritten);
  return stage.run([&] { return group.broadcastSync(tensor, broadcast); });
}

template <typename T>
absl::Status sendStaged(ProcessGroup& group, std::string_view op, std::vector<T>& values, int dst,
                        const P2POptions& p2p, const ObjectOptions& options) {
  Stage stage(group, op, options);
  const Tensor tensor = stage.of(values, kRead);
  return stage.run([&] { return group.sendSync(tensor, dst, p2p); });
}

template <typename T>
absl::Status recvStaged(ProcessGroup& group, std::string_view op, std::vector<T>& values, int src,
                        const P2POptions& p2p, const ObjectOptions& options) {
  Stage stage(group, op, options);
  const Tensor tensor = stage.of(values, kWritten);
  return stage.run([&] { return group.recvSync(tensor, src, p2p); });
}

// `whole` (a 1-d view) cut into `n` equal consecutive views, one per rank;
// none when staging failed and `whole` is empty (Stage::run reports that).
std::vector<Tensor> slices(const Tensor& whole, int n) {
  std::vector<Tensor> parts;
  if (whole.shape().empty()) return parts;
  const int64_t each = whole.numel() / n;
  for (int r = 0; r < n; ++r) parts.push_back(*whole.narrow(r * each, each));
  return parts;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> broadcastBytes(ProcessGroup& group,
                                                        const std::vector<Serialized>& objects,
                                                        size_t count, int src,
                                                        const ObjectOptions& options) {
  const std::string op = "broadcast_object_list";
  if (absl::Status s = checkRoot(group, op, "src", src); !s.ok()) return s;
  std::vector<int64_t> sizes(count);
  const bool is_src = group.rank() == src;
  if (is_src) {
    for (size_t i = 0; i < count; ++i) sizes[i] = slotSize(objects[i]);
  }
  if (count == 0) return std::vector<std::string>{};
  const BroadcastOptions broadcast = {.root = src, .timeout = options.timeout};
  if (absl::Status s = broadcastStaged(group, op, sizes, broadcast, options); !s.ok()) return s;
  const size_t bytes_total = total(sizes);
  std::vector<uint8_t> bytes =
      is_src ? concatenate(objects, bytes_total) : std::vector<uint8_t>(bytes_total);
  if (bytes_total > 0) {
    if (absl::Status s = broadcastStaged(group, op, bytes, broadcast, options); !s.ok()) return s;
  }
  return split(group, op, sizes, bytes,
               [src](size_t i) { return absl::StrCat("object ", i, " of rank ", src); });
}

absl::StatusOr<std::vector<std::string>> allGatherBytes(ProcessGroup& group,
                                                        const Serialized& object,
                                                        const ObjectOptions& options) {
  const std::string op = "all_gather_object";
  absl::StatusOr<std::vector<int64_t>> sizes = allGatherSizes(group, op, object, options);
  if (!sizes.ok()) return sizes.status();
  return allGatherSlots(group, op, object, *sizes, options);
}

absl::StatusOr<std::vector<std::string>> gatherBytes(ProcessGroup& group, const Serialized& object,
                                                     int dst, const ObjectOptions& options) {
  const std::string op = "gather_object";
  if (absl::Status s = checkRoot(group, op, "dst", dst); !s.ok()) return s;
  absl::StatusOr<std::vector<int64_t>> sizes = allGatherSizes(group, op, object, options);
  if (!sizes.ok()) return sizes.status();
  // Every rank now knows whether an object failed; if one did, every rank
  // takes the failure's message, so that all of them report it.
  if (std::any_of(sizes->begin(), sizes->end(), [](int64_t size) { return size < 0; })) {
    return allGatherSlots(group, op, object, *sizes, options);
  }
  const size_t width = longest(*sizes);
  const bool is_dst = group.rank() == dst;
  std::vector<uint8_t> all(is_dst ? width * group.size() : 0);
  if (width > 0) {
    std::vector<uint8_t> mine(width);
    if (!object->empty()) std::memcpy(mine.data(), object->data(), object->size());
    Stage stage(group, op, options);
    const Tensor in = stage.of(mine, kRead);
    std::vector<Tensor> outputs;
    if (is_dst) outputs = slices(stage.of(all, kWritten), group.size());
    if (absl::Status s = stage.run([&] {
          return group.gatherSync(outputs, in, {.root = dst, .timeout = options.timeout});
        });
        !s.ok()) {
      return s;
    }
  }
  if (!is_dst) return std::vector<std::string>{};
  std::vector<std::string> objects;
  for (int r = 0; r < group.size(); ++r) {
    objects.emplace_back(reinterpret_cast<const char*>(all.data()) + r * width,
                         slotLength((*sizes)[r]));
  }
  return objects;
}

absl::StatusOr<std::string> scatterBytes(ProcessGroup& group,
                                         const std::vector<Serialized>& objects, int src,
                                         const ObjectOptions& options) {
  const std::string op = "scatter_object_list";
  if (absl::Status s = checkRoot(group, op, "src", src); !s.ok()) return s;
  const bool is_src = group.rank() == src;
  const BroadcastOptions broadcast = {.root = src, .timeout = options.timeout};
  // src's verdict first: {width, 0} to go on, or {length of a message, 1}
  // with the message next, when src cannot take part (a wrong count or an
  // object that failed to serialize).
  std::vector<int64_t> header = {0, 0};
  std::string problem;
  std::vector<int64_t> sizes;
  if (is_src) {
    if (objects.size() != static_cast<size_t>(group.size())) {
      problem = absl::StrCat("rank ", src, " passed ", objects.size(), " input objects for ",
                             group.size(), " ranks; pass one per rank");
    }
    for (size_t r = 0; problem.empty() && r < objects.size(); ++r) {
      if (!objects[r].ok()) {
        problem = absl::StrCat("object ", r, " of rank ", src,
                               " failed to serialize: ", objects[r].status().message());
      }
      sizes.push_back(slotSize(objects[r]));
    }
    header = problem.empty() ? std::vector<int64_t>{static_cast<int64_t>(longest(sizes)), 0}
                             : std::vector<int64_t>{static_cast<int64_t>(problem.size()), 1};
  }
  if (absl::Status s = broadcastStaged(group, op, header, broadcast, options); !s.ok()) return s;
  if (header[1] != 0) {
    std::vector<uint8_t> message(problem.begin(), problem.end());
    message.resize(static_cast<size_t>(header[0]));
    if (absl::Status s = broadcastStaged(group, op, message, broadcast, options); !s.ok()) {
      return s;
    }
    return invalidArgumentError(
        absl::StrCat(where(group, op), std::string(message.begin(), message.end())));
  }
  const ScatterOptions scatter = {.root = src, .timeout = options.timeout};
  std::vector<int64_t> my_size(1);
  {
    Stage stage(group, op, options);
    const Tensor out = stage.of(my_size, kWritten);
    std::vector<Tensor> inputs;
    if (is_src) inputs = slices(stage.of(sizes, kRead), group.size());
    if (absl::Status s = stage.run([&] { return group.scatterSync(out, inputs, scatter); });
        !s.ok()) {
      return s;
    }
  }
  const size_t width = static_cast<size_t>(header[0]);
  std::vector<uint8_t> mine(width);
  if (width > 0) {
    std::vector<uint8_t> padded(is_src ? width * group.size() : 0);
    if (is_src) {
      for (int r = 0; r < group.size(); ++r) {
        const std::string& bytes = *objects[r];
        if (!bytes.empty()) std::memcpy(padded.data() + r * width, bytes.data(), bytes.size());
      }
    }
    Stage stage(group, op, options);
    const Tensor out = stage.of(mine, kWritten);
    std::vector<Tensor> inputs;
    if (is_src) inputs = slices(stage.of(padded, kRead), group.size());
    if (absl::Status s = stage.run([&] { return group.scatterSync(out, inputs, scatter); });
        !s.ok()) {
      return s;
    }
  }
  return std::string(reinterpret_cast<const char*>(mine.data()), slotLength(my_size[0]));
}

absl::Status sendBytes(ProcessGroup& group, const std::vector<Serialized>& objects, int dst,
                       const ObjectOptions& options) {
  const std::string op = "send_object_list";
  std::vector<int64_t> sizes;
  for (const Serialized& object : objects) sizes.push_back(slotSize(object));
  const P2POptions p2p = {.tag = 0, .timeout = options.timeout};
  if (absl::Status s = sendStaged(group, op, sizes, dst, p2p, options); !s.ok()) return s;
  const size_t bytes_total = total(sizes);
  if (bytes_total > 0) {
    std::vector<uint8_t> bytes = concatenate(objects, bytes_total);
    if (absl::Status s = sendStaged(group, op, bytes, dst, p2p, options); !s.ok()) return s;
  }
  for (size_t i = 0; i < objects.size(); ++i) {
    if (!objects[i].ok()) {
      return serializeError(group, op, absl::StrCat("object ", i, " of rank ", group.rank()),
                            std::string(objects[i].status().message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> recvBytes(ProcessGroup& group, size_t count, int src,
                                                   const ObjectOptions& options) {
  const std::string op = "recv_object_list";
  std::vector<int64_t> sizes(count);
  const P2POptions p2p = {.tag = 0, .timeout = options.timeout};
  if (absl::Status s = recvStaged(group, op, sizes, src, p2p, options); !s.ok()) return s;
  std::vector<uint8_t> bytes(total(sizes));
  if (!bytes.empty()) {
    if (absl::Status s = recvStaged(group, op, bytes, src, p2p, options); !s.ok()) return s;
  }
  return split(group, op, sizes, bytes,
               [src](size_t i) { return absl::StrCat("object ", i, " of rank ", src); });
}

absl::Status deserializeError(const ProcessGroup& group, std::string_view op, size_t index,
                              int from, const absl::Status& why) {
  return invalidArgumentError(absl::StrCat(where(group, op), "object ", index, " from rank ", from,
                                           " failed to deserialize: ", why.message()));
}

}  // namespace object_internal
}  // namespace loom::comm
