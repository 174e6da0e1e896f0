#include "plan/testing/two_stage.h"

#include <string>
#include <utility>
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

// The model's buffers, and the program blocks that use them.
class TwoStage {
 public:
  TwoStage(Plan& plan, const TwoStageOptions& o) : plan_(plan), o_(o), b_(plan, o) {
    using comm::DType;
    ids_ = b_.buffer("tokens", {o.batch, o.seq}, BufferRole::kActivation, DType::kInt32);
    labels_ = b_.buffer("labels", {o.batch, o.seq}, BufferRole::kActivation, DType::kInt32);
    seed_ = b_.buffer("loss_seed", {}, BufferRole::kActivation);
    embed_ = b_.param("embed.weight", {o.vocab, o.hidden}, 0);
    head_ = o.tied ? -1 : b_.param("head.weight", {o.hidden, o.vocab}, 1);
    h_ = b_.activation("h", o.hidden);
    logits_ = b_.activation("logits", o.vocab);
    loss_ = b_.buffer("loss", {}, BufferRole::kActivation);
    dlogits_ = b_.activation("dlogits", o.vocab);
    dh_ = b_.activation("dh", o.hidden);
    plan.interface = {
        .ids = ids_, .labels = labels_, .loss_grad_seed = seed_, .loss = loss_, .vocab = o.vocab};
  }

  Program oneProgram() {
    Program p = program(0);
    b_.add(p.blocks[0], "nn.embedding", {ids_, embed_}, {h_});
    const int64_t dhead = lossAndHead(p.blocks[0], p.blocks[1], h_, o_.tied ? embed_ : head_);
    const int64_t dembed = embeddingGrad(p.blocks[1], dh_);
    if (o_.tied) {
      // The table's two parts, added per micro-batch.
      const int64_t dsum = grad("dembed+dhead", o_.vocab, o_.hidden);
      b_.add(p.blocks[1], "nn.add", {dhead, dembed}, {dsum});
      b_.step(p.blocks[2], embed_, accumulate(p.blocks[1], dsum, "grad:embed.weight"));
      return p;
    }
    const int64_t gembed = accumulate(p.blocks[1], dembed, "grad:embed.weight");
    b_.step(p.blocks[2], embed_, gembed);
    b_.step(p.blocks[2], head_, accumulate(p.blocks[1], dhead, "grad:head.weight"));
    return p;
  }

  Program firstStage() {
    const auto [send_h, sent_h] = transfer("send_handle:h", "sent:h");
    const auto [recv_dh, got_dh] = transfer("recv_handle:dh", "received:dh");
    Program p = program(0);
    b_.add(p.blocks[0], "nn.embedding", {ids_, embed_}, {h_});
    b_.transfer(p.blocks[0], "dist.send_start", h_, send_h, "send_h", 1, 0);
    b_.transfer(p.blocks[1], "dist.recv_start", got_dh, recv_dh, "recv_dh", 1, 1);
    b_.wait(p.blocks[1], recv_dh, got_dh, "recv_dh");
    const int64_t dembed = embeddingGrad(p.blocks[1], got_dh);
    const int64_t gembed =
        accumulate(p.blocks[1], dembed, o_.tied ? "part:embed.weight" : "grad:embed.weight");
    // The activation's send is waited for a block later.
    b_.wait(p.blocks[1], send_h, sent_h, "send_h");
    b_.step(p.blocks[2], embed_, o_.tied ? exchange(p.blocks[2], gembed, 0) : gembed);
    return p;
  }

  Program lastStage() {
    const auto [recv_h, got_h] = transfer("recv_handle:h", "received:h");
    const auto [send_dh, sent_dh] = transfer("send_handle:dh", "sent:dh");
    // Tied: this stage's replica of the table, from the same init stream.
    const int64_t weight = o_.tied ? replicaOf(embed_) : head_;
    Program p = program(1);
    b_.transfer(p.blocks[0], "dist.recv_start", got_h, recv_h, "recv_h", 0, 0);
    b_.wait(p.blocks[0], recv_h, got_h, "recv_h");
    const int64_t dhead = lossAndHead(p.blocks[0], p.blocks[1], got_h, weight);
    b_.transfer(p.blocks[1], "dist.send_start", dh_, send_dh, "send_dh", 0, 1);
    b_.wait(p.blocks[1], send_dh, sent_dh, "send_dh");
    if (!o_.tied) {
      b_.step(p.blocks[2], head_, accumulate(p.blocks[1], dhead, "grad:head.weight"));
      return p;
    }
    const int64_t part = accumulate(p.blocks[1], dhead, "part:embed.weight");
    const int64_t grad = exchange(p.blocks[2], part, 1);
    plan_.buffers[grad].replica_of = grad_of_embed_;
    b_.step(p.blocks[2], weight, grad);
    return p;
  }

