// Subgroups with their own options and the rank conversions, as
// torch.distributed.new_group(ranks, timeout=..., backend=...,
// use_local_synchronization=True), get_global_rank and get_group_rank. Run
// under the launcher on 4 ranks:
//   bazel-bin/tools/launch/launch --nproc=4 -- bazel-bin/examples/comm/subgroups
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/init_process_group.h"
#include "comm/process_group.h"

namespace {

using loom::comm::NewGroupOptions;
using loom::comm::ProcessGroup;
using loom::comm::Tensor;

absl::Status run(ProcessGroup& world) {
  // Ranks 3 and 1, in that order, with a one-minute timeout; only they
  // call it (local synchronization), so ranks 0 and 2 go straight on.
  if (world.rank() == 1 || world.rank() == 3) {
    NewGroupOptions options;
    options.backend = "gloo";
    options.timeout = absl::Minutes(1);
    options.use_local_synchronization = true;
    absl::StatusOr<std::shared_ptr<ProcessGroup>> pair = world.newGroup({3, 1}, options);
    if (!pair.ok()) return pair.status();
    ProcessGroup& group = **pair;
    absl::StatusOr<int> global = group.globalRank(group.rank());
    if (!global.ok()) return global.status();
    std::vector<int64_t> value = {world.rank()};
    if (absl::Status s = group.allReduceSync(Tensor::of(value)); !s.ok()) return s;
    std::printf("group %s: rank %d of %d is global rank %d; sum %ld; timeout %s\n",
                group.name().c_str(), group.rank(), group.size(), *global,
                static_cast<long>(value[0]), absl::FormatDuration(group.timeout()).c_str());
  }
  // Every rank makes this one, in the usual way.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> evens = world.newGroup({0, 2});
  if (!evens.ok()) return evens.status();
  if (*evens != nullptr) {
    absl::StatusOr<int> group_rank = (*evens)->groupRank(world.rank());
    if (!group_rank.ok()) return group_rank.status();
    std::printf("global rank %d is rank %d of group %s\n", world.rank(), *group_rank,
                (*evens)->name().c_str());
  }
  return absl::OkStatus();
}

}  // namespace

int main() {
  loom::comm::InitOptions options;
  options.backend = "gloo";
  absl::StatusOr<std::shared_ptr<ProcessGroup>> world = loom::comm::initProcessGroup(options);
  const absl::Status status = world.ok() ? run(**world) : world.status();
  if (!status.ok()) {
    std::fprintf(stderr, "subgroups: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
