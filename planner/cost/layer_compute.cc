// A model's compute layer by layer (see layer_compute.h).
#include "planner/cost/layer_compute.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plan/scope.h"
#include "planner/cost/op_work.h"
#include "planner/transforms/stages/balance.h"

namespace loom::planner::cost {
namespace {

Dtype floatTypeOf(comm::DType dtype) {
  if (dtype == comm::DType::kBFloat16) return Dtype::kBF16;
  if (dtype == comm::DType::kFloat16) return Dtype::kF16;
  return Dtype::kF32;
}

TensorDesc describe(const plan::Buffer& b) {
  return {.shape = b.local_shape,
          .element_bytes = static_cast<int64_t>(comm::dtypeSize(b.dtype)),
          .dtype = floatTypeOf(b.dtype)};
}

// The stack block `text` (a scope or a buffer name) names, or nullopt.
std::optional<int64_t> blockOf(std::string_view text, const std::string& stack) {
  std::optional<plan::RepeatedBlock> block = plan::repeatedBlockOf(text);
  if (!block || block->stack != stack) return std::nullopt;
  return block->index;
}

// The stack with the most scoped instructions.
std::string stackOf(const PricedProgram& program) {
  std::map<std::string, int64_t> counts;
  for (int64_t order = 0; order < program.size(); ++order) {
    if (auto block = plan::repeatedBlockOf(program.instruction(order).scope)) {
      ++counts[block->stack];
    }
  }
  std::string stack;
  int64_t most = 0;
  for (const auto& [name, count] : counts) {
    if (count > most) std::tie(stack, most) = std::tie(name, count);
  }
  return stack;
}

// A part of LayerCompute: a layer of the stack (>= 0), the ops before or
// after it; kNoPart and kMixed (touched by several parts) own no buffer.
constexpr int64_t kBefore = -1;
constexpr int64_t kAfter = -2;
constexpr int64_t kNoPart = -3;
constexpr int64_t kMixed = -4;

// "exp_avg:layers.3.wq" -> "layers.3.wq": the name of the parameter a
// gradient or optimizer state belongs to (plan_json.cc names them so).
std::string_view paramName(std::string_view name) {
  const size_t colon = name.rfind(':');
  return colon == std::string_view::npos ? name : name.substr(colon + 1);
}

// Adds each part's resident, optimizer, gradient and saved bytes
// (LayerCompute::Part) to `part(index)`, from `partOf`, each instruction's
// part. A saved activation is live across the end of the first forward
// (the backward reads it); a reduced gradient, into the optimizer phase.
template <typename PartFn>
void addMemory(const PricedProgram& program, const std::string& stack,
               const std::vector<int64_t>& partOf, PartFn&& part) {
  // Each buffer's part, over every op and over the backward's alone.
  std::vector<int64_t> owner(program.numBuffers(), kNoPart);
  std::vector<int64_t> backwardOwner(program.numBuffers(), kNoPart);
  int64_t forwardEnd = -1;
  int64_t optimizerStart = program.size();
  for (int64_t order = 0; order < program.size(); ++order) {
    const plan::Phase phase = program.instruction(order).phase;
    if (phase == plan::Phase::kForward && (forwardEnd == -1 || forwardEnd == order - 1)) {
      forwardEnd = order;
    }
    if (phase == plan::Phase::kOptimizer) optimizerStart = std::min(optimizerStart, order);
    const int64_t index = partOf[order];
    if (index == kNoPart) continue;
    auto claim = [&](int64_t& o) { o = o == kNoPart || o == index ? index : kMixed; };
    auto touch = [&](int64_t id) {
      claim(owner[id]);
      if (phase == plan::Phase::kBackward) claim(backwardOwner[id]);
    };
    for (int64_t id : program.operands(order)) touch(id);
    for (int64_t id : program.results(order)) touch(id);
  }
  // A parameter outside the stack: the part that reads it, by name, for
  // its optimizer states.
  std::map<std::string_view, int64_t> ownerOfParam;
  for (int64_t id = 0; id < program.numBuffers(); ++id) {
    const plan::Buffer& b = program.buffer(id);
    if (b.role == plan::BufferRole::kParam) ownerOfParam[b.name] = owner[id];
  }
  // The part whose parameter `name` (or whose parameter's gradient or
  // state) is, or nullopt.
  auto partOfParam = [&](int64_t id, std::string_view name) -> std::optional<int64_t> {
    if (const std::optional<int64_t> layer = blockOf(name, stack)) {
      return *layer + program.nameShift(id);
    }
    auto it = ownerOfParam.find(name);
    if (it != ownerOfParam.end() && (it->second == kBefore || it->second == kAfter)) {
      return it->second;
    }
    return std::nullopt;
  };
  for (int64_t id = 0; id < program.numBuffers(); ++id) {
    const plan::Buffer& b = program.buffer(id);
    if (b.onHost() || !program.holds(id)) continue;
    const plan::Lifetime live = program.live(id);
    const bool persistent = plan::persistentRole(b.role);
    // Gradients the optimizer reads: every one of a stage's is live there.
    const bool reduced = b.role == plan::BufferRole::kGrad && live.last >= optimizerStart;
    if (persistent || reduced) {
      if (const std::optional<int64_t> index = partOfParam(id, paramName(b.name))) {
        LayerCompute::Part& p = part(*index);
        (persistent ? p.resident_bytes : p.grad_bytes) += b.bytes;
        if (b.role == plan::BufferRole::kOptimizerState) p.optimizer_bytes += b.bytes;
      }
      continue;
    }
    // The chunk that runs an activation's backward readers holds it from
    // its forward (or from the transfer that brings it) to that backward.
    const bool saved = b.role == plan::BufferRole::kActivation && live.first <= forwardEnd &&
                       forwardEnd < live.last;
    const int64_t reader = backwardOwner[id];
    if (saved && reader != kNoPart && reader != kMixed) part(reader).saved_bytes += b.bytes;
  }
}

}  // namespace

absl::StatusOr<LayerCompute> layerCompute(const PricedProgram& program, const PlanPrice* price) {
  const std::string stack = stackOf(program);
  if (stack.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(program.header().source, ": no repeated layers to cut into pipeline chunks"));
  }
  LayerCompute out;
  auto part = [&](int64_t index) -> LayerCompute::Part& {
    if (index == kBefore) return out.before;
    if (index == kAfter) return out.after;
    if (index >= static_cast<int64_t>(out.layers.size())) out.layers.resize(index + 1);
    return out.layers[index];
  };
  // An op outside the stack belongs before it until the phase reaches the
  // stack and after it from there on (the backward runs the stack in
  // reverse, so there the head's gradient comes first).
  plan::Phase phase = plan::Phase::kOptimizer;
  bool pastStack = false;
  std::vector<TensorDesc> operands, results;
  // A collective blocks compute when it is synchronous, or started and
  // waited for with no compute op between (tp's): its handle -> its time
  // and the compute ops run before it started.
  int64_t computed = 0;
  std::map<int64_t, std::pair<double, int64_t>> started;
  // Each instruction's part (kNoPart: the optimizer's, or an unscoped op
  // that neither computes nor blocks), for the buffers each part touches.
  std::vector<int64_t> partOf(program.size(), kNoPart);
  for (int64_t order = 0; order < program.size(); ++order) {
    const plan::Instruction& in = program.instruction(order);
    if (in.phase != phase) {
      phase = in.phase;
      pastStack = false;
    }
    const double seconds = price != nullptr ? price->duration_s[order].value_or(0) : 0;
    const bool compute = in.info->family == plan::OpFamily::kCompute;
    bool blocking = in.info->family == plan::OpFamily::kCollective && !in.info->async_start;
    if (in.info->family == plan::OpFamily::kCollective && in.info->async_start) {
      started[program.results(order)[0]] = {seconds, computed};
    }
    double blocked = seconds;
    if (in.info->family == plan::OpFamily::kWait) {
      auto it = started.find(program.operands(order)[0]);
      blocking = it != started.end() && it->second.second == computed;
      if (blocking) blocked = it->second.first;
    }
    if (compute) ++computed;
    if (phase == plan::Phase::kOptimizer) continue;
    std::optional<int64_t> layer = blockOf(in.scope, stack);
    if (layer) *layer += program.scopeShift(order);
    if (!(compute || blocking)) {
      if (layer) partOf[order] = *layer;
      continue;
    }
    if (layer) pastStack = true;
    const bool forward = phase == plan::Phase::kForward;
    partOf[order] = layer ? *layer : pastStack == forward ? kAfter : kBefore;
    LayerCompute::Part& p = part(partOf[order]);
    if (blocking) {
      p.blocking_s += blocked;
      continue;
    }
    (forward ? p.forward_s : p.backward_s) += seconds;
    operands.clear();
    results.clear();
    for (int64_t id : program.operands(order)) operands.push_back(describe(program.buffer(id)));
    for (int64_t id : program.results(order)) results.push_back(describe(program.buffer(id)));
    const std::optional<int64_t> flops = opFlops(
        {.name = in.op, .operands = operands, .results = results,
         .transpose_lhs = in.attrs.transpose_lhs});
    if (!flops) {
      return absl::InvalidArgumentError(
          absl::StrCat(in.where(), ": no FLOPs formula for ", in.op, " (planner/cost/op_work.cc)"));
    }
    p.flops += *flops;
  }
  addMemory(program, stack, partOf, part);
  return out;
}

