// The nccl backend: communicator creation (split or unique id), stream
// ordering, the watchdog that completes Works and aborts on timeouts or
// asynchronous errors, and one method per collective.
#include "comm/nccl/nccl_backend.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "comm/deadline.h"
#include "comm/errors.h"
#include "comm/nccl/cuda_util.h"
#include "comm/nccl/nccl_types.h"

static_assert(NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0),
              "the nccl backend uses ncclGather, ncclScatter and ncclAlltoAll (NCCL 2.28)");

namespace loom::comm::nccl {
namespace {

thread_local cudaStream_t current_stream = nullptr;

absl::Status ncclError(ncclResult_t result, ncclComm_t comm, std::string_view what) {
  const char* detail = comm != nullptr ? ncclGetLastError(comm) : nullptr;
  return backendError(absl::StrCat(
      std::string(what), " failed in NCCL: ", ncclGetErrorString(result),
      detail != nullptr && *detail != '\0' ? absl::StrCat(" (", detail, ")") : std::string()));
}

// Polls a non-blocking communicator until its pending operation (init,
// split, an enqueue) is done; returns the final state, or nullopt when the
// deadline passed first.
std::optional<ncclResult_t> settle(ncclComm_t comm, const Deadline& deadline) {
  for (;;) {
    ncclResult_t state = ncclInProgress;
    const ncclResult_t queried = ncclCommGetAsyncError(comm, &state);
    if (queried != ncclSuccess) return queried;
    if (state != ncclInProgress) return state;
    if (deadline.expired()) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// Non-blocking, so that creation and every call can be bounded by a
// deadline and aborted.
ncclConfig_t nonBlockingConfig(const std::string& name) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = name.c_str();
  return config;
}

// Issues one call's NCCL and CUDA work on the group's stream.
class Launcher {
 public:
  Launcher(ncclComm_t comm, cudaStream_t stream, const Deadline& deadline)
      : comm_(comm), stream_(stream), deadline_(deadline) {}

  ncclComm_t comm() const { return comm_; }
  cudaStream_t stream() const { return stream_; }

  // Checks an NCCL call, first waiting out ncclInProgress (the communicator
  // is non-blocking, and the next NCCL call may come only once this one is
  // enqueued).
  absl::Status nccl(ncclResult_t result, std::string_view what) {
    if (result == ncclInProgress) {
      const std::optional<ncclResult_t> state = settle(comm_, deadline_);
      if (!state) {
        return timeoutError(absl::StrCat(std::string(what),
                                         " was still being enqueued by NCCL at "
                                         "the call's deadline"));
      }
      result = *state;
    }
    return result == ncclSuccess ? absl::OkStatus() : ncclError(result, comm_, what);
  }

  absl::Status cuda(cudaError_t error, std::string_view what) { return cudaStatus(error, what); }

  // Runs `body` between ncclGroupStart and ncclGroupEnd (NCCL's way to
  // batch sends and receives); the group is closed even when body fails.
  absl::Status group(const std::function<absl::Status()>& body) {
    if (absl::Status status = nccl(ncclGroupStart(), "ncclGroupStart"); !status.ok()) {
      return status;
    }
    absl::Status status = body();
    status.Update(nccl(ncclGroupEnd(), "ncclGroupEnd"));
    return status;
  }

  // Device memory for packing tensor lists, freed in stream order after
  // the call (release()).
  absl::StatusOr<char*> scratch(size_t bytes) {
    void* memory = nullptr;
    if (absl::Status status = cuda(cudaMallocAsync(&memory, std::max<size_t>(bytes, 1), stream_),
                                   "cudaMallocAsync of scratch memory");
        !status.ok()) {
      return status;
    }
    scratch_.push_back(memory);
    return static_cast<char*>(memory);
  }

  absl::Status copy(void* dst, const void* src, size_t bytes) {
    if (bytes == 0) return absl::OkStatus();
    return cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_),
                "cudaMemcpyAsync between a tensor and scratch memory");
  }

  absl::Status release() {
    absl::Status status;
    for (void* memory : scratch_) {
      status.Update(cuda(cudaFreeAsync(memory, stream_), "cudaFreeAsync of scratch memory"));
    }
    scratch_.clear();
    return status;
  }

 private:
  ncclComm_t comm_;
  cudaStream_t stream_;
  Deadline deadline_;
  std::vector<void*> scratch_;
};

using LaunchFn = std::function<absl::Status(Launcher&)>;

class Engine;

// A call's handle: complete once its end event on the group's stream has
// fired (the watchdog checks), or failed by a timeout, an NCCL error or an
// abort.
class NcclWork : public Work {
 public:
  NcclWork(CollectiveInfo info, absl::Duration timeout, cudaEvent_t end,
           std::weak_ptr<Engine> engine)
      : Work(std::move(info), timeout), end_(end), engine_(std::move(engine)) {}
  ~NcclWork() override { cudaEventDestroy(end_); }

  cudaEvent_t end() const { return end_; }

