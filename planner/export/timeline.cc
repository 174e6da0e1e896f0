// The predicted timeline of one step (see timeline.h for the model).
#include "planner/export/timeline.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "llvm/ADT/DenseMap.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "planner/dialect/dist/ir/dist_ops.h"
#include "planner/dialect/dist/ir/dist_types.h"
#include "planner/dialect/nn/ir/nn_interfaces.h"
#include "planner/transforms/autodiff/passes.h"

namespace loom::planner::exporter {
namespace {

int64_t elements(mlir::Type type) {
  if (auto future = llvm::dyn_cast<dist::FutureType>(type)) type = future.getValueType();
  return llvm::cast<mlir::RankedTensorType>(type).getNumElements();
}

}  // namespace

const char* phaseName(Phase phase) {
  switch (phase) {
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kOptimizer:
      return "optimizer";
  }
  return "unknown";
}

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
    return mesh::DeviceMesh::create(std::vector<int64_t>(meshOp.getShape().begin(),
                                                         meshOp.getShape().end()),
                                    names);
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

absl::StatusOr<Timeline> predictTimeline(mlir::func::FuncOp func, const mesh::DeviceMesh& mesh,
                                         const mesh::Topology& topology,
                                         const memory::MemoryPlan& memory,
                                         const TimelineOptions& options) {
  if (mesh.size() != topology.worldSize()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the mesh has ", mesh.size(), " devices but the topology ",
                     topology.worldSize(), " (", topology.toString(),
                     "); make the mesh's product equal hosts x devices per host"));
  }
  if (options.compute_efficiency <= 0 || options.compute_efficiency > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compute efficiency must be in (0, 1], got: ", options.compute_efficiency));
  }
  const mesh::DeviceSpec& device = topology.device();
  // The slowest link of each axis group (rank 0's group; the topology is
  // homogeneous, so every group along the same axes is alike).
  std::map<std::string, mesh::Link> links;
  auto linkOf = [&](const CollectiveInfo& info) -> absl::StatusOr<mesh::Link> {
    const std::string key = absl::StrJoin(info.axes, ",");
    if (auto it = links.find(key); it != links.end()) return it->second;
    absl::StatusOr<mesh::DeviceMesh::Group> group = mesh.groupOf(0, info.axes);
    if (!group.ok()) return group.status();
    absl::StatusOr<mesh::Link> link = topology.slowestLink(*group);
    if (!link.ok()) return link.status();
    links.emplace(key, *link);
    return *link;
  };

  Timeline timeline;
  const std::vector<Phase> phases = assignPhases(func);
  double compute = 0;  // when the compute stream is free
  double comm = 0;     // when the comm stream is free
  llvm::DenseMap<mlir::Value, double> done;  // future -> completion time
  auto computeEvent = [&](std::string name, Phase phase, int64_t index, double duration) {
    TimelineEvent event;
    event.name = std::move(name);
    event.phase = phase;
    event.index = index;
    event.start_s = compute;
    event.duration_s = duration;
    timeline.events.push_back(std::move(event));
    compute += duration;
    timeline.compute_s += duration;
  };
  int64_t index = 0;
  for (mlir::Operation& op : func.getBody().front()) {
    const Phase phase = phases[index];
    if (std::optional<CollectiveInfo> info = describeCollective(&op, mesh)) {
      double duration = 0;
      if (info->group_size > 1) {
        absl::StatusOr<mesh::Link> link = linkOf(*info);
        if (!link.ok()) return link.status();
        duration = info->steps * link->spec.latency_s +
                   static_cast<double>(info->bytes) / link->spec.bandwidth_bytes_per_s;
      }
      const double start = std::max(compute, comm);
      timeline.events.push_back({.name = info->kind, .comm = true, .phase = phase,
                                 .index = index, .start_s = start, .duration_s = duration,
                                 .bytes = info->bytes, .axes = absl::StrJoin(info->axes, ",")});
      comm = start + duration;
      timeline.comm_s += duration;
      if (info->async) {
        done[op.getResult(0)] = comm;
      } else {
        timeline.exposed_comm_s += comm - compute;
        compute = comm;
      }
    } else if (auto wait = llvm::dyn_cast<dist::WaitOp>(op)) {
      const double ready = done.lookup(wait.getFuture());
      if (ready > compute) {
        timeline.exposed_comm_s += ready - compute;
        compute = ready;
      }
    } else if (auto cost = llvm::dyn_cast<nn::CostOpInterface>(op)) {
      mlir::Type element =
          llvm::cast<mlir::ShapedType>(op.getResult(0).getType()).getElementType();
      const double peak = element.isBF16() || element.isF16() ? device.peak_flops_bf16
                                                               : device.peak_flops_fp32;
      const double flopTime =
          static_cast<double>(cost.getFlops()) / (peak * options.compute_efficiency);
      const double memoryTime =
          static_cast<double>(cost.getBytesMoved()) / device.memory_bandwidth_bytes_per_s;
      computeEvent(op.getName().getStringRef().str(), phase, index,
                   std::max(flopTime, memoryTime));
    }
    ++index;
  }
  const bool explicitOptimizer =
      llvm::any_of(phases, [](Phase phase) { return phase == Phase::kOptimizer; });
  if (!explicitOptimizer && llvm::is_contained(phases, Phase::kBackward)) {
    compute = std::max(compute, comm);
    for (auto [i, param] : llvm::enumerate(memory.params)) {
      const int64_t streamed = 2 * param.param_bytes + param.param_bytes +
                               4 * param.moment_bytes + 2 * param.master_bytes;
      const double duration =
          static_cast<double>(streamed) / device.memory_bandwidth_bytes_per_s;
      timeline.optimizer_s += duration;
      computeEvent("dist.optimizer_step", Phase::kOptimizer, static_cast<int64_t>(i), duration);
    }
  }
  timeline.step_time_s = std::max(compute, comm);
  return timeline;
}

}  // namespace loom::planner::exporter
