// plan.json export (see plan_json.h and docs/plan_json.md).
#include "planner/export/plan_json.h"

#include <cstdint>
#include <optional>
#include <string>
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
#include "planner/dialect/dist/ir/dist_attrs.h"
#include "planner/dialect/dist/ir/dist_interfaces.h"
#include "planner/dialect/dist/ir/dist_ops.h"
#include "planner/dialect/dist/ir/dist_types.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/dialect/nn/ir/nn_interfaces.h"
#include "planner/export/timeline.h"
#include "planner/transforms/autodiff/passes.h"
#include "planner/transforms/collectives/comm_volume.h"
#include "planner/transforms/collectives/passes.h"
#include "planner/transforms/memory/memory_plan.h"
#include "planner/transforms/optimizer/passes.h"
#include "planner/transforms/placement/passes.h"

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

std::string axisString(const dist::AxisPlacement& entry) {
  switch (entry.kind) {
    case dist::AxisPlacement::Kind::kReplicate:
      return "replicate";
    case dist::AxisPlacement::Kind::kShard:
      return absl::StrCat("shard(", entry.dim, entry.padded ? ",padded)" : ")");
    case dist::AxisPlacement::Kind::kPartial:
      return absl::StrCat("partial(", dist::stringifyReductionKind(entry.reduction).str(), ")");
  }
  return "replicate";
}

json placementJson(const Placement& placement) {
  json out = json::array();
  for (const dist::AxisPlacement& entry : placement) out.push_back(axisString(entry));
  return out;
}

Placement fromAttr(mlir::Attribute attr) {
  auto placement = llvm::dyn_cast_or_null<dist::PlacementAttr>(attr);
  if (!placement) return {};
  return Placement(placement.getAxes().begin(), placement.getAxes().end());
}

