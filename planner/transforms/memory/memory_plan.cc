// Buffer lifetimes and the peak bytes per rank (see memory_plan.h).
#include "planner/transforms/memory/memory_plan.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/tensor.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "mlir/IR/BuiltinTypes.h"
#include "plan/lifetimes.h"
#include "plan/op_table.h"
#include "planner/cost/plan_price.h"
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/dialect/dist/ir/dist_ops.h"
#include "planner/dialect/dist/ir/dist_types.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/transforms/accumulate/micro_steps.h"
#include "planner/transforms/autodiff/passes.h"
#include "planner/transforms/collectives/comm_volume.h"
#include "planner/transforms/optimizer/passes.h"

namespace loom::planner::memory {
namespace {

int64_t elementCount(mlir::Type type) {
  if (auto future = llvm::dyn_cast<dist::FutureType>(type)) type = future.getValueType();
  auto tensor = llvm::dyn_cast<mlir::RankedTensorType>(type);
  return tensor ? tensor.getNumElements() : 0;
}

// The comm dtype of a tensor's (or future's) elements, for the staging rule.
comm::DType commDType(mlir::Type type) {
  if (auto future = llvm::dyn_cast<dist::FutureType>(type)) type = future.getValueType();
  if (auto tensor = llvm::dyn_cast<mlir::RankedTensorType>(type)) type = tensor.getElementType();
  if (type.isBF16()) return comm::DType::kBFloat16;
  if (type.isF16()) return comm::DType::kFloat16;
  if (type.isF64()) return comm::DType::kFloat64;
  if (type.isInteger(64)) return comm::DType::kInt64;
  if (type.isInteger(32)) return comm::DType::kInt32;
  return comm::DType::kFloat32;
}

// The staging bytes of a collective (cost::collectiveStagingBytes, the rule
// plan pricing uses too); 0 for other ops and for one without a wire type.
int64_t dtypeStagingBytes(mlir::Operation* op) {
  const llvm::StringRef name = op->getName().getStringRef();
  const plan::OpInfo* info = plan::findOp(name);
  auto wireAttr = op->getAttrOfType<mlir::TypeAttr>("wire_type");
  if (!info || info->family != plan::OpFamily::kCollective || !wireAttr ||
      op->getNumOperands() != 1 || op->getNumResults() != 1) {
    return 0;
  }
  auto accumAttr = op->getAttrOfType<mlir::TypeAttr>("accum_type");
  auto reduction = op->getAttrOfType<dist::ReductionKindAttr>("reduction");
  const int64_t g = collectives::groupSize(op, op->getAttrOfType<mlir::FlatSymbolRefAttr>("mesh"),
                                           op->getAttrOfType<mlir::ArrayAttr>("mesh_axes"));
  return cost::collectiveStagingBytes(
      {.kind = info->collective,
       .in_elements = elementCount(op->getOperand(0).getType()),
       .out_elements = elementCount(op->getResult(0).getType()),
       .operand = commDType(op->getOperand(0).getType()),
       .wire = commDType(wireAttr.getValue()),
       .result = commDType(op->getResult(0).getType()),
       .accum =
           accumAttr ? std::optional<comm::DType>(commDType(accumAttr.getValue())) : std::nullopt,
       .sum = reduction && (reduction.getValue() == dist::ReductionKind::Sum ||
                            reduction.getValue() == dist::ReductionKind::Avg),
       .group_size = g});
}

// The host staging of a copy into a device tensor of another type: the
// runtime converts on the host into a block of the destination's type and
// copies that (docs/planner_offload.md); live until the copy's wait.
int64_t conversionStagingBytes(mlir::Operation* op) {
  auto copy = llvm::dyn_cast<dist::CopyIntoDeviceStartOp>(op);
  if (!copy || copy.getSource().getType().getElementType() ==
                   copy.getDest().getType().getElementType()) {
    return 0;
  }
  return storageBytes(copy.getDest().getType());
}

// The wait of a copy into a device tensor: it yields that tensor again.
bool isInPlaceWait(mlir::Operation& op) {
  auto wait = llvm::dyn_cast<dist::WaitOp>(op);
  return wait && llvm::isa_and_nonnull<dist::CopyIntoDeviceStartOp>(wait.getFuture().getDefiningOp());
}

// Whether `copy`'s wait is a returned gradient (offload returns the host
// copy of each gradient).
bool isReturnedGradCopy(dist::CopyToHostStartOp copy, const llvm::DenseSet<mlir::Value>& grads) {
  for (mlir::Operation* user : copy.getResult().getUsers()) {
    if (llvm::isa<dist::WaitOp>(user) && grads.contains(user->getResult(0))) return true;
  }
  return false;
}

// A value with its defining op (null: an argument), or staging with its
// collective or copy.
using Staged = std::vector<std::pair<ValueLifetime, mlir::Operation*>>;

// The peak of one memory (host or device) over `values` and `staged`: one
// micro-step's; over an optimizer step of several, the highest of the
// first, a middle and the last micro-step's, each holding what
// plan::microStepLifetime says (a middle one alone when no op is kept to
// the first or last).
MemoryPeak peakOf(mlir::func::FuncOp func, const std::vector<ValueLifetime>& values,
                  const Staged& staged, bool host) {
  mlir::Block& body = func.getBody().front();
  const int64_t end = static_cast<int64_t>(body.getOperations().size()) - 1;
  const int64_t microSteps = accumulate::microStepsOf(func);
  std::vector<int64_t> micros{-1};
  int64_t lastModelOp = -1, at = 0;
  bool marked = false;
  // The model's ops end where the optimizer phase begins (a tied
  // gradient's exchange, the steps, offload's copies back).
  bool optimizer = false;
  for (mlir::Operation& op : body) {
    optimizer |= optimizer::inOptimizerPhase(&op);
    if (&op != body.getTerminator() && !optimizer) lastModelOp = at;
    marked |= accumulate::microStepOf(&op) != plan::MicroStep::kEvery;
    ++at;
  }
  if (microSteps > 1 && marked) {
    micros = {0, microSteps - 1};
    if (microSteps > 2) micros.push_back(1);
  }
  auto heldIn = [&](const ValueLifetime& value, mlir::Operation* def,
                    int64_t micro) -> std::optional<plan::Lifetime> {
    const plan::Lifetime live{.first = value.first, .last = value.last};
    // Arguments (parameters, states, inputs) are held as in one step.
    if (microSteps == 1 || def == nullptr) return live;
    const bool carried = value.value && accumulate::isCarried(value.value);
    return plan::microStepLifetime(live, accumulate::microStepOf(def), carried, micro, microSteps,
                                   lastModelOp);
  };
  MemoryPeak peak;
  peak.peak_bytes = -1;
  for (int64_t micro : micros) {
    // Live bytes per role at each op (slot 0 is the entry), by a
    // difference array over the lifetimes.
    std::vector<MemoryBreakdown> delta(end + 3);
    auto add = [&](const ValueLifetime& value, mlir::Operation* def) {
      if (value.host != host) return;
      const std::optional<plan::Lifetime> held = heldIn(value, def, micro);
      if (!held) return;
      delta[held->first + 1][value.role] += value.bytes;
      delta[held->last + 2][value.role] -= value.bytes;
    };
    for (const ValueLifetime& value : values) add(value, value.value.getDefiningOp());
    for (const auto& [value, def] : staged) add(value, def);
    MemoryBreakdown live;
    for (int64_t slot = 0; slot <= end + 1; ++slot) {
      for (int r = 0; r < kNumRoles; ++r) live.bytes[r] += delta[slot].bytes[r];
      if (live.total() > peak.peak_bytes) {
        peak.peak_bytes = live.total();
        peak.peak_index = slot - 1;
        peak.at_peak = live;
      }
    }
  }
  if (peak.peak_index >= 0) {
    auto it = body.begin();
    std::advance(it, peak.peak_index);
    peak.peak_op = &*it;
  }
  return peak;
}

}  // namespace

int64_t MemoryBreakdown::total() const {
  int64_t sum = 0;
  for (int64_t b : bytes) sum += b;
  return sum;
}

int64_t storageBytes(mlir::Type type) {
  if (auto future = llvm::dyn_cast<dist::FutureType>(type)) type = future.getValueType();
  auto tensor = llvm::dyn_cast<mlir::RankedTensorType>(type);
  if (!tensor) return 0;
  const int64_t bits = tensor.getElementType().getIntOrFloatBitWidth();
  return tensor.getNumElements() * ((bits + 7) / 8);
}

MemoryPlan computeMemoryPlan(mlir::func::FuncOp func) {
  MemoryPlan plan;
  mlir::Block& body = func.getBody().front();
  llvm::DenseMap<mlir::Operation*, int64_t> index;
  for (mlir::Operation& op : body) index[&op] = static_cast<int64_t>(index.size());
  const int64_t end = static_cast<int64_t>(index.size()) - 1;

  // Returned values marked nn.grad_of are gradients.
  llvm::DenseSet<mlir::Value> grads;
  mlir::Operation* terminator = body.getTerminator();
  for (auto [i, operand] : llvm::enumerate(terminator->getOperands())) {
    if (func.getResultAttr(i, autodiff::kGradOfAttrName)) grads.insert(operand);
  }

  // The last op that holds `value`: its last reader, where an async
  // collective's operand is held until the collective's wait (the runtime
  // reads it meanwhile), as plan::computeLifetimes has it; a returned value
  // (the loss) is held to the end of the step.
  auto lastUse = [&](mlir::Value value, int64_t first) {
    int64_t last = first;
    for (mlir::Operation* user : value.getUsers()) {
      mlir::Operation* ancestor = body.findAncestorOpInBlock(*user);
      if (!ancestor) continue;
      int64_t at = index[ancestor];
      const plan::OpInfo* info = plan::findOp(ancestor->getName().getStringRef());
      if (info && info->async_start) {
        for (mlir::Operation* wait : ancestor->getResult(0).getUsers()) {
          if (llvm::isa<dist::WaitOp>(wait)) at = std::max(at, index[wait]);
        }
      }
      last = std::max(last, at);
    }
    return last;
  };

  // Gradients on their way to the host are gradients: the device shard a
  // copy reads (no longer returned once offload returns its host copy) and
  // the copy's future.
  for (auto copy : body.getOps<dist::CopyToHostStartOp>()) {
    if (grads.contains(copy.getInput()) || isReturnedGradCopy(copy, grads)) {
      grads.insert(copy.getInput());
      grads.insert(copy.getResult());
    }
  }

  // Values made from parameters by dist ops only (gathered copies, their
  // futures and buckets).
  llvm::DenseSet<mlir::Value> paramDerived;
  for (mlir::BlockArgument arg : func.getArguments()) {
    const int64_t bytes = storageBytes(arg.getType());
    if (bytes == 0) continue;
    const unsigned n = arg.getArgNumber();
    const bool param = func.getArgAttr(n, nn::NnDialect::kParamAttrName) != nullptr;
    const bool state = func.getArgAttr(n, optimizer::kOptimizerStateAttrName) != nullptr;
    if (param) paramDerived.insert(arg);
    // Parameters and their optimizer states are resident all step.
    plan.values.push_back({.value = arg,
                           .role = param   ? BufferRole::kParam
                                   : state ? BufferRole::kOptimizerState
                                           : BufferRole::kActivation,
                           .bytes = bytes,
                           .first = -1,
                           .last = param || state ? end : lastUse(arg, -1),
                           .host = dist::onHost(arg)});
  }
  // Staging beside a collective, with the collective.
  Staged staged;
  for (mlir::Operation& op : body) {
    // An optimizer step's results, and a copy into a device tensor's, are
    // their operands' buffers, updated in place.
    if (llvm::isa<dist::OptimizerStepOp, dist::CopyIntoDeviceStartOp>(op)) {
      if (const int64_t staging = conversionStagingBytes(&op); staging > 0) {
        staged.push_back({{.value = {},
                           .role = BufferRole::kActivation,
                           .bytes = staging,
                           .first = index[&op],
                           .last = lastUse(op.getResult(0), index[&op]),
                           .host = true},
                          &op});
      }
      continue;
    }
    if (isInPlaceWait(op)) continue;
    const bool fromParams =
        llvm::isa<dist::DistDialect>(op.getDialect()) && op.getNumOperands() > 0 &&
        llvm::all_of(op.getOperands(), [&](mlir::Value v) { return paramDerived.contains(v); });
    for (mlir::Value result : op.getResults()) {
      const int64_t bytes = storageBytes(result.getType());
      if (bytes == 0) continue;
      BufferRole role = BufferRole::kActivation;
      if (grads.contains(result) || llvm::isa<dist::AccumulateOp>(op)) {
        role = BufferRole::kGrad;
      } else if (fromParams) {
        role = BufferRole::kGathered;
        paramDerived.insert(result);
      }
      plan.values.push_back({.value = result,
                             .role = role,
                             .bytes = bytes,
                             .first = index[&op],
                             .last = lastUse(result, index[&op]),
                             .host = dist::onHost(result)});
    }
    // Counted with the activations; it is no SSA value, so not in values.
    if (const int64_t staging = dtypeStagingBytes(&op); staging > 0) {
      staged.push_back({{.value = {},
                         .role = BufferRole::kActivation,
                         .bytes = staging,
                         .first = index[&op],
                         .last = lastUse(op.getResult(0), index[&op])},
                        &op});
    }
  }

  const MemoryPeak device = peakOf(func, plan.values, staged, /*host=*/false);
  plan.peak_bytes = device.peak_bytes;
  plan.peak_index = device.peak_index;
  plan.peak_op = device.peak_op;
  plan.at_peak = device.at_peak;
  plan.host = peakOf(func, plan.values, staged, /*host=*/true);
  return plan;
}

std::string formatBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

std::string formatBreakdown(const MemoryBreakdown& breakdown) {
  return absl::StrCat("params ", formatBytes(breakdown[BufferRole::kParam]), ", grads ",
                      formatBytes(breakdown[BufferRole::kGrad]), ", optimizer states ",
                      formatBytes(breakdown[BufferRole::kOptimizerState]), ", activations ",
                      formatBytes(breakdown[BufferRole::kActivation]), ", gathered ",
                      formatBytes(breakdown[BufferRole::kGathered]));
}

std::string suggestFix(const MemoryBreakdown& breakdown) {
  const int64_t state = breakdown[BufferRole::kParam] + breakdown[BufferRole::kGrad] +
                        breakdown[BufferRole::kOptimizerState];
  const int64_t transient = breakdown[BufferRole::kActivation] + breakdown[BufferRole::kGathered];
  if (state >= transient) {
    return "shard the parameter state over more ranks (a larger fsdp axis), add tensor "
           "parallelism (a tp axis), or offload the optimizer states to host memory "
           "(--offload=optimizer)";
  }
  return "lower the batch or sequence length per rank, or add tensor parallelism (a tp axis) "
         "to split the activations";
}

}  // namespace loom::planner::memory
