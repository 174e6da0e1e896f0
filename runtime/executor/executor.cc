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
#include "runtime/executor/executor_internal.h"
#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/optim/adamw.h"
#include "plan/lifetimes.h"
#include "plan/op_table.h"

namespace loom::runtime {
namespace {

// Moves the `valid`-shaped top-left corner of a `local`-shaped buffer to or
// from a dense block: into the padded buffer when `into_padded` (the rest
// stays as it is: zero padding), else out of it.
void copyCorner(float* padded, const std::vector<int64_t>& local, float* dense,
                const std::vector<int64_t>& valid, bool into_padded) {
  const int64_t count = product(valid);
  if (valid == local) {
    if (into_padded)
      std::memcpy(padded, dense, count * sizeof(float));
    else
      std::memcpy(dense, padded, count * sizeof(float));
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
    if (into_padded)
      std::memcpy(padded + offset, dense + row * inner, inner * sizeof(float));
    else
      std::memcpy(dense + row * inner, padded + offset, inner * sizeof(float));
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

}  // namespace

int64_t product(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < std::min(end, dims.size()); ++i) n *= dims[i];
  return n;
}

std::string shapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
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

absl::Status permuteDims(KernelSet& k, Ref src, const std::vector<int64_t>& shape,
                         const std::vector<int64_t>& perm, Ref dst) {
  const size_t rank = shape.size();
  const size_t elem = comm::dtypeSize(src.dtype);
  if (rank == 0 || product(shape) == 0)
    return rank == 0 ? k.copy(dst.data, src.data, elem) : absl::OkStatus();
  std::vector<int64_t> stride(rank, 1), out(rank);
  for (size_t d = rank - 1; d > 0; --d) stride[d - 1] = stride[d] * shape[d];
  for (size_t i = 0; i < rank; ++i) out[i] = shape[perm[i]];
  // With the last dim in place, rows of it move whole; otherwise single
  // elements do. Each copy2D walks one result dim (`walk`) for every index
  // of the result dims before it.
  const bool rows = perm[rank - 1] == static_cast<int64_t>(rank - 1);
  const size_t walk = rows ? (rank >= 2 ? rank - 2 : 0) : rank - 1;
  const size_t width = (rows ? shape[rank - 1] : 1) * elem;
  const int64_t height = rank >= 2 || !rows ? out[walk] : 1;
  const size_t srcPitch = static_cast<size_t>(stride[perm[walk]]) * elem;
  const size_t dstPitch = static_cast<size_t>(product(out, walk + 1)) * elem;
  const int64_t outer = product(out, 0, walk);
  std::vector<int64_t> index(walk, 0);
  for (int64_t n = 0; n < outer; ++n) {
    int64_t from = 0;
    for (size_t i = 0; i < walk; ++i) from += index[i] * stride[perm[i]];
    absl::Status s = k.copy2D(dst.at(n * product(out, walk)).data, dstPitch, src.at(from).data,
                              srcPitch, width, static_cast<size_t>(height));
    if (!s.ok()) return s;
    for (int64_t i = static_cast<int64_t>(walk) - 1; i >= 0; --i) {
      if (++index[i] < out[i]) break;
      index[i] = 0;
    }
  }
  return absl::OkStatus();
}

Executor::Executor(const plan::Plan& plan, std::shared_ptr<comm::ProcessGroup> world,
                   ExecutorOptions options)
    : plan_(plan), world_(std::move(world)), options_(options) {}

Executor::~Executor() {
  // Collectives still in flight (a failed step) must finish or time out
  // before their buffers go away.
  for (const auto& [handle, pending] : pendingHandles()) {
    if (pending->work) (void)pending->work->wait(options_.timeout);
    if (pending->copy) (void)kernels_->finishCopy(*pending->copy);
  }
  // Device work still queued reads buffers the allocator is about to free.
  if (kernels_ != nullptr) (void)kernels_->synchronize();
  // Trace callbacks run on the groups' threads just after completion.
  const double deadline = TraceRecorder::nowUs() + 5e6;
  while (callbacks_outstanding_ > 0 && TraceRecorder::nowUs() < deadline) std::this_thread::yield();
}

absl::StatusOr<std::unique_ptr<Executor>> Executor::create(
    const plan::Plan& plan, std::shared_ptr<comm::ProcessGroup> world, ExecutorOptions options) {
  if (absl::Status s = plan::checkPlanForJob(plan, world->size()); !s.ok()) return s;
  std::unique_ptr<Executor> executor(new Executor(plan, std::move(world), options));
  Executor& e = *executor;
  e.rank_ = e.world_->rank();
  absl::StatusOr<std::vector<int64_t>> coords = e.plan_.mesh.coordinateOf(e.rank_);
  if (!coords.ok()) return coords.status();
  e.coords_ = *coords;
  const bool offloaded = std::any_of(e.plan_.buffers.begin(), e.plan_.buffers.end(),
                                     [](const plan::Buffer& b) { return b.onHost(); });
  if (offloaded && options.deterministic) {
    return absl::InvalidArgumentError(absl::StrCat(
        plan.source,
        ": deterministic mode keeps per-row gradient stacks on the device; this plan offloads "
        "its optimizer states to the host (drop --deterministic, or re-plan with "
        "--offload=none)"));
  }
  if (e.plan_.micro_batches > 1 && options.deterministic) {
    return absl::InvalidArgumentError(absl::StrCat(
        plan.source, ": deterministic mode orders sums over one batch; this plan accumulates ",
        e.plan_.micro_batches,
        " micro-batches per step (drop --deterministic, or re-plan with one micro-step)"));
  }
  e.program_ = &plan::programFor(e.plan_, e.coords_);
  e.instructions_ = e.program_->instructions();
  for (size_t i = 0; i < e.instructions_.size(); ++i) {
    e.block_begin_.emplace(e.instructions_[i]->block, static_cast<int64_t>(i));
    if (e.first_step_ < 0 && e.instructions_[i]->info->family == plan::OpFamily::kOptimizer)
      e.first_step_ = static_cast<int64_t>(i);
  }
  e.carried_ = plan::carriedBuffers(e.plan_, *e.program_);
  if (absl::Status s = e.planStages(); !s.ok()) return s;
  if (absl::Status s = e.planSchedule(); !s.ok()) return s;
  e.loss_grad_seed_ = kLossGradSeed / static_cast<float>(e.plan_.micro_batches);
  // Before any device is touched: what deterministic mode cannot run.
  e.order_ = std::make_unique<RowOrder>(options.deterministic);
  if (absl::Status s = e.order_->checkPlan(e.plan_, e.instructions_, options.device); !s.ok())
    return s;
  if (options.device == ExecutorDevice::kCuda) {
    absl::StatusOr<std::unique_ptr<KernelSet>> kernels = cudaKernelSet(options.cuda_device);
    if (!kernels.ok()) {
      return absl::Status(kernels.status().code(),
                          absl::StrCat("rank ", e.rank_, ": ", kernels.status().message()));
    }
    e.kernels_ = *std::move(kernels);
  } else {
    e.kernels_ = cpuKernelSet();
  }
  // The calling thread issues the collectives, so their process groups'
  // CUDA backends (made on first use) belong to this device.
  if (absl::Status s = e.kernels_->activate(); !s.ok()) return s;
  e.allocator_ = std::make_unique<CachingAllocator>(e.kernels_->blockSource());
  e.host_allocator_ = std::make_unique<CachingAllocator>(e.kernels_->hostBlockSource());
  if (offloaded) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    e.host_adamw_ = std::make_unique<optim::HostAdamW>(
        options.host_threads > 0 ? options.host_threads : std::clamp(cores, 1, 8));
  }
  if (options.max_grad_norm > 0) {
    e.clip_coefficient_ =
        reinterpret_cast<float*>(static_cast<char*>(e.kernels_->scalars()) + sizeof(double));
  }