 private:
  Program program(int64_t stage) {
    Program p;
    p.stage = stage;
    p.blocks = {{"forward", Phase::kForward, {}},
                {"backward", Phase::kBackward, {}},
                {"optimizer", Phase::kOptimizer, {}}};
    p.schedule = scheduleFor(stage, o_);
    return p;
  }
  // A started transfer's handle buffer and the [batch, seq, hidden]
  // tensor its wait yields.
  std::pair<int64_t, int64_t> transfer(const std::string& handle, const std::string& tensor) {
    return {b_.activation(handle, o_.hidden), b_.activation(tensor, o_.hidden)};
  }
  int64_t grad(const std::string& name, int64_t rows, int64_t cols) {
    return b_.buffer(name, {rows, cols}, BufferRole::kGrad);
  }
  int64_t accumulate(Block& backward, int64_t value, const std::string& name) {
    const Buffer& v = plan_.buffers[value];
    const int64_t sum = grad(name, v.global_shape[0], v.global_shape[1]);
    b_.add(backward, "dist.accumulate", {value}, {sum});
    return sum;
  }
  // The logits of `input` by `weight` ([hidden, vocab], or tied the
  // [vocab, hidden] table), the loss and back to dh_; returns the weight's
  // gradient.
  int64_t lossAndHead(Block& forward, Block& backward, int64_t input, int64_t weight) {
    if (o_.tied) {
      b_.add(forward, "nn.matmul", {input, weight}, {logits_}).attrs.transpose_rhs = true;
    } else {
      b_.add(forward, "nn.linear", {input, weight}, {logits_});
    }
    b_.add(forward, "nn.cross_entropy", {logits_, labels_}, {loss_});
    b_.add(backward, "nn.cross_entropy_grad", {logits_, labels_, seed_}, {dlogits_}).attrs.scale =
        1.0 / static_cast<double>(o_.batch * o_.seq);
    b_.add(backward, "nn.matmul", {dlogits_, weight}, {dh_}).attrs.transpose_rhs = !o_.tied;
    if (o_.tied) {
      const int64_t dtable = b_.buffer("dhead", {o_.vocab, o_.hidden}, BufferRole::kActivation);
      b_.add(backward, "nn.matmul", {dlogits_, input}, {dtable}).attrs.transpose_lhs = true;
      return dtable;
    }
    const int64_t dhead = b_.buffer("dhead", {o_.hidden, o_.vocab}, BufferRole::kActivation);
    b_.add(backward, "nn.matmul", {input, dlogits_}, {dhead}).attrs.transpose_lhs = true;
    return dhead;
  }
  int64_t embeddingGrad(Block& backward, int64_t grad) {
    const int64_t dembed = b_.buffer("dembed", {o_.vocab, o_.hidden}, BufferRole::kActivation);
    b_.add(backward, "nn.embedding_grad", {ids_, grad}, {dembed});
    return dembed;
  }
  // A second copy of parameter `param` and its states.
  int64_t replicaOf(int64_t param) {
    const Buffer p = plan_.buffers[param];
    const int64_t copy = b_.param(p.name, p.global_shape, p.init->stream_id);
    for (int64_t k = 0; k < 3; ++k) plan_.buffers[copy + k].replica_of = param + k;
    return copy;
  }
  // Stage `stage`'s part `own` of the table's gradient swapped with the
  // other stage's (tag 2 + the sender) and added, stage 0's part first;
  // returns the sum.
  int64_t exchange(Block& optimizer, int64_t own, int64_t stage) {
    const int64_t peer = 1 - stage;
    const std::string at = absl::StrCat("@", stage);
    auto transient = [&](const std::string& name) {
      return b_.buffer(name + at, {o_.vocab, o_.hidden}, BufferRole::kActivation);
    };
    const int64_t recv = transient("recv_handle:part");
    const int64_t got = transient("received:part");
    const int64_t send = transient("send_handle:part");
    const int64_t sent = transient("sent:part");
    const int64_t sum = grad("grad:embed.weight", o_.vocab, o_.hidden);
    b_.transfer(optimizer, "dist.recv_start", got, recv, "recv_part", peer, 2 + peer);
    b_.transfer(optimizer, "dist.send_start", own, send, "send_part", peer, 2 + stage);
    b_.wait(optimizer, recv, got, "recv_part");
    b_.add(optimizer, "nn.add", stage == 0 ? std::vector{own, got} : std::vector{got, own}, {sum});
    b_.wait(optimizer, send, sent, "send_part");
    if (stage == 0) grad_of_embed_ = sum;
    return sum;
  }

  Plan& plan_;
  const TwoStageOptions& o_;
  Builder b_;
  int64_t ids_, labels_, seed_, embed_, head_, h_, logits_, loss_, dlogits_, dh_;
  int64_t grad_of_embed_ = -1;
};

}  // namespace

absl::StatusOr<Plan> twoStagePlan(const TwoStageOptions& o) {
  if (o.stages != 1 && o.stages != 2) {
    return absl::InvalidArgumentError(absl::StrCat("stages is ", o.stages, "; 1 or 2"));
  }
  Plan plan;
  plan.source = absl::StrCat("two_stage(stages=", o.stages, ", micro_batches=", o.micro_batches,
                             o.tied ? ", tied" : "", ")");
  plan.model = "two_stage";
  plan.function = "train_step";
  absl::StatusOr<mesh::DeviceMesh> mesh = mesh::DeviceMesh::create({o.stages}, {"pp"});
  if (!mesh.ok()) return mesh.status();
  plan.mesh = *mesh;
  plan.strategies = {"pp"};
  plan.micro_batches = o.micro_batches;
  TwoStage model(plan, o);
  if (o.stages == 1) {
    plan.programs.push_back(model.oneProgram());
  } else {
    plan.programs.push_back(model.firstStage());
    plan.programs.push_back(model.lastStage());
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
