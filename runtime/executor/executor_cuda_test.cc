// The executor on a GPU against the same plan on the CPU: tiny Llama's
// 1-rank plan trained for a few steps on both, losses (and, with clipping,
// gradient norms) within 1e-4 relative, parameters read back through
// localValues and checkpointShards, no cudaMalloc after the first step; its
// mixed-precision (bf16) plan, losses and norms within 2e-2; and the plans
// that offload their optimizer states to pinned host memory.
// Where no GPU is usable the GPU cases skip with CUDA's reason; the
// refusals that need no GPU run everywhere.
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/all_backends.h"
#include "comm/hash_store.h"
#include "comm/process_group.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/data/token_feed.h"
#include "runtime/executor/cuda_kernel_set.h"
#include "runtime/executor/executor.h"
#include "tests/testing/status_matchers.h"

namespace loom::runtime {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::HasSubstr;

constexpr int kSteps = 6;

std::string planPath(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/loom/runtime/executor/testdata/", name,
                      "/plan.json");
}

// A one-rank world: gloo for host tensors, nccl for CUDA tensors.
std::shared_ptr<comm::ProcessGroup> soloWorld() {
  comm::registerAllBackends();
  comm::ProcessGroupOptions options;
  options.checks = comm::CollectiveChecks::kOff;
  options.group_name = "solo";
  absl::StatusOr<std::shared_ptr<comm::ProcessGroup>> world =
      comm::ProcessGroup::create(std::make_shared<comm::HashStore>(), 0, 1, options);
  EXPECT_TRUE(world.ok()) << world.status();
  return world.ok() ? *world : nullptr;
}

struct TrainRun {
  std::vector<double> losses;
  std::vector<double> norms;
  std::vector<float> embedding;  // tok_embeddings.weight after the last step
  int64_t system_allocations_after_step_2 = -1;
  int64_t system_allocations_at_end = -1;
  // The host arena's (offloaded plans: cudaHostAlloc).
  int64_t host_allocations_after_step_2 = -1;
  int64_t host_allocations_at_end = -1;
};

TrainRun train(ExecutorOptions options, const std::string& plan_name = "llama_single") {
  TrainRun run;
  absl::StatusOr<plan::Plan> plan = plan::loadPlan(planPath(plan_name));
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return run;
  absl::StatusOr<std::unique_ptr<Executor>> executor =
      Executor::create(*plan, soloWorld(), options);
  EXPECT_TRUE(executor.ok()) << executor.status();
  if (!executor.ok()) return run;
  Executor& e = **executor;
  absl::StatusOr<std::unique_ptr<data::SyntheticTokens>> feed = data::SyntheticTokens::create(
      {.seed = 7, .vocab = e.vocab(), .seq = e.seqLength(), .global_batch = e.stepBatch()});
  EXPECT_TRUE(feed.ok()) << feed.status();
  if (!feed.ok()) return run;
  // The step's rows, micro-batch after micro-batch.
  std::vector<int32_t> ids(e.stepBatch() * e.seqLength()), labels(ids.size());
  for (int step = 1; step <= kSteps; ++step) {
    EXPECT_TRUE((*feed)->batch(step % 2, 0, e.stepBatch(), ids.data(), labels.data()).ok());
    absl::StatusOr<StepResult> r = e.step(step, ids.data(), labels.data());
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return run;
    run.losses.push_back(r->loss);
    run.norms.push_back(r->grad_norm);
    if (step == 2) {
      run.system_allocations_after_step_2 = e.allocatorStats().system_allocations;
      run.host_allocations_after_step_2 = e.hostAllocatorStats().system_allocations;
    }
  }
  run.system_allocations_at_end = e.allocatorStats().system_allocations;
  run.host_allocations_at_end = e.hostAllocatorStats().system_allocations;
  absl::StatusOr<std::vector<float>> table = e.localValues("tok_embeddings.weight");
  EXPECT_TRUE(table.ok()) << table.status();
  if (table.ok()) run.embedding = *table;
  // The checkpoint views are host copies holding the same values.
  absl::StatusOr<std::vector<checkpoint::ShardView>> shards = e.checkpointShards();
  EXPECT_TRUE(shards.ok()) << shards.status();
  if (shards.ok()) {
    for (const checkpoint::ShardView& view : *shards) {
      if (view.name != "tok_embeddings.weight") continue;
      const float* data = static_cast<const float*>(view.data);
      EXPECT_EQ(std::vector<float>(data, data + run.embedding.size()), run.embedding);
    }
  }
  return run;
}

