// Default "unsupported" implementations of Backend calls, and the backend
// registry.
#include "comm/backend.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

absl::StatusOr<std::unique_ptr<Backend>> createBackend(std::string_view name, Device::Type device,
                                                       const BackendContext& context) {
  absl::StatusOr<Registration> registration = lookUp(name, device);
  if (!registration.ok()) return registration.status();
  return registration->factory(context);
}

}  // namespace loom::comm