  // Makes the caller's current stream wait for the call, without blocking
  // the host (PyTorch's work.wait() on a CUDA work).
  absl::Status synchronize() override {
    if (isCompleted() && !isSuccess()) return exception();
    return cudaStatus(cudaStreamWaitEvent(currentCudaStream(), end_, 0),
                      absl::StrCat(info().describe(), ": making the current stream wait"));
  }

 protected:
  void abortEngine() override;

 private:
  cudaEvent_t end_;
  std::weak_ptr<Engine> engine_;
};

// The communicator, stream and watchdog of one group, shared by the backend
// and its Works.
class Engine : public std::enable_shared_from_this<Engine> {
 public:
  Engine(std::string group, int device, ncclComm_t comm, cudaStream_t stream, void* barrier)
      : group_(std::move(group)),
        device_(device),
        stream_(stream),
        barrier_(barrier),
        comm_(comm) {}

  ~Engine() { shutdown(); }

  void start() {
    watchdog_ = std::thread([this] { watch(); });
  }

  int device() const { return device_; }
  void* barrierBuffer() const { return barrier_; }

  absl::StatusOr<std::shared_ptr<Work>> enqueue(const CollectiveInfo& info, absl::Duration timeout,
                                                const LaunchFn& launch) {
    const Deadline deadline = Deadline::after(timeout);
    std::vector<std::shared_ptr<NcclWork>> to_fail;
    absl::StatusOr<std::shared_ptr<Work>> result;
    {
      absl::MutexLock lock(&mu_);
      if (broken_) return brokenError(info, *broken_);
      result = enqueueLocked(info, timeout, deadline, launch, to_fail);
    }
    failAll(to_fail);
    return result;
  }

  // Aborts the communicator (ncclCommAbort): outstanding calls fail with
  // `reason`, later ones at once. Only the first reason counts.
  void abortWith(const std::string& reason) {
    std::vector<std::shared_ptr<NcclWork>> to_fail;
    {
      absl::MutexLock lock(&mu_);
      abortLocked(reason, to_fail);
    }
    failAll(to_fail);
  }

  // A communicator with the same members, split from this one.
  absl::StatusOr<ncclComm_t> split(int key, const std::string& name, const Deadline& deadline) {
    absl::MutexLock lock(&mu_);
    if (broken_) return backendError(absl::StrCat("the parent group ", group_, " is broken"));
    ncclConfig_t config = nonBlockingConfig(name);
    ncclComm_t comm = nullptr;
    const ncclResult_t result = ncclCommSplit(comm_, /*color=*/0, key, &comm, &config);
    if (result != ncclSuccess && result != ncclInProgress) {
      return ncclError(result, comm_, "ncclCommSplit");
    }
    const std::optional<ncclResult_t> state = settle(comm, deadline);
    if (!state || *state != ncclSuccess) {
      ncclCommAbort(comm);
      return state ? ncclError(*state, nullptr, "ncclCommSplit")
                   : timeoutError("ncclCommSplit did not finish in time");
    }
    return comm;
  }

  bool usable() {
    absl::MutexLock lock(&mu_);
    return !broken_.has_value();
  }

  // Lets outstanding calls finish or time out, stops the watchdog and
  // releases the communicator, stream and buffers. Idempotent.
  void shutdown() {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    if (watchdog_.joinable()) watchdog_.join();
    cudaSetDevice(device_);
    absl::MutexLock lock(&mu_);
    if (comm_ != nullptr) {
      // ncclCommFinalize flushes the communicator; a bounded wait keeps a
      // dead peer from hanging the destructor.
      const ncclResult_t finalized = ncclCommFinalize(comm_);
      const std::optional<ncclResult_t> state =
          finalized == ncclInProgress || finalized == ncclSuccess
              ? settle(comm_, Deadline::after(absl::Seconds(10)))
              : std::optional<ncclResult_t>(finalized);
      if (state && *state == ncclSuccess) {
        ncclCommDestroy(comm_);
      } else {
        ncclCommAbort(comm_);
      }
      comm_ = nullptr;
    }
    cudaStreamDestroy(stream_);
    cudaFree(barrier_);
  }

 private:
  struct Outstanding {
    std::shared_ptr<NcclWork> work;
    Deadline deadline;
    absl::Duration timeout;
  };

  absl::Status brokenError(const CollectiveInfo& info, const std::string& reason) const {
    return backendError(absl::StrCat(info.describe(), " failed: backend nccl of group ", group_,
                                     " is broken because ", reason,
                                     "; its communicator was aborted (ncclCommAbort), so every "
                                     "later call fails; create the group again"));
  }

