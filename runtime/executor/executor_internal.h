// What the executor's files (executor*.cc) share and its interface does not
// show: a bound instruction, a pending collective, and layout helpers.
#ifndef LOOM_RUNTIME_EXECUTOR_EXECUTOR_INTERNAL_H_
#define LOOM_RUNTIME_EXECUTOR_EXECUTOR_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <functional>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "comm/work.h"
#include "runtime/executor/executor.h"
#include "runtime/executor/kernel_set.h"

namespace loom::runtime {

// The dtypes the runtime computes in, moves and reduces.
inline bool runtimeDtype(comm::DType t) {
  return t == comm::DType::kFloat32 || t == comm::DType::kBFloat16 || t == comm::DType::kInt32;
}

// What the loss seed is fed: d loss / d loss.
inline constexpr float kLossGradSeed = 1.0f;

// The product of dims[begin, end).
int64_t product(const std::vector<int64_t>& dims, size_t begin = 0, size_t end = SIZE_MAX);

// "[2, 3]".
std::string shapeText(const std::vector<int64_t>& shape);

// Rows [begin, begin + count) of dim `dim` of a row-major tensor `shape`
// (elements of src's dtype), copied to a dense [.., count, ..] block on the
// kernels' device. Rows past shape[dim] read as zeros.
absl::Status copyDimSlice(KernelSet& k, Ref src, const std::vector<int64_t>& shape, int64_t dim,
                          int64_t begin, int64_t count, Ref dst);
// The reverse: a dense block of `count` rows placed at rows [begin, ...) of
// dim `dim` of `dst`; rows past shape[dim] are not written.
absl::Status placeDimSlice(KernelSet& k, Ref src, int64_t count, Ref dst,
                           const std::vector<int64_t>& shape, int64_t dim, int64_t begin);

// `dst` = `src` (row-major `shape`) with its dims permuted: result dim i is
// source dim perm[i]. Built from copy2D, so it runs on every kernel set:
// one strided copy per index of the leading result dims.
absl::Status permuteDims(KernelSet& k, Ref src, const std::vector<int64_t>& shape,
                         const std::vector<int64_t>& perm, Ref dst);

// optim::localSquaredNorm of a host tensor, f32 or bf16 (read as its exact
// f32 values): offloaded gradients a GPU's kernels cannot read.
double hostSquaredNorm(Ref grads, int64_t count);

// An instruction bound to its kernel: `body` runs it once its results are
// allocated. `view_of` makes result 0 share an operand's (or a pending
// collective's) storage instead of allocating.
struct Executor::Bound {
  const plan::Instruction* instr = nullptr;
  int64_t position = 0;
  std::function<absl::Status(int64_t step)> body;
  int64_t view_of = -1;           // result 0 aliases this buffer
  bool allocates_results = true;  // false: the body defines them
  // Deterministic mode: kRowReduce ops sum over batch rows and give the
  // results flagged in `stacked_results` as per-row stacks; kPropagate ops
  // (add, bucket, ...) carry their operands' stacks to their results.
  enum class StackRule { kNone, kRowReduce, kPropagate };
  StackRule stack_rule = StackRule::kNone;
  std::vector<bool> stacked_results;
  bool stack_mean = false;
  std::vector<int64_t> release_after;
};

// How sums over batch rows are ordered: the one strategy object of
// deterministic mode (docs/runtime.md, "Deterministic mode"). Off, an op
// that sums over rows sums all of this rank's rows at once, in the kernels'
// order, and collectives reduce in the engine's order. On, such an op keeps
// one partial result per batch row (a stack), GEMMs run one sequence at a
// time so a row's arithmetic does not depend on how many rows the rank
// holds, stacks travel by all-gather (launchStacked), and each is summed
// over the global rows in row order before use (finalize): the 1-rank
// run's bits on every batch-splitting layout. Binders ask it; none tests
// the mode themselves.
class Executor::RowOrder {
 public:
  explicit RowOrder(bool exact) : exact_(exact) {}
  // This rank's batch rows and the sequence length, once the plan's ids
  // have given them.
  void setRows(int64_t rows, int64_t seq) {
    rows_ = rows;
    seq_ = seq;
  }
  bool exact() const { return exact_; }
  // The plans the mode can make exact: CPU, f32, no tp, batch along dim 0.
  absl::Status checkPlan(const plan::Plan& plan,
                         const std::vector<const plan::Instruction*>& program,
                         ExecutorDevice device) const;
  absl::Status checkCollective(comm::DType operand, comm::DType wire) const;
  // How many partial results an op that sums over this rank's rows makes:
  // one per batch row, or one total.
  int64_t partials() const { return exact_ ? rows_ : 1; }
  // Marks `bound` as summing its `rows` over batch rows into the results
  // flagged in `stacked` (by their mean when `mean`).
  absl::Status reduceOverRows(Bound& bound, int64_t rows, std::vector<bool> stacked,
                              bool mean = false) const;
  // Marks `bound` as carrying its operands' per-row partials to its results.
  void carryRows(Bound& bound) const;
  // The rows one GEMM call covers, of `rows`.
  int64_t gemmChunk(int64_t rows) const { return exact_ && rows % seq_ == 0 ? seq_ : rows; }
  // Whether a reduce_sum over `dims` of `shape` keeps one result per batch row.
  bool keepsRows(const std::vector<int64_t>& dims, const std::vector<int64_t>& shape) const {
    return exact_ && !dims.empty() && dims[0] == 0 && shape[0] == rows_;
  }
  // Whether a collective's operand travels converted to its wire type
  // (deterministic plans are f32 throughout).
  bool convertsToWire() const { return !exact_; }

