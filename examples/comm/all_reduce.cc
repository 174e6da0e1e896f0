// The all_reduce examples of the torch.distributed documentation, written
// against comm's public API. Run one under the launcher, e.g.
//   bazel-bin/tools/launch/launch --nproc=2 -- bazel-bin/examples/comm/all_reduce sum
// Examples: sum, product (2 ranks), group_max (3 ranks: MAX over
// new_group([0, 2])), average_accuracy (4 ranks).
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "comm/init_process_group.h"
#include "comm/process_group.h"

namespace {

using loom::comm::ProcessGroup;
using loom::comm::ReduceOp;
using loom::comm::Tensor;

// torch's way of printing a small int64 tensor: "tensor([4, 6])".
std::string show(const std::vector<int64_t>& values) {
  return absl::StrFormat("tensor([%s])", absl::StrJoin(values, ", "));
}

// tensor = torch.arange(2, dtype=torch.int64) + 1 + 2 * rank, then
// all_reduce with `op`: ranks 0 and 1 hold [1, 2] and [3, 4].
absl::Status arangeExample(ProcessGroup& world, ReduceOp op) {
  const int64_t rank = world.rank();
  std::vector<int64_t> tensor = {1 + 2 * rank, 2 + 2 * rank};
  std::printf("before: %s\n", show(tensor).c_str());
  if (absl::Status s = world.allReduceSync(Tensor::of(tensor), {.op = op}); !s.ok()) return s;
  std::printf("after: %s\n", show(tensor).c_str());
  return absl::OkStatus();
}

// Every rank of the world calls new_group([0, 2]); rank 1 gets no group.
absl::Status groupMaxExample(ProcessGroup& world) {
  absl::StatusOr<std::shared_ptr<ProcessGroup>> group = world.newGroup({0, 2});
  if (!group.ok()) return group.status();
  std::vector<int64_t> tensor = {world.rank()};
  if (*group == nullptr) {
    std::printf("not in the group: %s\n", show(tensor).c_str());
    return absl::OkStatus();
  }
  if (absl::Status s = (*group)->allReduceSync(Tensor::of(tensor), {.op = ReduceOp::kMax});
      !s.ok()) {
    return s;
  }
  std::printf("max over ranks 0 and 2: %s\n", show(tensor).c_str());
  return absl::OkStatus();
}

// Each rank measured its own accuracy; the job's is their mean.
absl::Status averageAccuracyExample(ProcessGroup& world) {
  const double accuracies[] = {0.75, 0.8, 0.85, 0.9};
  std::vector<double> accuracy = {accuracies[world.rank() % 4]};
  std::printf("local accuracy: %.4f\n", accuracy[0]);
  if (absl::Status s = world.allReduceSync(Tensor::of(accuracy)); !s.ok()) return s;
  accuracy[0] /= world.size();
  std::printf("average accuracy: %.4f\n", accuracy[0]);
  return absl::OkStatus();
}

// The examples by name: what a rank runs for argv[1].
struct Example {
  const char* name;
  absl::Status (*run)(ProcessGroup& world);
};

constexpr Example kExamples[] = {
    {"sum", [](ProcessGroup& world) { return arangeExample(world, ReduceOp::kSum); }},
    {"product", [](ProcessGroup& world) { return arangeExample(world, ReduceOp::kProduct); }},
    {"group_max", groupMaxExample},
    {"average_accuracy", averageAccuracyExample},
};

}  // namespace

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "";
  const Example* example = nullptr;
  for (const Example& candidate : kExamples) {
    if (name == candidate.name) example = &candidate;
  }
  if (example == nullptr) {
    std::fprintf(stderr, "all_reduce: pass sum, product, group_max or average_accuracy\n");
    return 2;
  }
  loom::comm::InitOptions options;
  options.backend = "gloo";
  absl::StatusOr<std::shared_ptr<ProcessGroup>> world = loom::comm::initProcessGroup(options);
  absl::Status status = world.ok() ? example->run(**world) : world.status();
  if (!status.ok()) {
    std::fprintf(stderr, "all_reduce %s: %s\n", example->name,
                 std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