double relative(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-30); }

void expectClose(const std::vector<double>& cuda, const std::vector<double>& cpu, double tolerance,
                 const std::string& what) {
  ASSERT_EQ(cuda.size(), cpu.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_LE(relative(cuda[i], cpu[i]), tolerance)
        << what << " at step " << i + 1 << ": cuda " << cuda[i] << ", cpu " << cpu[i];
  }
}

// `options` on GPU 0.
ExecutorOptions onGpu(ExecutorOptions options = {}) {
  options.device = ExecutorDevice::kCuda;
  options.cuda_device = 0;
  return options;
}

class ExecutorCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string reason = cudaDeviceUnavailableReason(0); !reason.empty())
      GTEST_SKIP() << reason;
  }
};

TEST_F(ExecutorCudaTest, TrainsTinyLlamaWithTheCpuLosses) {
  const ExecutorOptions cuda = onGpu();
  const TrainRun gpu = train(cuda);
  const TrainRun cpu = train({});
  expectClose(gpu.losses, cpu.losses, 1e-4, "loss");
  ASSERT_EQ(gpu.losses.size(), static_cast<size_t>(kSteps));
  EXPECT_LT(gpu.losses.back(), gpu.losses.front()) << "training did not lower the loss";
  // The steady state asks the device for no memory.
  EXPECT_EQ(gpu.system_allocations_at_end, gpu.system_allocations_after_step_2);
  ASSERT_EQ(gpu.embedding.size(), cpu.embedding.size());
  float largest = 0, worst = 0;
  for (size_t i = 0; i < cpu.embedding.size(); ++i) {
    largest = std::max(largest, std::abs(cpu.embedding[i]));
    worst = std::max(worst, std::abs(gpu.embedding[i] - cpu.embedding[i]));
  }
  // AdamW divides by sqrt(v), so GEMM rounding differences in small
  // gradients grow into parameter differences larger than the losses'.
  EXPECT_LE(worst, 1e-3 * largest) << "tok_embeddings.weight after " << kSteps << " steps";
}

// Activation recompute: the GPU runs the recomputed forward ops like any
// other and trains with the CPU's losses without recompute.
TEST_F(ExecutorCudaTest, TrainsTinyLlamaWithRecomputeLikeTheCpuWithout) {
  const ExecutorOptions cuda = onGpu();
  const TrainRun gpu = train(cuda, "llama_full_single");
  const TrainRun cpu = train({});
  expectClose(gpu.losses, cpu.losses, 1e-4, "loss with full recompute");
  EXPECT_EQ(gpu.system_allocations_at_end, gpu.system_allocations_after_step_2);
}

// Gradient accumulation: two micro-steps, the sums made by dist.accumulate's
// copy and in-place add on the device, give the CPU's losses.
TEST_F(ExecutorCudaTest, AccumulatesMicroStepsLikeTheCpu) {
  const ExecutorOptions cuda = onGpu();
  const TrainRun gpu = train(cuda, "accum_llama_single_m2");
  const TrainRun cpu = train({}, "accum_llama_single_m2");
  expectClose(gpu.losses, cpu.losses, 1e-4, "loss over two micro-steps");
  EXPECT_EQ(gpu.system_allocations_at_end, gpu.system_allocations_after_step_2);
}

TEST_F(ExecutorCudaTest, ClipsWithTheCpuGlobalNorm) {
  ExecutorOptions options;
  options.max_grad_norm = 0.5;
  const TrainRun cpu = train(options);
  const TrainRun gpu = train(onGpu(options));
  expectClose(gpu.norms, cpu.norms, 1e-4, "gradient norm");
  expectClose(gpu.losses, cpu.losses, 1e-4, "clipped loss");
}

// Mixed precision: both devices run the bf16 plan with the same rounding
// points (bf16 activations and gradients, f32 master and moments), but the
// GPU's GEMMs and reductions add in another order, so a bf16 result near a
// rounding boundary can land one bf16 ulp (2^-8 relative) away, and those
// differences feed the next layers and steps. 2e-2 relative bounds that.
constexpr double kBf16StepTolerance = 2e-2;