 private:
  bool exact_ = false;
  int64_t rows_ = 1;  // this rank's batch rows
  int64_t seq_ = 1;
};

// An async collective (or offload's copy) between its start and its wait.
struct Executor::Pending {
  std::shared_ptr<comm::Work> work;
  std::vector<void*> staging;  // released at the wait
  // A copy between device and host memory: its fence, and its host staging
  // (a converted source), released to the host arena at the wait.
  std::optional<CopyFence> copy;
  std::vector<void*> host_staging;
  // Post-processing at the wait into the wait's result; may be empty (then
  // the wait's result is the start's result).
  std::function<absl::Status(Ref out)> finish;
  double issued_us = 0;
  std::string collective, axes;
  int64_t index = -1;
  std::string started;  // the start's Instruction::where(), for messages
  // A point-to-point transfer's peer stage (-1: a collective); waiting
  // for it is a pipeline bubble.
  int64_t peer = -1;
};

// A collective as bound: what does not change from step to step.
struct Executor::CollectiveCall {
  const plan::Instruction* in = nullptr;
  std::string kind;  // all_gather, reduce_scatter, all_reduce or all_to_all
  std::shared_ptr<comm::ProcessGroup> group;
  int64_t g = 1;  // the group's size
  int64_t operand = -1, result = -1;
  comm::DType operand_type = comm::DType::kFloat32, wire = comm::DType::kFloat32;
  comm::DType accum = comm::DType::kFloat32, result_type = comm::DType::kFloat32;
  comm::ReduceOp reduce = comm::ReduceOp::kSum;
  bool async = false, padded = false;
  // A sum or average accumulated wider than the wire: exchanged with an
  // all-to-all and added in rank order by sumChunks.
  bool exact = false;
  int64_t dim = 0;         // gather_dim, scatter_dim or split_dim
  int64_t concat_dim = 0;  // all_to_all
  std::vector<int64_t> in_shape, out_shape;
  int64_t in_count = 0, out_count = 0;
  int64_t bytes = 0;  // per rank, for the trace
  std::string axes, track, handle;
};

// One issue of a collective: its pending state, and the operand and result
// as the route sees them (the operand converted to the wire type).
struct Executor::CollectiveRun {
  const CollectiveCall& call;
  std::shared_ptr<Pending> pending;
  Ref src, dst;
  comm::Device device;
  comm::Tensor tensor(Ref data, int64_t count) const;
};

}  // namespace loom::runtime

#endif  // LOOM_RUNTIME_EXECUTOR_EXECUTOR_INTERNAL_H_