  absl::StatusOr<std::shared_ptr<Work>> enqueueLocked(
      const CollectiveInfo& info, absl::Duration timeout, const Deadline& deadline,
      const LaunchFn& launch, std::vector<std::shared_ptr<NcclWork>>& to_fail)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::string what = info.describe();
    if (absl::Status status = cudaStatus(cudaSetDevice(device_), what); !status.ok()) {
      return status;
    }
    // The call starts after the caller's work so far: an event on the
    // caller's stream that the group's stream waits for.
    cudaEvent_t ready = nullptr;
    if (absl::Status status =
            cudaStatus(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), what);
        !status.ok()) {
      return status;
    }
    absl::Status status = cudaStatus(cudaEventRecord(ready, currentCudaStream()), what);
    if (status.ok()) status = cudaStatus(cudaStreamWaitEvent(stream_, ready, 0), what);
    cudaEventDestroy(ready);
    if (!status.ok()) return status;
    cudaEvent_t end = nullptr;
    if (absl::Status created =
            cudaStatus(cudaEventCreateWithFlags(&end, cudaEventDisableTiming), what);
        !created.ok()) {
      return created;
    }
    Launcher launcher(comm_, stream_, deadline);
    status = launch(launcher);
    status.Update(launcher.release());
    if (status.ok()) status = cudaStatus(cudaEventRecord(end, stream_), what);
    if (!status.ok()) {
      cudaEventDestroy(end);
      // A failed call may leave the non-blocking communicator failed or
      // stuck; then only an abort releases it.
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      const absl::Status failed =
          makeError(errorKind(status), status.code(), absl::StrCat(what, ": ", status.message()));
      if (state != ncclSuccess) abortLocked(std::string(failed.message()), to_fail);
      return failed;
    }
    auto work = std::make_shared<NcclWork>(info, timeout, end, weak_from_this());
    outstanding_.push_back({work, deadline, timeout});
    return std::shared_ptr<Work>(work);
  }

  void abortLocked(const std::string& reason, std::vector<std::shared_ptr<NcclWork>>& to_fail)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (broken_) return;
    broken_ = reason;
    if (comm_ != nullptr) {
      // Unblocks NCCL kernels waiting for peers and frees the communicator.
      ncclCommAbort(comm_);
      comm_ = nullptr;
    }
    for (Outstanding& o : outstanding_) to_fail.push_back(std::move(o.work));
    outstanding_.clear();
  }

  // Completes Works outside the lock: completion callbacks may call back in.
  void failAll(const std::vector<std::shared_ptr<NcclWork>>& works) {
    std::optional<std::string> reason;
    {
      absl::MutexLock lock(&mu_);
      reason = broken_;
    }
    for (const auto& work : works) work->complete(brokenError(work->info(), reason.value_or("")));
  }

  bool hasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !outstanding_.empty() || stopping_;
  }

  // The watchdog: completes Works whose end event fired, and aborts the
  // communicator on an asynchronous NCCL error, a CUDA error or a call past
  // its deadline, as PyTorch's ProcessGroupNCCL watchdog does.
  void watch() {
    cudaSetDevice(device_);
    int idle_rounds = 0;
    for (;;) {
      std::vector<std::pair<std::shared_ptr<NcclWork>, absl::Status>> done;
      std::vector<std::shared_ptr<NcclWork>> to_fail;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &Engine::hasWork));
        if (outstanding_.empty()) return;  // stopping, and nothing left
        ncclResult_t state = ncclSuccess;
        if (comm_ != nullptr) ncclCommGetAsyncError(comm_, &state);
        if (state != ncclSuccess && state != ncclInProgress) {
          abortLocked(
              std::string(
                  ncclError(state, comm_, "the communicator (ncclCommGetAsyncError)").message()),
              to_fail);
        }
        for (auto it = outstanding_.begin(); it != outstanding_.end();) {
          const CollectiveInfo& info = it->work->info();
          const cudaError_t query = cudaEventQuery(it->work->end());
          if (query == cudaSuccess) {
            done.emplace_back(it->work, absl::OkStatus());
            it = outstanding_.erase(it);
            continue;
          }
          if (query != cudaErrorNotReady) {
            const absl::Status failed = cudaStatus(query, info.describe());
            done.emplace_back(it->work, failed);
            outstanding_.erase(it);
            abortLocked(std::string(failed.message()), to_fail);
            break;
          }
          if (it->deadline.expired()) {
            done.emplace_back(
                it->work,
                timeoutError(absl::StrCat(
                    info.describe(), " did not complete within ", absl::FormatDuration(it->timeout),
                    " on backend nccl; a rank of the group is likely missing, slower, or called "
                    "a different collective. The group's communicator was aborted "
                    "(ncclCommAbort) and later calls fail at once")));
            const std::string reason = absl::StrCat(info.describe(), " timed out");
            outstanding_.erase(it);
            abortLocked(reason, to_fail);
            break;
          }
          ++it;
        }
      }
      for (auto& [work, status] : done) work->complete(status);
      failAll(to_fail);
      // Poll often while calls are in flight, backing off to 1 ms.
      idle_rounds = done.empty() ? idle_rounds + 1 : 0;
      std::this_thread::sleep_for(
          std::chrono::microseconds(std::min(1000, 20 << std::min(idle_rounds, 6))));
    }
  }

  const std::string group_;
  const int device_;
  cudaStream_t const stream_;
  void* const barrier_;  // one int32 on the device, all-reduced by barrier()
  absl::Mutex mu_;
  ncclComm_t comm_ ABSL_GUARDED_BY(mu_);
  std::deque<Outstanding> outstanding_ ABSL_GUARDED_BY(mu_);
  std::optional<std::string> broken_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread watchdog_;
};

