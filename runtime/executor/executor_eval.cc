// Forward-only evaluation: the instructions the loss depends on, and no
// others, run on a batch; nothing a training step keeps (parameters,
// optimizer states, gradients) is written.
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/executor/executor.h"
#include "runtime/executor/executor_internal.h"

namespace loom::runtime {

// Walks the stream backwards from the loss: an instruction is needed when
// one of its results is, and then so are its operands. Backward and
// optimizer instructions never feed the loss, so they drop out, and so do
// forward prefetches of the backward's gathers. A dist.free of a needed
// buffer stays, so that evaluation frees memory where training does.
void Executor::planEvaluation() {
  std::vector<bool> buffer_needed(plan_.buffers.size(), false);
  eval_needed_.assign(instructions_.size(), false);
  if (plan_.interface.loss < 0) return;
  buffer_needed[plan_.interface.loss] = true;
  for (int64_t i = static_cast<int64_t>(instructions_.size()) - 1; i >= 0; --i) {
    const plan::Instruction& in = *instructions_[i];
    if (in.phase == plan::Phase::kOptimizer) continue;
    bool needed = false;
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
  if (plan_.programs.size() > 1) {
    return absl::FailedPreconditionError(
        absl::StrCat(plan_.source,
                     ": forward-only evaluation of a pipelined plan is not supported (the loss "
                     "lives on the last stage); evaluate with a plan without a pipeline axis"));
  }
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
  absl::Status status;
  double loss = 0;
  const plan::Interface& io = plan_.interface;
  const std::vector<plan::ScheduleEntry>& schedule = program_->schedule;
  for (size_t e = 0; e < schedule.size() && status.ok(); ++e) {
    const plan::ScheduleEntry& entry = schedule[e];
    if (entry.micro_batch < 0) continue;  // the optimizer's run
    const bool fresh = e == 0 || schedule[e - 1].micro_batch != entry.micro_batch;
    if (fresh) {
      micro_ = entry.micro_batch;
      status = feed(micro_, ids, labels);
      if (!status.ok()) break;
    }
    status = runEvalBlock(*program_->block(entry.block), entry.micro_batch, step);
    if (!status.ok()) break;
    const bool done =
        e + 1 == schedule.size() || schedule[e + 1].micro_batch != entry.micro_batch;
    if (!done) continue;
    absl::StatusOr<float> micro_loss = readLoss(step);
    if (!micro_loss.ok()) {
      status = micro_loss.status();
      break;
    }
    loss += *micro_loss;
    for (int64_t id : {io.ids, io.labels, io.loss_grad_seed, io.positions}) {
      if (id >= 0) releaseBuffer(id);
    }
  }
  // Between steps only parameters and optimizer states are defined (a step
  // ends every other lifetime); whatever evaluation left, it releases.
  for (const plan::Buffer& b : plan_.buffers) releaseBuffer(b.id);
  endPhase();
  micro_ = saved_micro;
  options_.trace = traced;
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("evaluation after step ", step, ": ",
                                                    status.message()));
  }
  if (!pending_.empty()) {
    return absl::InternalError(absl::StrCat("evaluation after step ", step, ": collective '",
                                            pending_.begin()->first, "' was never waited"));
  }
  return EvalResult{.loss = loss / static_cast<double>(plan_.micro_batches),
                    .seconds = (TraceRecorder::nowUs() - start) / 1e6};
}

}  // namespace loom::runtime
