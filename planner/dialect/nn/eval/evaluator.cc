// Interprets functions of `nn` ops with the float64 reference kernels.
#include "planner/dialect/nn/eval/evaluator.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "planner/dialect/nn/ir/nn_ops.h"

namespace loom::planner::nn::eval {
namespace {

using Results = absl::StatusOr<std::vector<Tensor>>;

std::vector<int64_t> shapeOf(mlir::Type type) {
  const auto shape = llvm::cast<mlir::RankedTensorType>(type).getShape();
  return {shape.begin(), shape.end()};
}

// "'nn.embedding' at loc(...)", for error messages.
std::string describe(mlir::Operation* op) {
  std::string location;
  llvm::raw_string_ostream(location) << op->getLoc();
  return absl::StrCat("'", op->getName().getStringRef().str(), "' at ", location);
}

// Ids and labels index rows of a table or logits; out-of-range values are
// an input error, not undefined behaviour.
absl::Status checkIndices(mlir::Operation* op, const Tensor& indices, int64_t vocab,
                          const char* role) {
  for (int64_t t = 0; t < indices.numElements(); ++t) {
    const double index = indices.values[t];
    if (index < 0 || index >= static_cast<double>(vocab)) {
      return absl::InvalidArgumentError(absl::StrCat(describe(op), ": ", role, " #", t, " is ",
                                                     index, ", outside the vocab [0, ", vocab,
                                                     "); give ", role, " in range"));
    }
  }
  return absl::OkStatus();
}

class Interpreter {
 public:
  void bind(mlir::Value value, Tensor tensor) { values_[value] = std::move(tensor); }

  const Tensor& get(mlir::Value value) const { return values_.at(value); }

  // Runs one op and binds its results.
  absl::Status run(mlir::Operation* op) {
    Results results = compute(op);
    if (!results.ok()) return results.status();
    for (auto [result, tensor] : llvm::zip_equal(op->getResults(), *results)) {
      values_[result] = std::move(tensor);
    }
    return absl::OkStatus();
  }

