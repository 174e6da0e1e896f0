// The analytic step model (see transformer_model.h). The program below
// follows what the plan pipeline emits for the zoo's Llama graph
// (planner/models/zoo_builder.cc): the same compute ops in the same order,
// the collectives plan-insert-collectives adds, plan-bucketing's buckets,
// plan-schedule's prefetch and gradient overlap, and the buffers with the
// lifetimes plan-memory-plan gives them (gathered buckets and their
// unbucketed views are both counted, as the memory plan counts them).
#include "planner/cost/transformer_model.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace loom::planner::cost {
namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Per-rank sizes of one micro-step.
struct Dims {
  int64_t b = 0;       // sequences per rank
  int64_t s = 0;       // sequence length
  int64_t tokens = 0;  // b * s
  int64_t h = 0;
  int64_t hq = 0;     // query width per tp rank
  int64_t kv = 0;     // key/value width per tp rank
  int64_t f = 0;      // ffn width per tp rank
  int64_t vocab = 0;  // vocabulary per tp rank
  int64_t heads = 0;  // query heads per tp rank
  int64_t head_dim = 0;
  int64_t e = 0;  // bytes per element
  int64_t tp = 1;
  int64_t fsdp = 1;
  int64_t dp = 1;
};

// A parameter of a unit: its gathered (whole over fsdp, local over tp) and
// shard elements.
struct Param {
  int64_t gathered = 0;
  int64_t shard = 0;
};

// Layer parameters, in the order of their forward use.
enum LayerParam { kAttnNorm, kWq, kWk, kWv, kWo, kFfnNorm, kW1, kW3, kW2, kNumLayerParams };
// Root parameters, in the order of their forward use.
enum RootParam { kEmbedding, kNorm, kHead, kNumRootParams };

constexpr int kLayerBackwardUse[] = {kW2, kW3, kW1, kFfnNorm, kWo, kWv, kWk, kWq, kAttnNorm};
constexpr int kRootBackwardUse[] = {kHead, kNorm};

enum Stream : int32_t { kTpStream = 0, kFsdpStream = 1, kDpStream = 2, kBatchStream = 3 };

constexpr int32_t kEnd = std::numeric_limits<int32_t>::max();

class ProgramBuilder {
 public:
  ProgramBuilder(const Workload& workload, const Strategy& strategy, const CostModel& model);

  StepEstimate build();

 private:
  // Instructions and buffers.
  int32_t last() const { return static_cast<int32_t>(program_.size()) - 1; }
  int32_t compute(double seconds) {
    program_.push_back({.kind = Instruction::Kind::kCompute, .seconds = seconds});
    return last();
  }
  // An op that takes no time (bucket, unbucket, free): a slot where the
  // memory plan counts live buffers.
  int32_t slot() { return compute(0); }
  int32_t collective(CollectiveKind kind, int32_t stream, double bytes, bool async) {
    Instruction instruction{.kind = Instruction::Kind::kCollective,
                            .seconds = model_.collectiveSeconds(kind, groups_[stream], bytes),
                            .async = async,
                            .stream = stream};
    program_.push_back(instruction);
    comm_bytes_ += static_cast<int64_t>(bytes);
    return last();
  }
  int32_t wait(int32_t start) {
    program_.push_back({.kind = Instruction::Kind::kWait, .start = start});
    return last();
  }
  // What the runtime allocates beside a sum over `g` ranks of `elements`
  // values of d_.e bytes when it accumulates wider than it travels (a bf16
  // or f16 plan: the pipeline accumulates in f32), as plan-memory-plan
  // counts it: a reduce-scatter receives every rank's segments; an
  // all-reduce also keeps its segment's sum, and pads to equal segments.
  // -1 (no buffer) for f32.
  int32_t sumStaging(bool all_reduce, int64_t elements, int64_t g) {
    if (d_.e >= 4 || g <= 1) return -1;
    if (!all_reduce) return buffer(elements * d_.e, Role::kActivation);
    const int64_t segment = ceilDiv(elements, g);
    int64_t bytes = (g + 1) * segment * d_.e;
    if (g * segment != elements) bytes += 2 * g * segment * d_.e;
    return buffer(bytes, Role::kActivation);
  }
  void useStaging(int32_t staging) {
    if (staging >= 0) use(staging);
  }
  // A buffer made by the last instruction.
  int32_t buffer(int64_t bytes, Role role) {
    buffers_.push_back({.bytes = bytes, .role = role, .first = last(), .last = last()});
    return static_cast<int32_t>(buffers_.size()) - 1;
  }
  // A function argument: parameters are resident, inputs live to their
  // last use.
  int32_t argument(int64_t bytes, Role role) {
    buffers_.push_back(
        {.bytes = bytes, .role = role, .first = -1, .last = role == Role::kParam ? kEnd : -1});
    return static_cast<int32_t>(buffers_.size()) - 1;
  }
  void use(int32_t id) {
    if (id >= 0 && buffers_[id].last != kEnd) buffers_[id].last = last();
  }
  void keep(int32_t id) { buffers_[id].last = kEnd; }

  // A compute op: priced, with its result buffers made and its operands
  // used.
  int32_t op(const ComputeCost& cost, std::initializer_list<int32_t> operands = {}) {
    waitFor(operands);
    compute(model_.computeSeconds(cost));
    for (int32_t id : operands) use(id);
    for (int32_t id : paramOperands_) use(id);
    paramOperands_.clear();
    return last();
  }
  ComputeCost gemm(int64_t m, int64_t n, int64_t k) const {
    return {.op_class = OpClass::kGemm,
            .dtype = workload_.dtype,
            .flops = 2.0 * m * n * k,
            .bytes = static_cast<double>((m * k + k * n + m * n) * d_.e),
            .m = m,
            .n = n,
            .k = k};
  }
  ComputeCost elementwise(double flops, double bytes) const {
    return {.op_class = OpClass::kMemoryBound,
            .dtype = workload_.dtype,
            .flops = flops,
            .bytes = bytes};
  }
  int64_t act(int64_t width) const { return d_.tokens * width * d_.e; }
  // The loss is all-reduced over the batch axes: the fsdp (or dp) stream
  // when there is one, a stream of its own under HSDP.
  int32_t lossStream() const {
    if (d_.dp > 1 && d_.fsdp > 1) return kBatchStream;
    return d_.fsdp > 1 ? kFsdpStream : kDpStream;
  }

