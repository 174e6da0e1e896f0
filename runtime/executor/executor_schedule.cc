// Running a program's schedule: block runs whose micro-batches interleave
// (GPipe, 1F1B, interleaved 1F1B), each micro-batch's buffers and async
// handles parked while another one runs, and the step's loss shared over
// the pipeline's stages (docs/runtime.md, "Schedules and stage programs").
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/executor/executor.h"
#include "runtime/executor/executor_internal.h"

namespace loom::runtime {

absl::Status Executor::planStages() {
  // With one program every rank runs all of it, and a pp axis (if any) is
  // like any replicating axis.
  for (size_t a = 0; a < plan_.strategies.size() && plan_.programs.size() > 1; ++a) {
    if (plan_.strategies[a] == "pp") pp_axis_ = static_cast<int64_t>(a);
  }
  const size_t n = plan_.buffers.size();
  used_.assign(n, false);
  for (const plan::Instruction* in : instructions_) {
    for (const std::vector<int64_t>* ids : {&in->operands, &in->results}) {
      for (int64_t id : *ids) used_[id] = true;
    }
  }
  const plan::Interface& io = plan_.interface;
  feeds_.clear();
  for (int64_t id : {io.ids, io.labels, io.loss_grad_seed, io.positions}) {
    if (id >= 0 && used_[id]) feeds_.push_back(id);
  }
  saving_stage_.assign(n, -1);
  holders_.assign(n, 0);
  loss_stage_ = -1;
  for (const plan::Program& program : plan_.programs) {
    std::vector<bool> here(n, false);
    for (const plan::Instruction* in : program.instructions()) {
      for (const std::vector<int64_t>* ids : {&in->operands, &in->results}) {
        for (int64_t id : *ids) here[id] = true;
      }
      for (int64_t id : in->results) {
        if (id != io.loss) continue;
        loss_stage_ = std::max(loss_stage_, program.stage);
        if (&program == program_) defines_loss_ = true;
      }
    }
    // A replica counts for its primary: one tensor, held by several stages.
    for (size_t id = 0; id < n; ++id) {
      if (!here[id]) continue;
      const int64_t primary = plan_.buffers[id].primaryId();
      ++holders_[primary];
      if (saving_stage_[primary] < 0 || program.stage < saving_stage_[primary])
        saving_stage_[primary] = program.stage;
    }
  }
  for (const plan::Buffer& b : plan_.buffers) {
    holders_[b.id] = holders_[b.primaryId()];
    saving_stage_[b.id] = saving_stage_[b.primaryId()];
  }
  return absl::OkStatus();
}

absl::Status Executor::planSchedule() {
  const std::vector<plan::ScheduleEntry>& schedule = program_->schedule;
  const int64_t count = plan_.micro_batches;
  // The micro-batch each model block ran last, and how many model runs are
  // still to come.
  std::map<std::string, int64_t, std::less<>> ran;
  int64_t model_runs = 0;
  for (const plan::ScheduleEntry& entry : schedule) model_runs += entry.micro_batch >= 0;
  std::vector<int64_t> first(count, -1), last(count, -1);
  for (size_t e = 0; e < schedule.size(); ++e) {
    const plan::ScheduleEntry& entry = schedule[e];
    const std::string where =
        absl::StrCat(plan_.source, ": stage ", program_->stage, "'s schedule[", e, "]");
    if (entry.micro_batch < 0) {
      if (model_runs > 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, " runs ", entry.block, " with ", model_runs,
            " model block runs still to come; the optimizer needs every micro-batch's gradients, "
            "so it runs last (re-plan with this build's //tools:plan)"));
      }
      continue;
    }
    --model_runs;
    auto [it, fresh] = ran.emplace(entry.block, -1);
    if (entry.micro_batch != it->second + 1) {
      // dist.accumulate starts its sum in micro-batch 0 and a last-micro-step
      // instruction reads it complete, so each block runs them in order.
      return absl::InvalidArgumentError(absl::StrCat(
          where, " runs ", entry.block, " for micro-batch ", entry.micro_batch, " after ",
          it->second < 0 ? "none" : absl::StrCat("micro-batch ", it->second),
          "; the runtime sums gradients in micro-batch order, so each block must run micro-batch "
          "0, 1, ... in turn (reorder the schedule)"));
    }
    it->second = entry.micro_batch;
    if (first[entry.micro_batch] < 0) first[entry.micro_batch] = static_cast<int64_t>(e);
    last[entry.micro_batch] = static_cast<int64_t>(e);
  }
  entry_first_.assign(schedule.size(), false);
  entry_last_.assign(schedule.size(), false);
  for (int64_t m = 0; m < count; ++m) {
    if (first[m] < 0) continue;
    entry_first_[first[m]] = true;
    entry_last_[last[m]] = true;
  }
  parked_.assign(count, MicroSlots{});

  // What belongs to one micro-batch: defined by a model block (or fed),
  // neither resident, nor carried, nor left for the optimizer.
  const size_t n = plan_.buffers.size();
  std::vector<bool> model_defined(n, false), optimizer_reads(n, false);
  std::map<std::string, bool> start_in_model, wait_in_model;
  for (const plan::Instruction* in : instructions_) {
    const bool model = in->phase != plan::Phase::kOptimizer;
    for (int64_t id : model ? in->results : in->operands) {
      (model ? model_defined : optimizer_reads)[id] = true;
    }
    if (in->info->async_start) start_in_model[in->attrs.async_handle] = model;
    if (in->info->family == plan::OpFamily::kWait) wait_in_model[in->attrs.async_handle] = model;
  }
  for (int64_t id : feeds_) model_defined[id] = true;
  micro_buffers_.clear();
  for (size_t id = 0; id < n; ++id) {
    if (model_defined[id] && !plan::persistentRole(plan_.buffers[id].role) && !carried_[id] &&
        !optimizer_reads[id]) {
      micro_buffers_.push_back(static_cast<int64_t>(id));
    }
  }
  micro_handles_.clear();
  for (const auto& [handle, model] : start_in_model) {
    if (model && wait_in_model[handle]) micro_handles_.insert(handle);
  }
  return absl::OkStatus();
}

