// The exporter (see plan_json.h and docs/plan_json.md): module -> plan::Plan.
#include "planner/export/plan_json.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include "nlohmann/json.hpp"
#include "plan/attrs_codec.h"
#include "plan/lifetimes.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/plan_price.h"
#include "planner/dialect/dist/ir/dist_attrs.h"
#include "planner/dialect/dist/ir/dist_interfaces.h"
#include "planner/dialect/dist/ir/dist_ops.h"
#include "planner/dialect/dist/ir/dist_types.h"
#include "planner/dialect/nn/ir/module_path.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/dialect/nn/ir/nn_interfaces.h"
#include "planner/export/stage_functions.h"
#include "planner/export/timeline.h"
#include "planner/transforms/accumulate/micro_steps.h"
#include "planner/transforms/autodiff/passes.h"
#include "planner/transforms/autodiff/phases.h"
#include "planner/transforms/collectives/passes.h"
#include "planner/transforms/memory/memory_plan.h"
#include "planner/transforms/optimizer/passes.h"
#include "planner/transforms/placement/passes.h"
#include "planner/transforms/stages/passes.h"

namespace loom::planner::exporter {
namespace {

using nlohmann::json;
using Placement = std::vector<dist::AxisPlacement>;

std::string printed(auto printable) {
  std::string text;
  llvm::raw_string_ostream os(text);
  printable.print(os);
  return text;
}

mlir::RankedTensorType tensorOf(mlir::Type type) {
  if (auto future = llvm::dyn_cast<dist::FutureType>(type)) type = future.getValueType();
  return llvm::cast<mlir::RankedTensorType>(type);
}

plan::AxisPlacement toPlan(const dist::AxisPlacement& entry) {
  plan::AxisPlacement out;
  switch (entry.kind) {
    case dist::AxisPlacement::Kind::kReplicate:
      break;
    case dist::AxisPlacement::Kind::kShard:
      out.kind = plan::AxisPlacement::Kind::kShard;
      out.dim = entry.dim;
      out.padded = entry.padded;
      break;
    case dist::AxisPlacement::Kind::kPartial:
      out = *plan::AxisPlacement::parse(
          absl::StrCat("partial(", dist::stringifyReductionKind(entry.reduction).str(), ")"));
      break;
  }
  return out;
}

plan::Placement toPlan(const Placement& placement) {
  plan::Placement out;
  for (const dist::AxisPlacement& entry : placement) out.push_back(toPlan(entry));
  return out;
}

Placement fromAttr(mlir::Attribute attr) {
  auto placement = llvm::dyn_cast_or_null<dist::PlacementAttr>(attr);
  if (!placement) return {};
  return Placement(placement.getAxes().begin(), placement.getAxes().end());
}

// An attribute as JSON, the form plan::setAttrFromJson reads: numbers,
// strings and arrays as themselves, enums by name, types as their printed
// element type, placements as per-axis strings, unit attributes as true.
json attrJson(mlir::Attribute attr) {
  if (auto reduction = llvm::dyn_cast<dist::ReductionKindAttr>(attr)) {
    return dist::stringifyReductionKind(reduction.getValue()).str();
  }
  if (auto integer = llvm::dyn_cast<mlir::IntegerAttr>(attr)) {
    if (integer.getType().isInteger(1)) return integer.getValue().getBoolValue();
    return integer.getInt();
  }
  if (auto real = llvm::dyn_cast<mlir::FloatAttr>(attr)) return real.getValueAsDouble();
  if (auto text = llvm::dyn_cast<mlir::StringAttr>(attr)) return text.getValue().str();
  if (llvm::isa<mlir::UnitAttr>(attr)) return true;
  if (auto type = llvm::dyn_cast<mlir::TypeAttr>(attr)) return printed(type.getValue());
  if (auto placement = llvm::dyn_cast<dist::PlacementAttr>(attr)) {
    json out = json::array();
    for (const dist::AxisPlacement& entry : fromAttr(placement))
      out.push_back(toPlan(entry).toString());
    return out;
  }
  if (auto ints = llvm::dyn_cast<mlir::DenseI64ArrayAttr>(attr)) {
    return json(std::vector<int64_t>(ints.asArrayRef().begin(), ints.asArrayRef().end()));
  }
  if (auto array = llvm::dyn_cast<mlir::ArrayAttr>(attr)) {
    json out = json::array();
    for (mlir::Attribute element : array) out.push_back(attrJson(element));
    return out;
  }
  return printed(attr);
}

// The placement an op result has: the op's result placement attribute or,
// for dist ops, what PlacementTransferOpInterface makes of its operand's;
// other ops keep their operand's.
Placement derivePlacement(mlir::Operation* op, unsigned result, mlir::ArrayAttr meshAxes,
                          const llvm::DenseMap<mlir::Value, Placement>& placements) {
  if (auto results = op->getAttrOfType<mlir::ArrayAttr>(placement::kResultPlacementsAttrName)) {
    if (result < results.size()) return fromAttr(results[result]);
  }
  Placement operand = op->getNumOperands() > 0 ? placements.lookup(op->getOperand(0)) : Placement();
  operand.resize(meshAxes.size());
  if (auto transfer = llvm::dyn_cast<dist::PlacementTransferOpInterface>(op)) {
    llvm::SmallVector<dist::AxisPlacement> placement =
        transfer.getResultPlacement(result, operand, meshAxes);
    return Placement(placement.begin(), placement.end());
  }
  return operand;
}

// Local shape times the ranks that shard each dim.
std::vector<int64_t> globalShape(mlir::RankedTensorType local, const Placement& placement,
                                 const mesh::DeviceMesh& mesh) {
  std::vector<int64_t> shape(local.getShape().begin(), local.getShape().end());
  for (auto [axis, entry] : llvm::enumerate(placement)) {
    if (entry.isShard() && entry.dim < static_cast<int64_t>(shape.size())) {
      shape[entry.dim] *= mesh.shape()[axis];
    }
  }
  return shape;
}

// The init spec of a parameter or optimizer state: its nn.init with the
// plan's seed and its stream. Fails, naming the buffer and the fix, when
// the argument has none.
absl::StatusOr<plan::InitSpec> initSpecOf(mlir::func::FuncOp func, unsigned n,
                                          const std::string& name, uint64_t seed, int64_t stream) {
  auto init = func.getArgAttrOfType<mlir::DictionaryAttr>(n, nn::NnDialect::kInitAttrName);
  if (!init) {
    return absl::InvalidArgumentError(absl::StrCat(
        "argument #", n, " ('", name, "') of @", func.getSymName().str(), " has no ",
        nn::NnDialect::kInitAttrName.str(),
        "; give every parameter one, e.g. {nn.init = {kind = \"normal\", mean = 0.0, std = 0.02}} "
        "(the model zoo and the PyTorch importer set it; optimizer states get theirs from "
        "--plan-optimizer-step)"));
  }
  const llvm::StringRef kind = init.getAs<mlir::StringAttr>("kind").getValue();
  return plan::InitSpec{
      .kind = kind == "zeros"  ? plan::InitSpec::Kind::kZeros
              : kind == "ones" ? plan::InitSpec::Kind::kOnes
                               : plan::InitSpec::Kind::kNormal,
      .mean = static_cast<float>(init.getAs<mlir::FloatAttr>("mean").getValueAsDouble()),
      .std = static_cast<float>(init.getAs<mlir::FloatAttr>("std").getValueAsDouble()),
      .seed = seed,
      .stream_id = static_cast<uint64_t>(stream)};
}

// The name of argument `n`: its nn.name, else its location's name (inputs:
// "input_ids", "position_ids"), else "arg<n>". An optimizer state is named
// after its kind and the parameter `paramOf` gives ("exp_avg:NAME").
std::string argName(mlir::func::FuncOp func, unsigned n,
                    const llvm::DenseMap<mlir::Value, mlir::Value>& paramOf) {
  if (auto kind = func.getArgAttrOfType<mlir::StringAttr>(n, optimizer::kOptimizerStateAttrName)) {
    if (mlir::Value param = paramOf.lookup(func.getArgument(n))) {
      return absl::StrCat(
          kind.getValue().str(), ":",
          argName(func, llvm::cast<mlir::BlockArgument>(param).getArgNumber(), paramOf));
    }
  }
  if (auto name = func.getArgAttrOfType<mlir::StringAttr>(n, nn::NnDialect::kNameAttrName)) {
    return name.getValue().str();
  }
  if (auto loc = llvm::dyn_cast<mlir::NameLoc>(func.getArgument(n).getLoc()))
    return loc.getName().str();
  return absl::StrCat("arg", n);
}

plan::Topology topologyOf(const mesh::Topology& topology) {
  auto link = [](const mesh::Link& l) {
    return plan::Link{.link_class = std::string(mesh::linkClassName(l.link_class)),
                      .bandwidth_bytes_per_s = l.spec.bandwidth_bytes_per_s,
                      .latency_s = l.spec.latency_s};
  };
  const mesh::DeviceSpec& device = topology.device();
  return {.hosts = topology.numHosts(),
          .devices_per_host = topology.devicesPerHost(),
          .device = device.name,
          .peak_flops_bf16 = device.peak_flops_bf16,
          .peak_flops_fp32 = device.peak_flops_fp32,
          .memory_bytes = device.memory_bytes,
          .memory_bandwidth_bytes_per_s = device.memory_bandwidth_bytes_per_s,
          .host_memory_bytes = device.host_memory_bytes,
          .host_memory_bandwidth_bytes_per_s = device.host_memory_bandwidth_bytes_per_s,
          .intra_host = link(topology.intraHostLink()),
          .inter_host = link(topology.interHostLink()),
          .host = link(topology.hostLink())};
}

// The value a dist op chain starts from: back through collectives, waits,
// slices and buckets (an unbucket's entry to the bucket operand it came
// from) to the value the plan resharded, usually a function argument.
mlir::Value valueBehindDistOps(mlir::Value value) {
  for (int hops = 0; hops < 16 && !llvm::isa<mlir::BlockArgument>(value); ++hops) {
    mlir::Operation* def = value.getDefiningOp();
    if (auto unbucket = llvm::dyn_cast<dist::UnbucketOp>(def)) {
      const unsigned entry = llvm::cast<mlir::OpResult>(value).getResultNumber();
      mlir::Operation* producer = unbucket->getOperand(0).getDefiningOp();
      while (producer && !llvm::isa<dist::BucketOp>(producer) && producer->getNumOperands() > 0) {
        producer = producer->getOperand(0).getDefiningOp();
      }
      if (!producer || entry >= producer->getNumOperands()) break;
      value = producer->getOperand(entry);
    } else if (def && def->getDialect() && def->getDialect()->getNamespace() == "dist" &&
               def->getNumOperands() > 0) {
      value = def->getOperand(0);
    } else {
      break;
    }
  }
  return value;
}

// The parameter an optimizer step updates: its param operand or, for a
// step on a host master copy (plan-offload), the device tensor the copy of
// its result writes.
mlir::Value parameterOf(dist::OptimizerStepOp step) {
  auto arg = llvm::dyn_cast<mlir::BlockArgument>(step.getParam());
  auto func = arg ? llvm::dyn_cast<mlir::func::FuncOp>(arg.getOwner()->getParentOp()) : nullptr;
  if (!func || !func.getArgAttr(arg.getArgNumber(), optimizer::kOptimizerStateAttrName)) {
    return step.getParam();
  }
  for (mlir::Operation* user : step.getNewParam().getUsers()) {
    if (auto copy = llvm::dyn_cast<dist::CopyIntoDeviceStartOp>(user)) return copy.getDest();
  }
  return step.getParam();
}

// One export: the step's functions (one, or a pipeline's chunks), their
// memory plans, and the plan being built.
class Exporter {
 public:
  Exporter(ExportedStep step, mesh::DeviceMesh mesh, mlir::ArrayAttr meshAxes,
           const PlanExportOptions& options)
      : step_(std::move(step)), mesh_(std::move(mesh)), meshAxes_(meshAxes), options_(options) {}

