// The object collectives of torch.distributed, as its documentation shows
// them, written against comm's public API: broadcast_object_list,
// all_gather_object, gather_object, scatter_object_list and
// send/recv_object_list, with strings, a trivially copyable struct and a
// type of the program's own with a serializer. Run under the launcher on 3
// ranks:
//   bazel-bin/tools/launch/launch --nproc=3 -- bazel-bin/examples/comm/object_collectives
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "comm/init_process_group.h"
#include "comm/object_collectives.h"
#include "comm/process_group.h"

// A type of the program's own: a name and a step count, sent as "name@step".
struct Checkpoint {
  std::string name;
  int step = 0;
};

template <>
struct loom::comm::ObjectSerializer<Checkpoint> {
  static absl::StatusOr<std::string> serialize(const Checkpoint& checkpoint) {
    return absl::StrCat(checkpoint.name, "@", checkpoint.step);
  }
  static absl::StatusOr<Checkpoint> deserialize(std::string_view bytes) {
    const std::vector<std::string> parts = absl::StrSplit(std::string(bytes), '@');
    Checkpoint checkpoint;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &checkpoint.step)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", std::string(bytes), "' is not name@step"));
    }
    checkpoint.name = parts[0];
    return checkpoint;
  }
};

namespace {

using loom::comm::ProcessGroup;

// A trivially copyable struct travels as its bytes.
struct Metrics {
  int rank;
  double loss;
};

absl::Status run(ProcessGroup& world) {
  const int rank = world.rank();
  // broadcast_object_list: rank 0's list reaches everyone; the others pass
  // a list of the same length.
  std::vector<std::string> objects(3);
  if (rank == 0) objects = {"foo", "12", "{1: 2}"};
  if (absl::Status s = loom::comm::broadcastObjectList(world, objects, /*src=*/0); !s.ok()) {
    return s;
  }
  std::printf("broadcast_object_list: [%s]\n", absl::StrJoin(objects, ", ").c_str());

  // all_gather_object: every rank's object, of any size, on every rank.
  std::vector<std::string> gathered;
  const std::string mine = std::string(rank + 1, 'x');
  if (absl::Status s = loom::comm::allGatherObject(world, gathered, mine); !s.ok()) return s;
  std::printf("all_gather_object: [%s]\n", absl::StrJoin(gathered, ", ").c_str());

  // gather_object: the same, on rank 0 only.
  std::vector<Metrics> metrics;
  const Metrics own = {rank, 1.0 / (rank + 1)};
  if (absl::Status s = loom::comm::gatherObject(world, own, metrics, /*dst=*/0); !s.ok()) {
    return s;
  }
  for (const Metrics& m : metrics) {
    std::printf("gather_object: rank %d loss %.3f\n", m.rank, m.loss);
  }

  // scatter_object_list: rank 0 hands each rank its own object.
  std::vector<Checkpoint> plan;
  if (rank == 0) {
    for (int r = 0; r < world.size(); ++r) plan.push_back({absl::StrCat("shard", r), 100 * r});
  }
  Checkpoint checkpoint;
  if (absl::Status s = loom::comm::scatterObjectList(world, checkpoint, plan, /*src=*/0); !s.ok()) {
    return s;
  }
  std::printf("scatter_object_list: %s at step %d\n", checkpoint.name.c_str(), checkpoint.step);

  // send_object_list / recv_object_list: rank 0 to rank 1.
  if (rank == 0) {
    const std::vector<std::string> note = {"hello", "from rank 0"};
    if (absl::Status s = loom::comm::sendObjectList(world, note, /*dst=*/1); !s.ok()) return s;
  } else if (rank == 1) {
    std::vector<std::string> note(2);
    if (absl::Status s = loom::comm::recvObjectList(world, note, /*src=*/0); !s.ok()) return s;
    std::printf("recv_object_list: [%s]\n", absl::StrJoin(note, ", ").c_str());
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
    std::fprintf(stderr, "object_collectives: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