void Executor::switchMicroBatch(int64_t micro) {
  if (micro == micro_) return;
  MicroSlots& out = parked_[micro_];
  for (int64_t id : micro_buffers_) {
    if (block_of_[id] < 0) continue;
    out.blocks.emplace_back(id, block_of_[id]);
    if (stacks_[id].rows > 0) out.stacks.emplace_back(id, std::move(stacks_[id]));
    block_of_[id] = -1;
    stacks_[id] = Stack{};
  }
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (!micro_handles_.count(it->first)) {
      ++it;
      continue;
    }
    out.pending.insert(std::move(*it));
    it = pending_.erase(it);
  }
  MicroSlots& in = parked_[micro];
  for (const auto& [id, block] : in.blocks) block_of_[id] = block;
  for (auto& [id, stack] : in.stacks) stacks_[id] = std::move(stack);
  for (auto& [handle, pending] : in.pending) pending_[handle] = std::move(pending);
  in = MicroSlots{};
  micro_ = micro;
}

absl::StatusOr<double> Executor::finishMicroBatch(int64_t step) {
  for (const auto& [handle, pending] : pending_) {
    if (!micro_handles_.count(handle)) continue;
    return absl::InternalError(absl::StrCat(
        "step ", step, ": '", handle, "', started at ", pending->started,
        ", is still pending after micro-batch ", micro_,
        "'s last block run; its dist.wait must run in a block of the same micro-batch"));
  }
  double loss = 0;
  if (defines_loss_) {
    absl::StatusOr<float> micro_loss = readLoss(step);
    if (!micro_loss.ok()) return micro_loss.status();
    // Only the last stage that computes the loss reports it (shareLoss).
    if (program_->stage == loss_stage_) loss = *micro_loss;
  }
  for (int64_t id : feeds_) releaseBuffer(id);
  return loss;
}

absl::StatusOr<double> Executor::runSchedule(int64_t step, const int32_t* ids,
                                             const int32_t* labels, bool eval) {
  const std::vector<plan::ScheduleEntry>& schedule = program_->schedule;
  double loss = 0;
  for (size_t e = 0; e < schedule.size(); ++e) {
    const plan::ScheduleEntry& entry = schedule[e];
    const plan::Block& block = *program_->block(entry.block);
    if (entry.micro_batch < 0) {
      // The optimizer's run is the step's, whatever micro-batch ran last.
      if (eval) continue;
      if (absl::Status s = runBlock(block, -1, step); !s.ok()) return s;
      continue;
    }
    switchMicroBatch(entry.micro_batch);
    if (entry_first_[e]) {
      if (absl::Status s = feed(micro_, ids, labels); !s.ok()) return s;
    }
    absl::Status s = eval ? runEvalBlock(block, micro_, step) : runBlock(block, micro_, step);
    if (!s.ok()) return s;
    if (!entry_last_[e]) continue;
    absl::StatusOr<double> micro_loss = finishMicroBatch(step);
    if (!micro_loss.ok()) return micro_loss.status();
    loss += *micro_loss;
  }
  return loss;
}

void Executor::releaseTransient() {
  for (const plan::Buffer& b : plan_.buffers) releaseBuffer(b.id);
  for (MicroSlots& slots : parked_) {
    for (const auto& [id, block] : slots.blocks) {
      block_of_[id] = block;
      releaseBuffer(id);
    }
    slots.blocks.clear();
    slots.stacks.clear();
  }
}

std::vector<std::pair<std::string, const Executor::Pending*>> Executor::pendingHandles() const {
  std::vector<std::pair<std::string, const Pending*>> out;
  for (const auto& [handle, pending] : pending_) out.emplace_back(handle, pending.get());
  for (const MicroSlots& slots : parked_) {
    for (const auto& [handle, pending] : slots.pending) out.emplace_back(handle, pending.get());
  }
  return out;
}

absl::StatusOr<double> Executor::shareLoss(double loss, int64_t step) {
  if (pp_group_ == nullptr) return loss;
  // Every stage but the loss's adds 0, so the sum is that stage's loss bit
  // for bit, in any order.
  constexpr size_t kBytes = sizeof(double);
  void* data = allocator_->allocate(kBytes);
  if (data == nullptr) return outOfMemory(kBytes, "the loss shared over the pp axis");
  absl::Status s = kernels_->upload(data, &loss, kBytes);
  if (s.ok()) {
    absl::StatusOr<std::shared_ptr<comm::Work>> work =
        pp_group_->allReduce(comm::Tensor(data, comm::DType::kFloat64, {1}, kernels_->device()));
    s = work.ok() ? kernels_->await(**work, options_.timeout) : work.status();
    if (s.ok()) s = kernels_->download(&loss, data, kBytes);
    if (s.ok()) s = (*work)->wait(options_.timeout);
  }
  allocator_->release(data);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("step ", step, ", sharing the loss over the ",
                                               pp_group_->name(), " group: ", s.message()));
  }
  return loss;
}

}  // namespace loom::runtime