  absl::StatusOr<plan::Plan> run(mlir::ModuleOp module, const mesh::Topology& topology);

 private:
  absl::Status addBuffers();
  absl::Status addFunctionBuffers(mlir::func::FuncOp func, const memory::MemoryPlan& memory,
                                  const llvm::DenseMap<int64_t, int64_t>& streams);
  void linkReplicas();
  absl::Status addInstructions(plan::Program& program);
  absl::StatusOr<plan::Instruction> instructionOf(mlir::Operation& op, int64_t index);
  void describePointToPoint(mlir::Operation& op, plan::Instruction& in);
  absl::Status setInterface();
  int64_t vocabOf();
  absl::Status setLifetimes();
  absl::Status setPredicted(const mesh::Topology& topology);

  ExportedStep step_;
  mesh::DeviceMesh mesh_;
  mlir::ArrayAttr meshAxes_;
  const PlanExportOptions& options_;
  plan::Plan plan_;
  llvm::DenseMap<mlir::Value, Placement> placements_;
  llvm::DenseMap<mlir::Value, int64_t> ids_;
  llvm::DenseMap<mlir::Operation*, int64_t> opIndex_;
  llvm::DenseMap<mlir::Value, std::string> handles_;
};

absl::StatusOr<plan::Plan> Exporter::run(mlir::ModuleOp module, const mesh::Topology& topology) {
  plan_.source = "plan.json";
  plan_.model = options_.model;
  plan_.function = step_.name;
  plan_.mesh = mesh_;
  plan_.strategies.assign(mesh_.ndim(), "fsdp");
  for (auto meshOp : module.getOps<dist::MeshOp>()) {
    if (auto attr = meshOp->getAttrOfType<mlir::ArrayAttr>(placement::kStrategiesAttrName)) {
      plan_.strategies.clear();
      for (llvm::StringRef s : attr.getAsValueRange<mlir::StringAttr>())
        plan_.strategies.push_back(s.str());
    }
    break;
  }
  plan_.topology = topologyOf(topology);
  // Op indices run on across the chunks, so buffer names stay unique.
  for (ExportedFunction& f : step_.functions) {
    for (mlir::Operation& op : f.func.getBody().front()) opIndex_[&op] = opIndex_.size();
  }
  plan_.micro_batches = accumulate::microStepsOf(step_.functions.front().func);
  if (absl::Status s = addBuffers(); !s.ok()) return s;
  for (int64_t stage = 0; stage < step_.stages; ++stage) {
    plan::Program& program = plan_.programs.emplace_back();
    program.stage = stage;
    if (absl::Status s = addInstructions(program); !s.ok()) return s;
  }
  if (absl::Status s = setInterface(); !s.ok()) return s;
  if (absl::Status s = setLifetimes(); !s.ok()) return s;
  if (options_.search_template) return std::move(plan_);
  if (absl::Status s = setPredicted(topology); !s.ok()) return s;
  if (absl::Status s = plan::checkPlan(plan_); !s.ok()) {
    return absl::InternalError(absl::StrCat("the exporter made an invalid plan: ", s.message()));
  }
  return std::move(plan_);
}

// Parameters draw their init from one stream each, numbered in the step's
// argument order (a chunk argument's dist.pipeline_arg), so a pipelined
// plan starts from the weights the one-program plan does.
absl::Status Exporter::addBuffers() {
  auto stepArgOf = [](mlir::func::FuncOp func, unsigned n) -> int64_t {
    auto arg = func.getArgAttrOfType<mlir::IntegerAttr>(n, stages::kPipelineArgAttrName);
    return arg ? arg.getInt() : n;
  };
  std::vector<int64_t> params;
  for (ExportedFunction& f : step_.functions) {
    for (mlir::BlockArgument arg : f.func.getArguments()) {
      if (f.func.getArgAttr(arg.getArgNumber(), nn::NnDialect::kParamAttrName))
        params.push_back(stepArgOf(f.func, arg.getArgNumber()));
    }
  }
  // A tied parameter is an argument of several chunks; its replicas draw
  // from its one stream.
  std::sort(params.begin(), params.end());
  params.erase(std::unique(params.begin(), params.end()), params.end());
  llvm::DenseMap<int64_t, int64_t> streams;  // step argument -> stream
  for (int64_t param : params) streams[param] = static_cast<int64_t>(streams.size());
  for (ExportedFunction& f : step_.functions) {
    llvm::DenseMap<int64_t, int64_t> byArg;
    for (mlir::BlockArgument arg : f.func.getArguments()) {
      auto it = streams.find(stepArgOf(f.func, arg.getArgNumber()));
      if (it != streams.end()) byArg[arg.getArgNumber()] = it->second;
    }
    if (absl::Status s = addFunctionBuffers(f.func, memory::computeMemoryPlan(f.func), byArg);
        !s.ok()) {
      return s;
    }
  }
  linkReplicas();
  return absl::OkStatus();
}

// A tied parameter's buffers on each stage that holds it (the parameter,
// the gradient its optimizer step reads and its states) are replicas of
// the lowest stage's (plan::Buffer::replica_of): the same values every
// step, saved, exported and counted in the gradient norm once.
void Exporter::linkReplicas() {
  // (step argument, slot: 0 the parameter, else the optimizer step's
  // operand) -> (stage, buffer) per holder.
  std::map<std::pair<int64_t, unsigned>, std::vector<std::pair<int64_t, int64_t>>> copies;
  for (ExportedFunction& f : step_.functions) {
    auto tiedArg = [&](mlir::Value value) -> std::optional<int64_t> {
      auto arg = llvm::dyn_cast<mlir::BlockArgument>(value);
      if (!arg || !f.func.getArgAttr(arg.getArgNumber(), stages::kTiedStagesAttrName))
        return std::nullopt;
      return f.func
          .getArgAttrOfType<mlir::IntegerAttr>(arg.getArgNumber(), stages::kPipelineArgAttrName)
          .getInt();
    };
    for (mlir::BlockArgument arg : f.func.getArguments()) {
      if (std::optional<int64_t> stepArg = tiedArg(arg))
        copies[{*stepArg, 0}].push_back({f.stage, ids_.lookup(arg)});
    }
    for (auto step : f.func.getBody().front().getOps<dist::OptimizerStepOp>()) {
      std::optional<int64_t> stepArg = tiedArg(step.getParam());
      if (!stepArg) continue;
      for (unsigned k = 1; k < step->getNumOperands(); ++k)
        copies[{*stepArg, k}].push_back({f.stage, ids_.lookup(step->getOperand(k))});
    }
  }
  for (auto& [slot, holders] : copies) {
    std::sort(holders.begin(), holders.end());
    for (const auto& [stage, id] : llvm::drop_begin(holders))
      plan_.buffers[id].replica_of = holders.front().second;
  }
}

// One function's values, from its memory plan (arguments, then op results
// in program order). An optimizer state draws from its parameter's stream
// (`streams`: argument number -> stream). An optimizer step's results are
// its operands' buffers, updated in place.
absl::Status Exporter::addFunctionBuffers(mlir::func::FuncOp func,
                                          const memory::MemoryPlan& memory,
                                          const llvm::DenseMap<int64_t, int64_t>& streams) {
  mlir::Block& body = func.getBody().front();
  llvm::DenseMap<mlir::Value, mlir::Value> paramOf;
  for (auto step : body.getOps<dist::OptimizerStepOp>()) {
    const mlir::Value param = parameterOf(step);
    for (mlir::Value state :
         {step.getExpAvg(), step.getExpAvgSq(), step.getMaster(), step.getParam()}) {
      if (state && state != param) paramOf[state] = param;
    }
  }
  llvm::DenseMap<mlir::Value, unsigned> returned;
  for (auto [i, operand] : llvm::enumerate(body.getTerminator()->getOperands()))
    returned[operand] = i;
  for (const memory::ValueLifetime& lifetime : memory.values) {
    mlir::Value value = lifetime.value;
    plan::Buffer& b = plan_.buffers.emplace_back();
    b.id = static_cast<int64_t>(plan_.buffers.size()) - 1;
    b.role = lifetime.role;
    Placement placement;
    const mlir::RankedTensorType local = tensorOf(value.getType());
    if (auto arg = llvm::dyn_cast<mlir::BlockArgument>(value)) {
      const unsigned n = arg.getArgNumber();
      b.name = argName(func, n, paramOf);
      placement = fromAttr(func.getArgAttr(n, placement::kPlacementAttrName));
      if (auto shape = func.getArgAttrOfType<mlir::DenseI64ArrayAttr>(
              n, collectives::kGlobalShapeAttrName)) {
        b.global_shape.assign(shape.asArrayRef().begin(), shape.asArrayRef().end());
      }
      if (plan::persistentRole(b.role)) {
        const mlir::Value param = paramOf.lookup(arg) ? paramOf.lookup(arg) : value;
        const int64_t stream =
            streams.lookup(llvm::cast<mlir::BlockArgument>(param).getArgNumber());
        absl::StatusOr<plan::InitSpec> init = initSpecOf(func, n, b.name, options_.seed, stream);
        if (!init.ok()) return init.status();
        b.init = *init;
      }
    } else {
      mlir::Operation* op = value.getDefiningOp();
      const unsigned resultNumber = llvm::cast<mlir::OpResult>(value).getResultNumber();
      b.name = absl::StrCat(op->getName().getStringRef().str(), "#", opIndex_[op],
                            op->getNumResults() > 1 ? absl::StrCat(".", resultNumber) : "");
      placement = derivePlacement(op, resultNumber, meshAxes_, placements_);
      if (auto it = returned.find(value); it != returned.end()) {
        if (mlir::Attribute attr = func.getResultAttr(it->second, placement::kPlacementAttrName)) {
          placement = fromAttr(attr);
        }
        if (auto name = func.getResultAttrOfType<mlir::StringAttr>(it->second,
                                                                   nn::NnDialect::kNameAttrName)) {
          b.name = absl::StrCat("grad:", name.getValue().str());
        }
      }
    }
    if (placement.empty()) placement.resize(mesh_.ndim());
    placements_[value] = placement;
    ids_[value] = b.id;
    absl::StatusOr<comm::DType> dtype = comm::dtypeFromName(printed(local.getElementType()));
    if (!dtype.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(b.name, ": ", dtype.status().message(),
                       "; plans hold f32, bf16, f16, f64 and integer tensors"));
    }
    b.dtype = *dtype;
    if (b.global_shape.empty()) b.global_shape = globalShape(local, placement, mesh_);
    b.local_shape.assign(local.getShape().begin(), local.getShape().end());
    b.bytes = lifetime.bytes;
    b.memory = lifetime.host ? plan::MemorySpace::kHost : plan::MemorySpace::kDevice;
    b.placement = toPlan(placement);
  }
  // In-place results are their operands' buffers: an optimizer step's, and
  // a copy into a device tensor's future and wait.
  for (auto step : body.getOps<dist::OptimizerStepOp>()) {
    for (mlir::OpResult result : step->getResults()) {
      ids_[result] = ids_.lookup(step.getInPlaceOperand(result.getResultNumber()));
    }
  }
  for (auto copy : body.getOps<dist::CopyIntoDeviceStartOp>()) {
    const int64_t dest = ids_.lookup(copy.getDest());
    ids_[copy.getResult()] = dest;
    for (mlir::Operation* wait : copy.getResult().getUsers()) ids_[wait->getResult(0)] = dest;
  }
  return absl::OkStatus();
}

absl::StatusOr<plan::Instruction> Exporter::instructionOf(mlir::Operation& op, int64_t index) {
  plan::Instruction in;
  in.op = op.getName().getStringRef().str();
  in.index = index;
  in.scope = nn::modulePathOf(op.getLoc());
  in.recompute = op.hasAttr(autodiff::kRecomputeAttrName);
  in.micro_step = accumulate::microStepOf(&op);
  in.info = plan::findOp(in.op);
  if (in.info == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(printed(op.getLoc()), ": ", in.op,
                     " cannot be exported: it has no row in the plan op table "
                     "(plan/op_table.cc), so no runtime would execute it"));
  }
  for (mlir::Value operand : op.getOperands()) {
    if (auto it = ids_.find(operand); it != ids_.end()) in.operands.push_back(it->second);
  }
  for (mlir::Value result : op.getResults()) {
    if (auto it = ids_.find(result); it != ids_.end()) in.results.push_back(it->second);
  }
  for (mlir::NamedAttribute attr : op.getAttrs()) {
    // The mesh is the plan's; segment sizes are in the operand lists.
    const llvm::StringRef key = attr.getName().getValue();
    if (key == "mesh" || key == "operandSegmentSizes" || key == "resultSegmentSizes") continue;
    // Carried as Instruction::recompute and Instruction::micro_step.
    if (key == autodiff::kRecomputeAttrName || key == accumulate::kMicroStepAttrName) continue;
    // Carried by the block: a backward root starts a backward block, an
    // optimizer-phase op is in the optimizer block.
    if (key == autodiff::kBackwardRootAttrName || key == optimizer::kOptimizerPhaseAttrName) {
      continue;
    }
    // A point-to-point op's one axis is the plan's mesh_axes (below).
    if (in.info->family == plan::OpFamily::kPointToPoint && key == "axis") continue;
    if (options_.search_template && (key == placement::kOperandPlacementsAttrName ||
                                     key == placement::kResultPlacementsAttrName)) {
      continue;
    }
    if (absl::Status s = plan::setAttrFromJson(in, attr.getName().str(), attrJson(attr.getValue()));
        !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(printed(op.getLoc()), ": ", s.message()));
    }
  }
  if (std::optional<CollectiveInfo> info = describeCollective(&op, mesh_)) {
    in.attrs.group_size = info->group_size;
    in.attrs.bytes = info->bytes;
    if (info->async) {
      in.attrs.async_handle = absl::StrCat("h", handles_.size());
      handles_[op.getResult(0)] = in.attrs.async_handle;
    }
  } else if (in.info->family == plan::OpFamily::kPointToPoint) {
    describePointToPoint(op, in);
  } else if (in.info->family == plan::OpFamily::kCopy) {
    // What crosses the link: the tensor as it arrives.
    in.attrs.bytes = memory::storageBytes(op.getResult(0).getType());
    in.attrs.async_handle = absl::StrCat("h", handles_.size());
    handles_[op.getResult(0)] = in.attrs.async_handle;
  } else if (auto wait = llvm::dyn_cast<dist::WaitOp>(op)) {
    in.attrs.async_handle = handles_.lookup(wait.getFuture());
  }
  return in;
}

