// Collectives over objects rather than tensors, as torch.distributed's
// broadcast_object_list, all_gather_object, gather_object,
// scatter_object_list, send_object_list and recv_object_list. Objects travel
// as byte strings: ObjectSerializer<T> turns a T into bytes and back
// (std::string and trivially copyable types have one; specialise it for
// your own types). As in PyTorch each call first exchanges the byte counts
// and then the bytes, synchronously, through the group's device: the
// current CUDA device where the group's only backend is nccl (the bytes are
// staged through device memory, as PyTorch moves them to
// torch.cuda.current_device()), else the CPU.
//
// Errors name the rank whose object failed: an object that cannot be
// serialized still takes part in the exchange (its error message travels in
// its place), so every rank that receives it reports the same words rather
// than waiting for bytes that never come.
#ifndef LOOM_COMM_OBJECT_COLLECTIVES_H_
#define LOOM_COMM_OBJECT_COLLECTIVES_H_

#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/process_group.h"

namespace loom::comm {

struct ObjectOptions {
  // Bounds each of the call's exchanges; unset means the group's timeout.
  std::optional<absl::Duration> timeout = std::nullopt;
  // What the bytes travel through (PyTorch's `device` argument): kCpu, or
  // kCuda for the calling thread's current CUDA device. Unset: the group's
  // device (objectDevice).
  std::optional<Device::Type> device = std::nullopt;
};

// The device an object collective on `group` uses without
// ObjectOptions::device: CUDA where the group has no CPU backend and its
// CUDA backend is nccl (torch.distributed's rule for a group whose backend
// is NCCL), else the CPU.
Device::Type objectDevice(const ProcessGroup& group);

// The serializer hook: serialize(const T&) -> StatusOr<std::string> and
// deserialize(std::string_view) -> StatusOr<T>. A type without one does not
// compile in the calls below.
template <typename T, typename Enable = void>
struct ObjectSerializer;

template <>
struct ObjectSerializer<std::string> {
  static absl::StatusOr<std::string> serialize(const std::string& object) { return object; }
  static absl::StatusOr<std::string> deserialize(std::string_view bytes) {
    return std::string(bytes);
  }
};

// Trivially copyable types travel as their bytes (so both sides must share
// the layout, as ranks of one build do).
template <typename T>
struct ObjectSerializer<T, std::enable_if_t<std::is_trivially_copyable_v<T>>> {
  static absl::StatusOr<std::string> serialize(const T& object) {
    return std::string(reinterpret_cast<const char*>(&object), sizeof(T));
  }
  static absl::StatusOr<T> deserialize(std::string_view bytes) {
    if (bytes.size() != sizeof(T)) {
      return absl::InvalidArgumentError(
          "got " + std::to_string(bytes.size()) + " bytes for a trivially copyable object of " +
          std::to_string(sizeof(T)) + "; every rank must send the same type");
    }
    T object;
    std::memcpy(&object, bytes.data(), sizeof(T));
    return object;
  }
};

// The byte-level exchanges the templates below run on. An entry that is an
// error is that object's serialization failure.
namespace object_internal {

using Serialized = absl::StatusOr<std::string>;

// `objects` has `count` entries on `src` and is empty elsewhere; returns the
// bytes on every rank (src's own included).
absl::StatusOr<std::vector<std::string>> broadcastBytes(ProcessGroup& group,
                                                        const std::vector<Serialized>& objects,
                                                        size_t count, int src,
                                                        const ObjectOptions& options);
absl::StatusOr<std::vector<std::string>> allGatherBytes(ProcessGroup& group,
                                                        const Serialized& object,
                                                        const ObjectOptions& options);
// The group's objects on `dst`, nothing elsewhere.
absl::StatusOr<std::vector<std::string>> gatherBytes(ProcessGroup& group, const Serialized& object,
                                                     int dst, const ObjectOptions& options);
// `objects` has one entry per rank on `src` and is empty elsewhere.
absl::StatusOr<std::string> scatterBytes(ProcessGroup& group,
                                         const std::vector<Serialized>& objects, int src,
                                         const ObjectOptions& options);
absl::Status sendBytes(ProcessGroup& group, const std::vector<Serialized>& objects, int dst,
                       const ObjectOptions& options);
absl::StatusOr<std::vector<std::string>> recvBytes(ProcessGroup& group, size_t count, int src,
                                                   const ObjectOptions& options);

// "<op> in group G (rank r of n): object <index> from rank <from> failed to
// deserialize: <why>".
absl::Status deserializeError(const ProcessGroup& group, std::string_view op, size_t index,
                              int from, const absl::Status& why);

template <typename T>
std::vector<Serialized> serializeAll(const std::vector<T>& objects) {
  std::vector<Serialized> bytes;
  bytes.reserve(objects.size());
  for (const T& object : objects) bytes.push_back(ObjectSerializer<T>::serialize(object));
  return bytes;
}

// Deserializes bytes[i] into objects[i]; `from(i)` is the rank that sent it.
template <typename T, typename From>
absl::Status deserializeAll(const ProcessGroup& group, std::string_view op,
                            const std::vector<std::string>& bytes, std::vector<T>& objects,
                            From from) {
  std::vector<T> out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    absl::StatusOr<T> object = ObjectSerializer<T>::deserialize(bytes[i]);
    if (!object.ok()) return deserializeError(group, op, i, from(i), object.status());
    out.push_back(*std::move(object));
  }
  objects = std::move(out);
  return absl::OkStatus();
}

}  // namespace object_internal

