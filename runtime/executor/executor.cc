// The executor: binding instructions to kernels at start-up (every shape
// checked once), then running the stream step after step. Every kernel call
// and memory move goes through the KernelSet, so the same binding runs on
// the host and on a GPU.
#include "runtime/executor/executor.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <numeric>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/half_float.h"
#include "mesh/shard_math.h"
#include "runtime/init/counter_rng.h"
#include "runtime/executor/cuda_kernel_set.h"
#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/optim/adamw.h"

namespace loom::runtime {
namespace {

using json = nlohmann::json;

int64_t product(const std::vector<int64_t>& dims, size_t begin = 0, size_t end = SIZE_MAX) {
  int64_t n = 1;
  for (size_t i = begin; i < std::min(end, dims.size()); ++i) n *= dims[i];
  return n;
}

std::string shapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Moves the `valid`-shaped top-left corner of a `local`-shaped buffer to or
// from a dense block: into the padded buffer when `into_padded` (the rest
// stays as it is: zero padding), else out of it.
void copyCorner(float* padded, const std::vector<int64_t>& local, float* dense,
                const std::vector<int64_t>& valid, bool into_padded) {
  const int64_t count = product(valid);
  if (valid == local) {
    if (into_padded) std::memcpy(padded, dense, count * sizeof(float));
    else std::memcpy(dense, padded, count * sizeof(float));
    return;
  }
  if (count == 0) return;
  const size_t rank = local.size();
  std::vector<int64_t> index(rank, 0);
  const int64_t inner = valid.back();
  for (int64_t row = 0; row < count / inner; ++row) {
    int64_t offset = 0;
    for (size_t d = 0; d + 1 < rank; ++d) offset = offset * local[d] + index[d];
    offset *= local.back();
    if (into_padded) std::memcpy(padded + offset, dense + row * inner, inner * sizeof(float));
    else std::memcpy(dense + row * inner, padded + offset, inner * sizeof(float));
    for (int64_t d = static_cast<int64_t>(rank) - 2; d >= 0; --d) {
      if (++index[d] < valid[d]) break;
      index[d] = 0;
    }
  }
}

void copyIntoPadded(const float* src, const std::vector<int64_t>& valid, float* dst,
                    const std::vector<int64_t>& local) {
  copyCorner(dst, local, const_cast<float*>(src), valid, /*into_padded=*/true);
}

void copyFromPadded(const float* src, const std::vector<int64_t>& local, float* dst,
                    const std::vector<int64_t>& valid) {
  copyCorner(const_cast<float*>(src), local, dst, valid, /*into_padded=*/false);
}

// Rows [begin, begin + count) of dim `dim` of a row-major tensor `shape`
// (elements of src's dtype), copied to/from a dense [.., count, ..] block on
// the kernels' device. Rows past shape[dim] read as zeros and are not
// written.
absl::Status copyDimSlice(KernelSet& k, Ref src, const std::vector<int64_t>& shape, int64_t dim,
                          int64_t begin, int64_t count, Ref dst) {
  const size_t elem = comm::dtypeSize(src.dtype);
  const size_t outer = product(shape, 0, dim);
  const int64_t n = shape[dim];
  const int64_t tail = product(shape, dim + 1);
  const int64_t have = std::clamp<int64_t>(n - begin, 0, count);
  const size_t pitch = count * tail * elem;
  if (have > 0) {
    absl::Status s = k.copy2D(dst.data, pitch, src.at(begin * tail).data, n * tail * elem,
                              have * tail * elem, outer);
    if (!s.ok()) return s;
  }
  if (have == count) return absl::OkStatus();
  return k.zero2D(dst.at(have * tail).data, pitch, (count - have) * tail * elem, outer);
}
absl::Status placeDimSlice(KernelSet& k, Ref src, int64_t count, Ref dst,
                           const std::vector<int64_t>& shape, int64_t dim, int64_t begin) {
  const size_t elem = comm::dtypeSize(src.dtype);
  const size_t outer = product(shape, 0, dim);
  const int64_t n = shape[dim];
  const int64_t tail = product(shape, dim + 1);
  const int64_t have = std::clamp<int64_t>(n - begin, 0, count);
  if (have <= 0) return absl::OkStatus();
  return k.copy2D(dst.at(begin * tail).data, n * tail * elem, src.data, count * tail * elem,
                  have * tail * elem, outer);
}

// What the loss seed is fed: d loss / d loss.
constexpr float kLossGradSeed = 1.0f;
// The CUDA loss gradients take dloss as a host value; the executor knows it
// without reading the GPU only when it is the seed it feeds.
constexpr char kDlossNotSeed[] =
    "dloss is not the plan's loss_grad_seed; the CUDA loss-gradient kernels take dloss as a host "
    "value, known only for the fed seed (run this plan with --device=cpu)";

absl::StatusOr<comm::ReduceOp> reduceOpOf(const json& reduction) {
  std::string name;
  if (reduction.is_number_integer()) {
    static const char* kNames[] = {"sum", "avg", "max", "min"};
    const int64_t i = reduction.get<int64_t>();
    if (i < 0 || i > 3) return absl::InvalidArgumentError(absl::StrCat("unknown reduction ", i));
    name = kNames[i];
  } else if (reduction.is_string()) {
    name = reduction.get<std::string>();
  }
  if (name == "sum") return comm::ReduceOp::kSum;
  if (name == "avg") return comm::ReduceOp::kAvg;
  if (name == "max") return comm::ReduceOp::kMax;
  if (name == "min") return comm::ReduceOp::kMin;
  return absl::InvalidArgumentError(absl::StrCat("unknown reduction ", reduction.dump()));
}

}  // namespace

// An instruction bound to its kernel: `body` runs it once its results are
// allocated. `view_of` makes result 0 share an operand's (or a pending
// collective's) storage instead of allocating.
struct Executor::Bound {
  const Instruction* instr = nullptr;
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

// An async collective between its start and its wait.
struct Executor::Pending {
  std::shared_ptr<comm::Work> work;
  std::vector<void*> staging;  // released at the wait
  // Post-processing at the wait into the wait's result; may be empty (then
  // the wait's result is the start's result).
  std::function<absl::Status(Ref out)> finish;
  double issued_us = 0;
  std::string collective, axes;
  int64_t index = -1;
};

Executor::Executor(const Plan& plan, std::shared_ptr<comm::ProcessGroup> world,
                   ExecutorOptions options)
    : plan_(plan), world_(std::move(world)), options_(options) {}

Executor::~Executor() {
  // Collectives still in flight (a failed step) must finish or time out
  // before their buffers go away.
  for (auto& [handle, pending] : pending_) {
    if (pending->work) (void)pending->work->wait(options_.timeout);
  }
  // Device work still queued reads buffers the allocator is about to free.
  if (kernels_ != nullptr) (void)kernels_->synchronize();
  // Trace callbacks run on the groups' threads just after completion.
  const double deadline = TraceRecorder::nowUs() + 5e6;
  while (callbacks_outstanding_ > 0 && TraceRecorder::nowUs() < deadline) std::this_thread::yield();
}

absl::StatusOr<std::unique_ptr<Executor>> Executor::create(const Plan& plan,
                                                           std::shared_ptr<comm::ProcessGroup> world,
                                                           ExecutorOptions options) {
  if (absl::Status s = checkPlanForJob(plan, world->size()); !s.ok()) return s;
  std::unique_ptr<Executor> executor(new Executor(plan, std::move(world), options));
  Executor& e = *executor;
  e.rank_ = e.world_->rank();
  absl::StatusOr<std::vector<int64_t>> coords = e.plan_.mesh.coordinateOf(e.rank_);
  if (!coords.ok()) return coords.status();
  e.coords_ = *coords;
  if (options.device == ExecutorDevice::kCuda) {
    if (options.deterministic) {
      return absl::FailedPreconditionError(absl::StrCat(
          plan.source, ": deterministic mode is a CPU debugging mode (per-row partial sums, host "
          "reductions in global row order); run it with --device=cpu"));
    }
    absl::StatusOr<std::unique_ptr<KernelSet>> kernels = cudaKernelSet(options.cuda_device);
    if (!kernels.ok()) {
      return absl::Status(kernels.status().code(), absl::StrCat("rank ", e.rank_, ": ", kernels.status().message()));
    }
    e.kernels_ = *std::move(kernels);
  } else {
    e.kernels_ = cpuKernelSet();
  }
  // The calling thread issues the collectives, so their process groups'
  // CUDA backends (made on first use) belong to this device.
  if (absl::Status s = e.kernels_->activate(); !s.ok()) return s;
  e.allocator_ = std::make_unique<CachingAllocator>(e.kernels_->blockSource());
  if (options.max_grad_norm > 0) {
    e.clip_coefficient_ = reinterpret_cast<float*>(static_cast<char*>(e.kernels_->scalars()) + sizeof(double));
  }

  // One group per mesh axis, plus every set of axes a collective spans.
  std::set<std::vector<std::string>> axisSets;
  for (const Instruction& instr : e.plan_.instructions) {
    if (!instr.attrs.contains("mesh_axes")) continue;
    std::vector<std::string> axes = instr.attrs["mesh_axes"].get<std::vector<std::string>>();
    if (axes.size() > 1) axisSets.insert(axes);
  }
  absl::StatusOr<comm::MeshGroups> groups = comm::MeshGroups::create(
      e.world_, e.plan_.mesh, std::vector<std::vector<std::string>>(axisSets.begin(), axisSets.end()),
      "plan");
  if (!groups.ok()) return groups.status();
  e.groups_ = std::make_unique<comm::MeshGroups>(*std::move(groups));

  // The data-parallel rows of this rank, from the ids' placement.
  const BufferSpec& ids = e.plan_.buffers[e.plan_.interface.ids];
  absl::StatusOr<ShardBox> rows = shardBoxOf(ids, e.plan_.mesh, e.coords_);
  if (!rows.ok()) return rows.status();
  if (rows->valid != ids.local_shape || ids.local_shape[1] != ids.global_shape[1]) {
    return absl::InvalidArgumentError(absl::StrCat(
        plan.source, ": the token ids ", shapeText(ids.global_shape), " are split as ",
        shapeText(ids.local_shape), " per rank with padding or along the sequence; the CPU runtime "
        "needs a global batch that divides over the data-parallel axes (re-plan with --batch a "
        "multiple of their product)"));
  }
  e.rows_ = {rows->offsets[0], ids.local_shape[0]};
  e.global_batch_ = ids.global_shape[0];
  if (options.deterministic) {
    for (const BufferSpec& b : e.plan_.buffers) {
      if (b.dtype == comm::DType::kBFloat16) {
        return absl::InvalidArgumentError(absl::StrCat(
            plan.source, ": deterministic mode sums f32 per-row contributions; ", b.name,
            " is bf16 (plan with --dtype=f32 for a bit-exact comparison)"));
      }
    }
    for (const std::string& strategy : e.plan_.strategies) {
      if (strategy == "tp") {
        return absl::InvalidArgumentError(absl::StrCat(
            plan.source, ": deterministic mode covers layouts that split the batch (fsdp, dp, hsdp); "
            "tensor parallelism splits each token's sums across ranks, so its results cannot match "
            "the 1-rank run bit for bit"));
      }
    }
  }
  e.seq_ = ids.global_shape[1];
  // The exporter's interface.vocab, else the first embedding's rows (a
  // gathered padded table would count its padding: plans from before
  // interface.vocab).
  e.vocab_ = e.plan_.interface.vocab;
  for (const Instruction& instr : e.plan_.instructions) {
    if (e.vocab_ > 0) break;
    if (instr.op == "nn.embedding" && instr.operands.size() == 2) {
      e.vocab_ = e.plan_.buffers[instr.operands[1]].global_shape[0];
    }
  }
  if (e.vocab_ <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(plan.source, ": the plan has no nn.embedding of the ids"));
  }