  // One group per mesh axis, plus every set of axes a collective spans.
  std::set<std::vector<std::string>> axisSets;
  for (const plan::Instruction* instr : e.instructions_) {
    if (instr->attrs.mesh_axes.size() > 1) axisSets.insert(instr->attrs.mesh_axes);
  }
  absl::StatusOr<comm::MeshGroups> groups = comm::MeshGroups::create(
      e.world_, e.plan_.mesh,
      std::vector<std::vector<std::string>>(axisSets.begin(), axisSets.end()), "plan");
  if (!groups.ok()) return groups.status();
  e.groups_ = std::make_unique<comm::MeshGroups>(*std::move(groups));
  if (e.pp_axis_ >= 0) {
    absl::StatusOr<std::shared_ptr<comm::ProcessGroup>> pp =
        e.groups_->groupFor({e.plan_.mesh.axisNames()[e.pp_axis_]});
    if (!pp.ok()) return pp.status();
    e.pp_group_ = *pp;
  }

  // The data-parallel rows of this rank, from the ids' placement.
  const plan::Buffer& ids = e.plan_.buffers[e.plan_.interface.ids];
  absl::StatusOr<plan::ShardBox> rows = plan::shardBoxOf(ids, e.plan_.mesh, e.coords_);
  if (!rows.ok()) return rows.status();
  if (rows->valid != ids.local_shape || ids.local_shape[1] != ids.global_shape[1]) {
    return absl::InvalidArgumentError(absl::StrCat(
        plan.source, ": the token ids ", shapeText(ids.global_shape), " are split as ",
        shapeText(ids.local_shape),
        " per rank with padding or along the sequence; the CPU runtime "
        "needs a global batch that divides over the data-parallel axes (re-plan with --batch a "
        "multiple of their product)"));
  }
  e.rows_ = {rows->offsets[0], ids.local_shape[0]};
  e.global_batch_ = ids.global_shape[0];
  e.seq_ = ids.global_shape[1];
  e.order_->setRows(e.rows_.count, e.seq_);
  // The exporter's interface.vocab, else the first embedding's rows (a
  // gathered padded table would count its padding: plans from before
  // interface.vocab), on whichever stage it is.
  e.vocab_ = e.plan_.interface.vocab;
  for (const plan::Program& program : e.plan_.programs) {
    for (const plan::Instruction* instr : program.instructions()) {
      if (e.vocab_ > 0) break;
      if (instr->op == "nn.embedding")
        e.vocab_ = e.plan_.buffers[instr->operands[1]].global_shape[0];
    }
  }
  if (e.vocab_ <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(plan.source, ": the plan has no nn.embedding of the ids"));
  }

