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

absl::StatusOr<LayerCompute> layerCompute(const PricedProgram& program, const CostModel& model) {
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
  for (int64_t order = 0; order < program.size(); ++order) {
    const plan::Instruction& in = program.instruction(order);
    if (in.phase != phase) {
      phase = in.phase;
      pastStack = false;
    }
    if (in.info->family != plan::OpFamily::kCompute || phase == plan::Phase::kOptimizer) continue;
    operands.clear();
    results.clear();
    for (int64_t id : program.operands(order)) operands.push_back(describe(program.buffer(id)));
    for (int64_t id : program.results(order)) results.push_back(describe(program.buffer(id)));
    const std::optional<ComputeCost> cost = computeCost(
        {.name = in.op, .operands = operands, .results = results,
         .transpose_lhs = in.attrs.transpose_lhs});
    if (!cost) {
      return absl::InvalidArgumentError(
          absl::StrCat(in.where(), ": no cost formula for ", in.op, " (planner/cost/op_work.cc)"));
    }
    std::optional<int64_t> layer = blockOf(in.scope, stack);
    if (layer) *layer += program.scopeShift(order);
    if (layer) pastStack = true;
    const bool forward = phase == plan::Phase::kForward;
    LayerCompute::Part& p = layer             ? part(*layer)
                            : pastStack == forward ? out.after
                                                   : out.before;
    p.flops += std::llround(cost->flops);
    (forward ? p.forward_s : p.backward_s) += model.computeSeconds(*cost);
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
  std::vector<double> forward(chunks, 0), backward(chunks, 0);
  std::vector<int64_t> state(chunks, 0);
  size_t layer = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    for (int64_t k = 0; k < counts[c] && layer < compute.layers.size(); ++k, ++layer) {
      forward[c] += compute.layers[layer].forward_s;
      backward[c] += compute.layers[layer].backward_s;
      state[c] += compute.layers[layer].resident_bytes;
    }
  }
  forward.front() += compute.before.forward_s;
  backward.front() += compute.before.backward_s;
  forward.back() += compute.after.forward_s;
  backward.back() += compute.after.backward_s;
  absl::StatusOr<std::vector<std::vector<stages::PipelineAction>>> order =
      stages::scheduleOrder(schedule, shape);
  if (!order.ok()) return order.status();
  absl::StatusOr<stages::PipelineTiming> timing =
      stages::simulateOrder(*order, shape, forward, backward, 0);
  if (!timing.ok()) return timing.status();
  PipelineBound out{.step_s = timing->step_s};
  for (int64_t s = 0; s < shape.stages; ++s) {
    int64_t held = 0;
    for (int64_t c = s; c < chunks; c += shape.stages) held += state[c];
    out.stage_state_bytes = std::max(out.stage_state_bytes, held);
  }
  return out;
}

}  // namespace loom::planner::cost
