// plan-split-stages: one function per pipeline chunk, with a send and a
// receive at every value that crosses a cut (see passes.td and
// docs/planner_stages.md).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "planner/dialect/dist/ir/dist_attrs.h"
#include "planner/dialect/dist/ir/dist_ops.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/dialect/nn/ir/nn_ops.h"
#include "planner/transforms/autodiff/passes.h"
#include "planner/transforms/autodiff/phases.h"
#include "planner/transforms/placement/passes.h"
#include "planner/transforms/stages/passes.h"
#include "planner/transforms/stages/pipeline_axis.h"
#include "planner/transforms/stages/schedule_order.h"

namespace loom::planner::stages {

#define GEN_PASS_DEF_PLANSPLITSTAGES
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/stages/passes.h.inc"
#pragma GCC diagnostic pop

namespace {

int64_t chunkOf(mlir::Operation* op) {
  return op->getAttrOfType<mlir::IntegerAttr>(kStageAttrName).getInt();
}

std::string paramName(mlir::func::FuncOp func, unsigned arg) {
  auto name = func.getArgAttrOfType<mlir::StringAttr>(arg, nn::NnDialect::kNameAttrName);
  return name ? name.getValue().str() : "";
}

// The given placement of `value`: its argument's or its op result's.
mlir::Attribute placementOf(mlir::Value value) {
  mlir::Operation* def = value.getDefiningOp();
  auto results = def->getAttrOfType<mlir::ArrayAttr>(placement::kResultPlacementsAttrName);
  if (!results) return {};
  return results[llvm::cast<mlir::OpResult>(value).getResultNumber()];
}

// One chunk's function as it is being built.
struct Chunk {
  mlir::func::FuncOp func;
  // Original argument -> its index here.
  llvm::DenseMap<unsigned, unsigned> argIndex;
  mlir::IRMapping mapping;
  // The original function's result indices this chunk returns.
  std::vector<unsigned> results;
};

// The gradient of a parameter that chunks on several stages read (tied
// weights): autodiff's sum of one cotangent per use, split into the terms
// each reading chunk computes. Each chunk returns the sum of its own
// terms; plan-sum-tied-grads adds the chunks' sums once per optimizer step.
struct TiedGradient {
  unsigned result = 0;  // the step's result
  unsigned arg = 0;     // the parameter
  // The step's nn.add that sums the terms (its attributes go to the
  // chunks' sums).
  mlir::Operation* sum = nullptr;
  // Reading chunk -> its terms, in the order the step sums them.
  std::map<int64_t, llvm::SmallVector<mlir::Value>> terms;
};

class Splitter {
 public:
  Splitter(mlir::ModuleOp module, mlir::func::FuncOp func,
           std::optional<PipelineSchedule> schedule, int64_t& nextTag)
      : module_(module), func_(func), schedule_(schedule), nextTag_(nextTag) {}

  mlir::LogicalResult run();

 private:
  mlir::LogicalResult check();
  mlir::LogicalResult checkTied(mlir::BlockArgument arg, llvm::ArrayRef<int64_t> chunks);
  mlir::LogicalResult splitTiedGradients();
  mlir::LogicalResult assignResults();
  void createFunctions();
  // The stages whose chunks read tied argument `arg`, in order.
  mlir::DenseI64ArrayAttr tiedStages(unsigned arg);
  // Clones the ops into their chunks, with a send and a receive for each
  // value a chunk reads from another.
  mlir::LogicalResult cloneOps();
  mlir::FailureOr<mlir::Value> received(mlir::Value value, int64_t to, mlir::Operation* user);
  // Each reading chunk's sum of its terms of a tied gradient.
  void sumTiedTerms();
  void finishFunctions();