// A send or receive: its axis, the bytes it moves (the tensor's, whole) and
// the handle of its start.
void Exporter::describePointToPoint(mlir::Operation& op, plan::Instruction& in) {
  in.attrs.mesh_axes = {op.getAttrOfType<mlir::StringAttr>("axis").getValue().str()};
  mlir::Type moved =
      op.getNumOperands() > 0 ? op.getOperand(0).getType() : op.getResult(0).getType();
  if (auto future = llvm::dyn_cast<dist::FutureType>(moved)) moved = future.getValueType();
  const auto tensor = llvm::cast<mlir::RankedTensorType>(moved);
  in.attrs.bytes =
      tensor.getNumElements() * static_cast<int64_t>((tensor.getElementTypeBitWidth() + 7) / 8);
  if (in.info->async_start) {
    in.attrs.async_handle = absl::StrCat("h", handles_.size());
    handles_[op.getResult(0)] = in.attrs.async_handle;
  }
}

// A stage's blocks (a forward and a backward per chunk, one optimizer) in
// the schedule's order; setPredicted adds their predicted times.
absl::Status Exporter::addInstructions(plan::Program& program) {
  absl::StatusOr<std::vector<plan::ScheduleEntry>> schedule =
      stageSchedule(step_, program.stage, plan_.micro_batches);
  if (!schedule.ok()) return schedule.status();
  program.schedule = *std::move(schedule);
  std::vector<ExportedFunction*> chunks;
  for (ExportedFunction& f : step_.functions) {
    if (f.stage == program.stage) chunks.push_back(&f);
  }
  // Instructions are large (their attributes): every block is sized first,
  // so none regrows.
  std::vector<std::vector<Phase>> phases;
  size_t optimizerCount = 0;
  for (ExportedFunction* f : chunks) {
    phases.push_back(assignPhases(f->func));
    size_t counts[3] = {0, 0, 0};
    for (Phase phase : phases.back()) ++counts[static_cast<int>(phase)];
    for (Phase phase : {plan::Phase::kForward, plan::Phase::kBackward}) {
      plan::Block& block = program.blocks.emplace_back();
      block.name = blockName(step_, phase, f->chunk);
      block.phase = phase;
      block.instructions.reserve(counts[static_cast<int>(phase)]);
    }
    optimizerCount += counts[static_cast<int>(plan::Phase::kOptimizer)];
  }
  plan::Block& optimizer = program.blocks.emplace_back();
  optimizer.name = blockName(step_, plan::Phase::kOptimizer, 0);
  optimizer.phase = plan::Phase::kOptimizer;
  optimizer.instructions.reserve(optimizerCount);
  for (auto [k, f] : llvm::enumerate(chunks)) {
    mlir::Block& body = f->func.getBody().front();
    size_t position = 0;
    for (mlir::Operation& op : body.without_terminator()) {
      const int64_t index = opIndex_[&op];
      absl::StatusOr<plan::Instruction> in = instructionOf(op, index);
      if (!in.ok()) return in.status();
      const Phase phase = phases[k][position++];
      plan::Block& block =
          phase == Phase::kOptimizer ? optimizer : program.blocks[2 * k + static_cast<int>(phase)];
      in->phase = block.phase;
      in->block = block.name;
      in->position = static_cast<int64_t>(block.instructions.size());
      block.instructions.push_back(*std::move(in));
    }
  }
  return absl::OkStatus();
}

