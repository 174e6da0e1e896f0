// The tensors comm takes and its synchronous calls: a view of a vector
// (dtype from its element type), a read-only view of const data (an input,
// refused as an output with the same Status a failed call would give), and
// an owning tensor. Run under the launcher on 2 ranks:
//   bazel-bin/tools/launch/launch --nproc=2 -- bazel-bin/examples/comm/tensors
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "comm/init_process_group.h"
#include "comm/process_group.h"
#include "comm/tensor.h"

namespace {

using loom::comm::DType;
using loom::comm::OwnedTensor;
using loom::comm::ProcessGroup;
using loom::comm::Tensor;

absl::Status run(ProcessGroup& world) {
  // A const vector can be sent, gathered, broadcast from: it is only read.
  const std::vector<float> weights = {0.5f * (world.rank() + 1), 1.0f};
  OwnedTensor gathered(DType::kFloat32, {2 * world.size()});
  if (absl::Status s = world.allGatherIntoTensorSync(gathered.view(), Tensor::of(weights));
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::span<float>> values = gathered.values<float>();
  if (!values.ok()) return values.status();
  std::printf("gathered [%s]\n", absl::StrJoin(*values, ", ").c_str());
  // ... but never written: all_reduce refuses it before anything runs.
  const absl::Status refused = world.allReduceSync(Tensor::of(weights));
  std::printf("all_reduce of a const vector: %s\n", std::string(refused.message()).c_str());
  // Reading an owning tensor as the wrong type is an error, not garbage.
  std::printf("as int64: %s\n", std::string(gathered.values<int64_t>().status().message()).c_str());
  return absl::OkStatus();
}

}  // namespace

int main() {
  loom::comm::InitOptions options;
  options.backend = "gloo";
  absl::StatusOr<std::shared_ptr<ProcessGroup>> world = loom::comm::initProcessGroup(options);
  const absl::Status status = world.ok() ? run(**world) : world.status();
  if (!status.ok()) {
    std::fprintf(stderr, "tensors: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
