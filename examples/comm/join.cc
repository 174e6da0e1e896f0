// Training on uneven inputs with Join, as
// torch.distributed.algorithms.Join: rank r has r + 1 batches, each step
// all-reduces a gradient, and ranks that run out shadow the others' steps
// with zeros until every rank is done. Run under the launcher on 3 ranks:
//   bazel-bin/tools/launch/launch --nproc=3 -- bazel-bin/examples/comm/join
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/init_process_group.h"
#include "comm/join.h"
#include "comm/process_group.h"

namespace {

using loom::comm::Join;
using loom::comm::Joinable;
using loom::comm::JoinHook;
using loom::comm::ProcessGroup;
using loom::comm::Tensor;

// Sums one gradient per step over the ranks that still train.
class Trainer : public Joinable {
 public:
  explicit Trainer(ProcessGroup& group) : group_(group) {}

  absl::Status step(int64_t gradient) {
    std::vector<int64_t> summed = {gradient};
    if (absl::Status s = group_.allReduceSync(Tensor::of(summed)); !s.ok()) return s;
    std::printf("step %d: gradient sum %ld\n", steps_++, static_cast<long>(summed[0]));
    return absl::OkStatus();
  }

  std::unique_ptr<JoinHook> joinHook() override { return std::make_unique<ShadowHook>(group_); }
  ProcessGroup& joinProcessGroup() override { return group_; }

 private:
  // A joined rank's stand-in for one step: the same all-reduce, of zero.
  class ShadowHook : public JoinHook {
   public:
    explicit ShadowHook(ProcessGroup& group) : group_(group) {}
    absl::Status mainHook() override {
      std::vector<int64_t> zero = {0};
      return group_.allReduceSync(Tensor::of(zero));
    }
    absl::Status postHook(bool is_last_joiner) override {
      std::printf("all ranks joined; this rank joined %s\n", is_last_joiner ? "last" : "early");
      return absl::OkStatus();
    }

   private:
    ProcessGroup& group_;
  };

  ProcessGroup& group_;
  int steps_ = 0;
};

absl::Status run(ProcessGroup& world) {
  Trainer trainer(world);
  Join join({&trainer});
  for (int batch = 0; batch <= world.rank(); ++batch) {
    if (absl::Status s = join.notify(); !s.ok()) return s;
    if (absl::Status s = trainer.step(world.rank() + 1); !s.ok()) return s;
  }
  return join.join();
}

}  // namespace

int main() {
  loom::comm::InitOptions options;
  options.backend = "gloo";
  absl::StatusOr<std::shared_ptr<ProcessGroup>> world = loom::comm::initProcessGroup(options);
  const absl::Status status = world.ok() ? run(**world) : world.status();
  if (!status.ok()) {
    std::fprintf(stderr, "join: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
