// Executor::RowOrder (executor_internal.h): how sums over batch rows are
// ordered, the default's and deterministic mode's, decided in one place.
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/executor/executor.h"
#include "runtime/executor/executor_internal.h"

namespace loom::runtime {

absl::Status Executor::RowOrder::checkPlan(const plan::Plan& plan,
                                           const std::vector<const plan::Instruction*>& program,
                                           ExecutorDevice device) const {
  if (!exact_) return absl::OkStatus();
  if (device == ExecutorDevice::kCuda) {
    return absl::FailedPreconditionError(
        absl::StrCat(plan.source,
                     ": deterministic mode is a CPU debugging mode (per-row partial sums, host "
                     "reductions in global row order); run it with --device=cpu"));
  }
  for (const plan::Buffer& b : plan.buffers) {
    if (b.dtype == comm::DType::kBFloat16) {
      return absl::InvalidArgumentError(
          absl::StrCat(plan.source, ": deterministic mode sums f32 per-row contributions; ", b.name,
                       " is bf16 (plan with --dtype=f32 for a bit-exact comparison)"));
    }
  }
  for (const std::string& strategy : plan.strategies) {
    if (strategy == "tp") {
      return absl::InvalidArgumentError(absl::StrCat(
          plan.source,
          ": deterministic mode covers layouts that split the batch (fsdp, dp, hsdp); "
          "tensor parallelism splits each token's sums across ranks, so its results cannot match "
          "the 1-rank run bit for bit"));
    }
  }
  // Per-row sums follow the batch rows along dim 0 of every activation.
  for (const plan::Instruction* in : program) {
    if (in->op == "nn.transpose" && in->attrs.permutation.front() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(plan.source, ": ", in->where(),
                       ": deterministic mode keeps per-row sums along the batch "
                       "dim 0, and this transpose moves it; such a model has no bit-exact mode"));
    }
  }
  return absl::OkStatus();
}

absl::Status Executor::RowOrder::checkCollective(comm::DType operand, comm::DType wire) const {
  // Integers move exactly; floats must stay f32 for the per-row sums.
  if (exact_ && (operand == comm::DType::kBFloat16 || wire == comm::DType::kBFloat16)) {
    return absl::InvalidArgumentError("deterministic mode runs f32 plans");
  }
  return absl::OkStatus();
}

absl::Status Executor::RowOrder::reduceOverRows(Bound& bound, int64_t rows,
                                                std::vector<bool> stacked, bool mean) const {
  if (!exact_) return absl::OkStatus();
  if (rows % rows_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "deterministic mode: the ", rows, " rows do not split into ", rows_, " batch rows"));
  }
  bound.stack_rule = Bound::StackRule::kRowReduce;
  bound.stacked_results = std::move(stacked);
  bound.stack_mean = mean;
  return absl::OkStatus();
}

void Executor::RowOrder::carryRows(Bound& bound) const {
  if (exact_) bound.stack_rule = Bound::StackRule::kPropagate;
}

}  // namespace loom::runtime