void NcclWork::abortEngine() {
  if (std::shared_ptr<Engine> engine = engine_.lock()) {
    engine->abortWith(std::string(exception().message()));
  }
}

// Communicators this process made, by device and sorted member list, so a
// later group with the same members splits from one (ncclCommSplit shares
// the parent's set-up instead of bootstrapping again).
struct Parents {
  absl::Mutex mu;
  std::map<std::pair<int, std::vector<int>>, std::pair<std::string, std::weak_ptr<Engine>>>
      by_members ABSL_GUARDED_BY(mu);
  // How often each group name was created here, so that every creation uses
  // fresh store keys.
  std::map<std::string, int> generations ABSL_GUARDED_BY(mu);
};

Parents& parents() {
  static Parents* const kParents = new Parents();
  return *kParents;
}

bool contiguous(const std::vector<Tensor>& tensors, size_t bytes) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].data() != static_cast<char*>(tensors[0].data()) + i * bytes) return false;
  }
  return true;
}

class NcclBackend final : public Backend {
 public:
  NcclBackend(const BackendContext& context, std::shared_ptr<Engine> engine)
      : Backend(context), timeout_(context.timeout), engine_(std::move(engine)) {}

  ~NcclBackend() override { engine_->shutdown(); }

  std::string_view name() const override { return "nccl"; }

  WorkOr broadcast(Tensor tensor, const BroadcastOptions& options,
                   const CollectiveInfo& info) override {
    return run(info, options.timeout, {tensor}, [tensor, root = options.root](Launcher& l) {
      return l.nccl(ncclBroadcast(tensor.data(), tensor.data(), tensor.numel(),
                                  ncclDataType(tensor.dtype()), root, l.comm(), l.stream()),
                    "ncclBroadcast");
    });
  }

  WorkOr allReduce(Tensor tensor, const AllReduceOptions& options,
                   const CollectiveInfo& info) override {
    absl::StatusOr<ncclRedOp_t> op = ncclReduceOp(options.op, tensor.dtype(), info);
    if (!op.ok()) return op.status();
    return run(info, options.timeout, {tensor}, [tensor, op = *op](Launcher& l) {
      return l.nccl(ncclAllReduce(tensor.data(), tensor.data(), tensor.numel(),
                                  ncclDataType(tensor.dtype()), op, l.comm(), l.stream()),
                    "ncclAllReduce");
    });
  }

  WorkOr reduce(Tensor tensor, const ReduceOptions& options, const CollectiveInfo& info) override {
    absl::StatusOr<ncclRedOp_t> op = ncclReduceOp(options.op, tensor.dtype(), info);
    if (!op.ok()) return op.status();
    return run(
        info, options.timeout, {tensor}, [tensor, op = *op, root = options.root](Launcher& l) {
          return l.nccl(ncclReduce(tensor.data(), tensor.data(), tensor.numel(),
                                   ncclDataType(tensor.dtype()), op, root, l.comm(), l.stream()),
                        "ncclReduce");
        });
  }

  WorkOr allGather(std::vector<Tensor> outputs, Tensor input, const AllGatherOptions& options,
                   const CollectiveInfo& info) override {
    std::vector<Tensor> tensors = outputs;
    tensors.push_back(input);
    return run(info, options.timeout, tensors, [outputs, input](Launcher& l) -> absl::Status {
      const size_t bytes = input.nbytes();
      char* gathered = static_cast<char*>(outputs[0].data());
      if (!contiguous(outputs, bytes)) {
        absl::StatusOr<char*> scratch = l.scratch(bytes * outputs.size());
        if (!scratch.ok()) return scratch.status();
        gathered = *scratch;
      }
      if (absl::Status status =
              l.nccl(ncclAllGather(input.data(), gathered, input.numel(),
                                   ncclDataType(input.dtype()), l.comm(), l.stream()),
                     "ncclAllGather");
          !status.ok()) {
        return status;
      }
      if (gathered == outputs[0].data()) return absl::OkStatus();
      for (size_t r = 0; r < outputs.size(); ++r) {
        if (absl::Status status = l.copy(outputs[r].data(), gathered + r * bytes, bytes);
            !status.ok()) {
          return status;
        }
      }
      return absl::OkStatus();
    });
  }

  WorkOr allGatherIntoTensor(Tensor output, Tensor input, const AllGatherOptions& options,
                             const CollectiveInfo& info) override {
    // NCCL gathers in place when the input is this rank's slot of the output.
    return run(info, options.timeout, {output, input}, [output, input](Launcher& l) {
      return l.nccl(ncclAllGather(input.data(), output.data(), input.numel(),
                                  ncclDataType(input.dtype()), l.comm(), l.stream()),
                    "ncclAllGather");
    });
  }