  if (absl::Status s = e.bind(); !s.ok()) return s;
  e.planEvaluation();
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

absl::Status Executor::outOfMemory(size_t bytes, const std::string& what, bool host) const {
  const AllocatorStats& a = (host ? host_allocator_ : allocator_)->stats();
  return absl::ResourceExhaustedError(absl::StrCat(
      host ? "host" : kernels_->name(), " memory exhausted allocating ", bytes, " bytes for ",
      what, " (", a.in_use_bytes, " bytes in use, ", a.reserved_bytes,
      " held by the caching allocator); plan with a smaller batch or ",
      host ? "--host-memory-gb" : "--memory-gb", " set to what the ",
      host ? "host can pin per rank" : "device has free"));
}

absl::Status Executor::define(int64_t id) {
  if (block_of_[id] >= 0) return absl::OkStatus();
  const plan::Buffer& b = plan_.buffers[id];
  void* data = allocatorOf(id).allocate(static_cast<size_t>(b.bytes));
  if (data == nullptr) return outOfMemory(b.bytes, b.name, b.onHost());
  blocks_.push_back({data, 1, b.onHost()});
  block_of_[id] = static_cast<int64_t>(blocks_.size()) - 1;
  return absl::OkStatus();
}

absl::Status Executor::writeBuffer(int64_t id, const void* host, size_t bytes) {
  if (!plan_.buffers[id].onHost()) return kernels_->upload(bufferData(id), host, bytes);
  if (bytes > 0) std::memcpy(bufferData(id), host, bytes);
  return absl::OkStatus();
}

absl::Status Executor::readBuffer(void* host, int64_t id, size_t bytes) const {
  if (!plan_.buffers[id].onHost()) return kernels_->download(host, bufferData(id), bytes);
  if (bytes > 0) std::memcpy(host, bufferData(id), bytes);
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
  const plan::Buffer& b = plan_.buffers[id];
  if (stack.rows != global_batch_) {
    return absl::FailedPreconditionError(
        absl::StrCat("deterministic mode: ", b.name, " holds the contributions of ", stack.rows,
                     " of the ", global_batch_,
                     " batch rows when it is used; the plan reduces it over fewer mesh axes "
                     "than the batch is split over"));
  }
  std::vector<int64_t> order(stack.rows);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t c) { return stack.index[a] < stack.index[c]; });
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
    (block.host ? host_allocator_ : allocator_)->release(block.data);
    block.data = nullptr;
  }
  block_of_[id] = -1;
}

absl::Status Executor::Site::fail(const std::string& what) const {
  return absl::InvalidArgumentError(
      absl::StrCat(plan.source, ": ", in.where(), " at op index ", in.index, ": ", what));
}

absl::Status Executor::Site::need(size_t operands, size_t results) const {
  if (in.operands.size() != operands || in.results.size() != results) {
    return fail(absl::StrCat("expected ", operands, " operands and ", results, " results, got ",
                             in.operands.size(), " and ", in.results.size()));
  }
  return absl::OkStatus();
}

absl::Status Executor::Site::needF32(std::initializer_list<int64_t> ids, const char* why) const {
  for (int64_t id : ids) {
    if (plan.buffers[id].dtype != comm::DType::kFloat32) {
      return fail(absl::StrCat(plan.buffers[id].name, " is ",
                               std::string(comm::dtypeName(plan.buffers[id].dtype)), "; ", why));
    }
  }
  return absl::OkStatus();
}

