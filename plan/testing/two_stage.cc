#include "plan/testing/two_stage.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plan/lifetimes.h"
#include "plan/op_table.h"
#include "plan/testing/instruction.h"

namespace loom::plan::testing {
namespace {

// Builds one program block by block; buffers are the plan's.
class Builder {
 public:
  Builder(Plan& plan, const TwoStageOptions& o) : plan_(plan), o_(o) {}

  int64_t buffer(const std::string& name, std::vector<int64_t> shape, BufferRole role,
                 comm::DType dtype = comm::DType::kFloat32) {
    Buffer b;
    b.id = static_cast<int64_t>(plan_.buffers.size());
    b.name = name;
    b.dtype = dtype;
    b.global_shape = shape;
    b.local_shape = shape;
    b.role = role;
    b.placement = {AxisPlacement{}};
    b.bytes = b.numel() * static_cast<int64_t>(comm::dtypeSize(dtype));
    plan_.buffers.push_back(b);
    return b.id;
  }
  int64_t param(const std::string& name, std::vector<int64_t> shape, uint64_t stream) {
    const int64_t id = buffer(name, shape, BufferRole::kParam);
    plan_.buffers[id].init = InitSpec{.kind = InitSpec::Kind::kNormal, .std = 0.02f,
                                      .stream_id = stream};
    for (const char* state : {"exp_avg:", "exp_avg_sq:"}) {
      const int64_t s = buffer(state + name, shape, BufferRole::kOptimizerState);
      plan_.buffers[s].init = InitSpec{.kind = InitSpec::Kind::kZeros, .stream_id = stream};
    }
    return id;
  }
  // An [batch, seq, n] activation.
  int64_t activation(const std::string& name, int64_t n) {
    return buffer(name, {o_.batch, o_.seq, n}, BufferRole::kActivation);
  }

  Instruction& add(Block& block, const std::string& op, std::vector<int64_t> operands,
                   std::vector<int64_t> results) {
    Instruction in = instruction(op, block, std::move(operands), std::move(results));
    in.index = index_++;
    block.instructions.push_back(std::move(in));
    return block.instructions.back();
  }
  // A started transfer of `buffer` (its handle in `handle_buffer`) with
  // the stage across the cut.
  void transfer(Block& block, const std::string& op, int64_t buffer, int64_t handle_buffer,
                const std::string& handle, int64_t peer, int64_t tag) {
    const bool send = op == "dist.send_start";
    Instruction& in = add(block, op, send ? std::vector<int64_t>{buffer} : std::vector<int64_t>{},
                          {handle_buffer});
    in.attrs.mesh_axes = {"pp"};
    in.attrs.peer = peer;
    in.attrs.tag = tag;
    in.attrs.bytes = plan_.buffers[buffer].bytes;
    in.attrs.async_handle = handle;
  }
  void wait(Block& block, int64_t handle_buffer, int64_t result, const std::string& handle) {
    add(block, "dist.wait", {handle_buffer}, {result}).attrs.async_handle = handle;
  }
  void step(Block& block, int64_t param, int64_t grad) {
    Instruction& in = add(block, "dist.optimizer_step", {param, grad, param + 1, param + 2},
                          {param, param + 1, param + 2});
    in.attrs.lr = 1e-2;
    in.attrs.beta1 = 0.9;
    in.attrs.beta2 = 0.999;
    in.attrs.eps = 1e-8;
    in.attrs.weight_decay = 0.01;
  }