  if (absl::Status s = e.bind(); !s.ok()) return s;
  if (absl::Status s = e.initialise(); !s.ok()) return s;
  if (options.trace) {
    if (absl::Status s = e.trace_.alignClocks(*e.world_); !s.ok()) return s;
  }
  return executor;
}

void* Executor::bufferData(int64_t id) const {
  const int64_t block = block_of_[id];
  return block < 0 ? nullptr : blocks_[block].data;
}

absl::Status Executor::outOfMemory(size_t bytes, const std::string& what) const {
  const AllocatorStats& a = allocator_->stats();
  return absl::ResourceExhaustedError(absl::StrCat(
      kernels_->name(), " memory exhausted allocating ", bytes, " bytes for ", what, " (", a.in_use_bytes,
      " bytes in use, ", a.reserved_bytes, " held by the caching allocator); plan with a smaller batch or "
      "--memory-gb set to what the device has free"));
}

absl::Status Executor::define(int64_t id) {
  if (block_of_[id] >= 0) return absl::OkStatus();
  void* data = allocator_->allocate(static_cast<size_t>(plan_.buffers[id].bytes));
  if (data == nullptr) return outOfMemory(plan_.buffers[id].bytes, plan_.buffers[id].name);
  blocks_.push_back({data, 1});
  block_of_[id] = static_cast<int64_t>(blocks_.size()) - 1;
  return absl::OkStatus();
}

absl::Status Executor::defineStacked(int64_t id, Stack stack) {
  if (stack.rows <= 0) return define(id);
  if (block_of_[id] >= 0) releaseBuffer(id);
  const size_t bytes = static_cast<size_t>(plan_.buffers[id].bytes) * stack.rows;
  void* data = allocator_->allocate(bytes);
  if (data == nullptr) return outOfMemory(bytes, plan_.buffers[id].name);
  blocks_.push_back({data, 1});
  block_of_[id] = static_cast<int64_t>(blocks_.size()) - 1;
  stacks_[id] = std::move(stack);
  return absl::OkStatus();
}

absl::Status Executor::defineLike(int64_t id, int64_t of) {
  return stacks_[of].rows > 0 ? defineStacked(id, stacks_[of]) : define(id);
}

void Executor::alias(int64_t id, int64_t of) {
  block_of_[id] = block_of_[of];
  ++blocks_[block_of_[of]].refs;
  stacks_[id] = stacks_[of];
}

absl::Status Executor::finalize(int64_t id) {
  const Stack stack = stacks_[id];
  if (stack.rows == 0) return absl::OkStatus();
  const BufferSpec& b = plan_.buffers[id];
  if (stack.rows != global_batch_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "deterministic mode: ", b.name, " holds the contributions of ", stack.rows, " of the ",
        global_batch_, " batch rows when it is used; the plan reduces it over fewer mesh axes "
        "than the batch is split over"));
  }
  std::vector<int64_t> order(stack.rows);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return stack.index[a] < stack.index[c]; });
  const int64_t n = b.numel();
  const float* rows = static_cast<const float*>(bufferData(id));
  std::vector<float> sum(n, 0.0f);
  for (int64_t r : order) {
    const float* row = rows + r * n;
    for (int64_t j = 0; j < n; ++j) sum[j] += row[j];
  }
  if (stack.mean) {
    for (float& v : sum) v /= static_cast<float>(stack.rows);
  }
  const bool keep = persistent_[id];
  persistent_[id] = false;
  releaseBuffer(id);
  persistent_[id] = keep;
  if (absl::Status s = define(id); !s.ok()) return s;
  std::memcpy(bufferData(id), sum.data(), n * sizeof(float));
  return absl::OkStatus();
}

void Executor::releaseBuffer(int64_t id) {
  if (persistent_[id] || block_of_[id] < 0) return;
  stacks_[id] = Stack{};
  Block& block = blocks_[block_of_[id]];
  if (--block.refs == 0) {
    allocator_->release(block.data);
    block.data = nullptr;
  }
  block_of_[id] = -1;
}

