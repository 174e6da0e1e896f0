// initProcessGroup: one call from nothing to the world group, as
// torch.distributed.init_process_group: a backend string, an init method and
// a timeout in; the rendezvous, the store and the group are made inside.
// Backends are known by linking //comm:all_backends (this target does).
#ifndef LOOM_COMM_INIT_PROCESS_GROUP_H_
#define LOOM_COMM_INIT_PROCESS_GROUP_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/backend.h"
#include "comm/process_group.h"
#include "comm/store.h"

namespace loom::comm {

struct InitOptions {
  // "gloo", "mpi" or "nccl" (case-insensitive) for every device type the
  // backend serves, or one per device type: "cpu:gloo,cuda:nccl". Empty
  // means that pair, PyTorch's default.
  std::string backend = "";
  // env:// (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), tcp://host:port or
  // file:///path, as comm/rendezvous.h describes. Unused when `store` is set.
  std::string init_method = "env://";
  // Bounds the rendezvous and is the group's default call timeout. Unset:
  // defaultTimeout(backend).
  std::optional<absl::Duration> timeout = std::nullopt;
  // Required with `store`; otherwise they fill in what the init method and
  // environment lack (and must agree with them).
  std::optional<int> rank = std::nullopt;
  std::optional<int> world_size = std::nullopt;
  // A store every rank shares, instead of a rendezvous (torch's `store=`).
  std::shared_ptr<Store> store = nullptr;
  std::string group_name = "default";
  CollectiveChecks checks = CollectiveChecks::kCheap;
  int flight_recorder_entries = 2048;
  // Reads an environment variable for the rendezvous; empty means the
  // process environment (tests that run ranks as threads pass their own).
  std::function<std::optional<std::string>(const std::string&)> getenv = nullptr;
};

// PyTorch's default for `spec`: kDefaultNcclTimeout for "nccl" alone,
// kDefaultTimeout for everything else.
absl::Duration defaultTimeout(std::string_view spec);

// Joins the job and creates its world group. Errors in the options (an
// unknown backend, a malformed init method) come back before any network
// traffic, with the same words on every rank.
absl::StatusOr<std::shared_ptr<ProcessGroup>> initProcessGroup(const InitOptions& options = {});

}  // namespace loom::comm

#endif  // LOOM_COMM_INIT_PROCESS_GROUP_H_
