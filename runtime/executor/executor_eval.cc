// Forward-only evaluation: the instructions the loss depends on, and no
// others, run on a batch; nothing a training step keeps (parameters,
// optimizer states, gradients) is written.
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/executor/executor.h"
#include "runtime/executor/executor_internal.h"

namespace loom::runtime {

// Walks the stream backwards from the loss: an instruction is needed when
// one of its results is, and then so are its operands. Backward and
// optimizer instructions never feed the loss, so they drop out, and so do
// forward prefetches of the backward's gathers. A dist.free of a needed
// buffer stays, so that evaluation frees memory where training does. On a
// pipeline stage the loss may live elsewhere: the forward's point-to-point
// transfers (and their waits, wherever they are) run too, on every stage
// alike, so that each send still meets its receive and what the sent
// activations need runs.
void Executor::planEvaluation() {
  std::vector<bool> buffer_needed(plan_.buffers.size(), false);
  eval_needed_.assign(instructions_.size(), false);
  if (plan_.interface.loss < 0) return;
  buffer_needed[plan_.interface.loss] = true;
  std::set<std::string> forward_transfers;
  for (const plan::Instruction* in : instructions_) {
    if (in->phase == plan::Phase::kForward && in->info->family == plan::OpFamily::kPointToPoint &&
        in->info->async_start) {
      forward_transfers.insert(in->attrs.async_handle);
    }
  }
  for (int64_t i = static_cast<int64_t>(instructions_.size()) - 1; i >= 0; --i) {
    const plan::Instruction& in = *instructions_[i];
    if (in.phase == plan::Phase::kOptimizer) continue;
    // A forward transfer's wait may sit in a later (backward) block.
    bool needed = (in.phase == plan::Phase::kForward &&
                   in.info->family == plan::OpFamily::kPointToPoint) ||
                  (in.info->family == plan::OpFamily::kWait &&
                   forward_transfers.count(in.attrs.async_handle));
    for (int64_t id : in.results) needed = needed || buffer_needed[id];
    if (!needed) continue;
    eval_needed_[i] = true;
    for (int64_t id : in.operands) buffer_needed[id] = true;
  }
  for (size_t i = 0; i < instructions_.size(); ++i) {
    const plan::Instruction& in = *instructions_[i];
    if (in.op == "dist.free" && !in.operands.empty() && buffer_needed[in.operands[0]]) {
      eval_needed_[i] = true;
    }
  }
}

absl::Status Executor::runEvalBlock(const plan::Block& block, int64_t micro, int64_t step) {
  const int64_t begin = block_begin_.find(block.name)->second;
  const int64_t end = begin + static_cast<int64_t>(block.instructions.size());
  for (int64_t i = begin; i < end; ++i) {
    const Bound& bound = *bound_[i];
    if (!eval_needed_[i] || !plan::runsIn(bound.instr->micro_step, micro, plan_.micro_batches)) {
      // What it would end is ended all the same: a skipped instruction
      // comes after every needed use of what it releases.
      releaseAfter(bound);
      continue;
    }
    if (absl::Status s = run(bound, step); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<EvalResult> Executor::evaluate(int64_t step, const int32_t* ids,
                                              const int32_t* labels) {
  if (plan_.interface.loss < 0) {
    return absl::FailedPreconditionError(absl::StrCat(plan_.source, ": the plan has no loss"));
  }
  const double start = TraceRecorder::nowUs();
  if (absl::Status s = kernels_->activate(); !s.ok()) return s;
  // The measured trace is the training steps'; evaluation would blur its
  // per-step figures, so it runs untraced.
  const bool traced = std::exchange(options_.trace, false);
  const int64_t saved_micro = micro_;
  endPhase();
  beginPhase("eval");
  absl::StatusOr<double> loss = runSchedule(step, ids, labels, /*eval=*/true);
  // Between steps only parameters and optimizer states are defined (a step
  // ends every other lifetime); whatever evaluation left, it releases, and
  // the slots are the running micro-batch's again.
  releaseTransient();
  endPhase();
  switchMicroBatch(saved_micro);
  options_.trace = traced;
  if (!loss.ok()) {
    return absl::Status(loss.status().code(), absl::StrCat("evaluation after step ", step, ": ",
                                                           loss.status().message()));
  }
  if (const auto pending = pendingHandles(); !pending.empty()) {
    return absl::InternalError(absl::StrCat("evaluation after step ", step, ": collective '",
                                            pending.front().first, "' was never waited"));
  }
  absl::StatusOr<double> shared = shareLoss(*loss, step);
  if (!shared.ok()) return shared.status();
  return EvalResult{.loss = *shared / static_cast<double>(plan_.micro_batches),
                    .seconds = (TraceRecorder::nowUs() - start) / 1e6};
}

}  // namespace loom::runtime