  WorkOr gather(std::vector<Tensor> outputs, Tensor input, const GatherOptions& options,
                const CollectiveInfo& info) override {
    std::vector<Tensor> tensors = outputs;
    tensors.push_back(input);
    return run(info, options.timeout, tensors,
               [outputs, input, root = options.root](Launcher& l) -> absl::Status {
                 const size_t bytes = input.nbytes();
                 char* gathered = outputs.empty() ? nullptr : static_cast<char*>(outputs[0].data());
                 if (!outputs.empty() && !contiguous(outputs, bytes)) {
                   absl::StatusOr<char*> scratch = l.scratch(bytes * outputs.size());
                   if (!scratch.ok()) return scratch.status();
                   gathered = *scratch;
                 }
                 if (absl::Status status =
                         l.nccl(ncclGather(input.data(), gathered, input.numel(),
                                           ncclDataType(input.dtype()), root, l.comm(), l.stream()),
                                "ncclGather");
                     !status.ok()) {
                   return status;
                 }
                 if (outputs.empty() || gathered == outputs[0].data()) return absl::OkStatus();
                 for (size_t r = 0; r < outputs.size(); ++r) {
                   if (absl::Status status = l.copy(outputs[r].data(), gathered + r * bytes, bytes);
                       !status.ok()) {
                     return status;
                   }
                 }
                 return absl::OkStatus();
               });
  }

  WorkOr scatter(Tensor output, std::vector<Tensor> inputs, const ScatterOptions& options,
                 const CollectiveInfo& info) override {
    std::vector<Tensor> tensors = inputs;
    tensors.push_back(output);
    return run(info, options.timeout, tensors,
               [output, inputs, root = options.root](Launcher& l) -> absl::Status {
                 absl::StatusOr<const char*> packed = pack(l, inputs, output.nbytes());
                 if (!packed.ok()) return packed.status();
                 return l.nccl(
                     ncclScatter(*packed, output.data(), output.numel(),
                                 ncclDataType(output.dtype()), root, l.comm(), l.stream()),
                     "ncclScatter");
               });
  }

  WorkOr reduceScatter(Tensor output, std::vector<Tensor> inputs,
                       const ReduceScatterOptions& options, const CollectiveInfo& info) override {
    absl::StatusOr<ncclRedOp_t> op = ncclReduceOp(options.op, output.dtype(), info);
    if (!op.ok()) return op.status();
    std::vector<Tensor> tensors = inputs;
    tensors.push_back(output);
    return run(
        info, options.timeout, tensors, [output, inputs, op = *op](Launcher& l) -> absl::Status {
          absl::StatusOr<const char*> packed = pack(l, inputs, output.nbytes());
          if (!packed.ok()) return packed.status();
          return l.nccl(ncclReduceScatter(*packed, output.data(), output.numel(),
                                          ncclDataType(output.dtype()), op, l.comm(), l.stream()),
                        "ncclReduceScatter");
        });
  }

  WorkOr reduceScatterTensor(Tensor output, Tensor input, const ReduceScatterOptions& options,
                             const CollectiveInfo& info) override {
    absl::StatusOr<ncclRedOp_t> op = ncclReduceOp(options.op, output.dtype(), info);
    if (!op.ok()) return op.status();
    return run(info, options.timeout, {output, input}, [output, input, op = *op](Launcher& l) {
      return l.nccl(ncclReduceScatter(input.data(), output.data(), output.numel(),
                                      ncclDataType(output.dtype()), op, l.comm(), l.stream()),
                    "ncclReduceScatter");
    });
  }

  WorkOr allToAll(std::vector<Tensor> outputs, std::vector<Tensor> inputs,
                  const AllToAllOptions& options, const CollectiveInfo& info) override {
    std::vector<Tensor> tensors = outputs;
    tensors.insert(tensors.end(), inputs.begin(), inputs.end());
    // Tensors of any size per peer: NCCL's grouped send/recv pattern.
    return run(info, options.timeout, tensors, [outputs, inputs](Launcher& l) {
      return l.group([&]() -> absl::Status {
        for (size_t r = 0; r < inputs.size(); ++r) {
          if (absl::Status status =
                  sendRecv(l, inputs[r].data(), inputs[r].numel(), outputs[r].data(),
                           outputs[r].numel(), inputs[r].dtype(), static_cast<int>(r));
              !status.ok()) {
            return status;
          }
        }
        return absl::OkStatus();
      });
    });
  }