const std::map<std::string_view, Executor::Binder>& Executor::binders() {
  static const std::map<std::string_view, Binder>* const kBinders =
      new std::map<std::string_view, Binder>{
          {"nn.embedding", &Executor::bindEmbedding},
          {"nn.embedding_grad", &Executor::bindEmbeddingGrad},
          {"nn.linear", &Executor::bindLinear},
          {"nn.matmul", &Executor::bindMatmul},
          {"nn.rms_norm", &Executor::bindNorm},
          {"nn.layer_norm", &Executor::bindNorm},
          {"nn.rms_norm_grad", &Executor::bindNormGrad},
          {"nn.layer_norm_grad", &Executor::bindNormGrad},
          {"nn.rope", &Executor::bindRope},
          {"nn.attention", &Executor::bindAttention},
          {"nn.attention_grad", &Executor::bindAttention},
          {"nn.silu", &Executor::bindActivation},
          {"nn.gelu", &Executor::bindActivation},
          {"nn.silu_grad", &Executor::bindActivationGrad},
          {"nn.gelu_grad", &Executor::bindActivationGrad},
          {"nn.add", &Executor::bindElementwise},
          {"nn.mul", &Executor::bindElementwise},
          {"nn.softmax", &Executor::bindSoftmax},
          {"nn.softmax_grad", &Executor::bindSoftmax},
          {"nn.reshape", &Executor::bindReshape},
          {"nn.transpose", &Executor::bindTranspose},
          {"nn.reduce_sum", &Executor::bindReduceSum},
          {"nn.cross_entropy", &Executor::bindCrossEntropy},
          {"nn.cross_entropy_grad", &Executor::bindCrossEntropy},
          {"nn.bias_add", &Executor::bindBiasAdd},
          {"nn.vocab_max", &Executor::bindVocab},
          {"nn.vocab_stats", &Executor::bindVocab},
          {"nn.vocab_cross_entropy", &Executor::bindVocab},
          {"nn.vocab_cross_entropy_grad", &Executor::bindVocab},
          {"dist.bucket", &Executor::bindBucket},
          {"dist.unbucket", &Executor::bindBucket},
          {"dist.slice", &Executor::bindSlice},
          {"dist.free", &Executor::bindFree},
          {"dist.accumulate", &Executor::bindAccumulate},
          {"dist.optimizer_step", &Executor::bindOptimizerStep},
          {"dist.copy_to_host_start", &Executor::bindCopy},
          {"dist.copy_into_device_start", &Executor::bindCopy},
          {"dist.wait", &Executor::bindWait},
          {"dist.all_gather", &Executor::bindCollective},
          {"dist.all_gather_start", &Executor::bindCollective},
          {"dist.reduce_scatter", &Executor::bindCollective},
          {"dist.reduce_scatter_start", &Executor::bindCollective},
          {"dist.all_reduce", &Executor::bindCollective},
          {"dist.all_reduce_start", &Executor::bindCollective},
          {"dist.all_to_all", &Executor::bindCollective},
          {"dist.all_to_all_start", &Executor::bindCollective},
          {"dist.send", &Executor::bindPointToPoint},
          {"dist.send_start", &Executor::bindPointToPoint},
          {"dist.recv", &Executor::bindPointToPoint},
          {"dist.recv_start", &Executor::bindPointToPoint},
      };
  return *kBinders;
}

bool Executor::binds(std::string_view op) { return binders().count(op) > 0; }

absl::Status Executor::bind() {
  const int64_t numBuffers = static_cast<int64_t>(plan_.buffers.size());
  block_of_.assign(numBuffers, -1);
  persistent_.assign(numBuffers, false);
  stacks_.assign(numBuffers, Stack{});
  // A stage holds the parameters and states its own program uses; the
  // plan's table lists every stage's.
  for (const plan::Buffer& b : plan_.buffers) {
    persistent_[b.id] = plan::persistentRole(b.role) && used_[b.id];
  }

  const int64_t count = static_cast<int64_t>(instructions_.size());
  for (int64_t i = 0; i < count; ++i) {
    const plan::Instruction& in = *instructions_[i];
    auto bound = std::make_unique<Bound>();
    bound->instr = &in;
    bound->position = i;
    Site site{in, i, *bound, plan_};
    for (const std::vector<int64_t>* ids : {&in.operands, &in.results}) {
      for (int64_t id : *ids) {
        const comm::DType t = plan_.buffers[id].dtype;
        if (!runtimeDtype(t)) {
          return site.fail(
              absl::StrCat("buffer ", id, " (", plan_.buffers[id].name, ") is ",
                           std::string(comm::dtypeName(t)), "; the ", kernels_->name(),
                           " runtime computes in f32 and bf16 (plan with --dtype=f32 or bf16)"));
        }
      }
    }
    auto binder = binders().find(in.op);
    if (binder == binders().end()) return site.fail("no kernel is bound to this op");
    if (absl::Status s = (this->*binder->second)(site); !s.ok()) return s;
    bound_.push_back(std::move(bound));
  }

  // What to release after each instruction: every non-persistent buffer
  // at the end of its lifetime (plan/lifetimes.h: its last use, an async
  // start's operands at the wait, or its definition when nothing reads
  // it). The loss lives to the step's end. The intervals are this
  // program's: with several stages, the plan's `live` is the program's
  // that uses the buffer.
  const std::vector<plan::Lifetime> live = plan::computeLifetimes(plan_, *program_);
  for (int64_t id = 0; id < numBuffers; ++id) {
    if (persistent_[id] || id == plan_.interface.loss) continue;
    const int64_t at = live[id].last;
    if (at >= 0) bound_[at]->release_after.push_back(id);
  }
  return absl::OkStatus();
}