TEST_F(ExecutorCudaTest, TrainsTinyLlamaInBf16WithTheCpuLosses) {
  const ExecutorOptions cuda = onGpu();
  const TrainRun gpu = train(cuda, "llama_bf16_single");
  const TrainRun cpu = train({}, "llama_bf16_single");
  expectClose(gpu.losses, cpu.losses, kBf16StepTolerance, "bf16 loss");
  ASSERT_EQ(gpu.losses.size(), static_cast<size_t>(kSteps));
  EXPECT_LT(gpu.losses.back(), gpu.losses.front()) << "bf16 training did not lower the loss";
  // Staging for mixed calls and the workspace come from the set, not the
  // allocator, and the allocator's steady state asks for nothing.
  EXPECT_EQ(gpu.system_allocations_at_end, gpu.system_allocations_after_step_2);
  EXPECT_EQ(gpu.embedding.size(), cpu.embedding.size());
}

TEST_F(ExecutorCudaTest, ClipsBf16GradientsWithTheCpuGlobalNorm) {
  ExecutorOptions options;
  options.max_grad_norm = 0.5;
  const TrainRun cpu = train(options, "llama_bf16_single");
  const TrainRun gpu = train(onGpu(options), "llama_bf16_single");
  expectClose(gpu.norms, cpu.norms, kBf16StepTolerance, "bf16 gradient norm");
  expectClose(gpu.losses, cpu.losses, kBf16StepTolerance, "clipped bf16 loss");
}

// Offload (docs/planner_offload.md): the gradients go to pinned host
// memory on the copy stream, AdamW runs on the host's threads and the
// parameters come back; the losses are the CPU's without offload (the host
// step is the CPU's arithmetic), and neither the device nor the host arena
// allocates after the first steps.
TEST_F(ExecutorCudaTest, TrainsOffloadedTinyLlamaLikeTheCpuWithout) {
  ExecutorOptions options;
  options.max_grad_norm = 0.5;
  const TrainRun cpu = train(options, "llama_single");
  const TrainRun gpu = train(onGpu(options), "llama_offload_single");
  expectClose(gpu.losses, cpu.losses, 1e-4, "offloaded loss");
  expectClose(gpu.norms, cpu.norms, 1e-4, "offloaded gradient norm");
  EXPECT_EQ(gpu.system_allocations_at_end, gpu.system_allocations_after_step_2);
  EXPECT_GT(gpu.host_allocations_at_end, 0);
  EXPECT_EQ(gpu.host_allocations_at_end, gpu.host_allocations_after_step_2);
}

TEST_F(ExecutorCudaTest, TrainsOffloadedBf16TinyLlamaLikeTheCpu) {
  const ExecutorOptions cuda = onGpu();
  const TrainRun gpu = train(cuda, "llama_bf16_offload_single");
  const TrainRun cpu = train({}, "llama_bf16_offload_single");
  expectClose(gpu.losses, cpu.losses, kBf16StepTolerance, "offloaded bf16 loss");
  EXPECT_LT(gpu.losses.back(), gpu.losses.front()) << "offloaded bf16 training did not lower it";
  EXPECT_EQ(gpu.host_allocations_at_end, gpu.host_allocations_after_step_2);
}

// Needs no GPU: the mode is refused before CUDA is touched.
TEST(ExecutorCudaRefusalTest, DeterministicModeIsCpuOnly) {
  absl::StatusOr<plan::Plan> plan = plan::loadPlan(planPath("llama_single"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExecutorOptions options;
  options.device = ExecutorDevice::kCuda;
  options.deterministic = true;
  EXPECT_THAT(Executor::create(*plan, soloWorld(), options).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("deterministic mode is a CPU debugging mode")));
}

// Without a GPU, create says why (CUDA's reason) instead of crashing.
TEST(ExecutorCudaRefusalTest, NoUsableGpuIsAClearError) {
  const std::string reason = cudaDeviceUnavailableReason(0);
  if (reason.empty()) GTEST_SKIP() << "a GPU is usable here";
  absl::StatusOr<plan::Plan> plan = plan::loadPlan(planPath("llama_single"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExecutorOptions options;
  options.device = ExecutorDevice::kCuda;
  EXPECT_THAT(Executor::create(*plan, soloWorld(), options).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no usable GPU")));
}

}  // namespace
}  // namespace loom::runtime