absl::Status Executor::bind() {
  const int64_t numBuffers = static_cast<int64_t>(plan_.buffers.size());
  block_of_.assign(numBuffers, -1);
  persistent_.assign(numBuffers, false);
  stacks_.assign(numBuffers, Stack{});
  const bool det = options_.deterministic;
  for (const BufferSpec& b : plan_.buffers) {
    persistent_[b.id] = b.role == BufferRole::kParam || b.role == BufferRole::kOptimizerState;
  }

  // Last uses. An async start's operands stay alive until its wait, because
  // the group's worker thread reads them meanwhile.
  const int64_t count = static_cast<int64_t>(plan_.instructions.size());
  std::vector<int64_t> lastUse(numBuffers, -1), definedAt(numBuffers, -1);
  std::map<std::string, int64_t> waitOf;
  for (int64_t i = 0; i < count; ++i) {
    const Instruction& in = plan_.instructions[i];
    if (in.op == "dist.wait") waitOf[in.async_handle] = i;
  }
  for (int64_t i = 0; i < count; ++i) {
    const Instruction& in = plan_.instructions[i];
    const int64_t until = in.async_handle.empty() || in.op == "dist.wait" ? i : waitOf[in.async_handle];
    for (int64_t id : in.operands) lastUse[id] = std::max(lastUse[id], until);
    for (int64_t id : in.results) {
      if (definedAt[id] < 0) definedAt[id] = i;
    }
  }

  for (int64_t i = 0; i < count; ++i) {
    const Instruction& in = plan_.instructions[i];
    auto bound = std::make_unique<Bound>();
    bound->instr = &in;
    bound->position = i;
    auto fail = [&](const std::string& what) {
      return absl::InvalidArgumentError(absl::StrCat(plan_.source, ": ", in.where(), " at op index ",
                                                     in.index, ": ", what));
    };
    auto shape = [&](int64_t id) -> const std::vector<int64_t>& { return plan_.buffers[id].local_shape; };
    auto numel = [&](int64_t id) { return plan_.buffers[id].numel(); };
    auto f32 = [this](int64_t id) { return static_cast<float*>(bufferData(id)); };
    auto ref = [this](int64_t id) { return Ref{bufferData(id), plan_.buffers[id].dtype}; };
    auto i32 = [this](int64_t id) { return static_cast<int32_t*>(bufferData(id)); };
    auto need = [&](size_t operands, size_t results) -> absl::Status {
      if (in.operands.size() != operands || in.results.size() != results) {
        return fail(absl::StrCat("expected ", operands, " operands and ", results, " results, got ",
                                 in.operands.size(), " and ", in.results.size()));
      }
      return absl::OkStatus();
    };
    for (const std::vector<int64_t>* ids : {&in.operands, &in.results}) {
      for (int64_t id : *ids) {
        const comm::DType t = plan_.buffers[id].dtype;
        if (t != comm::DType::kFloat32 && t != comm::DType::kBFloat16 && t != comm::DType::kInt32) {
          return fail(absl::StrCat("buffer ", id, " (", plan_.buffers[id].name, ") is ",
                                   std::string(comm::dtypeName(t)), "; the ", kernels_->name(),
                                   " runtime computes in f32 and bf16 (plan with --dtype=f32 or bf16)"));
        }
      }
    }
    // Buffers the kernels take as float*: losses, vocab max and statistics,
    // AdamW's states and master copies.
    auto needF32 = [&](std::initializer_list<int64_t> ids,
                       const char* why = "losses, the dloss seed and vocab max/statistics are f32") -> absl::Status {
      for (int64_t id : ids) {
        if (plan_.buffers[id].dtype != comm::DType::kFloat32) {
          return fail(absl::StrCat(plan_.buffers[id].name, " is ",
                                   std::string(comm::dtypeName(plan_.buffers[id].dtype)), "; ", why));
        }
      }
      return absl::OkStatus();
    };
    const std::string& op = in.op;
    const std::vector<int64_t>& o = in.operands;
    const std::vector<int64_t>& r = in.results;
    absl::Status st;

    if (op == "nn.embedding") {
      if (st = need(2, 1); !st.ok()) return st;
      const int64_t hidden = shape(o[1]).back();
      const int64_t tokens = numel(o[0]);
      absl::StatusOr<ShardBox> box = shardBoxOf(plan_.buffers[o[1]], plan_.mesh, coords_);
      if (!box.ok()) return box.status();
      if (numel(r[0]) != tokens * hidden) return fail("result is not ids x hidden");
      const int64_t rowBegin = box->offsets[0], tableRows = box->valid[0];
      bound->body = [=, this](int64_t) {
        return kernels_->embedding(i32(o[0]), ref(o[1]), ref(r[0]), tokens, hidden, rowBegin, tableRows);
      };
    } else if (op == "nn.embedding_grad") {
      if (st = need(2, 1); !st.ok()) return st;
      const int64_t hidden = shape(r[0]).back();
      const int64_t tokens = numel(o[0]);
      absl::StatusOr<ShardBox> box = shardBoxOf(plan_.buffers[r[0]], plan_.mesh, coords_);
      if (!box.ok()) return box.status();
      if (numel(o[1]) != tokens * hidden) return fail("dy is not ids x hidden");
      const int64_t rowBegin = box->offsets[0], tableRows = box->valid[0];
      const int64_t batch = det ? rows_.count : 1;
      if (det) {
        if (tokens % batch) return fail("deterministic mode: the ids do not split by batch row");
        bound->stack_rule = Bound::StackRule::kRowReduce;
        bound->stacked_results = {true};
      }
      const int64_t table = numel(r[0]);
      bound->body = [=, this](int64_t) {
        const int64_t per = tokens / batch;
        absl::Status s = kernels_->zero2D(ref(r[0]).data, 0, batch * table * comm::dtypeSize(ref(r[0]).dtype), 1);
        for (int64_t b = 0; b < batch; ++b) {
          s.Update(kernels_->embeddingGrad(i32(o[0]) + b * per, ref(o[1]).at(b * per * hidden),
                                           ref(r[0]).at(b * table), per, hidden, rowBegin, tableRows));
        }
        return s;
      };
    } else if (op == "nn.linear") {
      if (o.size() != 2 && o.size() != 3) return fail("expected x, w and an optional bias");
      if (shape(o[1]).size() != 2) return fail("w must be rank 2");
      const int64_t inF = shape(o[1])[0], outF = shape(o[1])[1];
      if (shape(o[0]).back() != inF) {
        return fail(absl::StrCat("x ", shapeText(shape(o[0])), " does not match w ", shapeText(shape(o[1]))));
      }
      const int64_t rows = numel(o[0]) / inF;
      if (numel(r[0]) != rows * outF) return fail("result size");
      const bool bias = o.size() == 3;
      if (bias && numel(o[2]) != outF) return fail("bias size");
      // Deterministic: one sequence per GEMM, so a row's arithmetic does
      // not depend on how many rows the rank holds.
      const int64_t chunk = det && rows % seq_ == 0 ? seq_ : rows;
      bound->body = [=, this](int64_t) {
        absl::Status s;
        for (int64_t c = 0; c < rows; c += chunk) {
          s.Update(kernels_->linear(ref(o[0]).at(c * inF), ref(o[1]), bias ? ref(o[2]) : Ref{},
                                    ref(r[0]).at(c * outF), chunk, inF, outF));
        }
        return s;
      };
    } else if (op == "nn.matmul") {
      if (st = need(2, 1); !st.ok()) return st;
      const bool tl = in.attrs.value("transpose_lhs", false), tr = in.attrs.value("transpose_rhs", false);
      if (tl && tr) return fail("transpose_lhs and transpose_rhs together are not supported");
      if (tl) {
        if (shape(r[0]).size() != 2) return fail("transpose_lhs result must be rank 2");
        const int64_t m = shape(r[0])[0], n = shape(r[0])[1];
        const int64_t rows = numel(o[0]) / m;
        if (shape(o[0]).back() != m || shape(o[1]).back() != n || numel(o[1]) != rows * n) {
          return fail("lhs^T rhs shapes disagree");
        }
        const int64_t batch = rows_.count;
        if (det) {
          if (rows % batch) return fail("deterministic mode: the rows do not split by batch row");
          bound->stack_rule = Bound::StackRule::kRowReduce;
          bound->stacked_results = {true};
        }
        bound->body = [=, this](int64_t) {
          if (!det) {
            return kernels_->matmulTransposeLhs(ref(o[0]), ref(o[1]), ref(r[0]), rows, m, n);
          }
          const int64_t per = rows / batch;
          absl::Status s;
          for (int64_t b = 0; b < batch; ++b) {
            s.Update(kernels_->matmulTransposeLhs(ref(o[0]).at(b * per * m), ref(o[1]).at(b * per * n),
                                                  ref(r[0]).at(b * m * n), per, m, n));
          }
          return s;
        };
      } else {
        if (shape(o[1]).size() != 2) return fail("rhs must be rank 2 (batched matmuls are not supported)");
        const int64_t k = shape(o[0]).back();
        const int64_t n = tr ? shape(o[1])[0] : shape(o[1])[1];
        if ((tr ? shape(o[1])[1] : shape(o[1])[0]) != k) return fail("contraction dims disagree");
        const int64_t rows = numel(o[0]) / k;
        if (numel(r[0]) != rows * n) return fail("result size");
        const int64_t chunk = det && rows % seq_ == 0 ? seq_ : rows;
        bound->body = [=, this](int64_t) {
          absl::Status s;
          for (int64_t c = 0; c < rows; c += chunk) {
            s.Update(tr ? kernels_->matmulTransposeRhs(ref(o[0]).at(c * k), ref(o[1]), ref(r[0]).at(c * n), chunk, k, n)
                        : kernels_->matmul(ref(o[0]).at(c * k), ref(o[1]), ref(r[0]).at(c * n), chunk, k, n));
          }
          return s;
        };
      }
    } else if (op == "nn.rms_norm" || op == "nn.layer_norm") {
      const bool layer = op == "nn.layer_norm";
      if (st = need(layer ? 3 : 2, 1); !st.ok()) return st;
      const int64_t hidden = shape(o[0]).back(), rows = numel(o[0]) / hidden;
      if (numel(o[1]) != hidden) return fail("gamma size");
      const float eps = in.attrs.value("epsilon", 1e-5f);
      bound->body = [=, this](int64_t) {
        if (layer) return kernels_->layerNorm(ref(o[0]), ref(o[1]), ref(o[2]), ref(r[0]), rows, hidden, eps);
        return kernels_->rmsNorm(ref(o[0]), ref(o[1]), ref(r[0]), rows, hidden, eps);
      };
    } else if (op == "nn.rms_norm_grad" || op == "nn.layer_norm_grad") {
      const bool layer = op == "nn.layer_norm_grad";
      if (st = need(3, layer ? 3 : 2); !st.ok()) return st;
      const int64_t hidden = shape(o[0]).back(), rows = numel(o[0]) / hidden;
      if (numel(o[1]) != hidden || numel(o[2]) != numel(o[0])) return fail("shapes disagree");
      const float eps = in.attrs.value("epsilon", 1e-5f);
      const int64_t batch = det ? rows_.count : 1;
      if (det) {
        if (rows % batch) return fail("deterministic mode: the rows do not split by batch row");
        bound->stack_rule = Bound::StackRule::kRowReduce;
        bound->stacked_results = layer ? std::vector<bool>{false, true, true} : std::vector<bool>{false, true};
      }
      bound->body = [=, this](int64_t) {
        const int64_t per = rows / batch;
        absl::Status s;
        for (int64_t b = 0; b < batch; ++b) {
          const int64_t t = b * per * hidden, g = b * hidden;
          s.Update(layer ? kernels_->layerNormGrad(ref(o[0]).at(t), ref(o[1]), ref(o[2]).at(t), ref(r[0]).at(t),
                                                   ref(r[1]).at(g), ref(r[2]).at(g), per, hidden, eps)
                         : kernels_->rmsNormGrad(ref(o[0]).at(t), ref(o[1]), ref(o[2]).at(t), ref(r[0]).at(t),
                                                 ref(r[1]).at(g), per, hidden, eps));
        }
        return s;
      };
    } else if (op == "nn.rope") {
      if (st = need(1, 1); !st.ok()) return st;
      const std::vector<int64_t>& s = shape(o[0]);
      if (s.size() != 4 || s[3] % 2) return fail("rope wants [B, S, H, D] with D even");
      for (const AxisPlacement& p : plan_.buffers[o[0]].placement) {
        if (p.kind == AxisPlacement::Kind::kShard && p.dim == 1) {
          return fail("rope of a sequence-sharded tensor is not supported");
        }
      }
      const float theta = in.attrs.value("theta", 10000.0f);
      const bool inverse = in.attrs.value("inverse", false);
      bound->body = [=, this](int64_t) {
        return kernels_->rope(ref(o[0]), ref(r[0]), s[0], s[1], s[2], s[3], theta, inverse);
      };
    } else if (op == "nn.attention" || op == "nn.attention_grad") {
      const bool grad = op == "nn.attention_grad";
      if (st = need(grad ? 4 : 3, grad ? 3 : 1); !st.ok()) return st;
      const std::vector<int64_t>& q = shape(o[0]);
      const std::vector<int64_t>& k = shape(o[1]);
      if (q.size() != 4 || k.size() != 4 || shape(o[2]) != k || q[0] != k[0] || q[1] != k[1] ||
          q[3] != k[3] || k[2] == 0 || q[2] % k[2]) {
        return fail(absl::StrCat("q ", shapeText(q), " and k/v ", shapeText(k), " do not fit"));
      }
      const cpu::AttentionShape a{q[0], q[1], q[2], k[2], q[3]};
      if (st = kernels_->checkAttention(a); !st.ok()) return fail(std::string(st.message()));
      bound->body = [=, this](int64_t) {
        if (grad) {
          return kernels_->attentionGrad(ref(o[0]), ref(o[1]), ref(o[2]), ref(o[3]), ref(r[0]), ref(r[1]),
                                         ref(r[2]), a);
        }
        return kernels_->attention(ref(o[0]), ref(o[1]), ref(o[2]), ref(r[0]), a);
      };
    } else if (op == "nn.silu" || op == "nn.gelu") {
      if (st = need(1, 1); !st.ok()) return st;
      const bool gelu = op == "nn.gelu";
      const int64_t n = numel(o[0]);
      bound->body = [=, this](int64_t) {
        if (gelu) return kernels_->gelu(ref(o[0]), ref(r[0]), n);
        return kernels_->silu(ref(o[0]), ref(r[0]), n);
      };
    } else if (op == "nn.silu_grad" || op == "nn.gelu_grad") {
      if (st = need(2, 1); !st.ok()) return st;
      const bool gelu = op == "nn.gelu_grad";
      const int64_t n = numel(o[0]);
      if (numel(o[1]) != n) return fail("x and dy differ in size");
      bound->body = [=, this](int64_t) {
        if (gelu) return kernels_->geluGrad(ref(o[0]), ref(o[1]), ref(r[0]), n);
        return kernels_->siluGrad(ref(o[0]), ref(o[1]), ref(r[0]), n);
      };
    } else if (op == "nn.add" || op == "nn.mul") {
      if (st = need(2, 1); !st.ok()) return st;
      const int64_t n = numel(o[0]);
      if (numel(o[1]) != n || numel(r[0]) != n) return fail("operands differ in size (no broadcasting)");
      const bool mul = op == "nn.mul";
      if (det) bound->stack_rule = Bound::StackRule::kPropagate;
      bound->body = [=, this](int64_t) {
        const int64_t count = n * std::max<int64_t>(1, stacks_[r[0]].rows);
        if (mul) return kernels_->mul(ref(o[0]), ref(o[1]), ref(r[0]), count);
        return kernels_->add(ref(o[0]), ref(o[1]), ref(r[0]), count);
      };
    } else if (op == "nn.softmax" || op == "nn.softmax_grad") {
      const bool grad = op == "nn.softmax_grad";
      if (st = need(grad ? 2 : 1, 1); !st.ok()) return st;
      const int64_t n = shape(o[0]).back(), rows = numel(o[0]) / n;
      bound->body = [=, this](int64_t) {
        if (grad) return kernels_->softmaxGrad(ref(o[0]), ref(o[1]), ref(r[0]), rows, n);
        return kernels_->softmax(ref(o[0]), ref(r[0]), rows, n);
      };
    } else if (op == "nn.reshape") {
      if (st = need(1, 1); !st.ok()) return st;
      if (numel(o[0]) != numel(r[0])) return fail("reshape changes the element count");
      bound->view_of = o[0];
      bound->body = [](int64_t) { return absl::OkStatus(); };
    } else if (op == "nn.reduce_sum") {
      if (st = need(1, 1); !st.ok()) return st;
      std::vector<int64_t> dims = in.attrs.value("dims", std::vector<int64_t>{});
      const std::vector<int64_t> s = shape(o[0]);
      for (size_t k = 0; k < dims.size(); ++k) {
        if (dims[k] < 0 || dims[k] >= static_cast<int64_t>(s.size()) || (k && dims[k] <= dims[k - 1])) {
          return fail("dims must be strictly increasing and in range");
        }
      }
      if (st = kernels_->checkReduceSum(s.size()); !st.ok()) return fail(std::string(st.message()));
      // Deterministic: a sum over the batch dim is kept per batch row.
      const bool perRow = det && !dims.empty() && dims[0] == 0 && s[0] == rows_.count;
      if (perRow) {
        bound->stack_rule = Bound::StackRule::kRowReduce;
        bound->stacked_results = {true};
      }
      std::vector<int64_t> rowShape = s;
      rowShape[0] = perRow ? 1 : s[0];
      const int64_t inRow = perRow ? numel(o[0]) / s[0] : 0, outRow = numel(r[0]);
      bound->body = [=, this](int64_t) {
        if (!perRow) {
          return kernels_->reduceSum(ref(o[0]), s, dims, ref(r[0]));
        }
        absl::Status status;
        for (int64_t b = 0; b < s[0]; ++b) {
          status.Update(kernels_->reduceSum(ref(o[0]).at(b * inRow), rowShape, dims, ref(r[0]).at(b * outRow)));
        }
        return status;
      };
    } else if (op == "nn.cross_entropy" || op == "nn.cross_entropy_grad") {
      const bool grad = op == "nn.cross_entropy_grad";
      if (st = need(grad ? 3 : 2, 1); !st.ok()) return st;
      const int64_t vocab = shape(o[0]).back(), tokens = numel(o[0]) / vocab;
      if (numel(o[1]) != tokens) return fail("labels do not match the logits' tokens");
      for (const AxisPlacement& p : plan_.buffers[o[0]].placement) {
        if (p.kind == AxisPlacement::Kind::kShard &&
            p.dim == static_cast<int64_t>(shape(o[0]).size()) - 1) {
          return fail("the logits are split over the vocabulary; this op needs them whole");
        }
      }
      if (st = grad ? needF32({o[2]}) : needF32({r[0]}); !st.ok()) return st;
      const float scale = in.attrs.value("scale", 1.0f);
      const bool seedConstant = !kernels_->hostAddressable();
      if (grad && seedConstant && o[2] != plan_.interface.loss_grad_seed) return fail(kDlossNotSeed);
      // Deterministic: the loss is kept as one mean per batch row.
      const int64_t batch = det && !grad ? rows_.count : 1;
      if (det && !grad) {
        bound->stack_rule = Bound::StackRule::kRowReduce;
        bound->stacked_results = {true};
        bound->stack_mean = true;
      }
      bound->body = [=, this](int64_t) {
        if (grad) {
          return kernels_->crossEntropyGrad(ref(o[0]), i32(o[1]), seedConstant ? kLossGradSeed : *f32(o[2]),
                                            scale, ref(r[0]), tokens, vocab);
        }
        const int64_t per = tokens / batch;
        absl::Status s;
        for (int64_t b = 0; b < batch; ++b) {
          s.Update(kernels_->crossEntropy(ref(o[0]).at(b * per * vocab), i32(o[1]) + b * per, f32(r[0]) + b, per,
                                          vocab));
        }
        return s;
      };
    } else if (op == "nn.bias_add") {
      if (st = need(2, 1); !st.ok()) return st;
      const int64_t outF = shape(o[0]).back(), rows = numel(o[0]) / std::max<int64_t>(outF, 1);
      if (numel(o[1]) != outF) return fail("bias does not match x's last dim");
      bound->body = [=, this](int64_t) {
        return kernels_->biasAdd(ref(o[0]), ref(o[1]), ref(r[0]), rows, outF);
      };
    } else if (op.starts_with("nn.vocab_")) {
      // Vocab-parallel cross-entropy: the logits' last dim may be a shard
      // of the vocabulary; its global rows come from the logits' placement.
      const bool ce = op == "nn.vocab_cross_entropy";
      const int64_t logitsId = ce ? -1 : o.at(0);
      int64_t local = 0, valid = 0, rowBegin = 0, tokens = 0;
      if (!ce) {
        const BufferSpec& logits = plan_.buffers[logitsId];
        absl::StatusOr<ShardBox> box = shardBoxOf(logits, plan_.mesh, coords_);
        if (!box.ok()) return box.status();
        local = logits.local_shape.back();
        rowBegin = box->offsets.back();
        tokens = logits.numel() / std::max<int64_t>(local, 1);
        // A padded buffer's global dim is its padded extent; `vocab` says
        // how many rows are real.
        const int64_t vocab = in.attrs.value("vocab", logits.global_shape.back());
        if (vocab > logits.global_shape.back()) return fail("vocab exceeds the logits' rows");
        valid = std::clamp<int64_t>(vocab - rowBegin, 0, local);
      }
      if (op == "nn.vocab_max") {
        if (st = need(1, 1); !st.ok()) return st;
        if (numel(r[0]) != tokens) return fail("max must hold one value per token");
        if (st = needF32({r[0]}); !st.ok()) return st;
        bound->body = [=, this](int64_t) {
          return kernels_->vocabMax(ref(o[0]), f32(r[0]), tokens, local, valid);
        };
      } else if (op == "nn.vocab_stats") {
        if (st = need(3, 1); !st.ok()) return st;
        if (numel(o[1]) != tokens || numel(o[2]) != tokens || numel(r[0]) != 2 * tokens) {
          return fail("labels, max and stats must match the logits' tokens");
        }
        if (st = needF32({o[2], r[0]}); !st.ok()) return st;
        bound->body = [=, this](int64_t) {
          return kernels_->vocabStats(ref(o[0]), i32(o[1]), f32(o[2]), f32(r[0]), tokens, local, valid, rowBegin);
        };
      } else if (ce) {
        if (st = need(1, 1); !st.ok()) return st;
        const int64_t count = numel(o[0]) / 2;
        if (st = needF32({o[0], r[0]}); !st.ok()) return st;
        bound->body = [=, this](int64_t) { return kernels_->vocabCrossEntropy(f32(o[0]), f32(r[0]), count); };
      } else if (op == "nn.vocab_cross_entropy_grad") {
        if (st = need(5, 1); !st.ok()) return st;
        if (numel(o[1]) != tokens || numel(o[2]) != tokens || numel(o[3]) != 2 * tokens ||
            numel(r[0]) != numel(o[0])) {
          return fail("labels, max, stats and the gradient must match the logits");
        }
        if (st = needF32({o[2], o[3], o[4]}); !st.ok()) return st;
        const float scale = in.attrs.value("scale", 1.0f);
        const bool seedConstant = !kernels_->hostAddressable();
        if (seedConstant && o[4] != plan_.interface.loss_grad_seed) return fail(kDlossNotSeed);
        bound->body = [=, this](int64_t) {
          return kernels_->vocabCrossEntropyGrad(ref(o[0]), i32(o[1]), f32(o[2]), f32(o[3]),
                                                 seedConstant ? kLossGradSeed : *f32(o[4]), scale, ref(r[0]),
                                                 tokens, local, valid, rowBegin);
        };
      } else {
        return fail("unknown vocab-parallel op");
      }
    } else if (op == "dist.bucket" || op == "dist.unbucket") {
      const bool pack = op == "dist.bucket";
      const std::vector<int64_t>& entries = pack ? o : r;
      const int64_t flat = pack ? r.at(0) : o.at(0);
      if ((pack ? r.size() : o.size()) != 1) return fail("one bucket buffer expected");
      const int64_t chunks = in.attrs.value("chunks", int64_t{1});
      std::vector<int64_t> offsets = in.attrs.value("offsets", std::vector<int64_t>{});
      std::vector<int64_t> splitDims = in.attrs.value("split_dims", std::vector<int64_t>(entries.size(), 0));
      if (offsets.size() != entries.size() || splitDims.size() != entries.size() || chunks < 1 ||
          numel(flat) % chunks) {
        return fail("offsets/split_dims/chunks do not fit the entries");
      }
      const int64_t segment = numel(flat) / chunks;
      const comm::DType type = plan_.buffers[flat].dtype;
      for (int64_t id : entries) {
        if (plan_.buffers[id].dtype != type) {
          return fail(absl::StrCat(plan_.buffers[id].name, " is ", std::string(comm::dtypeName(plan_.buffers[id].dtype)),
                                   " but its bucket is ", std::string(comm::dtypeName(type))));
        }
      }
      const size_t elem = comm::dtypeSize(type);
      // padded: parts take ceil(n / chunks) rows of the split dim, the rows
      // past the entry's end zero in the bucket and dropped when unbucketing.
      const bool padded = in.attrs.value("padded", false);
      struct Part {
        int64_t id, outer, n, tail, offset, count, rows;
      };
      std::vector<Part> parts;
      for (size_t k = 0; k < entries.size(); ++k) {
        const std::vector<int64_t>& s = shape(entries[k]);
        const int64_t d = s.empty() ? 0 : splitDims[k];
        Part part{entries[k], product(s, 0, d), s.empty() ? 1 : s[d], product(s, d + 1), offsets[k], product(s), 0};
        part.rows = padded ? mesh::shardSize(part.n, chunks) : part.n / chunks;
        if ((!padded && part.n % chunks) || part.offset + part.outer * part.rows * part.tail > segment) {
          return fail(absl::StrCat("entry ", k, " ", shapeText(s), " does not fit its segment"));
        }
        parts.push_back(part);
      }
      if (det) bound->stack_rule = Bound::StackRule::kPropagate;
      const int64_t flatCount = numel(flat);
      bound->body = [=, this](int64_t) {
        const int64_t stackRows = std::max<int64_t>(1, stacks_[flat].rows);
        absl::Status s;
        for (int64_t row = 0; row < stackRows; ++row) {
          const Ref buffer = ref(flat).at(row * flatCount);
          for (const Part& p : parts) {
            // Chunk c of an entry is `real` rows of its split dim in each of
            // its `outer` slices, laid `rows` apart in segment c.
            const Ref entry = ref(p.id).at(row * p.count);
            const int64_t rows = p.rows;
            const size_t entryPitch = p.n * p.tail * elem, bucketPitch = rows * p.tail * elem;
            for (int64_t c = 0; c < chunks; ++c) {
              const int64_t real = std::clamp<int64_t>(p.n - c * rows, 0, rows);
              void* a = entry.at(c * rows * p.tail).data;
              const Ref b = buffer.at(c * segment + p.offset);
              const size_t width = real * p.tail * elem;
              if (!pack) {
                s.Update(kernels_->copy2D(a, entryPitch, b.data, bucketPitch, width, p.outer));
                continue;
              }
              s.Update(kernels_->copy2D(b.data, bucketPitch, a, entryPitch, width, p.outer));
              if (real < rows) {
                s.Update(kernels_->zero2D(b.at(real * p.tail).data, bucketPitch, (rows - real) * p.tail * elem,
                                          p.outer));
              }
            }
          }
        }
        return s;
      };
    } else if (op == "dist.slice") {
      if (st = need(1, 1); !st.ok()) return st;
      if (plan_.buffers[o[0]].dtype != plan_.buffers[r[0]].dtype) return fail("a slice keeps its dtype");
      const int64_t dim = in.attrs.value("slice_dim", int64_t{0});
      std::vector<std::string> axes = in.attrs.value("mesh_axes", std::vector<std::string>{});
      int64_t index = 0;
      for (const std::string& axis : axes) {
        absl::StatusOr<int64_t> a = plan_.mesh.axisIndex(axis);
        if (!a.ok()) return fail(std::string(a.status().message()));
        index = index * plan_.mesh.shape()[*a] + coords_[*a];
      }
      const std::vector<int64_t> in_shape = shape(o[0]);
      const int64_t rows = shape(r[0])[dim];
      bound->body = [=, this](int64_t) {
        return copyDimSlice(*kernels_, ref(o[0]), in_shape, dim, index * rows, rows, ref(r[0]));
      };
    } else if (op == "dist.free") {
      if (o.size() != 1 || !r.empty()) return fail("dist.free takes one buffer");
      bound->body = [](int64_t) { return absl::OkStatus(); };
    } else if (op == "dist.optimizer_step") {
      if (o.size() != 4 && o.size() != 5) {
        return fail("expected param, grad, exp_avg, exp_avg_sq and, for non-f32 params, an f32 master copy");
      }
      const int64_t n = numel(o[0]);
      for (int64_t id : o) {
        if (numel(id) != n) return fail("param, grad and states differ in size");
      }
      const bool master = o.size() == 5;
      constexpr char kStates[] = "AdamW keeps its states and master copies in f32";
      if (st = master ? needF32({o[2], o[3], o[4]}, kStates) : needF32({o[2], o[3]}, kStates); !st.ok()) {
        return st;
      }
      if (!master && plan_.buffers[o[0]].dtype != comm::DType::kFloat32) {
        return fail("a bf16 parameter needs an f32 master copy (operand 5); re-plan with the current planner");
      }
      optim::AdamWConfig config;
      config.lr = options_.learning_rate > 0 ? options_.learning_rate : in.attrs.value("lr", 1e-3);
      std::vector<double> betas = in.attrs.value("betas", std::vector<double>{0.9, 0.999});
      if (betas.size() != 2) return fail("betas must have two entries");
      config.beta1 = betas[0];
      config.beta2 = betas[1];
      config.eps = in.attrs.value("eps", 1e-8);
      config.weight_decay = in.attrs.value("weight_decay", 1e-2);
      bound->allocates_results = false;
      bound->body = [=, this](int64_t step) {
        return kernels_->adamw(config, step, ref(o[0]), ref(o[1]), f32(o[2]), f32(o[3]), master ? f32(o[4]) : nullptr,
                               n, clip_coefficient_);
      };
    } else if (op == "dist.wait") {
      if (st = need(1, 1); !st.ok()) return st;
      const std::string handle = in.async_handle;
      bound->allocates_results = false;
      bound->body = [=, this](int64_t step) -> absl::Status {
        auto it = pending_.find(handle);
        if (it == pending_.end()) {
          return absl::InternalError(absl::StrCat(in.where(), ": '", handle, "' was not started"));
        }
        std::shared_ptr<Pending> p = std::move(it->second);
        pending_.erase(it);
        const double t0 = TraceRecorder::nowUs();
        absl::Status s = kernels_->await(*p->work, options_.timeout);
        const double t1 = TraceRecorder::nowUs();
        if (!s.ok()) {
          return absl::Status(s.code(), absl::StrCat("step ", step, ", ", in.where(), " (", handle,
                                                     "): ", s.message()));
        }
        traceWait(in, step, p->index, p->collective, p->axes, t0, t1);
        if (p->finish) {
          if (absl::Status d = defineLike(r[0], o[0]); !d.ok()) return d;
          if (absl::Status d = p->finish(ref(r[0])); !d.ok()) return d;
        } else {
          alias(r[0], o[0]);
        }
        for (void* block : p->staging) allocator_->release(block);
        return absl::OkStatus();
      };
    } else if (op.starts_with("dist.all_gather") || op.starts_with("dist.reduce_scatter") ||
               op.starts_with("dist.all_reduce")) {
      if (st = need(1, 1); !st.ok()) return st;
      const std::string kind = in.attrs.value("kind", "");
      std::vector<std::string> axes = in.attrs.value("mesh_axes", std::vector<std::string>{});
      absl::StatusOr<std::shared_ptr<comm::ProcessGroup>> group = groups_->groupFor(axes);
      if (!group.ok()) return fail(std::string(group.status().message()));
      // Types: the operand's (E), the wire's (W: what the engine moves), the
      // accumulation's (A) and the result's (R, W or A). E != W converts
      // first; a sum accumulated wider than the wire is exchanged with an
      // all-to-all and added by sumChunks, so its accumulation is the plan's
      // on every backend and device, in rank order.
      const comm::DType e = plan_.buffers[o[0]].dtype, resultType = plan_.buffers[r[0]].dtype;
      const std::string wireName = in.attrs.value("wire_type", std::string(comm::dtypeName(e)));
      const std::string accumName = in.attrs.value("accum_type", wireName);
      absl::StatusOr<comm::DType> wireType = comm::dtypeFromName(wireName);
      absl::StatusOr<comm::DType> accumType = comm::dtypeFromName(accumName);
      if (!wireType.ok() || !accumType.ok()) {
        return fail(absl::StrCat("wire ", wireName, " / accumulation ", accumName, " is not a dtype"));
      }
      const comm::DType w = *wireType, acc = *accumType;
      for (comm::DType t : {w, acc}) {
        if (t != comm::DType::kFloat32 && t != comm::DType::kBFloat16 && t != comm::DType::kInt32) {
          return fail(absl::StrCat("wire ", wireName, " / accumulation ", accumName, ": the ", kernels_->name(),
                                   " runtime moves and reduces f32, bf16 and i32"));
        }
      }
      if ((e == comm::DType::kInt32) != (w == comm::DType::kInt32)) {
        return fail(absl::StrCat("a ", std::string(comm::dtypeName(e)), " operand cannot travel as ", wireName));
      }
      const bool async = op.ends_with("_start");
      const int64_t g = (*group)->size();
      const bool padded = in.attrs.value("padded", false);
      const std::vector<int64_t> inShape = shape(o[0]), outShape = shape(r[0]);
      std::shared_ptr<comm::ProcessGroup> pg = *group;
      comm::ReduceOp reduce = comm::ReduceOp::kSum;
      if (in.attrs.contains("reduction")) {
        absl::StatusOr<comm::ReduceOp> parsed = reduceOpOf(in.attrs["reduction"]);
        if (!parsed.ok()) return fail(std::string(parsed.status().message()));
        reduce = *parsed;
      }
      const bool reduction = kind != "all_gather";
      if (resultType != w && !(reduction && resultType == acc)) {
        return fail(absl::StrCat("the result is ", std::string(comm::dtypeName(resultType)), "; a ", kind,
                                 " with wire ", wireName, " and accumulation ", accumName,
                                 " delivers the wire type", reduction ? " or the accumulation type" : ""));
      }
      // Max and min are exact in any type; sums and averages accumulated
      // wider than the wire take the exchange-and-add path.
      const bool exact = reduction && comm::dtypeSize(acc) > comm::dtypeSize(w) &&
                         (reduce == comm::ReduceOp::kSum || reduce == comm::ReduceOp::kAvg) && g > 1;
      if (exact && acc != comm::DType::kFloat32) {
        return fail(absl::StrCat("accumulation ", accumName, " wider than the wire: the runtime accumulates in f32"));
      }
      if (det && (e != comm::DType::kFloat32 || w != comm::DType::kFloat32)) {
        return fail("deterministic mode runs f32 plans");
      }
      const size_t we = comm::dtypeSize(w);
      int64_t dim = 0;
      if (kind == "all_gather") dim = in.attrs.value("gather_dim", int64_t{0});
      if (kind == "reduce_scatter") dim = in.attrs.value("scatter_dim", int64_t{0});
      if (kind == "all_gather") {
        const int64_t want = padded ? outShape[dim] : inShape[dim] * g;
        if (mesh::shardSize(outShape[dim], g) != inShape[dim] || outShape[dim] != want) {
          return fail(absl::StrCat("gathering ", shapeText(inShape), " over ", g, " ranks along dim ", dim,
                                   " cannot give ", shapeText(outShape)));
        }
      } else if (kind == "reduce_scatter") {
        if (mesh::shardSize(inShape[dim], g) != outShape[dim]) {
          return fail(absl::StrCat("scattering ", shapeText(inShape), " over ", g, " ranks along dim ",
                                   dim, " cannot give ", shapeText(outShape)));
        }
      } else if (kind != "all_reduce" || inShape != outShape) {
        return fail(absl::StrCat("unsupported collective kind '", kind, "'"));
      }
      const int64_t bytes = in.attrs.value("bytes", int64_t{0});
      const std::string axesText = absl::StrJoin(axes, "+");
      const std::string track = absl::StrCat("comm:", pg->name());
      const std::string handle = async ? in.async_handle : absl::StrCat("sync#", i);
      bound->body = [=, this](int64_t step) -> absl::Status {
        auto p = std::make_shared<Pending>();
        p->collective = kind;
        p->axes = axesText;
        p->index = in.index;
        p->issued_us = TraceRecorder::nowUs();
        Ref src = ref(o[0]);
        Ref dst = ref(r[0]);
        const int64_t inCount = product(inShape), outCount = product(outShape);
        const comm::Device device = kernels_->device();
        auto tensor = [device](Ref data, int64_t count) {
          return comm::Tensor(data.data, data.dtype, {count}, device);
        };
        // Staging of `count` elements of type t, released at the wait.
        auto stage = [&, this](comm::DType t, int64_t count) -> absl::StatusOr<Ref> {
          const size_t size = count * comm::dtypeSize(t);
          void* block = allocator_->allocate(size);
          if (block == nullptr) return outOfMemory(size, in.where());
          p->staging.push_back(block);
          return Ref{block, t};
        };
        // Where the engine writes a reduction's result: the result itself,
        // or a wire-typed block converted into it at the wait.
        auto engineResult = [&, this]() -> absl::StatusOr<Ref> {
          if (resultType == w) return dst;
          absl::StatusOr<Ref> staging = stage(w, outCount);
          if (!staging.ok()) return staging.status();
          const Ref block = *staging;
          p->finish = [=, this](Ref out) { return kernels_->convert(block, out, outCount); };
          return block;
        };
        if (!det && e != w) {
          absl::StatusOr<Ref> wire = stage(w, inCount);
          if (!wire.ok()) return wire.status();
          if (absl::Status s = kernels_->convert(src, *wire, inCount); !s.ok()) return s;
          src = *wire;
        }
        absl::StatusOr<std::shared_ptr<comm::Work>> work;
        if (det && stacks_[o[0]].rows > 0) {
          // Deterministic: gather every rank's per-row contributions (and
          // which global rows they are) instead of summing them; a
          // reduce-scatter keeps this rank's part of each row.
          const Stack& mine = stacks_[o[0]];
          const int64_t rowsIn = mine.rows;
          std::vector<int64_t> index(rowsIn * g);
          absl::StatusOr<std::shared_ptr<comm::Work>> indexWork = pg->allGatherIntoTensor(
              comm::Tensor(index.data(), comm::DType::kInt64, {rowsIn * g}),
              comm::Tensor(const_cast<int64_t*>(mine.index.data()), comm::DType::kInt64, {rowsIn}));
          if (!indexWork.ok()) return indexWork.status();
          if (absl::Status s = (*indexWork)->wait(options_.timeout); !s.ok()) return s;
          if (kind == "all_gather" || (kind == "reduce_scatter" && (dim != 0 || padded))) {
            return absl::UnimplementedError(absl::StrCat(
                in.where(), ": deterministic mode covers all-reduces and dim-0 reduce-scatters of "
                "gradients; this plan needs ", kind, " along dim ", dim));
          }
          Stack gathered{rowsIn * g, index, mine.mean};
          if (absl::Status s = defineStacked(r[0], gathered); !s.ok()) return s;
          dst = ref(r[0]);
          if (kind == "all_reduce") {
            work = pg->allGatherIntoTensor(tensor(dst, rowsIn * g * inCount), tensor(src, rowsIn * inCount));
          } else {
            absl::StatusOr<Ref> staging = stage(w, g * rowsIn * inCount);
            if (!staging.ok()) return staging.status();
            work = pg->allGatherIntoTensor(tensor(*staging, g * rowsIn * inCount), tensor(src, rowsIn * inCount));
            const int64_t part = pg->rank();
            const Ref from = *staging;
            p->finish = [=, this](Ref out) {
              return kernels_->copy2D(out.data, outCount * we, from.at(part * outCount).data, inCount * we,
                                      outCount * we, g * rowsIn);
            };
          }
        } else if (kind == "all_reduce" && exact) {
          // Rank q adds up everybody's segment q (padded to equal segments),
          // then the sums are gathered in the result's type. Without padding
          // the operand is sent as it is and the sums gathered into the result.
          const int64_t segment = mesh::shardSize(inCount, g);
          const bool pad = g * segment != inCount;
          Ref send = src;
          if (pad) {
            absl::StatusOr<Ref> staging = stage(w, g * segment);
            if (!staging.ok()) return staging.status();
            send = *staging;
            absl::Status s = kernels_->copy(send.data, src.data, inCount * we);
            s.Update(kernels_->zero2D(send.at(inCount).data, 0, (g * segment - inCount) * we, 1));
            if (!s.ok()) return s;
          }
          absl::StatusOr<Ref> recv = stage(w, g * segment);
          absl::StatusOr<Ref> sum = stage(resultType, segment);
          absl::StatusOr<Ref> all = pad ? stage(resultType, g * segment) : absl::StatusOr<Ref>(Ref{});
          for (const absl::StatusOr<Ref>* block : {&recv, &sum, &all}) {
            if (!block->ok()) return block->status();
          }
          work = pg->allToAllSingle(tensor(*recv, g * segment), tensor(send, g * segment));
          const bool average = reduce == comm::ReduceOp::kAvg;
          const Ref received = *recv, mine = *sum, padded = *all;
          p->finish = [=, this](Ref out) -> absl::Status {
            absl::Status s = kernels_->sumChunks(received, g, segment, average, mine);
            if (!s.ok()) return s;
            const Ref gathered = pad ? padded : out;
            absl::StatusOr<std::shared_ptr<comm::Work>> gather =
                pg->allGatherIntoTensor(tensor(gathered, g * segment), tensor(mine, segment));
            if (!gather.ok()) return gather.status();
            step_works_.emplace_back(absl::StrCat(in.where(), " (gathering the sums)"), *gather);
            if (s = kernels_->await(**gather, options_.timeout); !s.ok() || !pad) return s;
            return kernels_->copy(out.data, gathered.data, outCount * comm::dtypeSize(out.dtype));
          };
        } else if (kind == "all_reduce") {
          absl::StatusOr<Ref> target = engineResult();
          if (!target.ok()) return target.status();
          if (absl::Status s = kernels_->copy(target->data, src.data, inCount * we); !s.ok()) return s;
          work = pg->allReduce(tensor(*target, outCount), {.op = reduce});
        } else if (kind == "all_gather") {
          if (dim == 0 && !padded) {
            work = pg->allGatherIntoTensor(tensor(dst, outCount), tensor(src, inCount));
          } else {
            // Gather rank-major, then lay the pieces side by side along dim
            // (dropping the padded tail) at the wait.
            absl::StatusOr<Ref> staging = stage(w, g * inCount);
            if (!staging.ok()) return staging.status();
            work = pg->allGatherIntoTensor(tensor(*staging, g * inCount), tensor(src, inCount));
            const int64_t rows = inShape[dim];
            const Ref from = *staging;
            p->finish = [=, this](Ref out) {
              absl::Status s;
              for (int64_t q = 0; q < g; ++q) {
                s.Update(placeDimSlice(*kernels_, from.at(q * inCount), rows, out, outShape, dim, q * rows));
              }
              return s;
            };
          }
        } else {  // reduce_scatter
          // Segment q holds rank q's rows of dim (zero-padded).
          Ref segments = src;
          if (dim != 0 || padded) {
            absl::StatusOr<Ref> staging = stage(w, g * outCount);
            if (!staging.ok()) return staging.status();
            const int64_t rows = outShape[dim];
            for (int64_t q = 0; q < g; ++q) {
              absl::Status s = copyDimSlice(*kernels_, src, inShape, dim, q * rows, rows, staging->at(q * outCount));
              if (!s.ok()) return s;
            }
            segments = *staging;
          }
          if (exact) {
            absl::StatusOr<Ref> recv = stage(w, g * outCount);
            if (!recv.ok()) return recv.status();
            work = pg->allToAllSingle(tensor(*recv, g * outCount), tensor(segments, g * outCount));
            const bool average = reduce == comm::ReduceOp::kAvg;
            const Ref received = *recv;
            p->finish = [=, this](Ref out) { return kernels_->sumChunks(received, g, outCount, average, out); };
          } else {
            absl::StatusOr<Ref> target = engineResult();
            if (!target.ok()) return target.status();
            work = pg->reduceScatterTensor(tensor(*target, outCount), tensor(segments, g * outCount),
                                           {.op = reduce});
          }
        }
        if (!work.ok()) {
          return absl::Status(work.status().code(),
                              absl::StrCat("step ", step, ", ", in.where(), ": ", work.status().message()));
        }
        p->work = *work;
        step_works_.emplace_back(in.where(), p->work);
        if (options_.trace) {
          const std::string phase(phaseName(in.phase));
          const int64_t index = in.index;
          const double issued = p->issued_us;
          ++callbacks_outstanding_;
          p->work->onCompletion([=, this](const absl::Status&) {
            const double done = TraceRecorder::nowUs();
            TraceEvent e;
            e.name = kind;
            e.track = track;
            e.phase = phase;
            e.step = step;
            e.index = index;
            e.start_us = issued;
            e.duration_us = done - issued;
            e.collective = kind;
            e.axes = axesText;
            e.bytes = bytes;
            trace_.add(std::move(e));
            --callbacks_outstanding_;
          });
        }
        // A blocking collective is a start and a wait in one. Without
        // overlap an async one is waited at once and its dist.wait later
        // finds it done.
        if (async && !options_.overlap) {
          const double t0 = TraceRecorder::nowUs();
          absl::Status s = kernels_->await(*p->work, options_.timeout);
          if (!s.ok()) {
            return absl::Status(s.code(), absl::StrCat("step ", step, ", ", in.where(), ": ", s.message()));
          }
          traceWait(in, step, in.index, kind, axesText, t0, TraceRecorder::nowUs());
        }
        if (!async) {
          absl::Status s = kernels_->await(*p->work, options_.timeout);
          if (s.ok() && p->finish) s = p->finish(dst);
          if (!s.ok()) {
            return absl::Status(s.code(), absl::StrCat("step ", step, ", ", in.where(), ": ", s.message()));
          }
          for (void* block : p->staging) allocator_->release(block);
          return absl::OkStatus();
        }
        pending_[handle] = std::move(p);
        return absl::OkStatus();
      };
    } else {
      return fail("no kernel is bound to this op");
    }

    bound_.push_back(std::move(bound));
  }

  // What to release after each instruction: explicit frees, and every
  // other non-persistent buffer after its last use (or right after its
  // definition when nothing reads it). The loss lives to the step's end.
  for (int64_t id = 0; id < numBuffers; ++id) {
    if (persistent_[id] || id == plan_.interface.loss) continue;
    int64_t at = std::max(lastUse[id], definedAt[id]);
    if (at < 0) continue;
    bound_[at]->release_after.push_back(id);
  }
  return absl::OkStatus();
}

