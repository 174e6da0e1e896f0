#include "plan/testing/gradient_swap.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "plan/lifetimes.h"
#include "plan/op_table.h"
#include "plan/testing/instruction.h"

namespace loom::plan::testing {
namespace {

int64_t addBuffer(Plan& plan, const Buffer& like, const std::string& name, BufferRole role) {
  Buffer b = like;
  b.id = static_cast<int64_t>(plan.buffers.size());
  b.name = name;
  b.role = role;
  b.init.reset();
  plan.buffers.push_back(b);
  return b.id;
}

}  // namespace

void recomputeLifetimes(Plan& plan) {
  for (Program& program : plan.programs) program.assignOrder();
  const std::vector<Lifetime> live = computeLifetimes(plan, plan.programs.front());
  for (size_t id = 0; id < plan.buffers.size(); ++id) plan.buffers[id].live = live[id];
}

absl::StatusOr<Plan> gradientSwapPlan(const Plan& base, const std::string& param) {
  if (base.programs.size() != 1 || base.mesh.ndim() < 1 || base.mesh.shape()[0] != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(base.source, ": a one-program plan whose mesh axis 0 has 2 ranks is needed"));
  }
  Plan plan = base;
  plan.strategies[0] = "pp";
  const std::string axis = plan.mesh.axisNames()[0];
  int64_t paramId = -1;
  for (const Buffer& b : plan.buffers) {
    if (b.name == param) paramId = b.id;
  }
  Program& program = plan.programs[0];
  Instruction* step = nullptr;
  Block* backward = nullptr;
  for (Block& block : program.blocks) {
    if (block.phase == Phase::kBackward) backward = &block;
    for (Instruction& in : block.instructions) {
      if (in.info->family == OpFamily::kOptimizer && in.operands[0] == paramId) step = &in;
    }
  }
  if (step == nullptr || backward == nullptr) {
    return absl::NotFoundError(absl::StrCat("no optimizer step of '", param, "' in ", base.source));
  }
  const int64_t grad = step->operands[1];
  const Buffer like = plan.buffers[grad];
  const int64_t sendHandle = addBuffer(plan, like, "send_handle:grad", BufferRole::kActivation);
  const int64_t sent = addBuffer(plan, like, "sent:grad", BufferRole::kActivation);
  const int64_t recvHandle = addBuffer(plan, like, "recv_handle:grad", BufferRole::kActivation);
  const int64_t received = addBuffer(plan, like, kReceivedGradient, like.role);
  step->operands[1] = received;
  auto p2p = [&](const std::string& op, std::vector<int64_t> operands, int64_t result,
                 const std::string& handle) {
    Instruction in = instruction(op, *backward, std::move(operands), {result});
    in.attrs.mesh_axes = {axis};
    in.attrs.bytes = like.bytes;
    in.attrs.async_handle = handle;
    return in;
  };
  backward->instructions.push_back(p2p("dist.send_start", {grad}, sendHandle, "swap_send"));
  backward->instructions.push_back(p2p("dist.recv_start", {}, recvHandle, "swap_recv"));
  Instruction waitSend = instruction("dist.wait", *backward, {sendHandle}, {sent});
  waitSend.attrs.async_handle = "swap_send";
  backward->instructions.push_back(waitSend);
  Instruction waitRecv = instruction("dist.wait", *backward, {recvHandle}, {received});
  waitRecv.attrs.async_handle = "swap_recv";
  backward->instructions.push_back(waitRecv);
  // Stage s sends with tag s and receives the other's tag.
  plan.programs.push_back(program);
  for (int64_t s = 0; s < 2; ++s) {
    Program& p = plan.programs[s];
    p.stage = s;
    for (Block& block : p.blocks) {
      for (Instruction& in : block.instructions) {
        if (in.info->family != OpFamily::kPointToPoint) continue;
        in.attrs.peer = 1 - s;
        in.attrs.tag = in.info->p2p == PointToPoint::kSend ? s : 1 - s;
      }
    }
  }
  recomputeLifetimes(plan);
  return plan;
}

}  // namespace loom::plan::testing