  // The all-reduce of an activation over tp. Its wait is placed right
  // before the first op that reads the result (op() emits it). Returns the
  // reduced buffer.
  int32_t tpAllReduce(int32_t value, int64_t elements, int64_t element_bytes) {
    const double bytes = 2.0 * (d_.tp - 1) * ceilDiv(elements, d_.tp) * element_bytes;
    const int32_t start = collective(CollectiveKind::kAllReduce, kTpStream, bytes, true);
    use(value);
    const int32_t staging = element_bytes == d_.e ? sumStaging(true, elements, d_.tp) : -1;
    const int32_t future = buffer(elements * element_bytes, Role::kActivation);
    const int32_t result = buffer(elements * element_bytes, Role::kActivation);
    deferred_.push_back(
        {.start = start, .future = future, .result = result, .staging = staging, .operand = value});
    return result;
  }
  // Emits the waits of deferred all-reduces whose results `operands` read.
  void waitFor(std::initializer_list<int32_t> operands) {
    for (int32_t id : operands) {
      for (size_t i = 0; i < deferred_.size(); ++i) {
        if (deferred_[i].result != id) continue;
        wait(deferred_[i].start);
        use(deferred_[i].future);
        use(deferred_[i].operand);  // an async collective holds its operand
        useStaging(deferred_[i].staging);
        buffers_[id].first = last();
        buffers_[id].last = last();
        deferred_.erase(deferred_.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
  }
  struct Deferred {
    int32_t start = -1;
    int32_t future = -1;
    int32_t result = -1;
    int32_t staging = -1;
    int32_t operand = -1;
  };
  std::vector<Deferred> deferred_;

  // Gather steps (fsdp).
  struct Bucket {
    bool backward = false;
    std::vector<int> params;
    int64_t shard_bytes = 0;
    int64_t gathered_bytes = 0;
    int32_t shard = -1;
    int32_t start = -1;
    int32_t future = -1;
    int32_t result = -1;
  };
  struct Step {
    int unit = -1;  // -1: root, else the layer
    bool backward = false;
    std::vector<Bucket> buckets;
    bool started = false;
  };
  std::vector<Bucket> bucketsOf(const std::vector<Param>& params,
                                const std::vector<int>& order) const;
  const std::vector<Param>& paramsOf(int unit) const { return unit < 0 ? root_ : layer_; }
  void startStep(size_t step);
  void startBucket(Bucket& bucket);
  // Before the first use of each bucket's first param: its wait, the next
  // step's starts after the last bucket's wait, and the unbucketed views.
  void beginUse(int unit, bool backward);
  void useParam(int unit, int param);
  void waitBucket(size_t step, size_t index);

  // Gradient reduction.
  void gradProduced(int unit, int param, int32_t buffer);
  void completePendingReduction();
  void finishAllReduce();
  void completeLastReduction();
  void flushGradWaits();

  // The program's pieces.
  void forwardRoot();
  void forwardLayer(int layer);
  void head();
  void backwardLayer(int layer);
  void backwardRoot();

  const Workload& workload_;
  const Strategy& strategy_;
  const CostModel& model_;
  Dims d_;
  std::vector<Param> layer_;
  std::vector<Param> root_;
  GroupShape groups_[4];
  std::vector<Instruction> program_;
  std::vector<Buffer> buffers_;
  // The gathered parameters useParam readied for the next op.
  std::vector<int32_t> paramOperands_;
  int64_t comm_bytes_ = 0;
  double backwardGather_ = 0;

  std::vector<Step> steps_;
  // Where the steps of each (unit, pass) are; -1 when none (no fsdp, or
  // kept for backward).
  // The (step, bucket) of each parameter, by pass (0: forward, 1:
  // backward), unit + 1 and parameter.
  std::vector<std::vector<std::pair<int, int>>> bucketOf_[2];
  // The views in use of each unit: view buffer per param (or the gathered
  // buffer of a one-param bucket) and the bucket each param is in.
  struct Views {
    std::vector<int32_t> view;
    std::vector<int32_t> result;
  };
  std::vector<Views> views_;  // by unit + 1
  // The pass whose buckets each unit's views come from.
  std::vector<int> pass_;  // by unit + 1

  // Gradient buckets (fsdp): per unit the groups in production order.
  struct GradGroup {
    std::vector<int> params;
    int64_t gathered_bytes = 0;
    int64_t shard_bytes = 0;
    std::vector<int32_t> grads;
  };
  std::vector<std::vector<GradGroup>> gradGroups_;  // by unit + 1
  struct Pending {
    int32_t start = -1;
    int32_t future = -1;
    int32_t bucket = -1;
    int32_t staging = -1;
    int64_t shard_bytes = 0;
    // The collective's operand, held until its wait.
    int32_t operand = -1;
  };
  Pending pending_;
  Pending pendingAllReduce_;
  // The dp all-reduces of unsharded gradients, waited at the end.
  std::vector<Pending> dpFutures_;

  // Saved activations of each layer's forward, read by its backward.
  struct Saved {
    int32_t x = -1;  // the layer input rms_norm read (replicated)
    int32_t xn = -1, v = -1, q_rope = -1, k_rope = -1, o = -1, x2 = -1, yn = -1;
    int32_t a = -1, g = -1, u = -1, m = -1;
  };
  std::vector<Saved> saved_;
  int32_t tokens_ = -1, labels_ = -1, seed_ = -1;
  int32_t residual_ = -1;         // the partial (tp) or plain residual stream
  int32_t residualReplica_ = -1;  // its all-reduced copy (tp)
  int32_t normOut_ = -1, logits_ = -1;
  int32_t lossStart_ = -1;
  int32_t lossOperand_ = -1;
  int32_t grad_ = -1;  // the gradient flowing backward
};

ProgramBuilder::ProgramBuilder(const Workload& workload, const Strategy& strategy,
                               const CostModel& model)
    : workload_(workload), strategy_(strategy), model_(model) {
  const models::TransformerConfig& c = workload.config;
  d_.b = strategy.micro_batch;
  d_.s = workload.seq;
  d_.tokens = d_.b * d_.s;
  d_.tp = strategy.tp;
  d_.fsdp = strategy.fsdp;
  d_.dp = strategy.dp;
  d_.h = c.hidden;
  d_.head_dim = c.headDim();
  d_.heads = c.num_heads / d_.tp;
  d_.hq = d_.heads * d_.head_dim;
  d_.kv = c.num_kv_heads / d_.tp * d_.head_dim;
  d_.f = ceilDiv(c.ffn_hidden, d_.tp);
  d_.vocab = ceilDiv(c.vocab, d_.tp);
  d_.e = dtypeBytes(workload.dtype);

  const int64_t F = d_.fsdp;
  const int64_t hShard = ceilDiv(d_.h, F);
  auto param = [&](int64_t other) {
    return Param{.gathered = hShard * F * other, .shard = hShard * other};
  };
  layer_.resize(kNumLayerParams);
  layer_[kAttnNorm] = param(1);
  layer_[kWq] = param(d_.hq);
  layer_[kWk] = param(d_.kv);
  layer_[kWv] = param(d_.kv);
  layer_[kWo] = param(d_.hq);
  layer_[kFfnNorm] = param(1);
  layer_[kW1] = param(d_.f);
  layer_[kW3] = param(d_.f);
  layer_[kW2] = param(d_.f);
  root_.resize(kNumRootParams);
  // Without tp the table is fsdp-sharded on the vocabulary; with tp, tp
  // takes the vocabulary and fsdp the hidden dim.
  root_[kEmbedding] = d_.tp > 1 ? param(d_.vocab)
                                : Param{.gathered = ceilDiv(c.vocab, F) * F * d_.h,
                                        .shard = ceilDiv(c.vocab, F) * d_.h};
  root_[kNorm] = param(1);
  root_[kHead] = param(d_.vocab);

  // Axes dp, fsdp, tp, tp innermost: strides 1, tp, tp * fsdp.
  const mesh::Topology& topology = model.topology();
  auto hostsOf = [&](int64_t stride, int64_t size) {
    int64_t hosts = 0, lastHost = -1;
    for (int64_t i = 0; i < size; ++i) {
      const int64_t host = i * stride / topology.devicesPerHost();
      if (host != lastHost) ++hosts;
      lastHost = host;
    }
    return GroupShape{.size = size, .hosts = std::max<int64_t>(hosts, 1)};
  };
  groups_[kTpStream] = hostsOf(1, d_.tp);
  groups_[kFsdpStream] = hostsOf(d_.tp, d_.fsdp);
  groups_[kDpStream] = hostsOf(d_.tp * d_.fsdp, d_.dp);
  groups_[kBatchStream] = hostsOf(d_.tp, d_.fsdp * d_.dp);
}

std::vector<ProgramBuilder::Bucket> ProgramBuilder::bucketsOf(const std::vector<Param>& params,
                                                              const std::vector<int>& order) const {
  const int64_t cap = strategy_.bucket_mb * (int64_t{1} << 20);
  std::vector<Bucket> buckets;
  for (int p : order) {
    const int64_t bytes = params[p].gathered * d_.e;
    if (buckets.empty() || (cap > 0 && buckets.back().gathered_bytes + bytes > cap)) {
      buckets.emplace_back();
    }
    buckets.back().params.push_back(p);
    buckets.back().gathered_bytes += bytes;
    buckets.back().shard_bytes += params[p].shard * d_.e;
  }
  return buckets;
}

void ProgramBuilder::startBucket(Bucket& bucket) {
  const bool single = bucket.params.size() == 1;
  if (!single) {
    slot();  // dist.bucket of the shards
    bucket.shard = buffer(bucket.shard_bytes, Role::kGathered);
  }
  bucket.start = collective(CollectiveKind::kAllGather, kFsdpStream,
                            static_cast<double>((d_.fsdp - 1) * bucket.shard_bytes), true);
  if (bucket.backward) backwardGather_ += program_[bucket.start].seconds;
  use(bucket.shard);
  bucket.future = buffer(bucket.gathered_bytes, Role::kGathered);
}

void ProgramBuilder::startStep(size_t step) {
  if (step >= steps_.size() || steps_[step].started) return;
  steps_[step].started = true;
  if (strategy_.prefetch == 0) return;  // each start right before its wait
  for (Bucket& bucket : steps_[step].buckets) startBucket(bucket);
}

void ProgramBuilder::waitBucket(size_t step, size_t index) {
  Bucket& bucket = steps_[step].buckets[index];
  if (strategy_.prefetch == 0) startBucket(bucket);
  wait(bucket.start);
  use(bucket.future);
  use(bucket.shard);  // freed right after the wait
  bucket.result = buffer(bucket.gathered_bytes, Role::kGathered);
  if (index + 1 == steps_[step].buckets.size()) {
    startStep(step + static_cast<size_t>(strategy_.prefetch));
  }
  Views& views = views_[steps_[step].unit + 1];
  if (bucket.params.size() == 1) {
    views.view[bucket.params[0]] = bucket.result;
    views.result[bucket.params[0]] = bucket.result;
    return;
  }
  slot();  // dist.unbucket: a view per parameter
  use(bucket.result);
  for (int p : bucket.params) {
    views.view[p] = buffer(paramsOf(steps_[step].unit)[p].gathered * d_.e, Role::kGathered);
    views.result[p] = bucket.result;
  }
}

void ProgramBuilder::beginUse(int unit, bool backward) {
  if (d_.fsdp == 1) return;
  const int pass = backward ? 1 : 0;
  if (pass == 1 && !strategy_.reshard_after_forward) return;  // the forward views stay
  pass_[unit + 1] = pass;
  Views& views = views_[unit + 1];
  std::fill(views.view.begin(), views.view.end(), -1);
  std::fill(views.result.begin(), views.result.end(), -1);
}

void ProgramBuilder::useParam(int unit, int param) {
  if (d_.fsdp == 1) return;
  Views& views = views_[unit + 1];
  if (views.view[param] < 0) {
    // The bucket's wait sits where its gather was: before the first use of
    // its first parameter.
    const auto [step, index] = bucketOf_[pass_[unit + 1]][unit + 1][param];
    waitBucket(static_cast<size_t>(step), static_cast<size_t>(index));
  }
  // Operands of the next op.
  paramOperands_.push_back(views.view[param]);
  paramOperands_.push_back(views.result[param]);
}

void ProgramBuilder::gradProduced(int unit, int param, int32_t grad) {
  const int64_t bytes = paramsOf(unit)[param].gathered * d_.e;
  if (d_.fsdp > 1) {
    for (GradGroup& group : gradGroups_[unit + 1]) {
      if (std::find(group.params.begin(), group.params.end(), param) == group.params.end()) {
        continue;
      }
      group.grads.push_back(grad);
      if (group.grads.size() < group.params.size()) return;
      // The group is final: the previous reduction completes first, then
      // this one's bucket and reduce-scatter start.
      completePendingReduction();
      if (group.params.size() > 1) {
        slot();  // dist.bucket of the whole gradients
        for (int32_t id : group.grads) use(id);
        pending_.bucket = buffer(group.gathered_bytes, Role::kActivation);
      }
      pending_.start = collective(CollectiveKind::kReduceScatter, kFsdpStream,
                                  static_cast<double>((d_.fsdp - 1) * group.shard_bytes), true);
      // A one-gradient group scatters the gradient itself, which dies at
      // the start; a bucket is freed after the wait.
      pending_.operand = group.params.size() > 1 ? pending_.bucket : group.grads[0];
      use(pending_.operand);
      pending_.staging = sumStaging(false, group.gathered_bytes / d_.e, d_.fsdp);
      pending_.future = buffer(group.shard_bytes, Role::kActivation);
      pending_.shard_bytes = group.shard_bytes;
      return;
    }
    return;
  }
  if (d_.dp > 1) {
    const double wire = 2.0 * (d_.dp - 1) * ceilDiv(bytes / d_.e, d_.dp) * d_.e;
    const int32_t start = collective(CollectiveKind::kAllReduce, kDpStream, wire, true);
    use(grad);
    const int32_t staging = sumStaging(true, bytes / d_.e, d_.dp);
    const int32_t future = buffer(bytes, Role::kActivation);
    dpFutures_.push_back({.start = start, .future = future, .staging = staging, .operand = grad});
    return;
  }
  // Returned as computed.
  buffers_[grad].role = Role::kGrad;
  keep(grad);
}

void ProgramBuilder::finishAllReduce() {
  if (pendingAllReduce_.start < 0) return;
  wait(pendingAllReduce_.start);
  use(pendingAllReduce_.future);
  use(pendingAllReduce_.operand);
  useStaging(pendingAllReduce_.staging);
  const int32_t reduced = buffer(pendingAllReduce_.shard_bytes, Role::kActivation);
  slot();  // dist.unbucket into the returned shards
  use(reduced);
  keep(buffer(pendingAllReduce_.shard_bytes, Role::kGrad));
  pendingAllReduce_ = {};
}

void ProgramBuilder::completePendingReduction() {
  // Under HSDP the dp all-reduce of the reduction before the pending one
  // completes first; the pending reduce-scatter's shards then start their
  // own all-reduce, which runs until the next reduction.
  finishAllReduce();
  if (pending_.start < 0) return;
  wait(pending_.start);
  use(pending_.future);
  use(pending_.operand);
  useStaging(pending_.staging);
  use(pending_.bucket);  // freed after the wait
  const int32_t shards = buffer(pending_.shard_bytes, Role::kActivation);
  if (d_.dp > 1) {
    const double wire = 2.0 * (d_.dp - 1) * ceilDiv(pending_.shard_bytes / d_.e, d_.dp) * d_.e;
    pendingAllReduce_.start = collective(CollectiveKind::kAllReduce, kDpStream, wire, true);
    use(shards);
    pendingAllReduce_.operand = shards;
    pendingAllReduce_.staging = sumStaging(true, pending_.shard_bytes / d_.e, d_.dp);
    pendingAllReduce_.future = buffer(pending_.shard_bytes, Role::kActivation);
    pendingAllReduce_.shard_bytes = pending_.shard_bytes;
  } else {
    slot();  // dist.unbucket into the returned shards
    use(shards);
    keep(buffer(pending_.shard_bytes, Role::kGrad));
  }
  pending_ = {};
}

void ProgramBuilder::completeLastReduction() {
  // The last reduction completes in place (with its dp all-reduce), then
  // the one still in flight.
  const Pending previous = pendingAllReduce_;
  pendingAllReduce_ = {};
  completePendingReduction();
  finishAllReduce();
  pendingAllReduce_ = previous;
  finishAllReduce();
}

void ProgramBuilder::flushGradWaits() {
  for (const Pending& reduction : dpFutures_) {
    wait(reduction.start);
    use(reduction.future);
    use(reduction.operand);
    useStaging(reduction.staging);
    keep(buffer(buffers_[reduction.future].bytes, Role::kGrad));
  }
  dpFutures_.clear();
}

void ProgramBuilder::forwardRoot() {
  beginUse(-1, false);
  useParam(-1, kEmbedding);
  op(elementwise(0, d_.tokens * 4.0 + 2.0 * act(d_.h)), {tokens_});
  residual_ = buffer(act(d_.h), Role::kActivation);
  if (d_.tp > 1) {
    residualReplica_ = tpAllReduce(residual_, d_.tokens * d_.h, d_.e);
  } else {
    residualReplica_ = residual_;
  }
}

void ProgramBuilder::forwardLayer(int layer) {
  Saved& s = saved_[layer];
  const ComputeCost norm = elementwise(4.0 * d_.tokens * d_.h, 2.0 * act(d_.h) + d_.h * d_.e);
  auto linear = [&](int64_t in, int64_t out) { return gemm(d_.tokens, out, in); };
  beginUse(layer, false);
  s.x = residualReplica_;
  useParam(layer, kAttnNorm);
  op(norm, {s.x});
  s.xn = buffer(act(d_.h), Role::kActivation);
  useParam(layer, kWq);
  op(linear(d_.h, d_.hq), {s.xn});
  int32_t q = buffer(act(d_.hq), Role::kActivation);
  op({.op_class = OpClass::kFree}, {q});
  const int32_t qr = buffer(act(d_.hq), Role::kActivation);
  useParam(layer, kWk);
  op(linear(d_.h, d_.kv), {s.xn});
  const int32_t k = buffer(act(d_.kv), Role::kActivation);
  op({.op_class = OpClass::kFree}, {k});
  const int32_t kr = buffer(act(d_.kv), Role::kActivation);
  useParam(layer, kWv);
  op(linear(d_.h, d_.kv), {s.xn});
  const int32_t v = buffer(act(d_.kv), Role::kActivation);
  op({.op_class = OpClass::kFree}, {v});
  s.v = buffer(act(d_.kv), Role::kActivation);
  op(elementwise(3.0 * d_.tokens * d_.hq, 2.0 * act(d_.hq)), {qr});
  s.q_rope = buffer(act(d_.hq), Role::kActivation);
  op(elementwise(3.0 * d_.tokens * d_.kv, 2.0 * act(d_.kv)), {kr});
  s.k_rope = buffer(act(d_.kv), Role::kActivation);
  const double macs = static_cast<double>(d_.b) * d_.heads * d_.head_dim * d_.s * (d_.s + 1) / 2;
  op({.op_class = OpClass::kAttention,
      .dtype = workload_.dtype,
      .flops = 4 * macs,
      .bytes = 2.0 * act(d_.hq) + 2.0 * act(d_.kv)},
     {s.q_rope, s.k_rope, s.v});
  const int32_t o = buffer(act(d_.hq), Role::kActivation);
  op({.op_class = OpClass::kFree}, {o});
  s.o = buffer(act(d_.hq), Role::kActivation);
  useParam(layer, kWo);
  op(linear(d_.hq, d_.h), {s.o});
  const int32_t out = buffer(act(d_.h), Role::kActivation);
  const ComputeCost add = elementwise(1.0 * d_.tokens * d_.h, 3.0 * act(d_.h));
  op(add, {residual_, out});
  int32_t x2 = buffer(act(d_.h), Role::kActivation);
  const int32_t x2Part = x2;
  if (d_.tp > 1) x2 = tpAllReduce(x2Part, d_.tokens * d_.h, d_.e);
  s.x2 = x2;
  useParam(layer, kFfnNorm);
  op(norm, {s.x2});
  s.yn = buffer(act(d_.h), Role::kActivation);
  useParam(layer, kW1);
  op(linear(d_.h, d_.f), {s.yn});
  s.a = buffer(act(d_.f), Role::kActivation);
  op(elementwise(4.0 * d_.tokens * d_.f, 2.0 * act(d_.f)), {s.a});
  s.g = buffer(act(d_.f), Role::kActivation);
  useParam(layer, kW3);
  op(linear(d_.h, d_.f), {s.yn});
  s.u = buffer(act(d_.f), Role::kActivation);
  op(elementwise(1.0 * d_.tokens * d_.f, 3.0 * act(d_.f)), {s.g, s.u});
  s.m = buffer(act(d_.f), Role::kActivation);
  useParam(layer, kW2);
  op(linear(d_.f, d_.h), {s.m});
  const int32_t down = buffer(act(d_.h), Role::kActivation);
  op(add, {x2Part, down});
  residual_ = buffer(act(d_.h), Role::kActivation);
  residualReplica_ = d_.tp > 1 ? tpAllReduce(residual_, d_.tokens * d_.h, d_.e) : residual_;
  // The partial sum is read by the next add only.
}

void ProgramBuilder::head() {
  const int64_t V = d_.vocab;
  useParam(-1, kNorm);
  op(elementwise(4.0 * d_.tokens * d_.h, 2.0 * act(d_.h) + d_.h * d_.e), {residualReplica_});
  normOut_ = buffer(act(d_.h), Role::kActivation);
  useParam(-1, kHead);
  op(gemm(d_.tokens, V, d_.h), {normOut_});
  logits_ = buffer(act(V), Role::kActivation);
  const double logitBytes = static_cast<double>(act(V));
  const double ids = d_.tokens * 4.0;
  if (d_.tp > 1) {
    op(elementwise(1.0 * d_.tokens * V, logitBytes + ids), {logits_});
    int32_t max = buffer(d_.tokens * 4, Role::kActivation);
    max = tpAllReduce(max, d_.tokens, 4);
    op(elementwise(3.0 * d_.tokens * V, logitBytes + ids + d_.tokens * 4.0 + d_.tokens * 8.0),
       {logits_, labels_, max});
    int32_t stats = buffer(d_.tokens * 8, Role::kActivation);
    stats = tpAllReduce(stats, d_.tokens * 2, 4);
    op(elementwise(2.0 * d_.tokens, d_.tokens * 8.0 + 4), {stats});
    const int32_t loss = buffer(4, Role::kActivation);
    if (d_.dp * d_.fsdp > 1) {
      lossStart_ = collective(CollectiveKind::kAllReduce, lossStream(),
                              2.0 * (d_.dp * d_.fsdp - 1) * 4, true);
      use(loss);
      lossOperand_ = loss;
      keep(buffer(4, Role::kActivation));
    }
    op(elementwise(6.0 * d_.tokens * V, 2 * logitBytes + ids + d_.tokens * 12.0 + 4),
       {logits_, labels_, max, stats, seed_});
  } else {
    op(elementwise(4.0 * d_.tokens * V, logitBytes + ids + 4), {logits_, labels_});
    const int32_t loss = buffer(4, Role::kActivation);
    if (d_.dp * d_.fsdp > 1) {
      lossStart_ = collective(CollectiveKind::kAllReduce, lossStream(),
                              2.0 * (d_.dp * d_.fsdp - 1) * 4, true);
      use(loss);
      lossOperand_ = loss;
      keep(buffer(4, Role::kActivation));
    }
    op(elementwise(6.0 * d_.tokens * V, 2 * logitBytes + ids + 4), {logits_, labels_, seed_});
  }
  const int32_t dlogits = buffer(act(V), Role::kActivation);
  // Backward of the head and the final norm.
  beginUse(-1, true);
  useParam(-1, kHead);
  op(gemm(d_.tokens, d_.h, V), {dlogits});
  int32_t dnorm = buffer(act(d_.h), Role::kActivation);
  op(gemm(d_.h, V, d_.tokens), {normOut_, dlogits});
  gradProduced(-1, kHead, buffer(root_[kHead].gathered * d_.e, Role::kActivation));
  if (d_.tp > 1) dnorm = tpAllReduce(dnorm, d_.tokens * d_.h, d_.e);
  useParam(-1, kNorm);
  op(elementwise(11.0 * d_.tokens * d_.h, 3.0 * act(d_.h) + 2.0 * d_.h * d_.e),
     {residualReplica_, dnorm});
  grad_ = buffer(act(d_.h), Role::kActivation);
  gradProduced(-1, kNorm, buffer(d_.h * d_.e, Role::kActivation));
}

void ProgramBuilder::backwardLayer(int layer) {
  Saved& s = saved_[layer];
  auto dx = [&](int64_t out, int64_t in) { return gemm(d_.tokens, in, out); };
  auto dw = [&](int64_t in, int64_t out) { return gemm(in, out, d_.tokens); };
  auto grad = [&](int p) {
    gradProduced(layer, p, buffer(layer_[p].gathered * d_.e, Role::kActivation));
  };
  const ComputeCost add = elementwise(1.0 * d_.tokens * d_.h, 3.0 * act(d_.h));
  const ComputeCost normGrad =
      elementwise(11.0 * d_.tokens * d_.h, 3.0 * act(d_.h) + 2.0 * d_.h * d_.e);
  // The input gradient of x[in] w[in, out] from g[out], and w's gradient.
  auto linearGrad = [&](int param, int64_t in, int64_t out, int32_t x, int32_t g) {
    useParam(layer, param);
    op(dx(out, in), {g});
    const int32_t input_grad = buffer(act(in), Role::kActivation);
    op(dw(in, out), {x, g});
    grad(param);
    return input_grad;
  };
  const int32_t dy = grad_;
  beginUse(layer, true);
  const int32_t dm = linearGrad(kW2, d_.f, d_.h, s.m, dy);
  op(elementwise(1.0 * d_.tokens * d_.f, 3.0 * act(d_.f)), {dm, s.u});
  const int32_t dg = buffer(act(d_.f), Role::kActivation);
  op(elementwise(1.0 * d_.tokens * d_.f, 3.0 * act(d_.f)), {dm, s.g});
  const int32_t du = buffer(act(d_.f), Role::kActivation);
  const int32_t dx3 = linearGrad(kW3, d_.h, d_.f, s.yn, du);
  op(elementwise(10.0 * d_.tokens * d_.f, 3.0 * act(d_.f)), {s.a, dg});
  const int32_t da = buffer(act(d_.f), Role::kActivation);
  const int32_t dx1 = linearGrad(kW1, d_.h, d_.f, s.yn, da);
  op(add, {dx1, dx3});
  int32_t dyn = buffer(act(d_.h), Role::kActivation);
  if (d_.tp > 1) dyn = tpAllReduce(dyn, d_.tokens * d_.h, d_.e);
  useParam(layer, kFfnNorm);
  op(normGrad, {s.x2, dyn});
  const int32_t dx2Part = buffer(act(d_.h), Role::kActivation);
  grad(kFfnNorm);
  op(add, {dy, dx2Part});
  const int32_t dx2 = buffer(act(d_.h), Role::kActivation);
  const int32_t dom = linearGrad(kWo, d_.hq, d_.h, s.o, dx2);
  op({.op_class = OpClass::kFree}, {dom});
  const int32_t dout = buffer(act(d_.hq), Role::kActivation);
  const double macs = static_cast<double>(d_.b) * d_.heads * d_.head_dim * d_.s * (d_.s + 1) / 2;
  op({.op_class = OpClass::kAttention,
      .dtype = workload_.dtype,
      .flops = 10 * macs,
      .bytes = 3.0 * act(d_.hq) + 4.0 * act(d_.kv)},
     {s.q_rope, s.k_rope, s.v, dout});
  const int32_t dq = buffer(act(d_.hq), Role::kActivation);
  const int32_t dk = buffer(act(d_.kv), Role::kActivation);
  const int32_t dv = buffer(act(d_.kv), Role::kActivation);
  op(elementwise(3.0 * d_.tokens * d_.kv, 2.0 * act(d_.kv)), {dk});
  const int32_t dkr = buffer(act(d_.kv), Role::kActivation);
  op(elementwise(3.0 * d_.tokens * d_.hq, 2.0 * act(d_.hq)), {dq});
  const int32_t dqr = buffer(act(d_.hq), Role::kActivation);
  op({.op_class = OpClass::kFree}, {dv});
  const int32_t dvm = buffer(act(d_.kv), Role::kActivation);
  const int32_t dxv = linearGrad(kWv, d_.h, d_.kv, s.xn, dvm);
  op({.op_class = OpClass::kFree}, {dkr});
  const int32_t dkm = buffer(act(d_.kv), Role::kActivation);
  const int32_t dxk = linearGrad(kWk, d_.h, d_.kv, s.xn, dkm);
  op(add, {dxv, dxk});
  const int32_t dxvk = buffer(act(d_.h), Role::kActivation);
  op({.op_class = OpClass::kFree}, {dqr});
  const int32_t dqm = buffer(act(d_.hq), Role::kActivation);
  const int32_t dxq = linearGrad(kWq, d_.h, d_.hq, s.xn, dqm);
  op(add, {dxvk, dxq});
  int32_t dxn = buffer(act(d_.h), Role::kActivation);
  if (d_.tp > 1) dxn = tpAllReduce(dxn, d_.tokens * d_.h, d_.e);
  useParam(layer, kAttnNorm);
  op(normGrad, {s.x, dxn});
  const int32_t dxPart = buffer(act(d_.h), Role::kActivation);
  grad(kAttnNorm);
  op(add, {dx2, dxPart});
  grad_ = buffer(act(d_.h), Role::kActivation);
}

void ProgramBuilder::backwardRoot() {
  // The embedding's gradient: a scatter-add into a zeroed table.
  const int64_t table = root_[kEmbedding].gathered * d_.e;
  op(elementwise(1.0 * d_.tokens * d_.h,
                 d_.tokens * 4.0 + 3.0 * act(d_.h) + static_cast<double>(table)),
     {tokens_, grad_});
  gradProduced(-1, kEmbedding, buffer(table, Role::kActivation));
  completeLastReduction();
  flushGradWaits();
  if (lossStart_ >= 0) {
    wait(lossStart_);
    use(lossOperand_);
  }
}

StepEstimate ProgramBuilder::build() {
  const int L = static_cast<int>(workload_.config.num_layers);
  views_.assign(L + 1, Views{.view = std::vector<int32_t>(kNumLayerParams, -1),
                             .result = std::vector<int32_t>(kNumLayerParams, -1)});
  saved_.assign(L, Saved{});
  pass_.assign(L + 1, 0);
  for (auto& byUnit : bucketOf_) {
    byUnit.assign(L + 1, std::vector<std::pair<int, int>>(kNumLayerParams, {-1, -1}));
  }
  gradGroups_.assign(L + 1, {});

  // Resident parameters and optimizer states.
  int64_t paramElements = 0;
  auto resident = [&](const std::vector<Param>& params, int64_t copies) {
    for (const Param& p : params) {
      const int64_t local = d_.fsdp > 1 ? p.shard : p.gathered;
      paramElements += local * copies;
      argument(local * d_.e, Role::kParam);
    }
  };
  resident(root_, 1);
  for (int i = 0; i < L; ++i) resident(layer_, 1);
  tokens_ = argument(d_.tokens * 4, Role::kActivation);
  labels_ = argument(d_.tokens * 4, Role::kActivation);
  // The loss cotangent's seed (autodiff's scalar argument).
  seed_ = argument(4, Role::kActivation);

  if (d_.fsdp > 1) {
    std::vector<int> rootForward = {kEmbedding, kNorm, kHead};
    std::vector<int> layerForward(kNumLayerParams);
    for (int p = 0; p < kNumLayerParams; ++p) layerForward[p] = p;
    std::vector<int> layerBackward(std::begin(kLayerBackwardUse), std::end(kLayerBackwardUse));
    std::vector<int> rootBackward(std::begin(kRootBackwardUse), std::end(kRootBackwardUse));
    // Steps are runs of consecutive gathers of one unit and pass in
    // program order. The root's forward buckets after the one holding the
    // table are gathered where the final norm and the head are used, after
    // every layer's: a step of their own.
    auto addStep = [&](int unit, bool backward, std::vector<Bucket> buckets) {
      const int step = static_cast<int>(steps_.size());
      for (Bucket& bucket : buckets) bucket.backward = backward;
      for (size_t i = 0; i < buckets.size(); ++i) {
        for (int p : buckets[i].params) {
          bucketOf_[backward ? 1 : 0][unit + 1][p] = {step, static_cast<int>(i)};
        }
      }
      steps_.push_back({.unit = unit, .backward = backward, .buckets = std::move(buckets)});
    };
    std::vector<Bucket> root = bucketsOf(root_, rootForward);
    std::vector<Bucket> rootLate(root.begin() + 1, root.end());
    root.resize(1);
    addStep(-1, false, std::move(root));
    for (int i = 0; i < L; ++i) addStep(i, false, bucketsOf(layer_, layerForward));
    if (!rootLate.empty()) addStep(-1, false, std::move(rootLate));
    if (strategy_.reshard_after_forward) {
      addStep(-1, true, bucketsOf(root_, rootBackward));
      for (int i = L - 1; i >= 0; --i) addStep(i, true, bucketsOf(layer_, layerBackward));
    }
    // Gradient groups in production order: the head and the norm during
    // the head's backward, the table last.
    auto groups = [&](int unit, const std::vector<int>& order) {
      std::vector<GradGroup> out;
      for (Bucket& bucket : bucketsOf(paramsOf(unit), order)) {
        out.push_back({.params = bucket.params,
                       .gathered_bytes = bucket.gathered_bytes,
                       .shard_bytes = bucket.shard_bytes,
                       .grads = {}});
      }
      return out;
    };
    gradGroups_[0] = groups(-1, {kHead, kNorm, kEmbedding});
    const std::vector<int> layerGrads = {kW2, kW3, kW1, kFfnNorm, kWo, kWv, kWk, kWq, kAttnNorm};
    for (int i = 0; i < L; ++i) gradGroups_[i + 1] = groups(i, layerGrads);
    for (int64_t j = 0; j < std::min<int64_t>(strategy_.prefetch, steps_.size()); ++j) {
      startStep(static_cast<size_t>(j));
    }
  }

  forwardRoot();
  for (int i = 0; i < L; ++i) forwardLayer(i);
  head();
  for (int i = L - 1; i >= 0; --i) backwardLayer(i);
  backwardRoot();

  // The memory plan: the states are resident (AdamW moments in f32 and an
  // f32 master copy of non-f32 parameters).
  const int64_t stateBytes = paramElements * (workload_.dtype == Dtype::kF32 ? 8 : 12);
  std::array<int64_t, kNumRoles> residentBytes{};
  residentBytes[static_cast<int>(Role::kOptimizerState)] = stateBytes;
  const int32_t n = static_cast<int32_t>(program_.size());
  for (Buffer& buffer : buffers_) {
    if (buffer.last == kEnd || buffer.last >= n) buffer.last = n - 1;
  }
  const MemoryPeak peak = peakMemory(buffers_, n, residentBytes);
  // The optimizer streams param, grad, both moments and the master copy.
  const double streamed = static_cast<double>(paramElements) *
                          (3.0 * d_.e + 16.0 + (workload_.dtype == Dtype::kF32 ? 0 : 8.0));
  const double optimizer = model_.streamSeconds(streamed);
  const Timing micro = simulate(program_);

  StepEstimate estimate;
  const double A = static_cast<double>(strategy_.accumulation);
  estimate.compute_s = micro.compute_s * A + optimizer;
  estimate.comm_s = micro.comm_s * A;
  estimate.exposed_comm_s = micro.exposed_comm_s * A;
  estimate.optimizer_s = optimizer;
  estimate.step_time_s = micro.step_time_s * A + optimizer;
  estimate.peak_bytes = peak.peak_bytes;
  estimate.breakdown = peak.breakdown;
  estimate.comm_bytes_per_rank = comm_bytes_ * strategy_.accumulation;
  estimate.tokens_per_step = strategy_.globalBatch() * workload_.seq;
  estimate.model_flops_per_device = 3.0 * forwardFlopsPerSequence(workload_) *
                                    static_cast<double>(strategy_.globalBatch()) /
                                    static_cast<double>(strategy_.devices());
  estimate.tokens_per_s_per_device = static_cast<double>(estimate.tokens_per_step) /
                                     estimate.step_time_s /
                                     static_cast<double>(strategy_.devices());
  estimate.mfu =
      estimate.model_flops_per_device / (estimate.step_time_s * model_.peakFlops(workload_.dtype));
  double streams[4] = {0, 0, 0, 0};
  for (const Instruction& instruction : program_) {
    if (instruction.kind == Instruction::Kind::kCollective) {
      streams[instruction.stream] += instruction.seconds;
    }
  }
  estimate.fsdp_stream_s = streams[kFsdpStream] * A;
  estimate.other_stream_s =
      std::max({streams[kTpStream], streams[kDpStream], streams[kBatchStream]}) * A;
  estimate.backward_gather_s = backwardGather_ * A;
  return estimate;
}

}  // namespace

std::string Strategy::meshSpec() const {
  std::vector<std::string> parts;
  if (dp > 1) parts.push_back(absl::StrCat("dp=", dp));
  if (fsdp > 1) parts.push_back(absl::StrCat("fsdp=", fsdp));
  if (tp > 1) parts.push_back(absl::StrCat("tp=", tp));
  if (parts.empty()) parts.push_back("dp=1");
  return absl::StrJoin(parts, ",");
}

std::string Strategy::axes() const {
  std::vector<std::string> parts;
  if (dp > 1) parts.push_back("dp");
  if (fsdp > 1) parts.push_back("fsdp");
  if (tp > 1) parts.push_back("tp");
  if (parts.empty()) parts.push_back("dp");
  return absl::StrJoin(parts, ",");
}

std::string Strategy::parallelism() const {
  std::vector<std::string> parts;
  if (dp > 1 && fsdp > 1) {
    parts.push_back(absl::StrCat("hsdp ", dp, "x", fsdp));
  } else if (fsdp > 1) {
    parts.push_back(absl::StrCat("fsdp ", fsdp));
  } else if (dp > 1) {
    parts.push_back(absl::StrCat("dp ", dp));
  }
  if (tp > 1) parts.push_back(absl::StrCat("tp ", tp));
  if (parts.empty()) parts.push_back("single device");
  return absl::StrJoin(parts, " + ");
}

std::string Strategy::knobs() const {
  std::vector<std::string> parts;
  if (fsdp > 1) {
    parts.push_back(absl::StrCat("prefetch ", prefetch));
    parts.push_back(reshard_after_forward ? "reshard" : "keep");
    parts.push_back(bucket_mb > 0 ? absl::StrCat("bucket ", bucket_mb, " MiB") : "bucket/unit");
  }
  parts.push_back(absl::StrCat("mb ", micro_batch, "x", accumulation));
  return absl::StrJoin(parts, ", ");
}

double forwardFlopsPerSequence(const Workload& workload) {
  const models::TransformerConfig& c = workload.config;
  const double s = static_cast<double>(workload.seq);
  const double h = static_cast<double>(c.hidden);
  const double hq = static_cast<double>(c.num_heads * c.headDim());
  const double kv = static_cast<double>(c.num_kv_heads * c.headDim());
  const double f = static_cast<double>(c.ffn_hidden);
  const double V = static_cast<double>(c.vocab);
  const double linears = 2 * s * (h * hq + 2 * h * kv + hq * h + 3 * h * f);
  const double attention = 4.0 * c.num_heads * c.headDim() * s * (s + 1) / 2;
  const double elementwise = s * (2 * 4 * h + 3 * (hq + kv) + 2 * h + 4 * f + f);
  const double layer = linears + attention + elementwise;
  const double head = 2 * s * h * V + 4 * s * h + 4 * s * V;
  return static_cast<double>(c.num_layers) * layer + head;
}

int64_t memoryLowerBound(const Workload& workload, const Strategy& strategy) {
  const models::TransformerConfig& c = workload.config;
  const int64_t T = strategy.tp;
  const int64_t F = strategy.fsdp;
  const int64_t e = dtypeBytes(workload.dtype);
  const int64_t h = c.hidden;
  const int64_t hq = c.num_heads / T * c.headDim();
  const int64_t kv = c.num_kv_heads / T * c.headDim();
  const int64_t f = ceilDiv(c.ffn_hidden, T);
  const int64_t vocab = ceilDiv(c.vocab, T);
  const int64_t hShard = ceilDiv(h, F);
  const int64_t layer = hShard * (2 + 2 * hq + 2 * kv + 3 * f);
  const int64_t root = (T > 1 ? hShard * vocab : ceilDiv(c.vocab, F) * h) + hShard + hShard * vocab;
  const int64_t elements = c.num_layers * layer + root;
  const int64_t state = workload.dtype == Dtype::kF32 ? 8 : 12;
  const int64_t tokens = strategy.micro_batch * workload.seq;
  const int64_t saved = tokens * (4 * h + 2 * hq + 2 * kv + 4 * f) * e;
  return elements * (e + state) + c.num_layers * saved;
}

absl::Status checkStrategy(const Workload& workload, const Strategy& strategy,
                           const CostModel& model) {
  const models::TransformerConfig& c = workload.config;
  if (c.family != models::ModelFamily::kLlama) {
    return absl::UnimplementedError(absl::StrCat(
        "the analytic step model covers the Llama family only, not ", c.name,
        " (GPT-2: LayerNorm, GELU, biases, tied head); plan it with an explicit --mesh and "
        "--axes"));
  }
  if (strategy.dp < 1 || strategy.fsdp < 1 || strategy.tp < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("mesh degrees must be >= 1, got dp=", strategy.dp, " fsdp=", strategy.fsdp,
                     " tp=", strategy.tp));
  }
  if (strategy.devices() != model.topology().worldSize()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the strategy ", strategy.meshSpec(), " uses ", strategy.devices(),
                     " devices but the topology has ", model.topology().worldSize()));
  }
  if (c.num_heads % strategy.tp != 0 || c.num_kv_heads % strategy.tp != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tp=", strategy.tp, " does not divide the ", c.num_heads, " heads and ", c.num_kv_heads,
        " kv heads of ", c.name, "; choose a tp that divides ", c.num_kv_heads));
  }
  if (strategy.micro_batch < 1 || strategy.accumulation < 1 || strategy.prefetch < 0 ||
      strategy.bucket_mb < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "micro-batch and accumulation must be >= 1 and prefetch and bucket size >= 0, got ",
        strategy.knobs()));
  }
  if (workload.seq < 1 || workload.seq > c.max_seq) {
    return absl::InvalidArgumentError(
        absl::StrCat("seq ", workload.seq, " is outside 1..", c.max_seq, " for ", c.name));
  }
  return absl::OkStatus();
}

absl::StatusOr<StepEstimate> estimateStep(const Workload& workload, const Strategy& strategy,
                                          const CostModel& model) {
  if (absl::Status status = checkStrategy(workload, strategy, model); !status.ok()) {
    return status;
  }
  ProgramBuilder builder(workload, strategy, model);
  return builder.build();
}

}  // namespace loom::planner::cost