// What the runtime feeds and reads: the token ids (operand 0 of the
// embedding), the labels (operand 1 of the cross-entropy), the seed of the
// loss's cotangent (autodiff's extra argument) and the returned loss, each
// in the chunk that has it.
absl::Status Exporter::setInterface() {
  plan::Interface& io = plan_.interface;
  // The argument an op's operand comes from, through the dist ops that
  // reshard it on the way (labels all-to-all'd to the logits' layout, say).
  auto argFeeding = [&](llvm::StringRef opName, unsigned operand) -> int64_t {
    for (ExportedFunction& f : step_.functions) {
      for (mlir::Operation& op : f.func.getBody().front()) {
        if (op.getName().getStringRef() != opName || op.getNumOperands() <= operand) continue;
        auto arg = llvm::dyn_cast<mlir::BlockArgument>(valueBehindDistOps(op.getOperand(operand)));
        if (!arg) continue;
        if (auto it = ids_.find(arg); it != ids_.end()) return it->second;
      }
    }
    return -1;
  };
  // Zoo graphs name their inputs by location; other graphs are read by use.
  for (ExportedFunction& f : step_.functions) {
    for (mlir::BlockArgument arg : f.func.getArguments()) {
      auto loc = llvm::dyn_cast<mlir::NameLoc>(arg.getLoc());
      if (!loc || f.func.getArgAttr(arg.getArgNumber(), nn::NnDialect::kNameAttrName)) continue;
      const llvm::StringRef name = loc.getName().getValue();
      if (name == "input_ids" || name == "tokens") io.ids = ids_.lookup(arg);
      if (name == "labels") io.labels = ids_.lookup(arg);
      if (name == "position_ids") io.positions = ids_.lookup(arg);
    }
  }
  if (io.ids < 0) io.ids = argFeeding("nn.embedding", 0);
  if (io.labels < 0) io.labels = argFeeding("nn.cross_entropy", 1);
  if (io.labels < 0) io.labels = argFeeding("nn.vocab_stats", 1);
  io.vocab = vocabOf();
  for (ExportedFunction& f : step_.functions) {
    if (auto seed = f.func->getAttrOfType<mlir::IntegerAttr>(autodiff::kLossGradArgAttrName)) {
      if (auto it = ids_.find(f.func.getArgument(seed.getInt())); it != ids_.end())
        io.loss_grad_seed = it->second;
    }
    mlir::Operation* terminator = f.func.getBody().front().getTerminator();
    for (auto [i, operand] : llvm::enumerate(terminator->getOperands())) {
      if (f.func.getResultAttr(i, autodiff::kGradOfAttrName)) continue;
      if (auto it = ids_.find(operand); it != ids_.end()) io.loss = it->second;
      break;
    }
  }
  for (auto [what, id, how] :
       {std::tuple{"token ids", io.ids,
                   "feed an argument to nn.embedding or give it loc(\"input_ids\")"},
        std::tuple{"labels", io.labels,
                   "feed an argument to nn.cross_entropy or give it loc(\"labels\")"},
        std::tuple{"loss", io.loss, "return the scalar loss first (plan-autodiff does)"},
        std::tuple{"loss cotangent seed", io.loss_grad_seed,
                   "run plan-autodiff before exporting"}}) {
    if (id < 0) {
      return absl::InvalidArgumentError(absl::StrCat("@", step_.name, ": the ", what,
                                                     " the runtime feeds or reads are not found; ",
                                                     how));
    }
  }
  return absl::OkStatus();
}