 private:
  Plan& plan_;
  const TwoStageOptions& o_;
  int64_t index_ = 0;
};

// Stage `s`'s schedule: GPipe (every forward, then every backward) or
// 1F1B (stages - s - 1 forwards ahead, then one of each in turn).
std::vector<ScheduleEntry> scheduleFor(int64_t s, const TwoStageOptions& o) {
  const int64_t m = o.micro_batches;
  const int64_t ahead = o.order == PipelineOrder::kGPipe ? m : o.stages - s - 1;
  std::vector<ScheduleEntry> schedule;
  int64_t forwards = 0;
  for (; forwards < ahead && forwards < m; ++forwards) schedule.push_back({"forward", forwards});
  for (int64_t k = 0; k < m; ++k) {
    if (forwards < m) schedule.push_back({"forward", forwards++});
    schedule.push_back({"backward", k});
  }
  schedule.push_back({"optimizer", -1});
  return schedule;
}

}  // namespace

absl::StatusOr<Plan> twoStagePlan(const TwoStageOptions& o) {
  if (o.stages != 1 && o.stages != 2) {
    return absl::InvalidArgumentError(absl::StrCat("stages is ", o.stages, "; 1 or 2"));
  }
  Plan plan;
  plan.source = absl::StrCat("two_stage(stages=", o.stages, ", micro_batches=", o.micro_batches,
                             ")");
  plan.model = "two_stage";
  plan.function = "train_step";
  absl::StatusOr<mesh::DeviceMesh> mesh = mesh::DeviceMesh::create({o.stages}, {"pp"});
  if (!mesh.ok()) return mesh.status();
  plan.mesh = *mesh;
  plan.strategies = {"pp"};
  plan.micro_batches = o.micro_batches;
  Builder b(plan, o);
  using comm::DType;
  const int64_t ids = b.buffer("tokens", {o.batch, o.seq}, BufferRole::kActivation, DType::kInt32);
  const int64_t labels =
      b.buffer("labels", {o.batch, o.seq}, BufferRole::kActivation, DType::kInt32);
  const int64_t seed = b.buffer("loss_seed", {}, BufferRole::kActivation);
  const int64_t embed = b.param("embed.weight", {o.vocab, o.hidden}, 0);
  const int64_t head = b.param("head.weight", {o.hidden, o.vocab}, 1);
  const int64_t h = b.activation("h", o.hidden);
  const int64_t logits = b.activation("logits", o.vocab);
  const int64_t loss = b.buffer("loss", {}, BufferRole::kActivation);
  const int64_t dlogits = b.activation("dlogits", o.vocab);
  const int64_t dh = b.activation("dh", o.hidden);
  const int64_t dhead = b.buffer("dhead", {o.hidden, o.vocab}, BufferRole::kActivation);
  const int64_t ghead = b.buffer("grad:head.weight", {o.hidden, o.vocab}, BufferRole::kGrad);
  const int64_t dembed = b.buffer("dembed", {o.vocab, o.hidden}, BufferRole::kActivation);
  const int64_t gembed = b.buffer("grad:embed.weight", {o.vocab, o.hidden}, BufferRole::kGrad);
  plan.interface = {.ids = ids, .labels = labels, .loss_grad_seed = seed, .loss = loss,
                    .vocab = o.vocab};

  auto program = [&](int64_t stage) {
    Program p;
    p.stage = stage;
    p.blocks = {{"forward", Phase::kForward, {}},
                {"backward", Phase::kBackward, {}},
                {"optimizer", Phase::kOptimizer, {}}};
    p.schedule = scheduleFor(stage, o);
    return p;
  };
  auto lossAndHead = [&](Block& forward, Block& backward, int64_t input) {
    b.add(forward, "nn.linear", {input, head}, {logits});
    b.add(forward, "nn.cross_entropy", {logits, labels}, {loss});
    b.add(backward, "nn.cross_entropy_grad", {logits, labels, seed}, {dlogits}).attrs.scale =
        1.0 / static_cast<double>(o.batch * o.seq);
    b.add(backward, "nn.matmul", {dlogits, head}, {dh}).attrs.transpose_rhs = true;
    b.add(backward, "nn.matmul", {input, dlogits}, {dhead}).attrs.transpose_lhs = true;
    b.add(backward, "dist.accumulate", {dhead}, {ghead});
  };
  auto embedding = [&](Block& backward, int64_t grad) {
    b.add(backward, "nn.embedding_grad", {ids, grad}, {dembed});
    b.add(backward, "dist.accumulate", {dembed}, {gembed});
  };
  if (o.stages == 1) {
    Program p = program(0);
    b.add(p.blocks[0], "nn.embedding", {ids, embed}, {h});
    lossAndHead(p.blocks[0], p.blocks[1], h);
    embedding(p.blocks[1], dh);
    b.step(p.blocks[2], embed, gembed);
    b.step(p.blocks[2], head, ghead);
    plan.programs.push_back(std::move(p));
  } else {
    const int64_t send_h = b.activation("send_handle:h", o.hidden);
    const int64_t sent_h = b.activation("sent:h", o.hidden);
    const int64_t recv_dh = b.activation("recv_handle:dh", o.hidden);
    const int64_t got_dh = b.activation("received:dh", o.hidden);
    const int64_t recv_h = b.activation("recv_handle:h", o.hidden);
    const int64_t got_h = b.activation("received:h", o.hidden);
    const int64_t send_dh = b.activation("send_handle:dh", o.hidden);
    const int64_t sent_dh = b.activation("sent:dh", o.hidden);
    Program first = program(0);
    b.add(first.blocks[0], "nn.embedding", {ids, embed}, {h});
    b.transfer(first.blocks[0], "dist.send_start", h, send_h, "send_h", 1, 0);
    b.transfer(first.blocks[1], "dist.recv_start", got_dh, recv_dh, "recv_dh", 1, 1);
    b.wait(first.blocks[1], recv_dh, got_dh, "recv_dh");
    embedding(first.blocks[1], got_dh);
    // The activation's send is waited for a block later.
    b.wait(first.blocks[1], send_h, sent_h, "send_h");
    b.step(first.blocks[2], embed, gembed);
    Program last = program(1);
    b.transfer(last.blocks[0], "dist.recv_start", got_h, recv_h, "recv_h", 0, 0);
    b.wait(last.blocks[0], recv_h, got_h, "recv_h");
    lossAndHead(last.blocks[0], last.blocks[1], got_h);
    b.transfer(last.blocks[1], "dist.send_start", dh, send_dh, "send_dh", 0, 1);
    b.wait(last.blocks[1], send_dh, sent_dh, "send_dh");
    b.step(last.blocks[2], head, ghead);
    plan.programs.push_back(std::move(first));
    plan.programs.push_back(std::move(last));
  }
  // Each buffer's interval is the one program's that uses it.
  for (Program& p : plan.programs) {
    p.assignOrder();
    const std::vector<Lifetime> live = computeLifetimes(plan, p);
    for (size_t id = 0; id < live.size(); ++id) {
      if (live[id] != Lifetime{}) plan.buffers[id].live = live[id];
    }
  }
  if (absl::Status s = checkPlan(plan); !s.ok()) return s;
  return plan;
}

}  // namespace loom::plan::testing
