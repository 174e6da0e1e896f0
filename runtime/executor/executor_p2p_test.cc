// Point-to-point between pipeline stages in the executor: the two-stage
// plan of plan/testing/gradient_swap.h (tiny Llama's fsdp 2 x tp 2 layout
// with axis 0 made the pp axis) on 4 ranks as threads over Gloo. Each stage
// sends its gradient shard of one weight to the other with dist.send_start
// and dist.recv_start; the shard each stage's optimizer then sees must be the
// one the other stage computed, which the 1-program plan gives.
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/testing/process_group_testing.h"
#include "gtest/gtest.h"
#include "plan/testing/gradient_swap.h"
#include "runtime/data/token_feed.h"
#include "runtime/executor/executor.h"

namespace loom::runtime {
namespace {

constexpr char kWeight[] = "layers.0.attention.wq.weight";

std::string planPath(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/loom/runtime/executor/testdata/", name,
                      "/plan.json");
}

struct StepOne {
  std::map<int, std::vector<float>> grads;  // per rank: the gradient shard of `grad`
  std::map<int, double> losses;
  std::map<int, int64_t> comm_bytes;
  // Per rank: the traced point-to-point spans, "send" or "recv" -> bytes.
  std::map<int, std::map<std::string, int64_t>> transfers;
};

// Step 1 of `plan` on synthetic tokens; records each rank's shard of the
// gradient buffer named `grad` as the optimizer sees it.
StepOne runStepOne(const plan::Plan& plan, const std::string& grad) {
  StepOne out;
  std::mutex mu;
  comm::ProcessGroupOptions pgOptions;
  pgOptions.checks = comm::CollectiveChecks::kOff;
  comm::testing::runRanksShared(
      static_cast<int>(plan.worldSize()),
      [&](std::shared_ptr<comm::ProcessGroup> group) {
        const int rank = group->rank();
        ExecutorOptions options;
        options.trace = true;
        options.on_gradients = [&](int64_t, const std::vector<checkpoint::ShardView>& views) {
          for (const checkpoint::ShardView& v : views) {
            if (v.name != grad) continue;
            int64_t n = 1;
            for (int64_t d : v.local_shape) n *= d;
            std::vector<float> values(n);
            std::memcpy(values.data(), v.data, n * sizeof(float));
            std::lock_guard<std::mutex> lock(mu);
            out.grads[rank] = std::move(values);
          }
        };
        absl::StatusOr<std::unique_ptr<Executor>> executor = Executor::create(plan, group, options);
        ASSERT_TRUE(executor.ok()) << executor.status();
        Executor& e = **executor;
        absl::StatusOr<std::unique_ptr<data::SyntheticTokens>> feed = data::SyntheticTokens::create(
            {.seed = 7, .vocab = e.vocab(), .seq = e.seqLength(), .global_batch = e.stepBatch()});
        ASSERT_TRUE(feed.ok()) << feed.status();
        const data::RowRange rows = e.batchRows();
        std::vector<int32_t> ids(rows.count * e.seqLength()), labels(ids.size());
        ASSERT_TRUE((*feed)->batch(1, rows.begin, rows.count, ids.data(), labels.data()).ok());
        absl::StatusOr<StepResult> r = e.step(1, ids.data(), labels.data());
        ASSERT_TRUE(r.ok()) << r.status();
        std::lock_guard<std::mutex> lock(mu);
        for (const TraceEvent& event : e.trace().events()) {
          if (event.collective == "send" || event.collective == "recv") {
            out.transfers[rank][event.collective] += event.bytes;
          }
        }
        out.losses[rank] = r->loss;
        out.comm_bytes[rank] = r->comm_bytes;
      },
      pgOptions);
  return out;
}

TEST(ExecutorPointToPointTest, StagesSwapTheirGradientShards) {
  absl::StatusOr<plan::Plan> base = plan::loadPlan(planPath("llama_fsdp2_tp2"));
  ASSERT_TRUE(base.ok()) << base.status();
  std::string grad;
  for (const plan::Program& p : base->programs) {
    for (const plan::Instruction* in : p.instructions()) {
      if (in->info->family == plan::OpFamily::kOptimizer &&
          base->buffers[in->operands[0]].name == kWeight) {
        grad = base->buffers[in->operands[1]].name;
      }
    }
  }
  ASSERT_FALSE(grad.empty());
  absl::StatusOr<plan::Plan> swap = plan::testing::gradientSwapPlan(*base, kWeight);
  ASSERT_TRUE(swap.ok()) << swap.status();
  ASSERT_TRUE(plan::checkPlan(*swap).ok()) << plan::checkPlan(*swap);

  const StepOne one = runStepOne(*base, grad);
  const StepOne two = runStepOne(*swap, plan::testing::kReceivedGradient);
  ASSERT_EQ(one.grads.size(), 4u);
  ASSERT_EQ(two.grads.size(), 4u);
  // Rank = stage * 2 + tp: the stage s rank gets the stage 1 - s rank's shard.
  for (int rank = 0; rank < 4; ++rank) {
    const int peer = rank < 2 ? rank + 2 : rank - 2;
    EXPECT_EQ(two.grads.at(rank), one.grads.at(peer)) << "rank " << rank;
    EXPECT_NE(two.grads.at(rank), one.grads.at(rank)) << "rank " << rank << ": shards equal";
    // The forward is untouched; the transfer's bytes are counted.
    EXPECT_EQ(two.losses.at(rank), one.losses.at(rank));
    const int64_t shard = static_cast<int64_t>(one.grads.at(rank).size() * sizeof(float));
    EXPECT_EQ(two.comm_bytes.at(rank) - one.comm_bytes.at(rank), 2 * shard) << "rank " << rank;
    // The measured trace holds both transfers.
    const std::map<std::string, int64_t> traced = {{"recv", shard}, {"send", shard}};
    ASSERT_TRUE(two.transfers.count(rank)) << "rank " << rank;
    EXPECT_EQ(two.transfers.at(rank), traced) << "rank " << rank;
    EXPECT_FALSE(one.transfers.count(rank)) << "rank " << rank;
  }
}

}  // namespace
}  // namespace loom::runtime
