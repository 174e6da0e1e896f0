// The predicted timeline of one step (see timeline.h for the model).
#include "planner/export/timeline.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "llvm/ADT/DenseMap.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "planner/cost/program.h"
#include "planner/dialect/dist/ir/dist_ops.h"
#include "planner/dialect/dist/ir/dist_types.h"
#include "planner/dialect/nn/ir/nn_interfaces.h"
#include "planner/transforms/autodiff/passes.h"
#include "planner/transforms/memory/memory_plan.h"

namespace loom::planner::exporter {
namespace {

// describeCollective's kinds.
cost::CollectiveKind kindOf(const std::string& kind) {
  if (kind == "all_gather") return cost::CollectiveKind::kAllGather;
  if (kind == "reduce_scatter") return cost::CollectiveKind::kReduceScatter;
  if (kind == "all_to_all") return cost::CollectiveKind::kAllToAll;
  return cost::CollectiveKind::kAllReduce;
}

int64_t elements(mlir::Type type) {
  if (auto future = llvm::dyn_cast<dist::FutureType>(type)) type = future.getValueType();
  return llvm::cast<mlir::RankedTensorType>(type).getNumElements();
}

// What one AdamW update streams: param, both moments and the master copy
// read and written, the gradient read at its own type (which
// grad-reduce-dtype may make wider or narrower than the parameter's).
int64_t streamedBytes(dist::OptimizerStepOp step) {
  int64_t bytes = memory::storageBytes(step.getGrad().getType());
  for (mlir::Value updated : step->getResults()) {
    bytes += 2 * memory::storageBytes(updated.getType());
  }
  return bytes;
}

}  // namespace

std::vector<Phase> assignPhases(mlir::func::FuncOp func) {
  mlir::Block& body = func.getBody().front();
  mlir::Operation* terminator = body.getTerminator();
  mlir::Operation* loss = nullptr;
  bool training = false;
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    if (func.getResultAttr(i, autodiff::kGradOfAttrName)) {
      training = true;
    } else if (!loss) {
      loss = terminator->getOperand(i).getDefiningOp();
      // A scheduled plan returns the wait of the loss's all-reduce, placed
      // at the end; the forward phase ends at the collective it waits for.
      if (auto wait = llvm::dyn_cast_or_null<dist::WaitOp>(loss)) {
        loss = wait.getFuture().getDefiningOp();
      }
    }
  }
  std::vector<Phase> phases;
  Phase current = Phase::kForward;
  for (mlir::Operation& op : body) {
    if (llvm::isa<dist::OptimizerStepOp>(op)) {
      phases.push_back(Phase::kOptimizer);
      continue;
    }
    phases.push_back(current);
    if (training && &op == loss) current = Phase::kBackward;
  }
  return phases;
}

absl::StatusOr<mesh::DeviceMesh> meshOf(mlir::ModuleOp module) {
  for (auto meshOp : module.getOps<dist::MeshOp>()) {
    std::vector<std::string> names;
    for (llvm::StringRef name : meshOp.getAxes().getAsValueRange<mlir::StringAttr>()) {
      names.push_back(name.str());
    }
    return mesh::DeviceMesh::create(
        std::vector<int64_t>(meshOp.getShape().begin(), meshOp.getShape().end()), names);
  }
  return absl::InvalidArgumentError(
      "the module has no dist.mesh; run --plan-placement and --plan-insert-collectives first");
}

std::optional<CollectiveInfo> describeCollective(mlir::Operation* op,
                                                 const mesh::DeviceMesh& mesh) {
  llvm::StringRef name = op->getName().getStringRef();
  if (!name.consume_front("dist.")) return std::nullopt;
  CollectiveInfo info;
  info.async = name.consume_back("_start");
  if (name != "all_gather" && name != "reduce_scatter" && name != "all_reduce" &&
      name != "all_to_all") {
    return std::nullopt;
  }
  info.kind = name.str();
  for (llvm::StringRef axis :
       op->getAttrOfType<mlir::ArrayAttr>("mesh_axes").getAsValueRange<mlir::StringAttr>()) {
    info.axes.push_back(axis.str());
    info.group_size *= *mesh.axisSize(axis);
  }
  const int64_t g = info.group_size;
  const mlir::Type wire = op->getAttrOfType<mlir::TypeAttr>("wire_type").getValue();
  const int64_t e = (wire.getIntOrFloatBitWidth() + 7) / 8;
  const int64_t in = elements(op->getOperand(0).getType());
  const int64_t out = elements(op->getResult(0).getType());
  info.steps = g - 1;
  if (info.kind == "all_gather") {
    info.bytes = (g - 1) * in * e;
  } else if (info.kind == "reduce_scatter") {
    info.bytes = (g - 1) * out * e;
  } else if (info.kind == "all_reduce") {
    info.bytes = 2 * (g - 1) * ((in + g - 1) / g) * e;
    info.steps = 2 * (g - 1);
  } else {
    info.bytes = (g - 1) * (in / g) * e;
  }
  return info;
}

