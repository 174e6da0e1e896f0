// Default "unsupported" implementations of Backend calls, and the backend
// registry.
#include "comm/backend.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "comm/errors.h"

namespace loom::comm {
namespace {

struct Registration {
  std::vector<Device::Type> devices;
  BackendFactory factory;
};

struct Registry {
  absl::Mutex mu;
  std::map<std::string, Registration, std::less<>> backends ABSL_GUARDED_BY(mu);
};

Registry& registry() {
  static Registry* const kRegistry = new Registry();
  return *kRegistry;
}

std::string_view deviceTypeName(Device::Type type) {
  return type == Device::Type::kCuda ? "cuda" : "cpu";
}

}  // namespace

absl::Status Backend::unsupported(const CollectiveInfo& info) const {
  return makeError(
      ErrorKind::kBackend, absl::StatusCode::kUnimplemented,
      absl::StrCat("backend ", std::string(name()), " does not support ", info.op, " (",
                   info.describe(), "); use a backend that does, see docs/comm.md"));
}

#define LOOM_UNSUPPORTED(signature) \
  Backend::WorkOr Backend::signature { return unsupported(info); }

LOOM_UNSUPPORTED(broadcast(Tensor, const BroadcastOptions&, const CollectiveInfo& info))
LOOM_UNSUPPORTED(allReduce(Tensor, const AllReduceOptions&, const CollectiveInfo& info))
LOOM_UNSUPPORTED(reduce(Tensor, const ReduceOptions&, const CollectiveInfo& info))
LOOM_UNSUPPORTED(allGather(std::vector<Tensor>, Tensor, const AllGatherOptions&,
                           const CollectiveInfo& info))
LOOM_UNSUPPORTED(allGatherIntoTensor(Tensor, Tensor, const AllGatherOptions&,
                                     const CollectiveInfo& info))
LOOM_UNSUPPORTED(gather(std::vector<Tensor>, Tensor, const GatherOptions&,
                        const CollectiveInfo& info))
LOOM_UNSUPPORTED(scatter(Tensor, std::vector<Tensor>, const ScatterOptions&,
                         const CollectiveInfo& info))
LOOM_UNSUPPORTED(reduceScatter(Tensor, std::vector<Tensor>, const ReduceScatterOptions&,
                               const CollectiveInfo& info))
LOOM_UNSUPPORTED(reduceScatterTensor(Tensor, Tensor, const ReduceScatterOptions&,
                                     const CollectiveInfo& info))
LOOM_UNSUPPORTED(allToAll(std::vector<Tensor>, std::vector<Tensor>, const AllToAllOptions&,
                          const CollectiveInfo& info))
LOOM_UNSUPPORTED(allToAllSingle(Tensor, Tensor, std::vector<int64_t>, std::vector<int64_t>,
                                const AllToAllOptions&, const CollectiveInfo& info))
LOOM_UNSUPPORTED(barrier(const BarrierOptions&, const CollectiveInfo& info))
LOOM_UNSUPPORTED(send(Tensor, int, const P2POptions&, const CollectiveInfo& info))
LOOM_UNSUPPORTED(recv(Tensor, int, const P2POptions&, const CollectiveInfo& info))
LOOM_UNSUPPORTED(recvAnySource(Tensor, const P2POptions&, const CollectiveInfo& info))

#undef LOOM_UNSUPPORTED

void registerBackend(std::string name, std::vector<Device::Type> devices, BackendFactory factory) {
  Registry& r = registry();
  absl::MutexLock lock(&r.mu);
  r.backends[std::move(name)] = Registration{std::move(devices), std::move(factory)};
}

std::vector<std::string> registeredBackends() {
  Registry& r = registry();
  absl::MutexLock lock(&r.mu);
  std::vector<std::string> names;
  for (const auto& [name, registration] : r.backends) names.push_back(name);
  return names;
}

namespace {

// The registration of `name` if it serves `device`, else the error every
// caller reports (the same words on every rank, which all pass the same
// name).
absl::StatusOr<Registration> lookUp(std::string_view name, Device::Type device) {
  Registry& r = registry();
  absl::MutexLock lock(&r.mu);
  auto it = r.backends.find(name);
  if (it == r.backends.end()) {
    std::vector<std::string> names;
    for (const auto& [known, registration] : r.backends) names.push_back(known);
    return invalidArgumentError(absl::StrCat(
        "unknown backend '", std::string(name), "'; registered backends are ",
        names.empty() ? "none (link //comm:all_backends)" : absl::StrJoin(names, ", ")));
  }
  const std::vector<Device::Type>& devices = it->second.devices;
  if (std::find(devices.begin(), devices.end(), device) == devices.end()) {
    return invalidArgumentError(absl::StrCat("backend ", std::string(name), " does not serve ",
                                             std::string(deviceTypeName(device)),
                                             " tensors; pick another backend for them"));
  }
  return it->second;
}

}  // namespace

absl::Status checkBackend(std::string_view name, Device::Type device) {
  return lookUp(name, device).status();
}

absl::StatusOr<std::vector<Device::Type>> backendDevices(std::string_view name) {
  {
    Registry& r = registry();
    absl::MutexLock lock(&r.mu);
    auto it = r.backends.find(name);
    if (it != r.backends.end()) return it->second.devices;
  }
  return lookUp(name, Device::Type::kCpu).status();
}

namespace {

constexpr char kDefaultSpec[] = "cpu:gloo,cuda:nccl";

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

absl::Status specError(std::string_view spec, std::string_view why) {
  return invalidArgumentError(absl::StrCat("backend '", std::string(spec), "': ", std::string(why),
                                           "; pass gloo, mpi, nccl or a list such as ",
                                           kDefaultSpec));
}

}  // namespace

absl::StatusOr<BackendChoice> parseBackendSpec(std::string_view spec) {
  const std::string text = lower(spec.empty() ? std::string_view(kDefaultSpec) : spec);
  BackendChoice choice;
  if (text.find(':') == std::string::npos) {
    absl::StatusOr<std::vector<Device::Type>> devices = backendDevices(text);
    if (!devices.ok()) return devices.status();
    for (Device::Type device : *devices) {
      (device == Device::Type::kCuda ? choice.cuda : choice.cpu) = text;
    }
    return choice;
  }
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    const std::vector<std::string> parts = absl::StrSplit(item, ':');
    if (parts.size() != 2 || parts[1].empty()) {
      return specError(spec, absl::StrCat("'", std::string(item), "' is not device:backend"));
    }
    const bool cuda = parts[0] == "cuda";
    if (!cuda && parts[0] != "cpu") {
      return specError(spec, absl::StrCat("unknown device type '", parts[0], "' (cpu or cuda)"));
    }
    std::string& slot = cuda ? choice.cuda : choice.cpu;
    if (!slot.empty()) return specError(spec, absl::StrCat(parts[0], " is given twice"));
    if (absl::Status s = checkBackend(parts[1], cuda ? Device::Type::kCuda : Device::Type::kCpu);
        !s.ok()) {
      return s;
    }
    slot = parts[1];
  }
  return choice;
}

absl::StatusOr<std::unique_ptr<Backend>> createBackend(std::string_view name, Device::Type device,
                                                       const BackendContext& context) {
  absl::StatusOr<Registration> registration = lookUp(name, device);
  if (!registration.ok()) return registration.status();
  return registration->factory(context);
}

}  // namespace loom::comm