// The vocabulary: rows of the table parameter the ids index, the argument
// behind the embedding's table (a gathered padded table's rows are its
// padded extent). 0: not found.
int64_t Exporter::vocabOf() {
  for (ExportedFunction& f : step_.functions) {
    for (mlir::Operation& op : f.func.getBody().front()) {
      if (op.getName().getStringRef() != "nn.embedding" || plan_.interface.ids < 0 ||
          ids_.lookup(op.getOperand(0)) != plan_.interface.ids) {
        continue;
      }
      const mlir::Value table = valueBehindDistOps(op.getOperand(1));
      if (auto arg = llvm::dyn_cast<mlir::BlockArgument>(table)) {
        return plan_.buffers[ids_.lookup(arg)].global_shape[0];
      }
      return 0;
    }
  }
  return 0;
}

// Each buffer's interval in the one program that uses it.
absl::Status Exporter::setLifetimes() {
  for (plan::Program& program : plan_.programs) {
    program.assignOrder();
    const std::vector<plan::Lifetime> live = plan::computeLifetimes(plan_, program);
    for (plan::Buffer& b : plan_.buffers) {
      if (plan_.programs.size() == 1 || live[b.id] != plan::Lifetime{}) b.live = live[b.id];
    }
  }
  return absl::OkStatus();
}