absl::Status Executor::initialise() {
  for (const BufferSpec& b : plan_.buffers) {
    if (!persistent_[b.id]) continue;
    if (b.dtype != comm::DType::kFloat32 && b.dtype != comm::DType::kBFloat16) {
      return absl::InvalidArgumentError(absl::StrCat(plan_.source, ": buffer ", b.id, " (", b.name,
                                                     ") is ", std::string(comm::dtypeName(b.dtype)),
                                                     "; the ", kernels_->name(),
                                                     " runtime keeps parameters in f32 or bf16 (plan with "
                                                     "--dtype=f32 or bf16)"));
    }
    if (absl::Status s = define(b.id); !s.ok()) return s;
    absl::StatusOr<ShardBox> box = shardBoxOf(b, plan_.mesh, coords_);
    if (!box.ok()) return box.status();
    std::vector<float> dense(product(box->valid));
    if (!dense.empty()) {
      if (absl::Status s = init::initShard(*b.init, b.global_shape, box->offsets, box->valid, dense.data());
          !s.ok()) {
        return absl::Status(s.code(), absl::StrCat("initialising ", b.name, ": ", s.message()));
      }
    }
    if (absl::Status s = uploadShard(b, dense, box->valid); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Executor::uploadShard(const BufferSpec& b, const std::vector<float>& dense,
                                   const std::vector<int64_t>& valid) {
  std::vector<float> padded(b.numel(), 0.0f);
  copyIntoPadded(dense.data(), valid, padded.data(), b.local_shape);
  if (b.dtype == comm::DType::kFloat32) {
    return kernels_->upload(bufferData(b.id), padded.data(), padded.size() * sizeof(float));
  }
  // bf16: a master copy starts from the same f32 values, so the parameter
  // is its master rounded, as after every step.
  std::vector<uint16_t> narrow(padded.size());
  for (size_t i = 0; i < padded.size(); ++i) narrow[i] = comm::floatToBfloat16(padded[i]);
  return kernels_->upload(bufferData(b.id), narrow.data(), narrow.size() * sizeof(uint16_t));
}

void Executor::traceWait(const Instruction& in, int64_t step, int64_t index, const std::string& collective,
                         const std::string& axes, double t0_us, double t1_us) {
  if (!options_.trace) return;
  TraceEvent e;
  e.name = absl::StrCat("wait ", collective);
  e.track = "compute";
  e.phase = phaseName(in.phase);
  e.step = step;
  e.index = index;
  e.start_us = t0_us;
  e.duration_us = t1_us - t0_us;
  e.collective = collective;
  e.axes = axes;
  trace_.add(std::move(e));
}

void Executor::beginPhase(const std::string& name) {
  current_phase_ = name;
  allocator_->resetPeak();
}

void Executor::endPhase() {
  if (current_phase_.empty()) return;
  phase_memory_.push_back({current_phase_, allocator_->stats().peak_in_use_bytes});
  current_phase_.clear();
}

absl::Status Executor::clipGradients() {
  // Each element once: a grad replicated over some axes is counted by the
  // share 1 / (their size) on every rank of them. The total stays on the
  // device: the AdamW steps read the coefficient there, and the host reads
  // the norm with the loss at the end of the step.
  double* total = static_cast<double*>(kernels_->scalars());
  if (absl::Status s = kernels_->zero2D(total, 0, sizeof(double), 1); !s.ok()) return s;
  for (const Instruction& in : plan_.instructions) {
    if (in.op != "dist.optimizer_step") continue;
    const BufferSpec& grad = plan_.buffers[in.operands[1]];
    int64_t copies = 1;
    for (size_t a = 0; a < grad.placement.size(); ++a) {
      if (grad.placement[a].kind == AxisPlacement::Kind::kReplicate) copies *= plan_.mesh.shape()[a];
    }
    absl::Status s = kernels_->addSquaredNorm(Ref{bufferData(grad.id), grad.dtype}, grad.numel(), copies, total);
    if (!s.ok()) return s;
  }
  absl::StatusOr<std::shared_ptr<comm::Work>> work =
      world_->allReduce(comm::Tensor(total, comm::DType::kFloat64, {1}, kernels_->device()));
  if (!work.ok()) return work.status();
  step_works_.emplace_back("the gradient norm's all-reduce", *work);
  if (absl::Status s = kernels_->await(**work, options_.timeout); !s.ok()) return s;
  return kernels_->clipCoefficient(total, options_.max_grad_norm, clip_coefficient_);
}

absl::Status Executor::run(const Bound& bound, int64_t step) {
  const Instruction& in = *bound.instr;
  if (bound.view_of >= 0) {
    alias(in.results[0], bound.view_of);
  } else if (bound.allocates_results && bound.stack_rule == Bound::StackRule::kRowReduce) {
    Stack local{rows_.count, {}, bound.stack_mean};
    for (int64_t r = 0; r < rows_.count; ++r) local.index.push_back(rows_.begin + r);
    for (size_t k = 0; k < in.results.size(); ++k) {
      absl::Status s = bound.stacked_results[k] ? defineStacked(in.results[k], local) : define(in.results[k]);
      if (!s.ok()) return s;
    }
  } else if (bound.allocates_results && bound.stack_rule == Bound::StackRule::kPropagate) {
    const Stack* stack = nullptr;
    for (int64_t id : in.operands) {
      if (stacks_[id].rows == 0) continue;
      if (stack != nullptr && stack->index != stacks_[id].index) {
        return absl::InternalError(absl::StrCat(in.where(), ": deterministic mode: operands hold "
                                                "different batch rows"));
      }
      stack = &stacks_[id];
    }
    for (int64_t id : in.operands) {
      if (stack != nullptr && stacks_[id].rows == 0) {
        return absl::InternalError(absl::StrCat(in.where(), ": deterministic mode: ",
                                                plan_.buffers[id].name, " is a total while another operand "
                                                "holds per-row contributions"));
      }
    }
    for (int64_t id : in.results) {
      absl::Status s = stack ? defineStacked(id, *stack) : define(id);
      if (!s.ok()) return s;
    }
  } else if (bound.allocates_results) {
    for (int64_t id : in.results) {
      if (absl::Status s = define(id); !s.ok()) return s;
    }
  }
  const double t0 = options_.trace ? TraceRecorder::nowUs() : 0;
  if (absl::Status s = bound.body(step); !s.ok()) return s;
  if (options_.trace && !in.comm_stream && in.op != "dist.wait" && in.op != "dist.free") {
    TraceEvent e;
    e.name = in.op;
    e.track = "compute";
    e.phase = phaseName(in.phase);
    e.step = step;
    e.index = in.index;
    e.start_us = t0;
    e.duration_us = TraceRecorder::nowUs() - t0;
    trace_.add(std::move(e));
  }
  for (int64_t id : bound.release_after) releaseBuffer(id);
  return absl::OkStatus();
}

absl::StatusOr<StepResult> Executor::step(int64_t step, const int32_t* ids, const int32_t* labels) {
  const double start = TraceRecorder::nowUs();
  StepResult result;
  phase_memory_.clear();
  step_works_.clear();
  if (absl::Status s = kernels_->activate(); !s.ok()) return s;
  const PlanInterface& io = plan_.interface;
  for (int64_t id : {io.ids, io.labels, io.loss_grad_seed}) {
    if (absl::Status s = define(id); !s.ok()) return s;
  }
  const size_t tokens = static_cast<size_t>(rows_.count * seq_);
  absl::Status fed = kernels_->upload(bufferData(io.ids), ids, tokens * sizeof(int32_t));
  fed.Update(kernels_->upload(bufferData(io.labels), labels, tokens * sizeof(int32_t)));
  fed.Update(kernels_->upload(bufferData(io.loss_grad_seed), &kLossGradSeed, sizeof(float)));
  if (io.positions >= 0) {
    if (absl::Status s = define(io.positions); !s.ok()) return s;
    std::vector<int32_t> positions(tokens);
    for (size_t t = 0; t < tokens; ++t) positions[t] = static_cast<int32_t>(t % seq_);
    fed.Update(kernels_->upload(bufferData(io.positions), positions.data(), tokens * sizeof(int32_t)));
  }
  if (!fed.ok()) return fed;

  std::optional<Phase> phase;
  for (const std::unique_ptr<Bound>& bound : bound_) {
    const Instruction& in = *bound->instr;
    if (!phase || *phase != in.phase) {
      endPhase();
      phase = in.phase;
      if (in.phase == Phase::kOptimizer) {
        std::vector<int64_t> grads;
        for (const Instruction& opt : plan_.instructions) {
          if (opt.op == "dist.optimizer_step") grads.push_back(opt.operands[1]);
        }
        for (int64_t id : grads) {
          if (absl::Status s = finalize(id); !s.ok()) return s;
        }
        if (options_.on_gradients) {
          absl::StatusOr<std::vector<checkpoint::ShardView>> views = shardViews(grads);
          if (!views.ok()) return views.status();
          options_.on_gradients(step, *views);
        }
        if (options_.max_grad_norm > 0) {
          if (absl::Status s = clipGradients(); !s.ok()) return s;
        }
      }
      beginPhase(std::string(phaseName(in.phase)));
    }
    if (absl::Status s = run(*bound, step); !s.ok()) return s;
  }
  endPhase();
  if (!pending_.empty()) {
    return absl::InternalError(absl::StrCat("collective '", pending_.begin()->first,
                                            "' was never waited in step ", step));
  }
  if (absl::Status s = finalize(io.loss); !s.ok()) return s;
  // The step's one synchronisation: the loss (and the norm) read back.
  float loss = 0;
  if (absl::Status s = kernels_->download(&loss, bufferData(io.loss), sizeof(float)); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("step ", step, ": ", s.message()));
  }
  result.loss = loss;
  if (options_.max_grad_norm > 0) {
    double total = 0;
    if (absl::Status s = kernels_->download(&total, kernels_->scalars(), sizeof(double)); !s.ok()) return s;
    result.grad_norm = std::sqrt(total);
  }
  // A collective the device waited on but that failed (an NCCL error or
  // timeout, which aborts the communicator) fails the step here.
  for (const auto& [where, work] : step_works_) {
    if (absl::Status s = work->wait(options_.timeout); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("step ", step, ", ", where, ": ", s.message()));
    }
  }
  step_works_.clear();
  persistent_[io.loss] = false;
  releaseBuffer(io.loss);
  for (int64_t id : {io.ids, io.labels, io.loss_grad_seed, io.positions}) {
    if (id >= 0) releaseBuffer(id);
  }
  result.seconds = (TraceRecorder::nowUs() - start) / 1e6;
  return result;
}

absl::StatusOr<std::vector<checkpoint::ShardView>> Executor::checkpointShards() const {
  std::vector<int64_t> ids;
  for (const BufferSpec& b : plan_.buffers) {
    if (persistent_[b.id]) ids.push_back(b.id);
  }
  return shardViews(ids);
}

absl::StatusOr<std::vector<checkpoint::ShardView>> Executor::shardViews(const std::vector<int64_t>& ids) const {
  std::vector<checkpoint::ShardView> shards;
  host_staging_.clear();
  if (absl::Status s = kernels_->activate(); !s.ok()) return s;
  for (int64_t id : ids) {
    const BufferSpec& b = plan_.buffers[id];
    if (bufferData(id) == nullptr) continue;
    // One replica: the rank at coordinate 0 of every axis that replicates it.
    bool saver = true;
    for (size_t a = 0; a < b.placement.size(); ++a) {
      if (b.placement[a].kind != AxisPlacement::Kind::kShard && coords_[a] != 0) saver = false;
    }
    if (!saver) continue;
    absl::StatusOr<ShardBox> box = shardBoxOf(b, plan_.mesh, coords_);
    if (!box.ok() || product(box->valid) == 0) continue;
    checkpoint::ShardView view;
    view.name = b.name;
    view.dtype = checkpoint::DType::kF32;
    view.global_shape = b.global_shape;
    view.box = {box->offsets, box->valid};
    view.local_shape = b.local_shape;
    view.data = bufferData(b.id);
    // Checkpoints hold f32: a bf16 buffer is widened (exactly) on the host.
    if (!kernels_->hostAddressable() || b.dtype != comm::DType::kFloat32) {
      absl::StatusOr<std::vector<float>> host = hostValues(b);
      if (!host.ok()) {
        return absl::Status(host.status().code(),
                            absl::StrCat("copying ", b.name, " to the host: ", host.status().message()));
      }
      view.data = host_staging_.emplace_back(*std::move(host)).data();
    }
    shards.push_back(std::move(view));
  }
  return shards;
}

absl::Status Executor::loadCheckpoint(const checkpoint::CheckpointReader& reader) {
  if (absl::Status s = kernels_->activate(); !s.ok()) return s;
  for (const BufferSpec& b : plan_.buffers) {
    if (!persistent_[b.id]) continue;
    absl::StatusOr<checkpoint::TensorInfo> info = reader.tensor(b.name);
    if (!info.ok()) return info.status();
    if (info->shape != b.global_shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint ", reader.directory(), ": ", b.name, " is ", shapeText(info->shape),
          " there but ", shapeText(b.global_shape), " in the plan; it was saved for another model"));
    }
    absl::StatusOr<ShardBox> box = shardBoxOf(b, plan_.mesh, coords_);
    if (!box.ok()) return box.status();
    std::vector<float> dense(product(box->valid));
    if (!dense.empty()) {
      if (absl::Status s = reader.readInto(b.name, {box->offsets, box->valid}, dense.data()); !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = uploadShard(b, dense, box->valid); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> Executor::hostValues(const BufferSpec& b) const {
  std::vector<float> values(b.numel());
  if (b.dtype == comm::DType::kFloat32) {
    if (absl::Status s = kernels_->download(values.data(), bufferData(b.id), values.size() * sizeof(float));
        !s.ok()) {
      return s;
    }
    return values;
  }
  if (b.dtype != comm::DType::kBFloat16) {
    return absl::FailedPreconditionError(absl::StrCat(b.name, " is ", std::string(comm::dtypeName(b.dtype)),
                                                      ", not a float buffer"));
  }
  std::vector<uint16_t> bits(values.size());
  if (absl::Status s = kernels_->download(bits.data(), bufferData(b.id), bits.size() * sizeof(uint16_t)); !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < bits.size(); ++i) values[i] = comm::bfloat16ToFloat(bits[i]);
  return values;
}

absl::StatusOr<std::vector<float>> Executor::localValues(const std::string& name) const {
  for (const BufferSpec& b : plan_.buffers) {
    if (b.name != name) continue;
    if (bufferData(b.id) == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(name, " is not held between steps"));
    }
    absl::StatusOr<ShardBox> box = shardBoxOf(b, plan_.mesh, coords_);
    if (!box.ok()) return box.status();
    if (absl::Status s = kernels_->activate(); !s.ok()) return s;
    absl::StatusOr<std::vector<float>> local = hostValues(b);
    if (!local.ok()) return local.status();
    std::vector<float> dense(product(box->valid));
    copyFromPadded(local->data(), b.local_shape, dense.data(), box->valid);
    return dense;
  }
  return absl::NotFoundError(absl::StrCat("no buffer named ", name, " in ", plan_.source));
}

}  // namespace loom::runtime
