// all_gather into outputs of different sizes: rank r contributes r + 1
// values, and every rank passes one output per rank sized to match. Run
// under the launcher on 3 ranks:
//   bazel-bin/tools/launch/launch --nproc=3 -- bazel-bin/examples/comm/uneven_all_gather
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "comm/init_process_group.h"
#include "comm/process_group.h"

namespace {

using loom::comm::ProcessGroup;
using loom::comm::Tensor;

absl::Status run(ProcessGroup& world) {
  const std::vector<int64_t> mine(world.rank() + 1, world.rank());
  std::vector<std::vector<int64_t>> outputs(world.size());
  std::vector<Tensor> views;
  for (int r = 0; r < world.size(); ++r) {
    outputs[r].resize(r + 1);
    views.push_back(Tensor::of(outputs[r]));
  }
  if (absl::Status s = world.allGatherSync(views, Tensor::of(mine)); !s.ok()) return s;
  std::vector<std::string> shown;
  for (const std::vector<int64_t>& output : outputs) {
    shown.push_back("[" + absl::StrJoin(output, ", ") + "]");
  }
  std::printf("gathered %s\n", absl::StrJoin(shown, " ").c_str());
  return absl::OkStatus();
}

}  // namespace

int main() {
  loom::comm::InitOptions options;
  options.backend = "gloo";
  absl::StatusOr<std::shared_ptr<ProcessGroup>> world = loom::comm::initProcessGroup(options);
  const absl::Status status = world.ok() ? run(**world) : world.status();
  if (!status.ok()) {
    std::fprintf(stderr, "uneven_all_gather: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