// An attribute as JSON: numbers, strings, arrays as themselves, placements
// as per-axis strings, anything else as its printed form.
json attrJson(mlir::Attribute attr) {
  if (auto integer = llvm::dyn_cast<mlir::IntegerAttr>(attr)) {
    if (integer.getType().isInteger(1)) return integer.getValue().getBoolValue();
    return integer.getInt();
  }
  if (auto real = llvm::dyn_cast<mlir::FloatAttr>(attr)) return real.getValueAsDouble();
  if (auto text = llvm::dyn_cast<mlir::StringAttr>(attr)) return text.getValue().str();
  if (llvm::isa<mlir::UnitAttr>(attr)) return true;
  if (auto type = llvm::dyn_cast<mlir::TypeAttr>(attr)) return printed(type.getValue());
  if (auto symbol = llvm::dyn_cast<mlir::FlatSymbolRefAttr>(attr)) return symbol.getValue().str();
  if (auto placement = llvm::dyn_cast<dist::PlacementAttr>(attr)) {
    return placementJson(fromAttr(placement));
  }
  if (auto ints = llvm::dyn_cast<mlir::DenseI64ArrayAttr>(attr)) {
    return json(std::vector<int64_t>(ints.asArrayRef().begin(), ints.asArrayRef().end()));
  }
  if (auto array = llvm::dyn_cast<mlir::ArrayAttr>(attr)) {
    json out = json::array();
    for (mlir::Attribute element : array) out.push_back(attrJson(element));
    return out;
  }
  if (auto reduction = llvm::dyn_cast<dist::ReductionKindAttr>(attr)) {
    return dist::stringifyReductionKind(reduction.getValue()).str();
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

// The topology section: hosts, the device and the two link classes.
json topologyJson(const mesh::Topology& topology) {
  auto linkJson = [](const mesh::Link& link) {
    return json{{"class", std::string(mesh::linkClassName(link.link_class))},
                {"bandwidth_bytes_per_s", link.spec.bandwidth_bytes_per_s},
                {"latency_s", link.spec.latency_s}};
  };
  const mesh::DeviceSpec& device = topology.device();
  return {{"hosts", topology.numHosts()},
          {"devices_per_host", topology.devicesPerHost()},
          {"device",
           {{"name", device.name},
            {"peak_flops_bf16", device.peak_flops_bf16},
            {"peak_flops_fp32", device.peak_flops_fp32},
            {"memory_bytes", device.memory_bytes},
            {"memory_bandwidth_bytes_per_s", device.memory_bandwidth_bytes_per_s}}},
          {"links",
           {{"intra_host", linkJson(topology.intraHostLink())},
            {"inter_host", linkJson(topology.interHostLink())}}}};
}

// What the buffer list is built from and what it leaves for the
// instructions: the buffer id of every value.
struct BufferContext {
  mlir::func::FuncOp func;
  mlir::ArrayAttr meshAxes;
  const mesh::DeviceMesh& mesh;
  uint64_t seed;
  llvm::DenseMap<mlir::Value, int64_t> ids;
  llvm::DenseMap<mlir::Value, Placement> placements;
};

// The name of argument `n`: its nn.name, else its location's name (inputs:
// "input_ids", "position_ids"), else "arg<n>". An optimizer state is named
// after its kind and the parameter `paramOf` gives.
std::string argName(mlir::func::FuncOp func, unsigned n,
                    const llvm::DenseMap<mlir::Value, mlir::Value>& paramOf) {
  if (auto kind = func.getArgAttrOfType<mlir::StringAttr>(n, optimizer::kOptimizerStateAttrName)) {
    if (mlir::Value param = paramOf.lookup(func.getArgument(n))) {
      return absl::StrCat(kind.getValue().str(), ":",
                          argName(func, llvm::cast<mlir::BlockArgument>(param).getArgNumber(),
                                  paramOf));
    }
  }
  if (auto name = func.getArgAttrOfType<mlir::StringAttr>(n, nn::NnDialect::kNameAttrName)) {
    return name.getValue().str();
  }
  if (auto loc = llvm::dyn_cast<mlir::NameLoc>(func.getArgument(n).getLoc())) {
    return loc.getName().str();
  }
  return absl::StrCat("arg", n);
}

// The init spec of a parameter or optimizer state: its nn.init with the
// plan's seed and its stream. Fails, naming the buffer and the fix, when
// the argument has none.
absl::StatusOr<json> initJson(mlir::func::FuncOp func, unsigned n, const std::string& name,
                              uint64_t seed, int64_t stream) {
  auto init = func.getArgAttrOfType<mlir::DictionaryAttr>(n, nn::NnDialect::kInitAttrName);
  if (!init) {
    return absl::InvalidArgumentError(absl::StrCat(
        "argument #", n, " ('", name, "') of @", func.getSymName().str(), " has no ",
        nn::NnDialect::kInitAttrName.str(),
        "; give every parameter one, e.g. {nn.init = {kind = \"normal\", mean = 0.0, "
        "std = 0.02}} (the model zoo and the PyTorch importer set it; optimizer states get "
        "theirs from --plan-optimizer-step)"));
  }
  return json{{"kind", init.getAs<mlir::StringAttr>("kind").getValue().str()},
              {"mean", init.getAs<mlir::FloatAttr>("mean").getValueAsDouble()},
              {"std", init.getAs<mlir::FloatAttr>("std").getValueAsDouble()},
              {"seed", seed},
              {"stream", stream}};
}

// The buffers: the memory plan's values (arguments, then op results in
// program order). Parameters draw their init from one stream each, in
// argument order; an optimizer state draws from its parameter's.
absl::StatusOr<json> buffersJson(const memory::MemoryPlan& memoryPlan, BufferContext& context) {
  mlir::func::FuncOp func = context.func;
  mlir::Block& body = func.getBody().front();
  llvm::DenseMap<mlir::Value, mlir::Value> paramOf;
  for (auto step : body.getOps<dist::OptimizerStepOp>()) {
    for (mlir::Value state : {step.getExpAvg(), step.getExpAvgSq(), step.getMaster()}) {
      if (state) paramOf[state] = step.getParam();
    }
  }
  llvm::DenseMap<mlir::Value, int64_t> streams;
  for (mlir::BlockArgument arg : func.getArguments()) {
    if (func.getArgAttr(arg.getArgNumber(), nn::NnDialect::kParamAttrName)) {
      streams[arg] = static_cast<int64_t>(streams.size());
    }
  }
  llvm::DenseMap<mlir::Operation*, int64_t> opIndex;
  for (mlir::Operation& op : body) opIndex[&op] = static_cast<int64_t>(opIndex.size());
  mlir::Operation* terminator = body.getTerminator();
  llvm::DenseMap<mlir::Value, unsigned> returned;
  for (auto [i, operand] : llvm::enumerate(terminator->getOperands())) returned[operand] = i;
  json buffers = json::array();
  for (const memory::ValueLifetime& lifetime : memoryPlan.values) {
    mlir::Value value = lifetime.value;
    std::string name;
    Placement placement;
    std::vector<int64_t> global;
    const mlir::RankedTensorType local = tensorOf(value.getType());
    json init = nullptr;
    if (auto arg = llvm::dyn_cast<mlir::BlockArgument>(value)) {
      const unsigned n = arg.getArgNumber();
      name = argName(func, n, paramOf);
      placement = fromAttr(func.getArgAttr(n, placement::kPlacementAttrName));
      if (auto shape = func.getArgAttrOfType<mlir::DenseI64ArrayAttr>(
              n, collectives::kGlobalShapeAttrName)) {
        global.assign(shape.asArrayRef().begin(), shape.asArrayRef().end());
      }
      if (lifetime.role == memory::BufferRole::kParam ||
          lifetime.role == memory::BufferRole::kOptimizerState) {
        const mlir::Value param = paramOf.lookup(arg) ? paramOf.lookup(arg) : value;
        absl::StatusOr<json> spec = initJson(func, n, name, context.seed, streams.lookup(param));
        if (!spec.ok()) return spec.status();
        init = *std::move(spec);
      }
    } else {
      mlir::Operation* op = value.getDefiningOp();
      const unsigned resultNumber = llvm::cast<mlir::OpResult>(value).getResultNumber();
      name = absl::StrCat(op->getName().getStringRef().str(), "#", opIndex[op],
                          op->getNumResults() > 1 ? absl::StrCat(".", resultNumber) : "");
      placement = derivePlacement(op, resultNumber, context.meshAxes, context.placements);
      if (auto it = returned.find(value); it != returned.end()) {
        if (mlir::Attribute attr = func.getResultAttr(it->second, placement::kPlacementAttrName)) {
          placement = fromAttr(attr);
        }
        if (auto resultName =
                func.getResultAttrOfType<mlir::StringAttr>(it->second, nn::NnDialect::kNameAttrName)) {
          name = absl::StrCat("grad:", resultName.getValue().str());
        }
      }
    }
    if (placement.empty()) placement.resize(context.mesh.ndim());
    context.placements[value] = placement;
    if (global.empty()) global = globalShape(local, placement, context.mesh);
    const int64_t id = static_cast<int64_t>(buffers.size());
    context.ids[value] = id;
    buffers.push_back({{"id", id},
                       {"name", name},
                       {"dtype", printed(local.getElementType())},
                       {"global_shape", global},
                       {"local_shape", std::vector<int64_t>(local.getShape().begin(),
                                                            local.getShape().end())},
                       {"bytes", lifetime.bytes},
                       {"role", memory::bufferRoleName(lifetime.role)},
                       {"placement", placementJson(placement)},
                       {"live", {lifetime.first, lifetime.last}},
                       {"init", std::move(init)}});
  }
  // An optimizer step's results are its operands' buffers, updated in place.
  for (auto step : body.getOps<dist::OptimizerStepOp>()) {
    for (mlir::OpResult result : step->getResults()) {
      context.ids[result] = context.ids.lookup(step.getInPlaceOperand(result.getResultNumber()));
    }
  }
  return buffers;
}

// An instruction's attributes: the op's (but its mesh), with what plan.json
// adds to collectives and waits. An optimizer step's betas are one pair, as
// torch.optim.AdamW takes them.
json attrsJson(mlir::Operation& op, const mesh::DeviceMesh& mesh,
               llvm::DenseMap<mlir::Value, std::string>& handles, std::string& stream) {
  json attrs = json::object();
  if (auto step = llvm::dyn_cast<dist::OptimizerStepOp>(op)) {
    return {{"lr", step.getLr().convertToDouble()},
            {"betas", {step.getBeta1().convertToDouble(), step.getBeta2().convertToDouble()}},
            {"eps", step.getEps().convertToDouble()},
            {"weight_decay", step.getWeightDecay().convertToDouble()}};
  }
  for (mlir::NamedAttribute attr : op.getAttrs()) {
    if (attr.getName() == "mesh") continue;
    attrs[attr.getName().str()] = attrJson(attr.getValue());
  }
  if (std::optional<CollectiveInfo> info = describeCollective(&op, mesh)) {
    stream = "comm";
    attrs["kind"] = info->kind;
    attrs["group_size"] = info->group_size;
    attrs["bytes"] = info->bytes;
    if (info->async) {
      const std::string handle = absl::StrCat("h", handles.size());
      handles[op.getResult(0)] = handle;
      attrs["async_handle"] = handle;
    }
  } else if (auto wait = llvm::dyn_cast<dist::WaitOp>(op)) {
    attrs["async_handle"] = handles.lookup(wait.getFuture());
  }
  return attrs;
}

// Instructions per phase, with the predicted start and duration of each.
json phasesJson(mlir::func::FuncOp func, const mesh::DeviceMesh& mesh, const Timeline& timeline,
                const llvm::DenseMap<mlir::Value, int64_t>& ids) {
  llvm::DenseMap<int64_t, const TimelineEvent*> eventOf;
  for (const TimelineEvent& event : timeline.events) eventOf[event.index] = &event;
  const std::vector<Phase> phases = assignPhases(func);
  json phaseLists = {{"forward", json::array()}, {"backward", json::array()},
                     {"optimizer", json::array()}};
  llvm::DenseMap<mlir::Value, std::string> handles;
  int64_t index = 0;
  for (mlir::Operation& op : func.getBody().front().without_terminator()) {
    json operands = json::array();
    for (mlir::Value operand : op.getOperands()) {
      if (auto it = ids.find(operand); it != ids.end()) operands.push_back(it->second);
    }
    json results = json::array();
    for (mlir::Value result : op.getResults()) {
      if (auto it = ids.find(result); it != ids.end()) results.push_back(it->second);
    }
    std::string stream = "compute";
    json instruction = {{"index", index}, {"op", op.getName().getStringRef().str()}};
    instruction["attrs"] = attrsJson(op, mesh, handles, stream);
    instruction["stream"] = stream;
    instruction["operands"] = std::move(operands);
    instruction["results"] = std::move(results);
    if (auto it = eventOf.find(index); it != eventOf.end()) {
      instruction["start_s"] = it->second->start_s;
      instruction["duration_s"] = it->second->duration_s;
    }
    phaseLists[phaseName(phases[index])].push_back(std::move(instruction));
    ++index;
  }
  return phaseLists;
}

// What the runtime feeds and reads: the token ids (operand 0 of the
// embedding), the labels (operand 1 of the cross-entropy), the seed of the
// loss's cotangent (autodiff's extra argument), the returned loss and the
// vocabulary.
json interfaceJson(mlir::func::FuncOp func, const llvm::DenseMap<mlir::Value, int64_t>& ids,
                   const json& buffers) {
  mlir::Operation* terminator = func.getBody().front().getTerminator();
  json interface = json::object();
  auto argFeeding = [&](llvm::StringRef opName, unsigned operand) -> std::optional<int64_t> {
    for (mlir::Operation& op : func.getBody().front()) {
      if (op.getName().getStringRef() != opName || op.getNumOperands() <= operand) continue;
      auto arg = llvm::dyn_cast<mlir::BlockArgument>(op.getOperand(operand));
      if (!arg) continue;
      if (auto it = ids.find(arg); it != ids.end()) return it->second;
    }
    return std::nullopt;
  };
  // Zoo graphs name their inputs by location; other graphs are read by use.
  for (mlir::BlockArgument arg : func.getArguments()) {
    auto loc = llvm::dyn_cast<mlir::NameLoc>(arg.getLoc());
    if (!loc || func.getArgAttr(arg.getArgNumber(), nn::NnDialect::kNameAttrName)) continue;
    const llvm::StringRef name = loc.getName().getValue();
    const char* key = name == "input_ids" || name == "tokens" ? "ids" : name == "labels" ? "labels"
                    : name == "position_ids" ? "positions" : nullptr;
    if (key) interface[key] = ids.lookup(arg);
  }
  if (!interface.contains("ids")) {
    if (std::optional<int64_t> id = argFeeding("nn.embedding", 0)) interface["ids"] = *id;
  }
  if (!interface.contains("labels")) {
    if (std::optional<int64_t> id = argFeeding("nn.cross_entropy", 1)) interface["labels"] = *id;
  }
  // The vocabulary: rows of the table parameter the ids index. Walk back
  // from the embedding's table through gathers, waits and buckets to the
  // argument (a gathered padded table's rows are its padded extent).
  for (mlir::Operation& op : func.getBody().front()) {
    if (op.getName().getStringRef() != "nn.embedding" || !interface.contains("ids") ||
        ids.lookup(op.getOperand(0)) != interface["ids"].get<int64_t>()) {
      continue;
    }
    mlir::Value table = op.getOperand(1);
    for (int hops = 0; hops < 16 && !llvm::isa<mlir::BlockArgument>(table); ++hops) {
      mlir::Operation* def = table.getDefiningOp();
      if (auto unbucket = llvm::dyn_cast<dist::UnbucketOp>(def)) {
        const unsigned entry = llvm::cast<mlir::OpResult>(table).getResultNumber();
        mlir::Value flat = unbucket->getOperand(0);
        mlir::Operation* producer = flat.getDefiningOp();
        while (producer && !llvm::isa<dist::BucketOp>(producer) && producer->getNumOperands() > 0) {
          producer = producer->getOperand(0).getDefiningOp();
        }
        if (!producer || entry >= producer->getNumOperands()) break;
        table = producer->getOperand(entry);
      } else if (def && def->getDialect() && def->getDialect()->getNamespace() == "dist" &&
                 def->getNumOperands() > 0) {
        table = def->getOperand(0);
      } else {
        break;
      }
    }
    if (auto arg = llvm::dyn_cast<mlir::BlockArgument>(table)) {
      interface["vocab"] = buffers[ids.lookup(arg)]["global_shape"][0];
    }
    break;
  }
  if (auto seed = func->getAttrOfType<mlir::IntegerAttr>(autodiff::kLossGradArgAttrName)) {
    if (auto it = ids.find(func.getArgument(seed.getInt())); it != ids.end()) {
      interface["loss_grad_seed"] = it->second;
    }
  }
  for (auto [i, operand] : llvm::enumerate(terminator->getOperands())) {
    if (func.getResultAttr(i, autodiff::kGradOfAttrName)) continue;
    if (auto it = ids.find(operand); it != ids.end()) interface["loss"] = it->second;
    break;
  }
  return interface;
}

// Predicted time and memory: the timeline's totals, the memory plan's
// peak and breakdown, the collectives' volume and the model FLOPs.
json predictedJson(mlir::func::FuncOp func, const Timeline& timeline,
                   const memory::MemoryPlan& memoryPlan, double computeEfficiency) {
  json breakdown = json::object();
  for (int r = 0; r < memory::kNumRoles; ++r) {
    breakdown[memory::bufferRoleName(static_cast<memory::BufferRole>(r))] =
        memoryPlan.at_peak.bytes[r];
  }
  json volume = json::array();
  const collectives::CommVolume comm = collectives::computeCommVolume(func);
  for (const auto& [key, entry] : comm.entries) {
    volume.push_back({{"axes", key.first},
                      {"kind", collectives::collectiveKindName(key.second)},
                      {"count", entry.count},
                      {"bytes", entry.bytes}});
  }
  // The nn ops' FLOPs per rank and step (forward and backward, as the
  // graph has them: no recomputation), what MFU divides by the step time.
  double modelFlops = 0;
  func.walk([&](nn::CostOpInterface op) { modelFlops += static_cast<double>(op.getFlops()); });
  return {{"step_time_s", timeline.step_time_s},
                       {"model_flops", modelFlops},
                       {"compute_s", timeline.compute_s},
                       {"comm_s", timeline.comm_s},
                       {"exposed_comm_s", timeline.exposed_comm_s},
                       {"optimizer_s", timeline.optimizer_s},
                       {"compute_efficiency", computeEfficiency},
                       {"peak_bytes", memoryPlan.peak_bytes},
                       {"peak_index", memoryPlan.peak_index},
                       {"breakdown", breakdown},
                       {"comm_volume", volume},
                       {"comm_bytes_per_rank", comm.totalBytes()}};
}

}  // namespace

absl::StatusOr<json> exportPlan(mlir::ModuleOp module, const mesh::Topology& topology,
                                const PlanExportOptions& options) {
  absl::StatusOr<mesh::DeviceMesh> mesh = meshOf(module);
  if (!mesh.ok()) return mesh.status();
  const mlir::ArrayAttr meshAxes = (*module.getOps<dist::MeshOp>().begin()).getAxes();
  auto funcs = module.getOps<mlir::func::FuncOp>();
  if (funcs.empty()) return absl::InvalidArgumentError("the module has no function to export");
  mlir::func::FuncOp func = *funcs.begin();
  const memory::MemoryPlan memoryPlan = memory::computeMemoryPlan(func);
  absl::StatusOr<Timeline> timeline =
      predictTimeline(func, *mesh, topology, {.compute_efficiency = options.compute_efficiency});
  if (!timeline.ok()) return timeline.status();

  json plan;
  plan["format_version"] = kPlanFormatVersion;
  plan["model"] = options.model;
  plan["function"] = func.getSymName().str();
  plan["mesh"] = {{"shape", mesh->shape()}, {"axes", mesh->axisNames()}};
  json strategies = json::array();
  for (auto meshOp : module.getOps<dist::MeshOp>()) {
    if (auto attr = meshOp->getAttrOfType<mlir::ArrayAttr>(placement::kStrategiesAttrName)) {
      strategies = attrJson(attr);
    }
    break;
  }
  plan["strategies"] = strategies;
  plan["topology"] = topologyJson(topology);
  BufferContext context{.func = func,
                        .meshAxes = meshAxes,
                        .mesh = *mesh,
                        .seed = options.seed,
                        .ids = llvm::DenseMap<mlir::Value, int64_t>(),
                        .placements = llvm::DenseMap<mlir::Value, Placement>()};
  absl::StatusOr<json> buffers = buffersJson(memoryPlan, context);
  if (!buffers.ok()) return buffers.status();
  plan["buffers"] = *std::move(buffers);
  plan["phases"] = phasesJson(func, *mesh, *timeline, context.ids);
  plan["interface"] = interfaceJson(func, context.ids, plan["buffers"]);
  plan["predicted"] = predictedJson(func, *timeline, memoryPlan, options.compute_efficiency);
  return plan;
}

absl::Status checkPlanSchema(const json& plan) {
  auto need = [](const json& object, const std::string& path, const char* key,
                 json::value_t type) -> absl::Status {
    if (!object.is_object() || !object.contains(key)) {
      return absl::InvalidArgumentError(absl::StrCat("plan.json: missing ", path, ".", key));
    }
    const json& value = object.at(key);
    const bool numeric = type == json::value_t::number_float &&
                         (value.is_number());
    const bool integral = type == json::value_t::number_integer && value.is_number_integer();
    if (value.type() != type && !numeric && !integral &&
        !(type == json::value_t::null && value.is_object())) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan.json: ", path, ".", key, " has type ", value.type_name()));
    }
    return absl::OkStatus();
  };
  using T = json::value_t;
  for (auto [key, type] : std::vector<std::pair<const char*, T>>{
           {"format_version", T::number_integer}, {"model", T::string}, {"mesh", T::object},
           {"topology", T::object}, {"strategies", T::array}, {"buffers", T::array},
           {"phases", T::object}, {"interface", T::object}, {"predicted", T::object}}) {
    if (absl::Status s = need(plan, "", key, type); !s.ok()) return s;
  }
  if (plan["format_version"] != kPlanFormatVersion) {
    return absl::InvalidArgumentError(absl::StrCat("plan.json: format_version is ",
                                                   plan["format_version"].dump(), ", not ",
                                                   kPlanFormatVersion));
  }
  for (const char* key : {"shape", "axes"}) {
    if (absl::Status s = need(plan["mesh"], ".mesh", key, T::array); !s.ok()) return s;
  }
  for (auto [key, type] : std::vector<std::pair<const char*, T>>{
           {"hosts", T::number_integer}, {"devices_per_host", T::number_integer},
           {"device", T::object}, {"links", T::object}}) {
    if (absl::Status s = need(plan["topology"], ".topology", key, type); !s.ok()) return s;
  }
  for (size_t i = 0; i < plan["buffers"].size(); ++i) {
    const json& buffer = plan["buffers"][i];
    const std::string path = absl::StrCat(".buffers[", i, "]");
    for (auto [key, type] : std::vector<std::pair<const char*, T>>{
             {"id", T::number_integer}, {"name", T::string}, {"dtype", T::string},
             {"global_shape", T::array}, {"local_shape", T::array},
             {"bytes", T::number_integer}, {"role", T::string}, {"placement", T::array},
             {"init", T::null}}) {
      if (absl::Status s = need(buffer, path, key, type); !s.ok()) return s;
    }
    if (buffer["placement"].size() != plan["mesh"]["axes"].size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan.json: ", path, ".placement has ", buffer["placement"].size(),
                       " entries for ", plan["mesh"]["axes"].size(), " mesh axes"));
    }
    if (buffer["init"].is_object()) {
      for (auto [key, type] : std::vector<std::pair<const char*, T>>{
               {"kind", T::string}, {"mean", T::number_float}, {"std", T::number_float},
               {"seed", T::number_integer}, {"stream", T::number_integer}}) {
        if (absl::Status s = need(buffer["init"], path + ".init", key, type); !s.ok()) return s;
      }
    }
  }
  for (const char* phase : {"forward", "backward", "optimizer"}) {
    if (absl::Status s = need(plan["phases"], ".phases", phase, T::array); !s.ok()) return s;
    for (size_t i = 0; i < plan["phases"][phase].size(); ++i) {
      const std::string path = absl::StrCat(".phases.", phase, "[", i, "]");
      for (auto [key, type] : std::vector<std::pair<const char*, T>>{
               {"op", T::string}, {"stream", T::string}, {"operands", T::array},
               {"results", T::array}, {"attrs", T::object}}) {
        if (absl::Status s = need(plan["phases"][phase][i], path, key, type); !s.ok()) return s;
      }
    }
  }
  for (auto [key, type] : std::vector<std::pair<const char*, T>>{
           {"step_time_s", T::number_float}, {"compute_s", T::number_float},
           {"exposed_comm_s", T::number_float}, {"peak_bytes", T::number_integer},
           {"breakdown", T::object}}) {
    if (absl::Status s = need(plan["predicted"], ".predicted", key, type); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace loom::planner::exporter