  mlir::ModuleOp module_;
  mlir::func::FuncOp func_;
  // nullopt until check(): the option's, or chosen by the chunks per stage.
  std::optional<PipelineSchedule> schedule_;
  int64_t& nextTag_;
  PipelineAxis axis_;
  int64_t stages_ = 0;
  int64_t chunks_ = 0;
  llvm::DenseSet<mlir::Operation*> backward_;
  std::vector<Chunk> chunk_;
  // Tied parameters (argument numbers), their gradients by result, the
  // step's adds that sum those across chunks (not cloned), and each
  // chunk's own sum: (result, chunk) -> the value it returns.
  llvm::DenseSet<unsigned> tiedArgs_;
  std::map<unsigned, TiedGradient> tied_;
  llvm::DenseSet<mlir::Operation*> tiedSums_;
  std::map<std::pair<unsigned, int64_t>, mlir::Value> tiedPartials_;
  // (value, reading chunk) -> the received value there.
  llvm::DenseMap<std::pair<mlir::Value, int64_t>, mlir::Value> received_;
  // A cloned definition -> the last send placed after it (sends follow
  // their definition in tag order).
  llvm::DenseMap<mlir::Operation*, mlir::Operation*> lastSendAfter_;
};

mlir::LogicalResult Splitter::check() {
  auto stages = func_->getAttrOfType<mlir::IntegerAttr>(kPipelineStagesAttrName);
  auto layers = func_->getAttrOfType<mlir::DenseI64ArrayAttr>(kStageLayersAttrName);
  if (!layers) {
    return func_.emitError() << "@" << func_.getSymName() << " has " << kPipelineStagesAttrName
                             << " but no " << kStageLayersAttrName << "; run --plan-stages";
  }
  stages_ = stages.getInt();
  chunks_ = static_cast<int64_t>(layers.size());
  if (stages_ < 2 || chunks_ % stages_ != 0) {
    return func_.emitError() << "@" << func_.getSymName() << " lists " << chunks_
                             << " chunks for " << stages_
                             << " pipeline stages; run --plan-stages again";
  }
  const int64_t virtualStages = chunks_ / stages_;
  std::optional<PipelineAxis> axis = findPipelineAxis(module_);
  if (!axis) {
    return func_.emitError() << "@" << func_.getSymName()
                             << " has pipeline stages, but the module's dist.mesh has no pp axis "
                                "(dist.strategies); plan with a pp axis, e.g. mesh=pp=2 axes=pp";
  }
  axis_ = *axis;
  if (axis_.size != stages_) {
    return func_.emitError() << "@" << func_.getSymName() << " is cut into " << stages_
                             << " pipeline stages, but the mesh's pp axis '" << axis_.name
                             << "' has " << axis_.size << " ranks; run plan-stages with stages="
                             << axis_.size;
  }
  if (!schedule_) {
    schedule_ = virtualStages > 1 ? PipelineSchedule::kInterleaved1F1B : PipelineSchedule::k1F1B;
  }
  const bool interleaved = *schedule_ == PipelineSchedule::kInterleaved1F1B;
  if (interleaved != (virtualStages > 1)) {
    return func_.emitError() << "@" << func_.getSymName() << " has " << virtualStages
                             << (virtualStages == 1 ? " model chunk" : " model chunks")
                             << " per stage, but the " << scheduleName(*schedule_)
                             << " schedule runs "
                             << (interleaved ? "two or more; give plan-stages virtual >= 2"
                                             : "one; use schedule=interleaved-1f1b or virtual=1");
  }
  for (mlir::Operation& op : func_.front().without_terminator()) {
    if (!op.hasAttr(kStageAttrName)) {
      return op.emitOpError() << "has no " << kStageAttrName
                              << "; every op of a staged step needs one (run --plan-stages)";
    }
    if (llvm::isa<dist::DistDialect>(op.getDialect())) {
      return op.emitOpError() << "is a dist op, but plan-split-stages runs before "
                                 "--plan-insert-collectives";
    }
  }
  for (mlir::BlockArgument arg : func_.getArguments()) {
    auto chunks = func_.getArgAttrOfType<mlir::DenseI64ArrayAttr>(arg.getArgNumber(),
                                                                  kArgStagesAttrName);
    if (!chunks || chunks.size() < 2 ||
        !func_.getArgAttr(arg.getArgNumber(), nn::NnDialect::kParamAttrName)) {
      continue;
    }
    if (mlir::failed(checkTied(arg, chunks.asArrayRef()))) return mlir::failure();
    tiedArgs_.insert(arg.getArgNumber());
  }
  return mlir::success();
}

// A tied parameter has one replica per stage: two chunks of one stage
// would hold two, and their separate updates would drift apart.
mlir::LogicalResult Splitter::checkTied(mlir::BlockArgument arg, llvm::ArrayRef<int64_t> chunks) {
  std::map<int64_t, int64_t> chunkOnStage;
  for (int64_t c : chunks) {
    auto [it, inserted] = chunkOnStage.emplace(c % stages_, c);
    if (inserted) continue;
    return func_.emitError() << "parameter " << paramName(func_, arg.getArgNumber())
                             << " (argument " << arg.getArgNumber()
                             << ") is read by pipeline chunks " << it->second << " and " << c
                             << ", which both run on stage " << c % stages_
                             << "; a stage holds one replica of a tied parameter, so cut the "
                                "layers so that its readers run on different stages (other "
                                "layers= counts or fewer virtual stages)";
  }
  return mlir::success();
}

// Splits each tied parameter's returned gradient, autodiff's chain of
// nn.add (the sum so far, then the next use's cotangent), into the terms
// of its reading chunks.
mlir::LogicalResult Splitter::splitTiedGradients() {
  mlir::Operation* returnOp = func_.front().getTerminator();
  for (mlir::OpOperand& use : returnOp->getOpOperands()) {
    auto of = func_.getResultAttrOfType<mlir::IntegerAttr>(use.getOperandNumber(),
                                                           autodiff::kGradOfAttrName);
    if (!of || !tiedArgs_.contains(static_cast<unsigned>(of.getInt()))) continue;
    TiedGradient tied;
    tied.result = use.getOperandNumber();
    tied.arg = static_cast<unsigned>(of.getInt());
    tied.sum = use.get().getDefiningOp();
    llvm::SmallVector<mlir::Value> terms;
    mlir::Value sum = use.get();
    for (auto add = sum.getDefiningOp<nn::AddOp>(); add && sum.hasOneUse();
         add = sum.getDefiningOp<nn::AddOp>()) {
      tiedSums_.insert(add);
      terms.push_back(add.getRhs());
      sum = add.getLhs();
    }
    terms.push_back(sum);
    auto readers =
        func_.getArgAttrOfType<mlir::DenseI64ArrayAttr>(tied.arg, kArgStagesAttrName).asArrayRef();
    for (mlir::Value term : llvm::reverse(terms)) {
      mlir::Operation* def = term.getDefiningOp();
      if (!def || !llvm::is_contained(readers, chunkOf(def))) {
        return (def ? def->emitOpError() : returnOp->emitOpError())
               << "computes a term of the gradient of tied parameter " << paramName(func_, tied.arg)
               << " outside the chunks that read it; a gradient must be computed where its "
                  "parameter is read";
      }
      tied.terms[chunkOf(def)].push_back(term);
    }
    for (int64_t c : readers) {
      if (tied.terms.count(c)) continue;
      return func_.emitError() << "tied parameter " << paramName(func_, tied.arg)
                               << " is read by pipeline chunk " << c
                               << ", which adds nothing to its gradient; each stage that holds a "
                                  "replica must compute part of its gradient (untie it)";
    }
    tied_[tied.result] = std::move(tied);
  }
  return mlir::success();
}

// Each returned value goes back from the chunk that defines it; a
// parameter's gradient must be defined where its parameter lives.
mlir::LogicalResult Splitter::assignResults() {
  mlir::Operation* returnOp = func_.front().getTerminator();
  for (mlir::OpOperand& use : returnOp->getOpOperands()) {
    // A tied gradient goes back from every chunk that reads its parameter.
    if (auto it = tied_.find(use.getOperandNumber()); it != tied_.end()) {
      for (const auto& [chunk, terms] : it->second.terms)
        chunk_[chunk].results.push_back(use.getOperandNumber());
      continue;
    }
    mlir::Operation* def = use.get().getDefiningOp();
    if (!def) {
      return returnOp->emitOpError()
             << "returns argument " << llvm::cast<mlir::BlockArgument>(use.get()).getArgNumber()
             << " as result " << use.getOperandNumber()
             << "; a staged step returns only values its chunks compute";
    }
    const int64_t chunk = chunkOf(def);
    chunk_[chunk].results.push_back(use.getOperandNumber());
    auto of = func_.getResultAttrOfType<mlir::IntegerAttr>(use.getOperandNumber(),
                                                           autodiff::kGradOfAttrName);
    if (of && !chunk_[chunk].argIndex.count(static_cast<unsigned>(of.getInt()))) {
      return def->emitOpError() << "computes the gradient of argument " << of.getInt()
                                << " in pipeline chunk " << chunk
                                << ", which does not read that parameter; a gradient must be "
                                   "computed in its parameter's chunk";
    }
  }
  return mlir::success();
}

// One function per chunk, named <function>.chunk<c>, with the arguments its
// ops read (in the original order, attributes and locations kept). Unread
// arguments go to the last chunk.
void Splitter::createFunctions() {
  mlir::OpBuilder builder(func_);
  chunk_.resize(chunks_);
  for (mlir::BlockArgument arg : func_.getArguments()) {
    auto chunks = func_.getArgAttrOfType<mlir::DenseI64ArrayAttr>(arg.getArgNumber(),
                                                                  kArgStagesAttrName);
    const std::vector<int64_t> readers =
        chunks ? std::vector<int64_t>(chunks.asArrayRef().begin(), chunks.asArrayRef().end())
               : std::vector<int64_t>{chunks_ - 1};
    for (int64_t c : readers) {
      Chunk& chunk = chunk_[c];
      chunk.argIndex[arg.getArgNumber()] = static_cast<unsigned>(chunk.argIndex.size());
    }
  }
  for (int64_t c = 0; c < chunks_; ++c) {
    Chunk& chunk = chunk_[c];
    std::vector<unsigned> args(chunk.argIndex.size());
    for (auto [original, index] : chunk.argIndex) args[index] = original;
    llvm::SmallVector<mlir::Type> types;
    for (unsigned a : args) types.push_back(func_.getArgument(a).getType());
    chunk.func = mlir::func::FuncOp::create(
        builder, func_.getLoc(), (func_.getSymName() + ".chunk" + llvm::Twine(c)).str(),
        builder.getFunctionType(types, {}));
    mlir::Block* body = new mlir::Block();
    chunk.func.getBody().push_back(body);
    for (auto [index, a] : llvm::enumerate(args)) {
      chunk.mapping.map(func_.getArgument(a), body->addArgument(types[index],
                                                                func_.getArgument(a).getLoc()));
      const unsigned i = static_cast<unsigned>(index);
      chunk.func.setArgAttrs(i, func_.getArgAttrDict(a));
      chunk.func.setArgAttr(i, kPipelineArgAttrName, builder.getI64IntegerAttr(a));
      if (tiedArgs_.contains(a)) chunk.func.setArgAttr(i, kTiedStagesAttrName, tiedStages(a));
    }
  }
}

mlir::DenseI64ArrayAttr Splitter::tiedStages(unsigned arg) {
  std::vector<int64_t> stages;
  for (int64_t c :
       func_.getArgAttrOfType<mlir::DenseI64ArrayAttr>(arg, kArgStagesAttrName).asArrayRef()) {
    stages.push_back(c % stages_);
  }
  llvm::sort(stages);
  return mlir::DenseI64ArrayAttr::get(func_.getContext(), stages);
}

// The value `user` in chunk `to` reads for `value`, defined in another
// chunk: a receive before the first such user, its send right after the
// definition.
mlir::FailureOr<mlir::Value> Splitter::received(mlir::Value value, int64_t to,
                                                mlir::Operation* user) {
  if (auto it = received_.find({value, to}); it != received_.end()) return it->second;
  mlir::Operation* def = value.getDefiningOp();
  const int64_t from = chunkOf(def);
  if (from % stages_ == to % stages_) {
    return user->emitOpError() << "in pipeline chunk " << to << " reads a value of chunk "
                               << from << ", which runs on the same stage (" << to % stages_
                               << "); only values crossing between stages are sent";
  }
  const bool gradient = backward_.contains(def);
  if (!gradient && backward_.contains(user)) {
    return user->emitOpError()
           << "in pipeline chunk " << to << " reads forward value of chunk " << from
           << " only in its backward pass; a stage receives a forward value for its own forward "
              "(cut the layers elsewhere)";
  }
  mlir::Attribute placement = placementOf(value);
  if (!placement) {
    return def->emitOpError() << "has no " << placement::kResultPlacementsAttrName
                              << "; run --plan-placement before --plan-split-stages";
  }
  mlir::OpBuilder builder(module_.getContext());
  const int64_t tag = nextTag_++;
  // The send, in the defining chunk, after the definition and any earlier
  // sends of it.
  mlir::Operation* clonedDef = chunk_[from].mapping.lookup(value).getDefiningOp();
  auto last = lastSendAfter_.find(clonedDef);
  builder.setInsertionPointAfter(last == lastSendAfter_.end() ? clonedDef : last->second);
  auto send = dist::SendOp::create(builder, def->getLoc(), chunk_[from].mapping.lookup(value),
                                   axis_.mesh, axis_.name, static_cast<uint64_t>(to % stages_),
                                   static_cast<uint64_t>(tag));
  send->setAttr(placement::kOperandPlacementsAttrName, builder.getArrayAttr({placement}));
  send->setAttr(placement::kResultPlacementsAttrName, builder.getArrayAttr({}));
  lastSendAfter_[clonedDef] = send;
  // The receive, in the reading chunk, where its first user goes.
  builder.setInsertionPointToEnd(&chunk_[to].func.front());
  auto recv = dist::RecvOp::create(builder, user->getLoc(), value.getType(), axis_.mesh,
                                   axis_.name, static_cast<uint64_t>(from % stages_),
                                   static_cast<uint64_t>(tag));
  recv->setAttr(placement::kOperandPlacementsAttrName, builder.getArrayAttr({}));
  recv->setAttr(placement::kResultPlacementsAttrName, builder.getArrayAttr({placement}));
  // A received gradient starts this chunk's backward pass.
  if (gradient) recv->setAttr(autodiff::kBackwardRootAttrName, builder.getUnitAttr());
  received_[{value, to}] = recv.getResult();
  return recv.getResult();
}

mlir::LogicalResult Splitter::cloneOps() {
  mlir::OpBuilder builder(module_.getContext());
  for (mlir::Operation& op : func_.front().without_terminator()) {
    if (tiedSums_.contains(&op)) continue;
    const int64_t c = chunkOf(&op);
    Chunk& chunk = chunk_[c];
    for (mlir::Value operand : op.getOperands()) {
      if (chunk.mapping.contains(operand)) continue;
      if (llvm::isa<mlir::BlockArgument>(operand)) {
        return op.emitOpError() << "in pipeline chunk " << c << " reads argument "
                                << llvm::cast<mlir::BlockArgument>(operand).getArgNumber()
                                << ", which plan-stages did not list for it in "
                                << kArgStagesAttrName << "; run --plan-stages again";
      }
      mlir::FailureOr<mlir::Value> value = received(operand, c, &op);
      if (mlir::failed(value)) return mlir::failure();
      chunk.mapping.map(operand, *value);
    }
    builder.setInsertionPointToEnd(&chunk.func.front());
    // The function says the chunk now.
    builder.clone(op, chunk.mapping)->removeAttr(kStageAttrName);
  }
  return mlir::success();
}

// Each chunk's terms of a tied gradient summed in the step's order, each
// add right after the later of its operands (where the step had it).
void Splitter::sumTiedTerms() {
  mlir::OpBuilder builder(module_.getContext());
  for (const auto& [result, tied] : tied_) {
    for (const auto& [c, terms] : tied.terms) {
      Chunk& chunk = chunk_[c];
      mlir::Value partial = chunk.mapping.lookup(terms.front());
      for (mlir::Value term : llvm::drop_begin(terms)) {
        mlir::Value next = chunk.mapping.lookup(term);
        mlir::Operation* a = partial.getDefiningOp();
        mlir::Operation* b = next.getDefiningOp();
        builder.setInsertionPointAfter(a->isBeforeInBlock(b) ? b : a);
        mlir::Operation* add = nn::AddOp::create(builder, b->getLoc(), partial, next);
        add->setDiscardableAttrs(tied.sum->getDiscardableAttrDictionary());
        add->removeAttr(kStageAttrName);
        partial = add->getResult(0);
      }
      tiedPartials_[{result, c}] = partial;
    }
  }
}

// Returns, result attributes (gradients' nn.grad_of renumbered) and the
// function attributes the later passes and the exporter read.
void Splitter::finishFunctions() {
  mlir::OpBuilder builder(module_.getContext());
  mlir::Operation* returnOp = func_.front().getTerminator();
  const auto schedule = builder.getStringAttr(scheduleName(*schedule_));
  for (int64_t c = 0; c < chunks_; ++c) {
    Chunk& chunk = chunk_[c];
    llvm::SmallVector<mlir::Value> values;
    for (unsigned r : chunk.results) {
      auto partial = tiedPartials_.find({r, c});
      values.push_back(partial != tiedPartials_.end()
                           ? partial->second
                           : chunk.mapping.lookup(returnOp->getOperand(r)));
    }
    builder.setInsertionPointToEnd(&chunk.func.front());
    mlir::func::ReturnOp::create(builder, returnOp->getLoc(), values);
    chunk.func.setFunctionType(builder.getFunctionType(
        chunk.func.getArgumentTypes(), mlir::ValueRange(values).getTypes()));
    for (auto [index, r] : llvm::enumerate(chunk.results)) {
      const unsigned i = static_cast<unsigned>(index);
      chunk.func.setResultAttrs(i, func_.getResultAttrDict(r));
      if (auto of = func_.getResultAttrOfType<mlir::IntegerAttr>(r, autodiff::kGradOfAttrName)) {
        chunk.func.setResultAttr(
            i, autodiff::kGradOfAttrName,
            builder.getI64IntegerAttr(chunk.argIndex.lookup(static_cast<unsigned>(of.getInt()))));
      }
    }
    for (mlir::NamedAttribute attr : func_->getAttrs()) {
      const llvm::StringRef key = attr.getName().getValue();
      if (key == mlir::SymbolTable::getSymbolAttrName() ||
          key == func_.getFunctionTypeAttrName() || key == func_.getArgAttrsAttrName() ||
          key == func_.getResAttrsAttrName() || key == autodiff::kLossGradArgAttrName) {
        continue;
      }
      chunk.func->setAttr(attr.getName(), attr.getValue());
    }
    if (auto seed = func_->getAttrOfType<mlir::IntegerAttr>(autodiff::kLossGradArgAttrName)) {
      auto it = chunk.argIndex.find(static_cast<unsigned>(seed.getInt()));
      if (it != chunk.argIndex.end()) {
        chunk.func->setAttr(autodiff::kLossGradArgAttrName, builder.getI64IntegerAttr(it->second));
      }
    }
    chunk.func->setAttr(kPipelineChunkAttrName, builder.getI64IntegerAttr(c));
    chunk.func->setAttr(kPipelineStageAttrName, builder.getI64IntegerAttr(c % stages_));
    chunk.func->setAttr(kPipelineScheduleAttrName, schedule);
    chunk.func->setAttr(kPipelineFunctionAttrName, func_.getSymNameAttr());
  }
}

mlir::LogicalResult Splitter::run() {
  if (mlir::failed(check()) || mlir::failed(splitTiedGradients())) return mlir::failure();
  backward_ = autodiff::backwardOps(func_);
  createFunctions();
  if (mlir::failed(assignResults()) || mlir::failed(cloneOps())) {
    for (Chunk& chunk : chunk_) chunk.func.erase();
    return mlir::failure();
  }
  sumTiedTerms();
  finishFunctions();
  func_.erase();
  return mlir::success();
}

class PlanSplitStagesPass : public impl::PlanSplitStagesBase<PlanSplitStagesPass> {
 public:
  using PlanSplitStagesBase::PlanSplitStagesBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    std::optional<PipelineSchedule> chosen;
    if (!schedule.empty()) {
      absl::StatusOr<PipelineSchedule> parsed = parseSchedule(schedule);
      if (!parsed.ok()) {
        module.emitError() << "plan-split-stages: " << std::string(parsed.status().message());
        return signalPassFailure();
      }
      chosen = *parsed;
    }
    // Tags pair sends with receives across the module's chunks.
    int64_t nextTag = 0;
    std::vector<mlir::func::FuncOp> staged;
    for (auto func : module.getOps<mlir::func::FuncOp>()) {
      if (!func.isExternal() && func->hasAttr(kPipelineStagesAttrName) &&
          !func->hasAttr(kPipelineChunkAttrName)) {
        staged.push_back(func);
      }
    }
    for (mlir::func::FuncOp func : staged) {
      if (mlir::failed(Splitter(module, func, chosen, nextTag).run())) return signalPassFailure();
    }
  }
};

}  // namespace

}  // namespace loom::planner::stages