cost::ComputeCost computeCostOf(mlir::Operation* op) {
  cost::ComputeCost cost;
  auto interface = llvm::dyn_cast<nn::CostOpInterface>(op);
  if (!interface) return cost;
  const llvm::StringRef name = op->getName().getStringRef();
  auto result = llvm::cast<mlir::ShapedType>(op->getResult(0).getType());
  const mlir::Type element = result.getElementType();
  cost.dtype = element.isBF16()  ? cost::Dtype::kBF16
               : element.isF16() ? cost::Dtype::kF16
                                 : cost::Dtype::kF32;
  cost.flops = static_cast<double>(interface.getFlops());
  cost.bytes = static_cast<double>(interface.getBytesMoved());
  if (name == "nn.linear" || name == "nn.matmul") {
    cost.op_class = cost::OpClass::kGemm;
    const int64_t n = result.getRank() > 0 ? result.getShape().back() : 1;
    const int64_t m = n > 0 ? result.getNumElements() / n : 0;
    cost.m = m;
    cost.n = n;
    cost.k = m > 0 && n > 0 ? static_cast<int64_t>(cost.flops / (2.0 * m * n) + 0.5) : 0;
  } else if (name == "nn.attention" || name == "nn.attention_grad") {
    cost.op_class = cost::OpClass::kAttention;
  } else if (name == "nn.reshape") {
    cost.op_class = cost::OpClass::kFree;
  }
  return cost;
}