// The predicted figures: the plan priced by cost::recordPrice (the same
// pricing the mesh search uses), and the traffic per axes and kind.
absl::Status Exporter::setPredicted(const mesh::Topology& topology) {
  cost::Efficiency efficiency;
  efficiency.gemm = options_.compute_efficiency;
  absl::StatusOr<cost::CostModel> model = cost::CostModel::create(topology, efficiency);
  if (!model.ok()) return model.status();
  if (absl::Status s = cost::recordPrice(*model, plan_); !s.ok()) return s;
  // Per optimizer step: every micro-step's collectives.
  plan_.predicted.comm_volume = cost::commVolumeOf(plan_);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<plan::Plan> exportPlan(mlir::ModuleOp module, const mesh::Topology& topology,
                                      const PlanExportOptions& options) {
  absl::StatusOr<mesh::DeviceMesh> mesh = meshOf(module);
  if (!mesh.ok()) return mesh.status();
  absl::StatusOr<ExportedStep> step = exportedStep(module);
  if (!step.ok()) return step.status();
  const mlir::ArrayAttr meshAxes = (*module.getOps<dist::MeshOp>().begin()).getAxes();
  return Exporter(*std::move(step), *std::move(mesh), meshAxes, options).run(module, topology);
}

}  // namespace loom::planner::exporter