absl::Status Executor::initialise() {
  for (const plan::Buffer& b : plan_.buffers) {
    if (!persistent_[b.id]) continue;
    if (b.dtype != comm::DType::kFloat32 && b.dtype != comm::DType::kBFloat16) {
      return absl::InvalidArgumentError(
          absl::StrCat(plan_.source, ": buffer ", b.id, " (", b.name, ") is ",
                       std::string(comm::dtypeName(b.dtype)), "; the ", kernels_->name(),
                       " runtime keeps parameters in f32 or bf16 (plan with "
                       "--dtype=f32 or bf16)"));
    }
    if (absl::Status s = define(b.id); !s.ok()) return s;
    absl::StatusOr<plan::ShardBox> box = plan::shardBoxOf(b, plan_.mesh, coords_);
    if (!box.ok()) return box.status();
    std::vector<float> dense(product(box->valid));
    if (!dense.empty()) {
      if (absl::Status s =
              init::initShard(*b.init, b.global_shape, box->offsets, box->valid, dense.data());
          !s.ok()) {
        return absl::Status(s.code(), absl::StrCat("initialising ", b.name, ": ", s.message()));
      }
    }
    if (absl::Status s = uploadShard(b, dense, box->valid); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Executor::uploadShard(const plan::Buffer& b, const std::vector<float>& dense,
                                   const std::vector<int64_t>& valid) {
  std::vector<float> padded(b.numel(), 0.0f);
  copyIntoPadded(dense.data(), valid, padded.data(), b.local_shape);
  if (b.dtype == comm::DType::kFloat32) {
    return writeBuffer(b.id, padded.data(), padded.size() * sizeof(float));
  }
  // bf16: a master copy starts from the same f32 values, so the parameter
  // is its master rounded, as after every step.
  std::vector<uint16_t> narrow(padded.size());
  for (size_t i = 0; i < padded.size(); ++i) narrow[i] = comm::floatToBfloat16(padded[i]);
  return writeBuffer(b.id, narrow.data(), narrow.size() * sizeof(uint16_t));
}

void Executor::traceWait(const plan::Instruction& in, int64_t step, int64_t index,
                         const std::string& collective, const std::string& axes, double t0_us,
                         double t1_us) {
  wait_us_ += t1_us - t0_us;
  if (!options_.trace) return;
  trace_.add(TraceEvent{.name = absl::StrCat("wait ", collective),
                        .track = "compute",
                        .phase = plan::phaseName(in.phase),
                        .step = step,
                        .index = index,
                        .block = in.block,
                        .micro_batch = microBatchOf(in),
                        .start_us = t0_us,
                        .duration_us = t1_us - t0_us,
                        .collective = collective,
                        .axes = axes});
}

void Executor::traceBubble(int64_t step, const std::string& name, const std::string& block,
                           double t0_us, double t1_us) {
  bubble_us_ += t1_us - t0_us;
  if (!options_.trace) return;
  TraceEvent e;
  e.name = name;
  e.track = kBubbleTrack;
  e.phase = "bubble";
  e.step = step;
  e.block = block;
  e.micro_batch = block.empty() ? -1 : micro_;
  e.start_us = t0_us;
  e.duration_us = t1_us - t0_us;
  trace_.add(std::move(e));
}

void Executor::traceSpan(const plan::Instruction& in, int64_t step, std::string name,
                         std::string track, int64_t index, double t0_us, int64_t bytes) {
  if (!options_.trace) return;
  TraceEvent e;
  e.name = std::move(name);
  e.track = std::move(track);
  e.phase = plan::phaseName(in.phase);
  e.step = step;
  e.index = index;
  e.block = in.block;
  e.micro_batch = microBatchOf(in);
  e.start_us = t0_us;
  e.duration_us = TraceRecorder::nowUs() - t0_us;
  e.bytes = bytes;
  trace_.add(std::move(e));
}

void Executor::beginPhase(const std::string& name) {
  current_phase_ = name;
  allocator_->resetPeak();
  host_allocator_->resetPeak();
}

void Executor::endPhase() {
  if (current_phase_.empty()) return;
  phase_memory_.push_back({current_phase_, allocator_->stats().peak_in_use_bytes,
                           host_allocator_->stats().peak_in_use_bytes});
  current_phase_.clear();
}

absl::Status Executor::clipGradients(int64_t step) {
  // Each element once: a grad replicated over some axes is counted by the
  // share 1 / (their size) on every rank of them. Along the pp axis an
  // unsplit grad has as many copies as stages whose programs hold it or a
  // replica of it (one, unless stages hold a tied parameter). The total stays on the
  // device: the AdamW steps read the coefficient there, and the host reads
  // the norm with the loss at the end of the step.
  double* total = static_cast<double*>(kernels_->scalars());
  if (absl::Status s = kernels_->zero2D(total, 0, sizeof(double), 1); !s.ok()) return s;
  // Offloaded gradients the device cannot read are summed on the host and
  // added to the device's total.
  double host_total = 0;
  bool host_grads = false;
  for (const plan::Instruction* in : instructions_) {
    if (in->info->family != plan::OpFamily::kOptimizer) continue;
    const plan::Buffer& grad = plan_.buffers[in->operands[1]];
    int64_t copies = 1;
    for (size_t a = 0; a < grad.placement.size(); ++a) {
      const plan::AxisPlacement::Kind kind = grad.placement[a].kind;
      if (static_cast<int64_t>(a) == pp_axis_) {
        if (kind != plan::AxisPlacement::Kind::kShard) copies *= holders_[grad.id];
      } else if (kind == plan::AxisPlacement::Kind::kReplicate) {
        copies *= plan_.mesh.shape()[a];
      }
    }
    if (grad.onHost() && !kernels_->hostAddressable()) {
      host_total += hostSquaredNorm(Ref{bufferData(grad.id), grad.dtype}, grad.numel()) /
                    static_cast<double>(copies);
      host_grads = true;
      continue;
    }
    absl::Status s =
        kernels_->addSquaredNorm(Ref{bufferData(grad.id), grad.dtype}, grad.numel(), copies, total);
    if (!s.ok()) return s;
  }
  if (host_grads) {
    double device_total = 0;
    absl::Status s = kernels_->download(&device_total, total, sizeof(double));
    device_total += host_total;
    if (s.ok()) s = kernels_->upload(total, &device_total, sizeof(double));
    if (!s.ok()) return s;
  }
  absl::StatusOr<std::shared_ptr<comm::Work>> work =
      world_->allReduce(comm::Tensor(total, comm::DType::kFloat64, {1}, kernels_->device()));
  if (!work.ok()) return work.status();
  step_works_.emplace_back("the gradient norm's all-reduce", *work);
  // Every stage's gradients are in the norm: the stages that ended their
  // backward first wait here for the others.
  const double t0 = TraceRecorder::nowUs();
  if (absl::Status s = kernels_->await(**work, options_.timeout); !s.ok()) return s;
  if (pp_group_ != nullptr) {
    traceBubble(step, "bubble: waits for the other stages' gradients (the norm)", "", t0,
                TraceRecorder::nowUs());
  }
  return kernels_->clipCoefficient(total, options_.max_grad_norm, clip_coefficient_);
}

absl::Status Executor::run(const Bound& bound, int64_t step) {
  const plan::Instruction& in = *bound.instr;
  if (bound.view_of >= 0) {
    alias(in.results[0], bound.view_of);
  } else if (bound.allocates_results && bound.stack_rule == Bound::StackRule::kRowReduce) {
    Stack local{rows_.count, {}, bound.stack_mean};
    for (int64_t r = 0; r < rows_.count; ++r) local.index.push_back(rows_.begin + r);
    for (size_t k = 0; k < in.results.size(); ++k) {
      absl::Status s =
          bound.stacked_results[k] ? defineStacked(in.results[k], local) : define(in.results[k]);
      if (!s.ok()) return s;
    }
  } else if (bound.allocates_results && bound.stack_rule == Bound::StackRule::kPropagate) {
    const Stack* stack = nullptr;
    for (int64_t id : in.operands) {
      if (stacks_[id].rows == 0) continue;
      if (stack != nullptr && stack->index != stacks_[id].index) {
        return absl::InternalError(absl::StrCat(in.where(),
                                                ": deterministic mode: operands hold "
                                                "different batch rows"));
      }
      stack = &stacks_[id];
    }
    for (int64_t id : in.operands) {
      if (stack != nullptr && stacks_[id].rows == 0) {
        return absl::InternalError(absl::StrCat(in.where(),
                                                ": deterministic mode: ", plan_.buffers[id].name,
                                                " is a total while another operand "
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
  if (in.info->stream == plan::Stream::kCompute && in.info->family != plan::OpFamily::kWait &&
      in.op != "dist.free") {
    traceSpan(in, step, in.op, "compute", in.index, t0);
  }
  releaseAfter(bound);
  return absl::OkStatus();
}

void Executor::releaseAfter(const Bound& bound) {
  // planSchedule has each block run its micro-batches in order, so a
  // block's run of the last one is its last run of the step.
  const bool last = micro_ == plan_.micro_batches - 1;
  for (int64_t id : bound.release_after) {
    if (last || !carried_[id]) releaseBuffer(id);
  }
}

absl::Status Executor::feed(int64_t micro, const int32_t* ids, const int32_t* labels) {
  const plan::Interface& io = plan_.interface;
  const size_t tokens = static_cast<size_t>(rows_.count * seq_);
  const size_t at = static_cast<size_t>(micro) * tokens;
  absl::Status fed;
  for (int64_t id : feeds_) {
    if (absl::Status s = define(id); !s.ok()) return s;
    void* data = bufferData(id);
    if (id == io.ids) {
      fed.Update(kernels_->upload(data, ids + at, tokens * sizeof(int32_t)));
    } else if (id == io.labels) {
      fed.Update(kernels_->upload(data, labels + at, tokens * sizeof(int32_t)));
    } else if (id == io.loss_grad_seed) {
      fed.Update(kernels_->upload(data, &loss_grad_seed_, sizeof(float)));
    } else {
      std::vector<int32_t> positions(tokens);
      for (size_t t = 0; t < tokens; ++t) positions[t] = static_cast<int32_t>(t % seq_);
      fed.Update(kernels_->upload(data, positions.data(), tokens * sizeof(int32_t)));
    }
  }
  return fed;
}

// The gradients are complete: deterministic sums, the parity callback and
// clipping, before the first optimizer step (after the optimizer phase's
// exchange of a tied parameter's gradient, which completes its sum).
absl::Status Executor::beginOptimizer(int64_t step) {
  std::vector<int64_t> grads;
  for (const plan::Instruction* opt : instructions_) {
    if (opt->info->family == plan::OpFamily::kOptimizer) grads.push_back(opt->operands[1]);
  }
  for (int64_t id : grads) {
    if (absl::Status s = finalize(id); !s.ok()) return s;
  }
  if (options_.on_gradients) {
    absl::StatusOr<std::vector<checkpoint::ShardView>> views = shardViews(grads);
    if (!views.ok()) return views.status();
    options_.on_gradients(step, *views);
  }
  if (options_.max_grad_norm <= 0) return absl::OkStatus();
  if (absl::Status s = clipGradients(step); !s.ok()) return s;
  return fetchHostClip();
}

absl::Status Executor::runBlock(const plan::Block& block, int64_t micro, int64_t step) {
  const int64_t begin = block_begin_.find(block.name)->second;
  const int64_t end = begin + static_cast<int64_t>(block.instructions.size());
  const int64_t count = plan_.micro_batches;
  for (int64_t i = begin; i < end; ++i) {
    const Bound& bound = *bound_[i];
    const plan::Instruction& in = *bound.instr;
    if (micro >= 0 && !plan::runsIn(in.micro_step, micro, count)) {
      // Not this micro-step's: what it would end is ended all the same.
      releaseAfter(bound);
      continue;
    }
    if (current_phase_ != plan::phaseName(in.phase)) {
      endPhase();
      beginPhase(std::string(plan::phaseName(in.phase)));
    }
    if (i == first_step_) {
      if (absl::Status s = beginOptimizer(step); !s.ok()) return s;
    }
    if (absl::Status s = run(bound, step); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<StepResult> Executor::step(int64_t step, const int32_t* ids, const int32_t* labels) {
  const double start = TraceRecorder::nowUs();
  StepResult result;
  phase_memory_.clear();
  step_works_.clear();
  wait_us_ = 0;
  bubble_us_ = 0;
  comm_bytes_ = 0;
  copy_wait_us_ = 0;
  copy_bytes_ = 0;
  lr_factor_ = options_.lr_schedule.factor(step);
  result.learning_rate = base_lr_ * lr_factor_;
  if (absl::Status s = kernels_->activate(); !s.ok()) return s;
  absl::StatusOr<double> loss = runSchedule(step, ids, labels, /*eval=*/false);
  if (!loss.ok()) return loss.status();
  endPhase();
  if (const auto pending = pendingHandles(); !pending.empty()) {
    return absl::InternalError(absl::StrCat("collective '", pending.front().first,
                                            "' (started at ", pending.front().second->started,
                                            ") was never waited in step ", step));
  }
  // The stages meet here: the time until the last of them ends its step
  // is the cool-down of those that ended earlier.
  const double shared_us = TraceRecorder::nowUs();
  absl::StatusOr<double> shared = shareLoss(*loss, step);
  if (!shared.ok()) return shared.status();
  if (pp_group_ != nullptr) {
    traceBubble(step, "bubble: waits for the other stages to end the step", "", shared_us,
                TraceRecorder::nowUs());
  }
  result.loss = *shared / static_cast<double>(plan_.micro_batches);
  if (options_.max_grad_norm > 0) {
    double total = 0;
    if (absl::Status s = kernels_->download(&total, kernels_->scalars(), sizeof(double)); !s.ok())
      return s;
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
  result.comm_wait_seconds = wait_us_ / 1e6;
  result.comm_bytes = comm_bytes_;
  result.bubble_seconds = bubble_us_ / 1e6;
  result.copy_wait_seconds = copy_wait_us_ / 1e6;
  result.copy_bytes = copy_bytes_;
  result.seconds = (TraceRecorder::nowUs() - start) / 1e6;
  return result;
}

// A micro-batch's loss, read back (its one synchronisation), and released.
absl::StatusOr<float> Executor::readLoss(int64_t step) {
  const int64_t id = plan_.interface.loss;
  if (absl::Status s = finalize(id); !s.ok()) return s;
  float loss = 0;
  if (absl::Status s = kernels_->download(&loss, bufferData(id), sizeof(float)); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("step ", step, ": ", s.message()));
  }
  persistent_[id] = false;
  releaseBuffer(id);
  return loss;
}

absl::StatusOr<std::vector<checkpoint::ShardView>> Executor::checkpointShards() const {
  std::vector<int64_t> ids;
  for (const plan::Buffer& b : plan_.buffers) {
    if (persistent_[b.id]) ids.push_back(b.id);
  }
  return shardViews(ids);
}

absl::StatusOr<std::vector<checkpoint::ShardView>> Executor::shardViews(
    const std::vector<int64_t>& ids) const {
  std::vector<checkpoint::ShardView> shards;
  host_staging_.clear();
  if (absl::Status s = kernels_->activate(); !s.ok()) return s;
  for (int64_t id : ids) {
    const plan::Buffer& b = plan_.buffers[id];
    if (bufferData(id) == nullptr) continue;
    // One replica: the rank at coordinate 0 of every axis that replicates
    // it; along the pp axis, unless it is split there, the lowest stage that
    // holds it.
    bool saver = true;
    for (size_t a = 0; a < b.placement.size(); ++a) {
      if (b.placement[a].kind == plan::AxisPlacement::Kind::kShard) continue;
      if (static_cast<int64_t>(a) == pp_axis_ ? program_->stage != saving_stage_[id]
                                              : coords_[a] != 0) {
        saver = false;
      }
    }
    if (!saver) continue;
    absl::StatusOr<plan::ShardBox> box = plan::shardBoxOf(b, plan_.mesh, coords_);
    if (!box.ok() || product(box->valid) == 0) continue;
    checkpoint::ShardView view;
    view.name = b.name;
    view.dtype = checkpoint::DType::kF32;
    view.global_shape = b.global_shape;
    view.box = {box->offsets, box->valid};
    view.local_shape = b.local_shape;
    view.data = bufferData(b.id);
    // Checkpoints hold f32: a bf16 buffer is widened (exactly) on the host.
    if ((!kernels_->hostAddressable() && !b.onHost()) || b.dtype != comm::DType::kFloat32) {
      absl::StatusOr<std::vector<float>> host = hostValues(b);
      if (!host.ok()) {
        return absl::Status(
            host.status().code(),
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
  for (const plan::Buffer& b : plan_.buffers) {
    if (!persistent_[b.id]) continue;
    // An offloaded f32 parameter's master copy is the parameter itself in
    // a checkpoint saved without offload.
    std::string name = b.name;
    if (!reader.tensor(name).ok() && name.rfind("master:", 0) == 0) {
      for (const plan::Buffer& param : plan_.buffers) {
        if (param.role == plan::BufferRole::kParam && param.name == name.substr(7) &&
            param.dtype == comm::DType::kFloat32) {
          name = param.name;
        }
      }
    }
    absl::StatusOr<checkpoint::TensorInfo> info = reader.tensor(name);
    if (!info.ok()) return info.status();
    if (info->shape != b.global_shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint ", reader.directory(), ": ", b.name, " is ",
                       shapeText(info->shape), " there but ", shapeText(b.global_shape),
                       " in the plan; it was saved for another model"));
    }
    absl::StatusOr<plan::ShardBox> box = plan::shardBoxOf(b, plan_.mesh, coords_);
    if (!box.ok()) return box.status();
    std::vector<float> dense(product(box->valid));
    if (!dense.empty()) {
      if (absl::Status s = reader.readInto(name, {box->offsets, box->valid}, dense.data());
          !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = uploadShard(b, dense, box->valid); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Executor::loadParameters(const ParameterFill& fill) {
  if (absl::Status s = kernels_->activate(); !s.ok()) return s;
  std::map<std::string, const plan::Buffer*> params;
  for (const plan::Buffer& b : plan_.buffers) {
    if (b.role == plan::BufferRole::kParam) params[b.name] = &b;
  }
  for (const plan::Buffer& b : plan_.buffers) {
    if (!persistent_[b.id]) continue;
    const plan::Buffer* source = nullptr;
    if (b.role == plan::BufferRole::kParam) {
      source = &b;
    } else if (b.name.rfind("master:", 0) == 0) {
      auto at = params.find(b.name.substr(7));
      if (at != params.end()) source = at->second;
    }
    if (source == nullptr) continue;
    absl::StatusOr<plan::ShardBox> box = plan::shardBoxOf(b, plan_.mesh, coords_);
    if (!box.ok()) return box.status();
    std::vector<float> dense(product(box->valid));
    if (!dense.empty()) {
      if (absl::Status s = fill(*source, {box->offsets, box->valid}, dense); !s.ok()) return s;
    }
    if (absl::Status s = uploadShard(b, dense, box->valid); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> Executor::hostValues(const plan::Buffer& b) const {
  std::vector<float> values(b.numel());
  if (b.dtype == comm::DType::kFloat32) {
    if (absl::Status s = readBuffer(values.data(), b.id, values.size() * sizeof(float)); !s.ok()) {
      return s;
    }
    return values;
  }
  if (b.dtype != comm::DType::kBFloat16) {
    return absl::FailedPreconditionError(absl::StrCat(
        b.name, " is ", std::string(comm::dtypeName(b.dtype)), ", not a float buffer"));
  }
  std::vector<uint16_t> bits(values.size());
  if (absl::Status s = readBuffer(bits.data(), b.id, bits.size() * sizeof(uint16_t)); !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < bits.size(); ++i) values[i] = comm::bfloat16ToFloat(bits[i]);
  return values;
}

absl::StatusOr<std::vector<float>> Executor::localValues(const std::string& name) const {
  bool named = false;
  for (const plan::Buffer& b : plan_.buffers) {
    if (b.name != name) continue;
    // Replicas share a name; this rank's stage holds one of them.
    named = true;
    if (bufferData(b.id) == nullptr) continue;
    absl::StatusOr<plan::ShardBox> box = plan::shardBoxOf(b, plan_.mesh, coords_);
    if (!box.ok()) return box.status();
    if (absl::Status s = kernels_->activate(); !s.ok()) return s;
    absl::StatusOr<std::vector<float>> local = hostValues(b);
    if (!local.ok()) return local.status();
    std::vector<float> dense(product(box->valid));
    copyFromPadded(local->data(), b.local_shape, dense.data(), box->valid);
    return dense;
  }
  if (named) return absl::FailedPreconditionError(absl::StrCat(name, " is not held between steps"));
  return absl::NotFoundError(absl::StrCat("no buffer named ", name, " in ", plan_.source));
}

}  // namespace loom::runtime