  WorkOr allToAllSingle(Tensor output, Tensor input, std::vector<int64_t> output_splits,
                        std::vector<int64_t> input_splits, const AllToAllOptions& options,
                        const CollectiveInfo& info) override {
    const int64_t input_row = rowElements(input);
    const int64_t output_row = rowElements(output);
    const bool even =
        std::all_of(input_splits.begin(), input_splits.end(),
                    [&](int64_t s) { return s * input_row == input_splits[0] * input_row; }) &&
        std::all_of(output_splits.begin(), output_splits.end(),
                    [&](int64_t s) { return s * output_row == input_splits[0] * input_row; });
    return run(info, options.timeout, {output, input}, [=](Launcher& l) -> absl::Status {
      const ncclDataType_t type = ncclDataType(input.dtype());
      if (even) {
        return l.nccl(ncclAlltoAll(input.data(), output.data(), input_splits[0] * input_row, type,
                                   l.comm(), l.stream()),
                      "ncclAlltoAll");
      }
      // Uneven splits: NCCL's grouped send/recv pattern.
      return l.group([&]() -> absl::Status {
        const size_t element = dtypeSize(input.dtype());
        int64_t send_offset = 0, recv_offset = 0;
        for (size_t r = 0; r < input_splits.size(); ++r) {
          const int64_t send_count = input_splits[r] * input_row;
          const int64_t recv_count = output_splits[r] * output_row;
          if (absl::Status status =
                  sendRecv(l, static_cast<char*>(input.data()) + send_offset * element, send_count,
                           static_cast<char*>(output.data()) + recv_offset * element, recv_count,
                           input.dtype(), static_cast<int>(r));
              !status.ok()) {
            return status;
          }
          send_offset += send_count;
          recv_offset += recv_count;
        }
        return absl::OkStatus();
      });
    });
  }

  WorkOr barrier(const BarrierOptions& options, const CollectiveInfo& info) override {
    // NCCL has no barrier; a one-element all-reduce on the group's stream is
    // one (as in PyTorch), and Work::wait() blocks until it completed.
    void* buffer = engine_->barrierBuffer();
    return run(info, options.timeout, {}, [buffer](Launcher& l) {
      return l.nccl(ncclAllReduce(buffer, buffer, 1, ncclInt32, ncclSum, l.comm(), l.stream()),
                    "ncclAllReduce (barrier)");
    });
  }

  WorkOr send(Tensor tensor, int dst, const P2POptions& options,
              const CollectiveInfo& info) override {
    if (absl::Status status = checkTag(options.tag, info); !status.ok()) return status;
    return run(info, options.timeout, {tensor}, [tensor, dst](Launcher& l) {
      return l.nccl(ncclSend(tensor.data(), tensor.numel(), ncclDataType(tensor.dtype()), dst,
                             l.comm(), l.stream()),
                    "ncclSend");
    });
  }

  WorkOr recv(Tensor tensor, int src, const P2POptions& options,
              const CollectiveInfo& info) override {
    if (absl::Status status = checkTag(options.tag, info); !status.ok()) return status;
    return run(info, options.timeout, {tensor}, [tensor, src](Launcher& l) {
      return l.nccl(ncclRecv(tensor.data(), tensor.numel(), ncclDataType(tensor.dtype()), src,
                             l.comm(), l.stream()),
                    "ncclRecv");
    });
  }

  // Refused with the reason, as PyTorch's ProcessGroupNCCL refuses it.
  WorkOr recvAnySource(Tensor, const P2POptions&, const CollectiveInfo& info) override {
    return makeError(
        ErrorKind::kBackend, absl::StatusCode::kUnimplemented,
        absl::StrCat("backend nccl does not support recv_any_source (", info.describe(),
                     "): ncclRecv must name its peer (PyTorch's NCCL backend has no "
                     "any-source receive either); receive from a named rank, or receive "
                     "through a group whose backend is gloo or mpi"));
  }

  void abort() override { engine_->abortWith("abort() was called"); }

 private:
  static int64_t rowElements(const Tensor& tensor) {
    if (tensor.shape().empty() || tensor.shape()[0] == 0) return 1;
    return tensor.numel() / tensor.shape()[0];
  }

  // The tensors back to back in device memory: the tensors themselves when
  // they already are, else scratch memory they are copied into. Empty on a
  // non-root rank of scatter.
  static absl::StatusOr<const char*> pack(Launcher& l, const std::vector<Tensor>& tensors,
                                          size_t bytes) {
    if (tensors.empty()) return nullptr;
    if (contiguous(tensors, bytes)) return static_cast<const char*>(tensors[0].data());
    absl::StatusOr<char*> scratch = l.scratch(bytes * tensors.size());
    if (!scratch.ok()) return scratch.status();
    for (size_t r = 0; r < tensors.size(); ++r) {
      if (absl::Status status = l.copy(*scratch + r * bytes, tensors[r].data(), bytes);
          !status.ok()) {
        return status;
      }
    }
    return *scratch;
  }

  // One peer's half of an all-to-all inside a group; empty messages are
  // skipped on both sides alike (the counts are each other's).
  static absl::Status sendRecv(Launcher& l, const void* send, int64_t send_count, void* recv,
                               int64_t recv_count, DType dtype, int peer) {
    const ncclDataType_t type = ncclDataType(dtype);
    if (send_count > 0) {
      if (absl::Status status =
              l.nccl(ncclSend(send, send_count, type, peer, l.comm(), l.stream()), "ncclSend");
          !status.ok()) {
        return status;
      }
    }
    if (recv_count > 0) {
      return l.nccl(ncclRecv(recv, recv_count, type, peer, l.comm(), l.stream()), "ncclRecv");
    }
    return absl::OkStatus();
  }

