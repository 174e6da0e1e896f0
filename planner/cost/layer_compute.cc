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

}  // namespace

absl::StatusOr<LayerCompute> layerCompute(const PricedProgram& program, const PlanPrice& price) {
  const std::string stack = stackOf(program);
  if (stack.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(program.header().source, ": no repeated layers to cut into pipeline chunks"));
  }
  LayerCompute out;
  auto part = [&](int64_t layer) -> LayerCompute::Part& {
    if (layer >= static_cast<int64_t>(out.layers.size())) out.layers.resize(layer + 1);
    return out.layers[layer];
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
  for (int64_t order = 0; order < program.size(); ++order) {
    const plan::Instruction& in = program.instruction(order);
    if (in.phase != phase) {
      phase = in.phase;
      pastStack = false;
    }
    const double seconds = price.duration_s[order].value_or(0);
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
    if (phase == plan::Phase::kOptimizer || !(compute || blocking)) continue;
    std::optional<int64_t> layer = blockOf(in.scope, stack);
    if (layer) {
      *layer += program.scopeShift(order);
      pastStack = true;
    }
    const bool forward = phase == plan::Phase::kForward;
    LayerCompute::Part& p = layer                  ? part(*layer)
                            : pastStack == forward ? out.after
                                                   : out.before;
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
  for (int64_t id = 0; id < program.numBuffers(); ++id) {
    const plan::Buffer& b = program.buffer(id);
    if (!plan::persistentRole(b.role) || !program.holds(id)) continue;
    if (const std::optional<int64_t> layer = blockOf(b.name, stack)) {
      part(*layer + program.nameShift(id)).resident_bytes += b.bytes;
    }
  }
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

absl::StatusOr<PipelineBound> pipelineBound(const LayerCompute& compute,
                                            const std::vector<int64_t>& counts,
                                            stages::PipelineSchedule schedule,
                                            const stages::PipelineShape& shape) {
  const int64_t chunks = static_cast<int64_t>(counts.size());
  std::vector<double> forward(chunks, 0), backward(chunks, 0), blocking(chunks, 0);
  std::vector<int64_t> state(chunks, 0);
  size_t layer = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    for (int64_t k = 0; k < counts[c] && layer < compute.layers.size(); ++k, ++layer) {
      forward[c] += compute.layers[layer].forward_s;
      backward[c] += compute.layers[layer].backward_s;
      blocking[c] += compute.layers[layer].blocking_s;
      state[c] += compute.layers[layer].resident_bytes;
    }
  }
  forward.front() += compute.before.forward_s;
  backward.front() += compute.before.backward_s;
  blocking.front() += compute.before.blocking_s;
  forward.back() += compute.after.forward_s;
  backward.back() += compute.after.backward_s;
  blocking.back() += compute.after.blocking_s;
  absl::StatusOr<std::vector<std::vector<stages::PipelineAction>>> order =
      stages::scheduleOrder(schedule, shape);
  if (!order.ok()) return order.status();
  absl::StatusOr<stages::PipelineTiming> timing =
      stages::simulateOrder(*order, shape, forward, backward, 0);
  if (!timing.ok()) return timing.status();
  PipelineBound out;
  double mostBlocking = 0;
  for (int64_t s = 0; s < shape.stages; ++s) {
    int64_t held = 0;
    double stalls = 0;
    for (int64_t c = s; c < chunks; c += shape.stages) {
      held += state[c];
      stalls += blocking[c];
    }
    out.stage_state_bytes = std::max(out.stage_state_bytes, held);
    mostBlocking = std::max(mostBlocking, stalls);
  }
  out.step_s = timing->step_s + static_cast<double>(shape.micro_batches) * mostBlocking;
  return out;
}

}  // namespace loom::planner::cost
