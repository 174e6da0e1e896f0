// initProcessGroup: backend string, timeout default, rendezvous, group.
#include "comm/init_process_group.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/backend.h"
#include "comm/errors.h"
#include "comm/rendezvous.h"

namespace loom::comm {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

absl::Duration defaultTimeout(std::string_view spec) {
  return lower(spec) == "nccl" ? kDefaultNcclTimeout : kDefaultTimeout;
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> initProcessGroup(const InitOptions& options) {
  const absl::Duration timeout = options.timeout.value_or(defaultTimeout(options.backend));
  absl::StatusOr<BackendChoice> backends = parseBackendSpec(options.backend);
  if (!backends.ok()) {
    return makeError(errorKind(backends.status()), backends.status().code(),
                     absl::StrCat("init_process_group: ", backends.status().message()));
  }
  if (timeout <= absl::ZeroDuration()) {
    return invalidArgumentError(absl::StrCat("init_process_group: timeout must be positive; got ",
                                             absl::FormatDuration(timeout)));
  }

  std::shared_ptr<Store> store = options.store;
  int rank = 0;
  int world_size = 0;
  if (store != nullptr) {
    if (!options.rank.has_value() || !options.world_size.has_value()) {
      return invalidArgumentError(
          "init_process_group: a store needs rank and world_size in the options too");
    }
    rank = *options.rank;
    world_size = *options.world_size;
  } else {
    RendezvousOptions rendezvous_options;
    rendezvous_options.rank = options.rank;
    rendezvous_options.world_size = options.world_size;
    rendezvous_options.timeout = timeout;
    rendezvous_options.getenv = options.getenv;
    absl::StatusOr<RendezvousResult> joined = rendezvous(options.init_method, rendezvous_options);
    if (!joined.ok()) return joined.status();
    store = joined->store;
    rank = joined->rank;
    world_size = joined->world_size;
  }

  ProcessGroupOptions group_options;
  group_options.cpu_backend = backends->cpu;
  group_options.cuda_backend = backends->cuda;
  group_options.timeout = timeout;
  group_options.group_name = options.group_name;
  group_options.checks = options.checks;
  group_options.flight_recorder_entries = options.flight_recorder_entries;
  return ProcessGroup::create(std::move(store), rank, world_size, std::move(group_options));
}

}  // namespace loom::comm