  absl::Status checkTag(int tag, const CollectiveInfo& info) const {
    if (tag == 0) return absl::OkStatus();
    return makeError(ErrorKind::kBackend, absl::StatusCode::kUnimplemented,
                     absl::StrCat("backend nccl does not support tags on send/recv (",
                                  info.describe(), " has tag ", tag,
                                  "): NCCL matches a send and a receive by their order; use tag "
                                  "0 and issue them in the same order on both ranks"));
  }

  WorkOr run(const CollectiveInfo& info, std::optional<absl::Duration> timeout,
             const std::vector<Tensor>& tensors, const LaunchFn& launch) {
    const Device device = Device::cuda(engine_->device());
    for (const Tensor& tensor : tensors) {
      if (!(tensor.device() == device)) {
        return invalidArgumentError(absl::StrCat(
            info.describe(), ": backend nccl of this group runs on ", device.toString(),
            " but got ", tensor.toString(),
            "; pass tensors on that device (the group's device is the current CUDA device "
            "when the group is created)"));
      }
    }
    return engine_->enqueue(info, timeout.value_or(timeout_), launch);
  }

  const absl::Duration timeout_;
  std::shared_ptr<Engine> engine_;
};

std::string describeGroup(const BackendContext& context) {
  return absl::StrCat("backend nccl of group ", context.group_name, " (rank ", context.rank, " of ",
                      context.size, ")");
}

// Publishes this rank's `value` under `prefix`/rank and returns every
// rank's, naming the ranks that did not publish within the timeout.
absl::StatusOr<std::vector<std::string>> exchange(const BackendContext& context,
                                                  const std::string& prefix,
                                                  const std::string& value) {
  Store& store = *context.store;
  if (absl::Status status = store.setString(absl::StrCat(prefix, "/", context.rank), value);
      !status.ok()) {
    return status;
  }
  std::vector<std::string> keys;
  for (int r = 0; r < context.size; ++r) keys.push_back(absl::StrCat(prefix, "/", r));
  if (absl::Status waited = store.wait(keys, context.timeout); !waited.ok()) {
    if (errorKind(waited) != ErrorKind::kTimeout) return waited;
    std::vector<int> missing;
    for (int r = 0; r < context.size; ++r) {
      absl::StatusOr<bool> present = store.check({keys[r]});
      if (present.ok() && !*present) missing.push_back(r);
    }
    return timeoutError(absl::StrCat(
        describeGroup(context), ": ranks ", absl::StrJoin(missing, ", "),
        " did not create their nccl backend within ", absl::FormatDuration(context.timeout),
        "; start every rank, and create groups in the same order"));
  }
  absl::StatusOr<std::vector<Bytes>> values = store.multiGet(keys);
  if (!values.ok()) return values.status();
  std::vector<std::string> result;
  for (const Bytes& v : *values) result.push_back(toString(v));
  return result;
}

// A fresh communicator from a unique id that rank 0 makes and publishes.
absl::StatusOr<ncclComm_t> initFromUniqueId(const BackendContext& context, int generation,
                                            const Deadline& deadline) {
  const std::string group = describeGroup(context);
  ncclUniqueId id;
  const std::string key = absl::StrCat("nccl_unique_id/", generation);
  if (context.rank == 0) {
    if (ncclResult_t result = ncclGetUniqueId(&id); result != ncclSuccess) {
      return ncclError(result, nullptr, absl::StrCat(group, ": ncclGetUniqueId"));
    }
    if (context.size > 1) {
      const Bytes bytes(reinterpret_cast<const uint8_t*>(&id),
                        reinterpret_cast<const uint8_t*>(&id) + sizeof(id));
      if (absl::Status status = context.store->set(key, bytes); !status.ok()) return status;
    }
  } else {
    if (absl::Status status = context.store->wait({key}, context.timeout); !status.ok()) {
      return errorKind(status) == ErrorKind::kTimeout
                 ? timeoutError(absl::StrCat(group,
                                             ": rank 0 did not publish the NCCL unique id "
                                             "within ",
                                             absl::FormatDuration(context.timeout),
                                             "; is rank 0 running and creating this group?"))
                 : status;
    }
    absl::StatusOr<Bytes> bytes = context.store->get(key);
    if (!bytes.ok()) return bytes.status();
    if (bytes->size() != sizeof(id)) {
      return storeError(absl::StrCat(group, ": the stored NCCL unique id has ", bytes->size(),
                                     " bytes instead of ", sizeof(id),
                                     "; another job may share this store"));
    }
    std::memcpy(&id, bytes->data(), sizeof(id));
  }
  ncclConfig_t config = nonBlockingConfig(context.group_name);
  ncclComm_t comm = nullptr;
  const ncclResult_t result =
      ncclCommInitRankConfig(&comm, context.size, id, context.rank, &config);
  if (result != ncclSuccess && result != ncclInProgress) {
    if (comm != nullptr) ncclCommAbort(comm);
    return ncclError(result, nullptr, absl::StrCat(group, ": ncclCommInitRankConfig"));
  }
  const std::optional<ncclResult_t> state = settle(comm, deadline);
  if (!state || *state != ncclSuccess) {
    const absl::Status status =
        state ? ncclError(*state, comm, absl::StrCat(group, ": ncclCommInitRankConfig"))
              : timeoutError(absl::StrCat(
                    group, ": the other ranks did not join the NCCL communicator within ",
                    absl::FormatDuration(context.timeout),
                    " (ncclCommInitRankConfig); the half-made communicator was aborted"));
    ncclCommAbort(comm);
    return status;
  }
  return comm;
}

}  // namespace

