// Op interfaces of the `nn` dialect (cost, sharding rule, vector-Jacobian
// product) and the sharding-rule value their ops return.
#ifndef LOOM_PLANNER_DIALECT_NN_IR_NN_INTERFACES_H_
#define LOOM_PLANNER_DIALECT_NN_IR_NN_INTERFACES_H_

#include <cstdint>
#include <optional>
#include <string>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LLVM.h"
#include "planner/cost/compute_cost.h"

namespace loom::planner::nn {

// What a factor means to the planner's strategies. Whether sharding it makes
// a result partial follows from where it appears, not from its kind.
enum class FactorKind {
  kBatch,        // tokens: batch and sequence dims of activations
  kContracting,  // summed over by a matrix product
  kHead,         // attention heads
  kVocab,        // the vocabulary dim of embeddings and logits
  kOther,        // feature dims and the dims of elementwise ops
};

// How shards of a result combine when a factor absent from it is sharded.
enum class ReductionKind { kSum, kMean, kMax };

llvm::StringRef stringifyFactorKind(FactorKind kind);
llvm::StringRef stringifyReductionKind(ReductionKind kind);

// One einsum-like factor of an op's iteration space.
struct ShardingFactor {
  std::string name;
  FactorKind kind;
  int64_t size;
  // Sharding the factor would need communication inside the op (the
  // normalized dim of a norm, the softmax dim, rope's pairs, causal
  // positions), so it must stay replicated.
  bool needsReplication = false;
  // How the shards of a result that lacks this factor combine.
  ReductionKind reduction = ReductionKind::kSum;
};

// The factors one tensor dim is made of, major to minor (a reshape merges
// several; a dim of size 1 may have none). Entries index the rule's factors.
using DimFactors = llvm::SmallVector<int64_t, 2>;
// The factors of every dim of one operand or result.
using TensorFactors = llvm::SmallVector<DimFactors, 4>;

// Where one tensor lives along one mesh axis, DTensor style.
struct Placement {
  enum class Kind { kReplicate, kShard, kPartial };

  static Placement replicate() { return {Kind::kReplicate, -1, ReductionKind::kSum}; }
  static Placement shard(int64_t dim) { return {Kind::kShard, dim, ReductionKind::kSum}; }
  static Placement partial(ReductionKind reduction) { return {Kind::kPartial, -1, reduction}; }

  bool operator==(const Placement& other) const = default;
  // "R", "S(1)", "P(sum)", "P(mean)" or "P(max)".
  std::string str() const;

  Kind kind;
  int64_t dim;              // the sharded dim, for kShard
  ReductionKind reduction;  // for kPartial
};

// The placements of every operand and result when one factor is sharded
// along a mesh axis and no other factor is.
struct FactorPlacements {
  llvm::SmallVector<Placement> operands;
  llvm::SmallVector<Placement> results;
};

// An op's sharding rule, like Shardy's `sdy.sharding_rule`: a list of factors
// and, for every dim of every operand and result, the factors it is made of.
// Sharding a factor shards every dim whose major factor it is; a result
// without the factor is partial (its shards combine with the factor's
// reduction) when an operand has it; an operand without it is replicated,
// except an addend (a bias summed after the contraction), which is partial
// when the factor is reduced, i.e. in no result.
class OpShardingRule {
 public:
  // Adds a factor and returns its index.
  int64_t addFactor(llvm::StringRef name, FactorKind kind, int64_t size,
                    bool needsReplication = false, ReductionKind reduction = ReductionKind::kSum);
  // Appends the next operand's (result's) dims, in operand (result) order.
  void addOperand(TensorFactors dims, bool isAddend = false);
  void addResult(TensorFactors dims);

  llvm::ArrayRef<ShardingFactor> getFactors() const { return factors_; }
  llvm::ArrayRef<TensorFactors> getOperands() const { return operands_; }
  llvm::ArrayRef<TensorFactors> getResults() const { return results_; }
  bool isAddend(int64_t operand) const { return addends_[operand]; }
  std::optional<int64_t> findFactor(llvm::StringRef name) const;

  // The placements implied by sharding `factor` alone. Fails when the factor
  // needs replication or comes after a factor larger than 1 in some dim
  // (sharding it would not split that dim into contiguous blocks).
  mlir::FailureOr<FactorPlacements> placementsFor(int64_t factor) const;

  // Shardy-like text, e.g. for nn.linear with a bias:
  // "([b0, b1, i], [i, o], +[o]) -> ([b0, b1, o]) {b0=2 batch, b1=16 batch,
  // i=64 contracting, o=256 other}"; a compound dim prints as "{h, g}", a
  // dim without factors as "1", and factor flags as ":replicated", ":mean",
  // ":max".
  std::string str() const;

 private:
  llvm::SmallVector<ShardingFactor> factors_;
  llvm::SmallVector<TensorFactors> operands_;
  llvm::SmallVector<bool> addends_;
  llvm::SmallVector<TensorFactors> results_;
};

// Bytes of every operand and result of `op` (element bit width / 8 times
// element count), the default of CostOpInterface::getBytesMoved.
int64_t operandAndResultBytes(mlir::Operation* op);

// How the cost model prices `op` (planner/cost/op_work.h's computeCost on
// its shapes); a default ComputeCost for an op without CostOpInterface.
cost::ComputeCost computeCostOf(mlir::Operation* op);

}  // namespace loom::planner::nn

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/dialect/nn/ir/nn_interfaces.h.inc"
#pragma GCC diagnostic pop

#endif  // LOOM_PLANNER_DIALECT_NN_IR_NN_INTERFACES_H_
