// Work futures, as torch.distributed's `work.get_future().then(...)`: an
// all_reduce issued asynchronously, a callback chained on its future that
// doubles the result, and result() once the call is done. Run under the
// launcher on 2 ranks:
//   bazel-bin/tools/launch/launch --nproc=2 -- bazel-bin/examples/comm/futures
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/future.h"
#include "comm/init_process_group.h"
#include "comm/process_group.h"

namespace {

using loom::comm::Future;
using loom::comm::ProcessGroup;
using loom::comm::Tensor;
using loom::comm::Work;

absl::Status run(ProcessGroup& world) {
  std::vector<int64_t> tensor = {world.rank() + 1};
  absl::StatusOr<std::shared_ptr<Work>> work = world.allReduce(Tensor::of(tensor));
  if (!work.ok()) return work.status();
  // fut.then(lambda fut: fut.value()[0] * 2)
  std::shared_ptr<Future<int64_t>> doubled = (*work)->getFuture()->then(
      [](const Future<std::vector<Tensor>>& future) -> absl::StatusOr<int64_t> {
        absl::StatusOr<std::vector<Tensor>> outputs = future.value();
        if (!outputs.ok()) return outputs.status();
        return (*outputs)[0].dataAs<int64_t>()[0] * 2;
      });
  if (absl::Status s = doubled->wait(); !s.ok()) return s;
  std::printf("the future's callback saw the sum and doubled it: %ld\n",
              static_cast<long>(*doubled->value()));
  absl::StatusOr<std::vector<Tensor>> result = (*work)->result();
  if (!result.ok()) return result.status();
  std::printf("result() holds %zu tensor: %ld\n", result->size(),
              static_cast<long>((*result)[0].dataAs<int64_t>()[0]));
  return absl::OkStatus();
}

}  // namespace

int main() {
  loom::comm::InitOptions options;
  options.backend = "gloo";
  absl::StatusOr<std::shared_ptr<ProcessGroup>> world = loom::comm::initProcessGroup(options);
  const absl::Status status = world.ok() ? run(**world) : world.status();
  if (!status.ok()) {
    std::fprintf(stderr, "futures: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