cudaStream_t currentCudaStream() { return current_stream; }
void setCurrentCudaStream(cudaStream_t stream) { current_stream = stream; }

CudaStreamGuard::CudaStreamGuard(cudaStream_t stream) : previous_(current_stream) {
  current_stream = stream;
}
CudaStreamGuard::~CudaStreamGuard() { current_stream = previous_; }

absl::StatusOr<std::unique_ptr<Backend>> createNcclBackend(const BackendContext& context) {
  const std::string group = describeGroup(context);
  if (const std::string reason = cudaUnavailableReason(); !reason.empty()) {
    return backendError(absl::StrCat(group, " cannot start: ", reason));
  }
  if (context.size < 1 || context.rank < 0 || context.rank >= context.size) {
    return invalidArgumentError(
        absl::StrCat(group, ": rank ", context.rank, " is outside a group of size ", context.size));
  }
  if (context.size > 1 && context.store == nullptr) {
    return invalidArgumentError(absl::StrCat(
        group, ": a group of more than one rank needs a store to exchange the NCCL unique id"));
  }
  int device = 0;
  if (absl::Status status = cudaStatus(cudaGetDevice(&device), group); !status.ok()) {
    return status;
  }
  std::vector<int> members = context.global_ranks;
  if (members.empty()) {
    for (int r = 0; r < context.size; ++r) members.push_back(r);
  }
  std::sort(members.begin(), members.end());
  const std::pair<int, std::vector<int>> parent_key(device, members);

  int generation = 0;
  std::string parent_name;
  std::shared_ptr<Engine> parent;
  {
    Parents& p = parents();
    absl::MutexLock lock(&p.mu);
    generation = p.generations[context.group_name]++;
    auto it = p.by_members.find(parent_key);
    if (it != p.by_members.end()) {
      parent = it->second.second.lock();
      if (parent != nullptr && parent->usable()) {
        parent_name = it->second.first;
      } else {
        parent = nullptr;
      }
    }
  }
  // Split only when every rank has the same parent: ncclCommSplit is
  // collective over the parent's ranks, and a rank that lacks it would wait
  // for a unique id instead.
  bool split = parent != nullptr;
  if (context.size > 1) {
    absl::StatusOr<std::vector<std::string>> parent_names =
        exchange(context, absl::StrCat("nccl_parent/", generation), parent_name);
    if (!parent_names.ok()) return parent_names.status();
    split = std::all_of(parent_names->begin(), parent_names->end(),
                        [&](const std::string& name) { return name == (*parent_names)[0]; }) &&
            !parent_name.empty();
  }

  const Deadline deadline = Deadline::after(context.timeout);
  absl::StatusOr<ncclComm_t> comm = split
                                        ? parent->split(context.rank, context.group_name, deadline)
                                        : initFromUniqueId(context, generation, deadline);
  if (!comm.ok()) {
    return makeError(errorKind(comm.status()), comm.status().code(),
                     split ? absl::StrCat(group, ": splitting from group ", parent_name, ": ",
                                          comm.status().message())
                           : std::string(comm.status().message()));
  }
  cudaStream_t stream = nullptr;
  void* barrier = nullptr;
  absl::Status status = cudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                                   absl::StrCat(group, ": creating its stream"));
  if (status.ok()) {
    status = cudaStatus(cudaMalloc(&barrier, sizeof(int32_t)),
                        absl::StrCat(group, ": allocating the barrier buffer"));
  }
  if (!status.ok()) {
    ncclCommAbort(*comm);
    if (stream != nullptr) cudaStreamDestroy(stream);
    return status;
  }
  auto engine = std::make_shared<Engine>(context.group_name, device, *comm, stream, barrier);
  engine->start();
  {
    Parents& p = parents();
    absl::MutexLock lock(&p.mu);
    auto it = p.by_members.find(parent_key);
    if (it == p.by_members.end() || it->second.second.expired()) {
      p.by_members[parent_key] = {context.group_name, engine};
    }
  }
  return std::unique_ptr<Backend>(new NcclBackend(context, std::move(engine)));
}

void registerNcclBackend() { registerBackend("nccl", {Device::Type::kCuda}, &createNcclBackend); }

}  // namespace loom::comm::nccl
