// Receiving from whichever rank sends first, as torch.distributed.recv(t)
// without src: rank 0 collects one message from every other rank in the
// order they arrive and learns each sender. Run under the launcher on 3
// ranks:
//   bazel-bin/tools/launch/launch --nproc=3 -- bazel-bin/examples/comm/recv_any_source
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/init_process_group.h"
#include "comm/process_group.h"

namespace {

using loom::comm::ProcessGroup;
using loom::comm::Tensor;

absl::Status run(ProcessGroup& world) {
  if (world.rank() != 0) {
    const std::vector<int64_t> message = {world.rank() * world.rank()};
    return world.sendSync(Tensor::of(message), /*dst=*/0);
  }
  // Arrival order varies; print in sender order so the output is fixed.
  std::vector<std::pair<int, int64_t>> received;
  for (int i = 1; i < world.size(); ++i) {
    std::vector<int64_t> message(1);
    absl::StatusOr<int> sender = world.recvAnySourceSync(Tensor::of(message));
    if (!sender.ok()) return sender.status();
    received.emplace_back(*sender, message[0]);
  }
  std::sort(received.begin(), received.end());
  for (const auto& [sender, value] : received) {
    std::printf("received %ld from rank %d\n", static_cast<long>(value), sender);
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
    std::fprintf(stderr, "recv_any_source: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