// Every rank passes a list of the same length; afterwards every rank holds
// src's objects (src's list is left as it is).
template <typename T>
absl::Status broadcastObjectList(ProcessGroup& group, std::vector<T>& objects, int src = 0,
                                 const ObjectOptions& options = {}) {
  const bool is_src = group.rank() == src;
  absl::StatusOr<std::vector<std::string>> bytes = object_internal::broadcastBytes(
      group,
      is_src ? object_internal::serializeAll(objects) : std::vector<object_internal::Serialized>{},
      objects.size(), src, options);
  if (!bytes.ok()) return bytes.status();
  if (is_src) return absl::OkStatus();
  return object_internal::deserializeAll(group, "broadcast_object_list", *bytes, objects,
                                         [src](size_t) { return src; });
}

// outputs[r] becomes rank r's object, on every rank.
template <typename T>
absl::Status allGatherObject(ProcessGroup& group, std::vector<T>& outputs, const T& object,
                             const ObjectOptions& options = {}) {
  absl::StatusOr<std::vector<std::string>> bytes =
      object_internal::allGatherBytes(group, ObjectSerializer<T>::serialize(object), options);
  if (!bytes.ok()) return bytes.status();
  return object_internal::deserializeAll(group, "all_gather_object", *bytes, outputs,
                                         [](size_t r) { return static_cast<int>(r); });
}

// On `dst`, outputs[r] becomes rank r's object; `outputs` is not touched
// elsewhere.
template <typename T>
absl::Status gatherObject(ProcessGroup& group, const T& object, std::vector<T>& outputs,
                          int dst = 0, const ObjectOptions& options = {}) {
  absl::StatusOr<std::vector<std::string>> bytes =
      object_internal::gatherBytes(group, ObjectSerializer<T>::serialize(object), dst, options);
  if (!bytes.ok()) return bytes.status();
  if (group.rank() != dst) return absl::OkStatus();
  return object_internal::deserializeAll(group, "gather_object", *bytes, outputs,
                                         [](size_t r) { return static_cast<int>(r); });
}

// `inputs` holds one object per rank on `src` (ignored elsewhere); every
// rank's `output` becomes its own.
template <typename T>
absl::Status scatterObjectList(ProcessGroup& group, T& output, const std::vector<T>& inputs,
                               int src = 0, const ObjectOptions& options = {}) {
  absl::StatusOr<std::string> bytes = object_internal::scatterBytes(
      group,
      group.rank() == src ? object_internal::serializeAll(inputs)
                          : std::vector<object_internal::Serialized>{},
      src, options);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<T> object = ObjectSerializer<T>::deserialize(*bytes);
  if (!object.ok()) {
    return object_internal::deserializeError(group, "scatter_object_list", group.rank(), src,
                                             object.status());
  }
  output = *std::move(object);
  return absl::OkStatus();
}

// Sends `objects` to `dst`, whose recvObjectList passes a list of the same
// length.
template <typename T>
absl::Status sendObjectList(ProcessGroup& group, const std::vector<T>& objects, int dst,
                            const ObjectOptions& options = {}) {
  return object_internal::sendBytes(group, object_internal::serializeAll(objects), dst, options);
}

// Receives src's list into `objects`, which holds as many entries as were
// sent.
template <typename T>
absl::Status recvObjectList(ProcessGroup& group, std::vector<T>& objects, int src,
                            const ObjectOptions& options = {}) {
  absl::StatusOr<std::vector<std::string>> bytes =
      object_internal::recvBytes(group, objects.size(), src, options);
  if (!bytes.ok()) return bytes.status();
  return object_internal::deserializeAll(group, "recv_object_list", *bytes, objects,
                                         [src](size_t) { return src; });
}

}  // namespace loom::comm

#endif  // LOOM_COMM_OBJECT_COLLECTIVES_H_