 private:
  Results compute(mlir::Operation* op) {
    auto one = [](Tensor t) { return Results(std::vector<Tensor>{std::move(t)}); };
    return llvm::TypeSwitch<mlir::Operation*, Results>(op)
        .Case([&](EmbeddingOp o) -> Results {
          const Tensor& table = get(o.getTable());
          absl::Status status = checkIndices(op, get(o.getIds()), table.shape[0], "ids");
          if (!status.ok()) return status;
          return one(embedding(get(o.getIds()), table));
        })
        .Case([&](LinearOp o) {
          return one(linear(get(o.getInput()), get(o.getWeight()),
                            o.getBias() ? &get(o.getBias()) : nullptr));
        })
        .Case([&](BiasAddOp o) { return one(biasAdd(get(o.getInput()), get(o.getBias()))); })
        .Case([&](MatmulOp o) {
          return one(
              matmul(get(o.getLhs()), get(o.getRhs()), o.getTransposeLhs(), o.getTransposeRhs()));
        })
        .Case([&](RmsNormOp o) {
          return one(
              rmsNorm(get(o.getInput()), get(o.getGamma()), o.getEpsilon().convertToDouble()));
        })
        .Case([&](LayerNormOp o) {
          return one(layerNorm(get(o.getInput()), get(o.getGamma()), get(o.getBeta()),
                               o.getEpsilon().convertToDouble()));
        })
        .Case([&](RopeOp o) {
          return one(rope(get(o.getInput()), o.getTheta().convertToDouble(), o.getInverse(),
                          o.getScaling()));
        })
        .Case([&](AttentionOp o) {
          return one(attention(get(o.getQuery()), get(o.getKey()), get(o.getValue())));
        })
        .Case([&](SiluOp o) { return one(silu(get(o.getInput()))); })
        .Case([&](GeluOp o) { return one(gelu(get(o.getInput()))); })
        .Case([&](AddOp o) { return one(add(get(o.getLhs()), get(o.getRhs()))); })
        .Case([&](MulOp o) { return one(mul(get(o.getLhs()), get(o.getRhs()))); })
        .Case([&](SoftmaxOp o) { return one(softmax(get(o.getInput()))); })
        .Case([&](ReshapeOp o) { return one(reshape(get(o.getInput()), shapeOf(o.getType()))); })
        .Case([&](TransposeOp o) {
          return one(
              transpose(get(o.getInput()), {o.getPermutation().begin(), o.getPermutation().end()}));
        })
        .Case([&](CrossEntropyOp o) -> Results {
          const Tensor& logits = get(o.getLogits());
          absl::Status status = checkIndices(op, get(o.getLabels()), logits.lastDim(), "labels");
          if (!status.ok()) return status;
          return one(crossEntropy(logits, get(o.getLabels())));
        })
        .Case([&](EmbeddingGradOp o) -> Results {
          const int64_t vocab = o.getType().getShape()[0];
          absl::Status status = checkIndices(op, get(o.getIds()), vocab, "ids");
          if (!status.ok()) return status;
          return one(embeddingGrad(get(o.getIds()), get(o.getResultGrad()), vocab));
        })
        .Case([&](ReduceSumOp o) {
          return one(reduceSum(get(o.getInput()), {o.getDims().begin(), o.getDims().end()}));
        })
        .Case([&](RmsNormGradOp o) {
          NormGrads grads = rmsNormGrad(get(o.getInput()), get(o.getGamma()),
                                        get(o.getResultGrad()), o.getEpsilon().convertToDouble());
          return Results(std::vector<Tensor>{std::move(grads.input), std::move(grads.gamma)});
        })
        .Case([&](LayerNormGradOp o) {
          NormGrads grads = layerNormGrad(get(o.getInput()), get(o.getGamma()),
                                          get(o.getResultGrad()), o.getEpsilon().convertToDouble());
          return Results(std::vector<Tensor>{std::move(grads.input), std::move(grads.gamma),
                                             std::move(grads.beta)});
        })
        .Case([&](AttentionGradOp o) {
          AttentionGrads grads = attentionGrad(get(o.getQuery()), get(o.getKey()),
                                               get(o.getValue()), get(o.getResultGrad()));
          return Results(std::vector<Tensor>{std::move(grads.query), std::move(grads.key),
                                             std::move(grads.value)});
        })
        .Case([&](SoftmaxGradOp o) {
          return one(softmaxGrad(get(o.getOutput()), get(o.getResultGrad())));
        })
        .Case(
            [&](SiluGradOp o) { return one(siluGrad(get(o.getInput()), get(o.getResultGrad()))); })
        .Case(
            [&](GeluGradOp o) { return one(geluGrad(get(o.getInput()), get(o.getResultGrad()))); })
        .Case([&](CrossEntropyGradOp o) -> Results {
          const Tensor& logits = get(o.getLogits());
          absl::Status status = checkIndices(op, get(o.getLabels()), logits.lastDim(), "labels");
          if (!status.ok()) return status;
          return one(crossEntropyGrad(logits, get(o.getLabels()), get(o.getLossGrad()),
                                      o.getScale().convertToDouble()));
        })
        .Case([&](VocabMaxOp o) { return one(vocabMax(get(o.getLogits()), 0, o.getVocab())); })
        .Case([&](VocabStatsOp o) -> Results {
          absl::Status status = checkIndices(op, get(o.getLabels()), o.getVocab(), "labels");
          if (!status.ok()) return status;
          return one(
              vocabStats(get(o.getLogits()), get(o.getLabels()), get(o.getMax()), 0, o.getVocab()));
        })
        .Case([&](VocabCrossEntropyOp o) { return one(vocabCrossEntropy(get(o.getStats()))); })
        .Case([&](VocabCrossEntropyGradOp o) -> Results {
          absl::Status status = checkIndices(op, get(o.getLabels()), o.getVocab(), "labels");
          if (!status.ok()) return status;
          return one(vocabCrossEntropyGrad(get(o.getLogits()), get(o.getLabels()), get(o.getMax()),
                                           get(o.getStats()), get(o.getLossGrad()),
                                           o.getScale().convertToDouble(), 0, o.getVocab()));
        })
        .Default([&](mlir::Operation*) -> Results {
          return absl::InvalidArgumentError(absl::StrCat(
              describe(op), " is not an nn op; the reference evaluator runs nn ops only"));
        });
  }

  llvm::DenseMap<mlir::Value, Tensor> values_;
};

}  // namespace

absl::StatusOr<std::vector<Tensor>> evaluate(mlir::func::FuncOp func,
                                             const std::vector<Tensor>& arguments) {
  if (arguments.size() != func.getNumArguments()) {
    return absl::InvalidArgumentError(
        absl::StrCat("@", func.getSymName().str(), " takes ", func.getNumArguments(),
                     " arguments, got: ", arguments.size(), "; pass one tensor each"));
  }
  if (func.isExternal()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "@", func.getSymName().str(), " is a declaration; pass a function with a body"));
  }
  Interpreter interpreter;
  for (auto [index, argument] : llvm::enumerate(func.getArguments())) {
    const std::vector<int64_t> shape = shapeOf(argument.getType());
    const Tensor& given = arguments[index];
    if (given.shape != shape || given.numElements() != Tensor(shape).numElements()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "@", func.getSymName().str(), " argument #", index, " has shape [",
          absl::StrJoin(shape, ", "), "], got: [", absl::StrJoin(given.shape, ", "), "] with ",
          given.numElements(), " values; pass a tensor of the argument's shape"));
    }
    interpreter.bind(argument, given);
  }
  for (mlir::Operation& op : func.getBody().front()) {
    if (auto ret = llvm::dyn_cast<mlir::func::ReturnOp>(op)) {
      std::vector<Tensor> results;
      for (mlir::Value value : ret.getOperands()) {
        results.push_back(interpreter.get(value));
      }
      return results;
    }
    absl::Status status = interpreter.run(&op);
    if (!status.ok()) return status;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("@", func.getSymName().str(), " has no func.return; pass a verified function"));
}

}  // namespace loom::planner::nn::eval