absl::StatusOr<Timeline> predictTimeline(mlir::func::FuncOp func, const mesh::DeviceMesh& mesh,
                                         const mesh::Topology& topology,
                                         const TimelineOptions& options) {
  if (mesh.size() != topology.worldSize()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the mesh has ", mesh.size(), " devices but the topology ", topology.worldSize(), " (",
        topology.toString(), "); make the mesh's product equal hosts x devices per host"));
  }
  if (options.compute_efficiency <= 0 || options.compute_efficiency > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("compute efficiency must be in (0, 1], got: ", options.compute_efficiency));
  }
  cost::Efficiency efficiency;
  efficiency.gemm = options.compute_efficiency;
  absl::StatusOr<cost::CostModel> model =
      cost::CostModel::create(topology, efficiency, options.profile);
  if (!model.ok()) return model.status();
  // Group shape and stream of each set of axes: rank 0's group (the
  // topology is homogeneous, so every group along the same axes is alike).
  struct AxesInfo {
    cost::GroupShape group;
    int32_t stream = 0;
  };
  std::map<std::string, AxesInfo> axesInfo;
  auto infoOf = [&](const CollectiveInfo& info) -> absl::StatusOr<AxesInfo> {
    const std::string key = absl::StrJoin(info.axes, ",");
    if (auto it = axesInfo.find(key); it != axesInfo.end()) return it->second;
    absl::StatusOr<cost::GroupShape> group = model->groupOf(mesh, info.axes);
    if (!group.ok()) return group.status();
    AxesInfo entry{.group = *group, .stream = static_cast<int32_t>(axesInfo.size())};
    axesInfo.emplace(key, entry);
    return entry;
  };

  Timeline timeline;
  const std::vector<Phase> phases = assignPhases(func);
  // The body as a cost::Program: one instruction per timed op, with the
  // event it becomes.
  std::vector<cost::Instruction> program;
  std::vector<TimelineEvent> events;
  llvm::DenseMap<mlir::Value, int32_t> startOf;       // future -> its collective
  std::vector<std::pair<int64_t, double>> optimizer;  // (op index, seconds)
  int64_t index = 0;
  for (mlir::Operation& op : func.getBody().front()) {
    const Phase phase = phases[index];
    if (std::optional<CollectiveInfo> info = describeCollective(&op, mesh)) {
      absl::StatusOr<AxesInfo> axes = infoOf(*info);
      if (!axes.ok()) return axes.status();
      cost::Instruction instruction{.kind = cost::Instruction::Kind::kCollective,
                                    .async = info->async,
                                    .stream = axes->stream};
      instruction.seconds = model->collectiveSeconds(kindOf(info->kind), axes->group,
                                                     static_cast<double>(info->bytes));
      if (info->async) startOf[op.getResult(0)] = static_cast<int32_t>(program.size());
      program.push_back(instruction);
      events.push_back({.name = info->kind,
                        .comm = true,
                        .phase = phase,
                        .index = index,
                        .duration_s = instruction.seconds,
                        .bytes = info->bytes,
                        .axes = absl::StrJoin(info->axes, ",")});
    } else if (auto wait = llvm::dyn_cast<dist::WaitOp>(op)) {
      auto it = startOf.find(wait.getFuture());
      program.push_back(
          {.kind = cost::Instruction::Kind::kWait, .start = it == startOf.end() ? -1 : it->second});
      events.push_back({});  // not an event; dropped below
    } else if (llvm::isa<nn::CostOpInterface>(op)) {
      const double seconds = model->computeSeconds(computeCostOf(&op));
      program.push_back({.kind = cost::Instruction::Kind::kCompute, .seconds = seconds});
      TimelineEvent event;
      event.name = op.getName().getStringRef().str();
      event.phase = phase;
      event.index = index;
      event.duration_s = seconds;
      events.push_back(std::move(event));
    } else if (auto step = llvm::dyn_cast<dist::OptimizerStepOp>(op)) {
      optimizer.push_back({index, model->streamSeconds(static_cast<double>(streamedBytes(step)))});
      timeline.optimizer_s += optimizer.back().second;
    }
    ++index;
  }
  std::vector<double> starts;
  const cost::Timing timing = cost::simulate(program, timeline.optimizer_s, &starts);
  for (size_t i = 0; i < program.size(); ++i) {
    if (program[i].kind == cost::Instruction::Kind::kWait) continue;
    events[i].start_s = starts[i];
    timeline.events.push_back(std::move(events[i]));
  }
  // The optimizer steps run one after another once the rest of the step
  // is done.
  double at = timing.step_time_s - timeline.optimizer_s;
  for (const auto& [stepIndex, seconds] : optimizer) {
    TimelineEvent event;
    event.name = "dist.optimizer_step";
    event.phase = Phase::kOptimizer;
    event.index = stepIndex;
    event.start_s = at;
    event.duration_s = seconds;
    timeline.events.push_back(std::move(event));
    at += seconds;
  }
  timeline.compute_s = timing.compute_s;
  timeline.comm_s = timing.comm_s;
  timeline.exposed_comm_s = timing.exposed_comm_s;
  timeline.step_time_s = timing.step_time_s;
  return timeline;
}

absl::Status repricePlan(mlir::ModuleOp module, const mesh::Topology& topology,
                         const TimelineOptions& options, plan::Plan& plan) {
  absl::StatusOr<mesh::DeviceMesh> mesh = meshOf(module);
  if (!mesh.ok()) return mesh.status();
  auto funcs = module.getOps<mlir::func::FuncOp>();
  if (funcs.empty()) return absl::InvalidArgumentError("the module has no function to price");
  mlir::func::FuncOp func = *funcs.begin();
  absl::StatusOr<Timeline> timeline = predictTimeline(func, *mesh, topology, options);
  if (!timeline.ok()) return timeline.status();
  llvm::DenseMap<int64_t, const TimelineEvent*> byIndex;
  for (const TimelineEvent& event : timeline->events) byIndex[event.index] = &event;
  for (plan::Program& program : plan.programs) {
    for (plan::Block& block : program.blocks) {
      for (plan::Instruction& in : block.instructions) {
        auto it = byIndex.find(in.index);
        if (it == byIndex.end()) continue;
        in.start_s = it->second->start_s;
        in.duration_s = it->second->duration_s;
      }
    }
  }
  plan::Predicted& predicted = plan.predicted;
  predicted.step_time_s = timeline->step_time_s;
  predicted.compute_s = timeline->compute_s;
  predicted.comm_s = timeline->comm_s;
  predicted.exposed_comm_s = timeline->exposed_comm_s;
  predicted.optimizer_s = timeline->optimizer_s;
  if (options.profile) predicted.machine_profile = options.profile->name;
  return absl::OkStatus();
}

}  // namespace loom::planner::exporter