LayerCompute repeatLayers(const LayerCompute& compute, int64_t layers) {
  const int64_t have = static_cast<int64_t>(compute.layers.size());
  if (layers <= have) return compute;
  LayerCompute out = compute;
  const int64_t middle = have / 2;
  const int64_t extra = layers - have;
  out.layers.clear();
  for (int64_t i = 0; i < layers; ++i) {
    const int64_t source = i <= middle ? i : i <= middle + extra ? middle : i - extra;
    out.layers.push_back(compute.layers[source]);
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> balanceChunks(const LayerCompute& compute, int64_t chunks) {
  std::vector<int64_t> costs;
  for (const LayerCompute::Part& layer : compute.layers) costs.push_back(layer.flops);
  return stages::balancedRuns(costs, chunks, compute.before.flops, compute.after.flops);
}

namespace {

// `compute`'s parts summed per chunk of `counts` layers (the ops before the
// stack in the first chunk, those after it in the last).
struct ChunkSums {
  std::vector<double> forward, backward, blocking;
  std::vector<int64_t> state, grads, saved;
};

ChunkSums sumChunks(const LayerCompute& compute, const std::vector<int64_t>& counts) {
  const size_t chunks = counts.size();
  ChunkSums sums{.forward = std::vector<double>(chunks, 0),
                 .backward = std::vector<double>(chunks, 0),
                 .blocking = std::vector<double>(chunks, 0),
                 .state = std::vector<int64_t>(chunks, 0),
                 .grads = std::vector<int64_t>(chunks, 0),
                 .saved = std::vector<int64_t>(chunks, 0)};
  auto add = [&](size_t c, const LayerCompute::Part& part) {
    sums.forward[c] += part.forward_s;
    sums.backward[c] += part.backward_s;
    sums.blocking[c] += part.blocking_s;
    sums.state[c] += part.resident_bytes;
    sums.grads[c] += part.grad_bytes;
    sums.saved[c] += part.saved_bytes;
  };
  size_t layer = 0;
  for (size_t c = 0; c < chunks; ++c) {
    for (int64_t k = 0; k < counts[c] && layer < compute.layers.size(); ++k, ++layer) {
      add(c, compute.layers[layer]);
    }
  }
  add(0, compute.before);
  add(chunks - 1, compute.after);
  return sums;
}

}  // namespace

absl::StatusOr<double> pipelineStepBound(const LayerCompute& compute,
                                         const std::vector<int64_t>& counts,
                                         stages::PipelineSchedule schedule,
                                         const stages::PipelineShape& shape) {
  const ChunkSums sums = sumChunks(compute, counts);
  absl::StatusOr<std::vector<std::vector<stages::PipelineAction>>> order =
      stages::scheduleOrder(schedule, shape);
  if (!order.ok()) return order.status();
  absl::StatusOr<stages::PipelineTiming> timing =
      stages::simulateOrder(*order, shape, sums.forward, sums.backward, 0);
  if (!timing.ok()) return timing.status();
  double mostBlocking = 0;
  for (int64_t s = 0; s < shape.stages; ++s) {
    double stalls = 0;
    for (size_t c = s; c < counts.size(); c += shape.stages) stalls += sums.blocking[c];
    mostBlocking = std::max(mostBlocking, stalls);
  }
  return timing->step_s + static_cast<double>(shape.micro_batches) * mostBlocking;
}

absl::StatusOr<int64_t> pipelineMemoryBound(const LayerCompute& compute,
                                            const std::vector<int64_t>& counts,
                                            stages::PipelineSchedule schedule,
                                            const stages::PipelineShape& shape,
                                            int64_t state_shards) {
  const ChunkSums sums = sumChunks(compute, counts);
  absl::StatusOr<std::vector<std::vector<stages::PipelineAction>>> order =
      stages::scheduleOrder(schedule, shape);
  if (!order.ok()) return order.status();
  int64_t most = 0;
  for (int64_t s = 0; s < shape.stages; ++s) {
    int64_t held = 0;
    int64_t reduced = 0;
    for (size_t c = s; c < counts.size(); c += shape.stages) {
      held += sums.state[c];
      reduced += sums.grads[c];
    }
    // The saved activations of the chunks in flight, at their most.
    int64_t inFlight = 0;
    int64_t mostInFlight = 0;
    for (const stages::PipelineAction& a : (*order)[s]) {
      const bool forward = a.kind == stages::PipelineAction::Kind::kForward;
      inFlight += forward ? sums.saved[a.chunk] : -sums.saved[a.chunk];
      mostInFlight = std::max(mostInFlight, inFlight);
    }
    most = std::max(most, held / state_shards + std::max(mostInFlight, reduced / state_shards));
  }
  return most;
}

int64_t stackMemoryBound(const LayerCompute& compute, int64_t state_shards,
                         bool optimizer_on_host) {
  int64_t state = 0;
  int64_t grads = 0;
  int64_t saved = 0;
  auto add = [&](const LayerCompute::Part& part) {
    // Offloaded, the optimizer reads its gradients on the host too.
    state += part.resident_bytes - (optimizer_on_host ? part.optimizer_bytes : 0);
    grads += optimizer_on_host ? 0 : part.grad_bytes;
    saved += part.saved_bytes;
  };
  for (const LayerCompute::Part& layer : compute.layers) add(layer);
  add(compute.before);
  add(compute.after);
  return state / state_shards + std::max(saved, grads / state_shards);
}

}  // namespace loom::planner::cost
