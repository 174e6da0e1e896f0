// plan-schedule: makes every collective asynchronous (`*_start` +
// `dist.wait`), prefetches parameter gathers k steps ahead and overlaps each
// unit's gradient reduction with the next unit's backward compute.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Support/LLVM.h"
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/dialect/dist/ir/dist_ops.h"
#include "planner/dialect/dist/ir/dist_types.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/transforms/autodiff/passes.h"
#include "planner/transforms/autodiff/phases.h"
#include "planner/transforms/bucketing/passes.h"
#include "planner/transforms/memory/memory_plan.h"
#include "planner/transforms/optimizer/passes.h"
#include "planner/transforms/schedule/passes.h"

namespace loom::planner::schedule {

#define GEN_PASS_DEF_PLANSCHEDULE
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/schedule/passes.h.inc"
#pragma GCC diagnostic pop

namespace {

// GiB, as plan-memory-plan's memory-budget-gb.
constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

// A started collective and the wait that completes it.
struct Async {
  mlir::Operation* start;
  dist::WaitOp wait;
};

// Parameter gathers of one unit and one pass, consecutive in program order.
struct Step {
  std::string key;
  llvm::SmallVector<mlir::Operation*> gathers;
};

// A gradient reduce-scatter and, under HSDP, the all-reduce it feeds; or
// the all-reduces of some of its unbucketed shards (packed again or not),
// as the norms' gradients under fsdp x tp with sequence parallelism.
struct Chain {
  dist::ReduceScatterOp scatter;
  dist::AllReduceOp reduce;
  llvm::SmallVector<dist::AllReduceOp, 2> shardReduces;
};

// The unit of a gather operand that is a parameter shard or a dist.bucket of
// parameter shards; nullopt for any other operand.
std::optional<std::string> paramUnit(mlir::func::FuncOp func, mlir::Value input) {
  auto unitOfArg = [&](mlir::Value value) -> std::optional<std::string> {
    auto arg = llvm::dyn_cast<mlir::BlockArgument>(value);
    if (!arg || arg.getOwner() != &func.front() ||
        !func.getArgAttr(arg.getArgNumber(), nn::NnDialect::kParamAttrName)) {
      return std::nullopt;
    }
    auto name =
        func.getArgAttrOfType<mlir::StringAttr>(arg.getArgNumber(), nn::NnDialect::kNameAttrName);
    return name ? bucketing::unitOf(name.getValue()) : std::string("root");
  };
  auto bucket = input.getDefiningOp<dist::BucketOp>();
  if (!bucket) return unitOfArg(input);
  std::optional<std::string> unit;
  for (mlir::Value entry : bucket->getOperands()) {
    unit = unitOfArg(entry);
    if (!unit) return std::nullopt;
  }
  return unit;
}

// The parameter-gather steps of `func`, in program order.
std::vector<Step> stepsOf(mlir::func::FuncOp func) {
  mlir::Operation* backward = autodiff::firstBackwardOp(func);
  std::vector<Step> steps;
  for (mlir::Operation& op : func.front()) {
    if (!llvm::isa<dist::AllGatherOp, dist::AllGatherStartOp>(op)) continue;
    std::optional<std::string> unit = paramUnit(func, op.getOperand(0));
    if (!unit) continue;
    const bool inBackward = backward && backward->isBeforeInBlock(&op);
    std::string key = *unit + (inBackward ? "|bwd" : "|fwd");
    if (steps.empty() || steps.back().key != key) {
      steps.push_back(Step{std::move(key), {}});
    }
    steps.back().gathers.push_back(&op);
  }
  return steps;
}

// Replaces a blocking collective by its start and a wait at the same place.
Async makeAsync(mlir::Operation* op) {
  mlir::OpBuilder builder(op);
  const mlir::Location loc = op->getLoc();
  auto tensor = llvm::cast<mlir::RankedTensorType>(op->getResult(0).getType());
  auto future = dist::FutureType::get(op->getContext(), tensor);
  mlir::Operation* start = nullptr;
  if (auto gather = llvm::dyn_cast<dist::AllGatherOp>(op)) {
    start = dist::AllGatherStartOp::create(
        builder, loc, future, gather.getMeshAttr(), gather.getMeshAxes(), gather.getInput(),
        gather.getGatherDimAttr(), gather.getPaddedAttr(), gather.getWireTypeAttr());
  } else if (auto scatter = llvm::dyn_cast<dist::ReduceScatterOp>(op)) {
    start = dist::ReduceScatterStartOp::create(
        builder, loc, future, scatter.getMeshAttr(), scatter.getMeshAxes(), scatter.getInput(),
        scatter.getScatterDimAttr(), scatter.getPaddedAttr(), scatter.getReductionAttr(),
        scatter.getWireTypeAttr(), scatter.getAccumTypeAttr());
  } else if (auto reduce = llvm::dyn_cast<dist::AllReduceOp>(op)) {
    start = dist::AllReduceStartOp::create(
        builder, loc, future, reduce.getMeshAttr(), reduce.getMeshAxes(), reduce.getInput(),
        reduce.getReductionAttr(), reduce.getWireTypeAttr(), reduce.getAccumTypeAttr());
  } else {
    auto toAll = llvm::cast<dist::AllToAllOp>(op);
    start = dist::AllToAllStartOp::create(
        builder, loc, future, toAll.getMeshAttr(), toAll.getMeshAxes(), toAll.getInput(),
        toAll.getSplitDimAttr(), toAll.getConcatDimAttr(), toAll.getWireTypeAttr());
  }
  auto wait = dist::WaitOp::create(builder, loc, tensor, start->getResult(0));
  op->getResult(0).replaceAllUsesWith(wait.getResult());
  op->erase();
  return Async{start, wait};
}

// Whether `value` is only unbucketed and returned (a final gradient).
bool onlyReturned(mlir::Value value) {
  for (mlir::Operation* user : value.getUsers()) {
    if (llvm::isa<mlir::func::ReturnOp>(user)) continue;
    auto unbucket = llvm::dyn_cast<dist::UnbucketOp>(user);
    if (!unbucket) return false;
    for (mlir::Operation* viewUser : unbucket->getUsers()) {
      if (!llvm::isa<mlir::func::ReturnOp>(viewUser)) return false;
    }
  }
  return !value.use_empty();
}

// The all-reduce that reads `value`, directly or through a dist.bucket
// (whose other users may only free it), and whose result is a final
// gradient; null when there is none.
dist::AllReduceOp shardReduceOf(mlir::Value value) {
  if (!value.hasOneUse()) return nullptr;
  mlir::Operation* user = *value.user_begin();
  if (auto bucket = llvm::dyn_cast<dist::BucketOp>(user)) {
    dist::AllReduceOp reduce;
    for (mlir::Operation* bucketUser : bucket->getUsers()) {
      if (llvm::isa<dist::FreeOp>(bucketUser)) continue;
      if (reduce) return nullptr;
      reduce = llvm::dyn_cast<dist::AllReduceOp>(bucketUser);
      if (!reduce) return nullptr;
    }
    return reduce && onlyReturned(reduce.getResult()) ? reduce : nullptr;
  }
  auto reduce = llvm::dyn_cast<dist::AllReduceOp>(user);
  return reduce && onlyReturned(reduce.getResult()) ? reduce : nullptr;
}

// The gradient reduction that begins with `scatter`, if its result is only
// made into final gradients.
std::optional<Chain> chainOf(dist::ReduceScatterOp scatter) {
  Chain chain{scatter, nullptr, {}};
  if (scatter->hasOneUse()) {
    chain.reduce = llvm::dyn_cast<dist::AllReduceOp>(*scatter->user_begin());
  }
  mlir::Value delivered = chain.reduce ? chain.reduce.getResult() : scatter.getResult();
  if (onlyReturned(delivered)) return chain;
  if (chain.reduce || !scatter->hasOneUse()) return std::nullopt;
  auto unbucket = llvm::dyn_cast<dist::UnbucketOp>(*scatter->user_begin());
  if (!unbucket) return std::nullopt;
  for (mlir::Value shard : unbucket.getResults()) {
    if (shard.hasOneUse() && llvm::isa<mlir::func::ReturnOp>(*shard.user_begin())) continue;
    dist::AllReduceOp reduce = shardReduceOf(shard);
    if (!reduce) return std::nullopt;
    if (!llvm::is_contained(chain.shardReduces, reduce)) chain.shardReduces.push_back(reduce);
  }
  if (chain.shardReduces.empty()) return std::nullopt;
  return chain;
}

// The gradient reductions of `func`, in program order.
std::vector<Chain> chainsOf(mlir::func::FuncOp func) {
  std::vector<Chain> chains;
  for (auto scatter : func.front().getOps<dist::ReduceScatterOp>()) {
    if (std::optional<Chain> chain = chainOf(scatter)) chains.push_back(std::move(*chain));
  }
  return chains;
}

// Moves `ops` in order so that they follow `*cursor` (or open the block when
// it is null), advancing the cursor.
void placeAfter(llvm::ArrayRef<mlir::Operation*> ops, mlir::Block& block,
                mlir::Operation*& cursor) {
  for (mlir::Operation* op : ops) {
    if (!cursor) {
      if (op != &block.front()) op->moveBefore(&block.front());
    } else {
      op->moveAfter(cursor);
    }
    cursor = op;
  }
}

// The first op of `block` that uses `value` (nested uses count at their
// ancestor in the block), or null.
mlir::Operation* firstUser(mlir::Value value, mlir::Block& block) {
  mlir::Operation* first = nullptr;
  for (mlir::Operation* user : value.getUsers()) {
    mlir::Operation* inBlock = block.findAncestorOpInBlock(*user);
    if (inBlock && (!first || inBlock->isBeforeInBlock(first))) first = inBlock;
  }
  return first;
}

// Rewrites `func` into its asynchronous schedule with prefetch depth `k`.
// A pipeline chunk's transfers (plan-split-stages) never make a stage wait
// for a peer that is waiting for it: every receive is posted at the top of
// the chunk, before anything it could block on, and waited for where the
// value is first used; every send starts where it was and is waited for at
// the end of the chunk. A send then finds its receive posted whatever the
// schedule's order (a gradient's receive is posted at the start of its
// micro-batch's forward), which is the simulation's assumption that
// sends never block, and the sent tensor stays alive until the transfer
// is done.
void startPointToPoint(mlir::func::FuncOp func) {
  mlir::Block& block = func.front();
  llvm::SmallVector<dist::SendOp> sends(block.getOps<dist::SendOp>());
  for (dist::SendOp send : sends) {
    mlir::OpBuilder builder(send);
    auto tensor = llvm::cast<mlir::RankedTensorType>(send.getInput().getType());
    auto start = dist::SendStartOp::create(
        builder, send.getLoc(), dist::FutureType::get(func.getContext(), tensor), send.getInput(),
        send.getMeshAttr(), send.getAxisAttr(), send.getPeerAttr(), send.getTagAttr());
    start->setDiscardableAttrs(send->getDiscardableAttrDictionary());
    builder.setInsertionPoint(block.getTerminator());
    dist::WaitOp::create(builder, send.getLoc(), tensor, start.getResult());
    send->erase();
  }
  llvm::SmallVector<dist::RecvOp> recvs(block.getOps<dist::RecvOp>());
  mlir::Operation* lastStart = nullptr;
  for (dist::RecvOp recv : recvs) {
    mlir::OpBuilder builder(func.getContext());
    if (lastStart) {
      builder.setInsertionPointAfter(lastStart);
    } else {
      builder.setInsertionPointToStart(&block);
    }
    auto tensor = llvm::cast<mlir::RankedTensorType>(recv.getType());
    auto start = dist::RecvStartOp::create(
        builder, recv.getLoc(), dist::FutureType::get(func.getContext(), tensor),
        recv.getMeshAttr(), recv.getAxisAttr(), recv.getPeerAttr(), recv.getTagAttr());
    start->setDiscardableAttrs(recv->getDiscardableAttrDictionary());
    // The received gradient, not its early start, begins the backward pass.
    start->removeAttr(autodiff::kBackwardRootAttrName);
    lastStart = start;
    builder.setInsertionPoint(recv);
    auto wait = dist::WaitOp::create(builder, recv.getLoc(), tensor, start.getResult());
    if (recv->hasAttr(autodiff::kBackwardRootAttrName)) {
      wait->setAttr(autodiff::kBackwardRootAttrName, builder.getUnitAttr());
    }
    recv.getResult().replaceAllUsesWith(wait.getResult());
    recv->erase();
  }
}

void scheduleFunc(mlir::func::FuncOp func, int64_t k) {
  mlir::Block& block = func.front();
  startPointToPoint(func);
  const std::vector<Step> steps = stepsOf(func);
  const std::vector<Chain> chains = chainsOf(func);

  llvm::SmallVector<mlir::Operation*> collectives;
  for (mlir::Operation& op : block) {
    if (llvm::isa<dist::AllGatherOp, dist::ReduceScatterOp, dist::AllReduceOp, dist::AllToAllOp>(
            op)) {
      collectives.push_back(&op);
    }
  }
  llvm::DenseMap<mlir::Operation*, Async> async;
  std::vector<Async> order;
  for (mlir::Operation* op : collectives) {
    async[op] = makeAsync(op);
    order.push_back(async[op]);
  }
  llvm::DenseSet<mlir::Operation*> placed;

  // Prefetch: the starts of step j follow the last wait of step j - k.
  mlir::Operation* entry = nullptr;
  for (auto [j, step] : llvm::enumerate(steps)) {
    for (mlir::Operation* gather : step.gathers) {
      placed.insert(async[gather].start);
    }
    if (k == 0) continue;
    const int64_t index = static_cast<int64_t>(j);
    mlir::Operation* anchor = nullptr;
    if (index >= k) {
      // After the wait and the free of the bucket it gathered.
      Async previous = async[steps[index - k].gathers.back()];
      anchor = previous.wait;
      while (auto free = llvm::dyn_cast_or_null<dist::FreeOp>(anchor->getNextNode())) {
        if (free.getBuffer() != previous.start->getOperand(0)) break;
        anchor = free;
      }
    }
    mlir::Operation*& cursor = anchor ? anchor : entry;
    for (mlir::Operation* gather : step.gathers) {
      mlir::Operation* start = async[gather].start;
      llvm::SmallVector<mlir::Operation*, 2> moved;
      if (auto bucket = start->getOperand(0).getDefiningOp<dist::BucketOp>()) {
        moved.push_back(bucket);
      }
      moved.push_back(start);
      placeAfter(moved, block, cursor);
    }
  }

  // Overlap: a reduce-scatter completes just before the next gradient
  // reduction begins, so one gradient bucket is in flight at a time. Under
  // HSDP its shard's all-reduce starts there and completes one reduction
  // later (before the one after next, or at the return), so it overlaps
  // the next unit's backward as the reduce-scatter did; so do the
  // all-reduces of some of its shards (sequence-parallel norms).
  auto beginOf = [&](size_t index) {
    mlir::Operation* begin = async[chains[index].scatter].start;
    if (auto bucket = begin->getOperand(0).getDefiningOp<dist::BucketOp>()) {
      begin = bucket;
    }
    return begin;
  };
  for (auto [i, chain] : llvm::enumerate(chains)) {
    Async scatter = async[chain.scatter];
    placed.insert(scatter.start);
    // Completes the reduce-scatter (and starts the all-reduces).
    llvm::SmallVector<mlir::Operation*> head = {scatter.wait};
    // Completes the reduction: the all-reduces' waits and the unbuckets.
    llvm::SmallVector<mlir::Operation*> tail;
    auto unbucketsOf = [](mlir::Value value, llvm::SmallVector<mlir::Operation*>& into) {
      for (mlir::Operation* user : value.getUsers()) {
        if (llvm::isa<dist::UnbucketOp>(user)) into.push_back(user);
      }
    };
    if (chain.reduce) {
      Async reduce = async[chain.reduce];
      placed.insert(reduce.start);
      head.push_back(reduce.start);
      tail.push_back(reduce.wait);
      unbucketsOf(reduce.wait.getResult(), tail);
    } else if (chain.shardReduces.empty()) {
      unbucketsOf(scatter.wait.getResult(), tail);
    } else {
      // The shards' unbucket, then each all-reduce with the bucket it reads.
      unbucketsOf(scatter.wait.getResult(), head);
      for (dist::AllReduceOp op : chain.shardReduces) {
        Async reduce = async[op];
        placed.insert(reduce.start);
        if (auto bucket = reduce.start->getOperand(0).getDefiningOp<dist::BucketOp>()) {
          head.push_back(bucket);
        }
        head.push_back(reduce.start);
        tail.push_back(reduce.wait);
        unbucketsOf(reduce.wait.getResult(), tail);
      }
    }
    if (i + 1 == chains.size()) continue;
    mlir::Operation* next = beginOf(i + 1);
    if (!chain.reduce && chain.shardReduces.empty()) {
      head.append(tail);
      tail.clear();
    }
    for (mlir::Operation* op : head) op->moveBefore(next);
    mlir::Operation* after = i + 2 < chains.size() ? beginOf(i + 2) : block.getTerminator();
    for (mlir::Operation* op : tail) op->moveBefore(after);
  }

  // Every other wait moves to just before the first user of its result.
  for (Async pair : order) {
    if (placed.contains(pair.start)) continue;
    if (mlir::Operation* user = firstUser(pair.wait.getResult(), block)) {
      pair.wait->moveBefore(user);
    }
  }

  // The runtime reads a collective's operand until its wait: frees of the
  // operand move after it.
  for (Async pair : order) {
    mlir::Operation* cursor = pair.wait;
    llvm::SmallVector<mlir::Operation*> frees;
    for (mlir::Operation* user : pair.start->getOperand(0).getUsers()) {
      if (llvm::isa<dist::FreeOp>(user) && user->getBlock() == &block &&
          user->isBeforeInBlock(pair.wait)) {
        frees.push_back(user);
      }
    }
    llvm::sort(frees, [](mlir::Operation* a, mlir::Operation* b) { return a->isBeforeInBlock(b); });
    placeAfter(frees, block, cursor);
  }
}

// `value` as the shortest decimal a reader would type (3.008e-06).
std::string gigabytes(double value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

class PlanSchedulePass : public impl::PlanScheduleBase<PlanSchedulePass> {
 public:
  using PlanScheduleBase::PlanScheduleBase;

  void runOnOperation() override {
    if (prefetch < 0) {
      getOperation().emitError() << "invalid prefetch=" << static_cast<int64_t>(prefetch)
                                 << "; use 0 (no prefetch) or the number of steps to run ahead";
      return signalPassFailure();
    }
    if (memoryBudgetGb < 0) {
      getOperation().emitError() << "invalid memory-budget-gb=" << gigabytes(memoryBudgetGb)
                                 << "; use a budget in GiB, or 0 to take k from prefetch";
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<mlir::func::FuncOp>()) {
      if (func.isExternal()) continue;
      int64_t k = prefetch;
      if (memoryBudgetGb > 0) {
        std::optional<int64_t> chosen = depthWithinBudget(func);
        if (!chosen) return signalPassFailure();
        k = *chosen;
      }
      scheduleFunc(func, k);
      func->setAttr(kPrefetchAttrName,
                    mlir::IntegerAttr::get(mlir::IntegerType::get(func.getContext(), 64), k));
    }
  }

 private:
  // The largest k (up to one less than the number of steps, beyond which
  // nothing moves) whose peak, as plan-memory-plan counts it (parameters,
  // optimizer states, activations live across the prefetch window,
  // gathered buffers in flight, gradients and their buckets), fits the
  // budget.
  // A larger k only starts gathers earlier, so every lifetime grows and
  // the peak never falls as k grows: a binary search finds the largest k.
  std::optional<int64_t> depthWithinBudget(mlir::func::FuncOp func) {
    const double budget = memoryBudgetGb * kBytesPerGiB;
    const int64_t steps = static_cast<int64_t>(stepsOf(func).size());
    auto peakAt = [&](int64_t k) {
      auto trial = llvm::cast<mlir::func::FuncOp>(func->clone());
      scheduleFunc(trial, k);
      // The AdamW states plan-optimizer-step adds after the schedule are
      // resident all step, so they count too. Adding them cannot fail on a
      // function without optimizer steps, with the default options.
      if (trial.getBody().front().getOps<dist::OptimizerStepOp>().empty()) {
        (void)optimizer::addOptimizerSteps(trial, {});
      }
      memory::MemoryPlan plan = memory::computeMemoryPlan(trial);
      trial->erase();
      return plan;
    };
    auto fits = [&](const memory::MemoryPlan& plan) {
      return static_cast<double>(plan.peak_bytes) <= budget;
    };
    int64_t high = std::max<int64_t>(steps - 1, 0);
    if (fits(peakAt(high))) return high;
    const memory::MemoryPlan atZero = peakAt(0);
    if (fits(atZero)) {
      // fits(low) and !fits(high).
      int64_t low = 0;
      while (high - low > 1) {
        const int64_t middle = low + (high - low) / 2;
        (fits(peakAt(middle)) ? low : high) = middle;
      }
      return low;
    }
    func.emitError() << "memory-budget-gb=" << gigabytes(memoryBudgetGb)
                     << " is below the peak without prefetch: " << atZero.peak_bytes << " bytes ("
                     << memory::formatBreakdown(atZero.at_peak)
                     << "); raise memory-budget-gb to at least "
                     << gigabytes(static_cast<double>(atZero.peak_bytes) / kBytesPerGiB) << " or "
                     << memory::suggestFix(atZero.at_peak);
    return std::nullopt;
  }
};

}  // namespace
}  // namespace loom::planner::schedule
