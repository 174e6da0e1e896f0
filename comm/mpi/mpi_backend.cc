// The mpi backend: communicator set-up, the worker thread that starts and
// polls MPI-3 nonblocking operations, and one method per collective.
#include "comm/mpi/mpi_backend.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
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
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/deadline.h"
#include "comm/errors.h"
#include "comm/mpi/host_staging.h"
#include "comm/mpi/mpi_runtime.h"
#include "mpi.h"

namespace loom::comm::mpi {
namespace {

using mpi::copyFromHost;
using mpi::copyToHost;
using mpi::HostBuffer;
using mpi::MpiLock;
using mpi::mpiStatus;
using mpi::StagedTensor;

// One call on a backend's queue: one nonblocking MPI operation. The closures
// own every buffer MPI touches, so a call abandoned after a timeout keeps
// them alive for as long as MPI might still write into them.
struct Call {
  std::shared_ptr<Work> work;
  Deadline deadline = Deadline::after(absl::ZeroDuration());
  absl::Duration timeout;
  // Point-to-point calls may run beside each other (see Engine::run).
  bool p2p = false;
  // Host-side preparation on the worker thread (staging copies); no MPI.
  std::function<absl::Status()> prepare;
  // Posts the nonblocking MPI operation; runs holding MpiLock and returns
  // MPI's error code.
  std::function<int(MPI_Comm, MPI_Request*)> post;
  // Runs once the request completed: copies results out, divides AVG,
  // checks a receive's size.
  std::function<absl::Status(const MPI_Status&)> finish;
  // A receive: its Work records the sender MPI names (MPI_SOURCE), as
  // c10d's ProcessGroupMPI reports a Work's source rank.
  bool records_source = false;
  MPI_Request request = MPI_REQUEST_NULL;
};

// Hands a started call that will never be polled again to the runtime,
// which keeps its buffers alive and checks its request at exit.
void abandon(Call call) {
  auto kept = std::make_shared<Call>(std::move(call));
  mpi::keepUntilExit(std::shared_ptr<MPI_Request>(kept, &kept->request));
}

// The worker thread of one backend and the state it shares with the
// backend's Works. Calls start in the order they were issued, which is the
// same on every rank: a collective starts once everything before it has
// completed, so later calls see earlier results as on a stream; consecutive
// sends and receives run beside each other, so that a pair of ranks that
// both send before they receive does not deadlock.
class Engine {
 public:
  Engine(MPI_Comm comm, std::string group) : comm_(comm), group_(std::move(group)) {
    thread_ = std::thread([this] { run(); });
  }

  ~Engine() { shutdown(); }

  absl::Status submit(Call call) {
    absl::MutexLock lock(&mu_);
    if (broken_) return brokenError(call.work->info(), *broken_);
    if (stopping_) {
      return backendError(absl::StrCat(call.work->info().describe(), ": backend mpi of group ",
                                       group_, " is shutting down"));
    }
    queue_.push_back(std::move(call));
    return absl::OkStatus();
  }

  // Marks the backend broken: outstanding calls fail with `reason` and later
  // ones are refused. The first reason sticks.
  void breakWith(std::string reason) {
    absl::MutexLock lock(&mu_);
    if (!broken_) broken_ = std::move(reason);
  }

  // Lets every submitted call finish (each is bounded by its deadline), then
  // stops the worker and frees the communicator unless a call was abandoned
  // in it. Safe to call more than once and from several threads.
  void shutdown() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    absl::MutexLock join_lock(&join_mu_);
    if (!thread_.joinable()) return;
    thread_.join();
    bool broken = false;
    {
      absl::MutexLock lock(&mu_);
      broken = broken_.has_value();
    }
    int finalized = 0;
    MPI_Finalized(&finalized);
    // A communicator with abandoned operations cannot be freed safely.
    if (!broken && !finalized) {
      MpiLock mpi_lock;
      MPI_Comm_free(&comm_);
    }
  }

 private:
  absl::Status brokenError(const CollectiveInfo& info, const std::string& reason) const {
    return backendError(absl::StrCat(info.describe(), " failed: backend mpi of group ", group_,
                                     " is broken because ", reason,
                                     "; MPI cannot cancel a started operation, so every later "
                                     "call fails; restart the job"));
  }

  bool wakeUp() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || stopping_ || broken_.has_value();
  }

  void run() {
    std::deque<Call> pending;  // submitted, not started
    std::deque<Call> running;  // started, not complete
    int idle_rounds = 0;
    for (;;) {
      std::optional<std::string> broken;
      {
        absl::MutexLock lock(&mu_);
        if (pending.empty() && running.empty()) {
          if (stopping_ && queue_.empty()) return;
          mu_.Await(absl::Condition(this, &Engine::wakeUp));
        }
        while (!queue_.empty()) {
          pending.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
        broken = broken_;
      }
      if (broken) {
        failAll(pending, running, *broken);
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(&stopping_));
        return;
      }
      bool progressed = startReady(pending, running);
      progressed = pollRunning(running) || progressed;
      checkDeadlines(pending, running);
      // Poll eagerly while calls are in flight, backing off to 1 ms sleeps
      // so that idle ranks leave the cores to busy ones.
      idle_rounds = progressed ? 0 : idle_rounds + 1;
      if (idle_rounds < 64) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(
            std::chrono::microseconds(std::min(1000, 10 << std::min(idle_rounds - 64, 7))));
      }
    }
  }

  bool startReady(std::deque<Call>& pending, std::deque<Call>& running) {
    bool started = false;
    while (!pending.empty()) {
      Call& call = pending.front();
      const bool collective_running =
          std::any_of(running.begin(), running.end(), [](const Call& c) { return !c.p2p; });
      if (call.p2p ? collective_running : !running.empty()) break;
      absl::Status status = call.prepare ? call.prepare() : absl::OkStatus();
      if (status.ok()) {
        MpiLock lock;
        status = mpiStatus(call.post(comm_, &call.request), call.work->info().describe());
      }
      if (!status.ok()) {
        // Broken first, so that a caller woken by the failure sees it.
        breakWith(
            absl::StrCat(call.work->info().describe(), " could not start: ", status.message()));
        call.work->complete(status);
        abandon(std::move(call));  // MPI may hold what it posted
        pending.pop_front();
        return true;
      }
      running.push_back(std::move(call));
      pending.pop_front();
      started = true;
    }
    return started;
  }

  bool pollRunning(std::deque<Call>& running) {
    bool progressed = false;
    for (auto it = running.begin(); it != running.end();) {
      MPI_Status mpi_status;
      int done = 0;
      int code = MPI_SUCCESS;
      {
        MpiLock lock;
        code = MPI_Test(&it->request, &done, &mpi_status);
      }
      const CollectiveInfo& info = it->work->info();
      if (code != MPI_SUCCESS) {
        const absl::Status status = mpiStatus(code, info.describe());
        breakWith(std::string(status.message()));
        it->work->complete(status);
        return true;
      }
      if (!done) {
        ++it;
        continue;
      }
      absl::Status status = it->finish ? it->finish(mpi_status) : absl::OkStatus();
      if (!status.ok()) {
        status = makeError(errorKind(status), status.code(),
                           absl::StrCat(info.describe(), ": ", status.message()));
      }
      if (status.ok() && it->records_source) it->work->setSourceRank(mpi_status.MPI_SOURCE);
      it->work->complete(status);
      it = running.erase(it);
      progressed = true;
    }
    return progressed;
  }

  void checkDeadlines(std::deque<Call>& pending, std::deque<Call>& running) {
    for (std::deque<Call>* calls : {&running, &pending}) {
      for (Call& call : *calls) {
        if (!call.deadline.expired()) continue;
        const CollectiveInfo& info = call.work->info();
        breakWith(absl::StrCat(info.describe(), " timed out"));
        call.work->complete(timeoutError(absl::StrCat(
            info.describe(), " did not complete within ", absl::FormatDuration(call.timeout),
            " on backend mpi; a rank of the group is likely missing, slower, or called a "
            "different collective. MPI cannot cancel a started operation, so this backend is "
            "now broken and later calls fail at once; restart the job")));
        return;
      }
    }
  }

  void failAll(std::deque<Call>& pending, std::deque<Call>& running, const std::string& reason) {
    for (std::deque<Call>* calls : {&running, &pending}) {
      for (Call& call : *calls) call.work->complete(brokenError(call.work->info(), reason));
    }
    // Started calls may still be read or written by MPI: keep their buffers.
    for (Call& call : running) abandon(std::move(call));
    running.clear();
    pending.clear();
  }

  MPI_Comm comm_;
  const std::string group_;
  absl::Mutex mu_;
  std::deque<Call> queue_ ABSL_GUARDED_BY(mu_);
  std::optional<std::string> broken_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex join_mu_;
  std::thread thread_ ABSL_GUARDED_BY(join_mu_);
};

// A Work whose caller gave up (a wait() timeout or abort()) breaks the
// backend: the MPI operation cannot be cancelled, and skipping a queued one
// would leave this rank out of step with the others.
class MpiWork : public Work {
 public:
  MpiWork(CollectiveInfo info, absl::Duration timeout, std::weak_ptr<Engine> engine)
      : Work(std::move(info), timeout), engine_(std::move(engine)) {}

 protected:
  void abortEngine() override {
    if (std::shared_ptr<Engine> engine = engine_.lock()) {
      engine->breakWith(std::string(exception().message()));
    }
  }

 private:
  std::weak_ptr<Engine> engine_;
};

absl::StatusOr<int> mpiCount(int64_t numel, const CollectiveInfo& info) {
  if (numel > INT_MAX) {
    return invalidArgumentError(absl::StrCat(
        info.describe(), " moves ", numel,
        " elements, more than the 2^31-1 one MPI call can (MPI-3 counts are int); split the "
        "tensor into smaller calls"));
  }
  return static_cast<int>(numel);
}

bool overlaps(const Tensor& a, const Tensor& b) {
  const char* a_begin = static_cast<const char*>(a.data());
  const char* b_begin = static_cast<const char*>(b.data());
  return a.nbytes() > 0 && b.nbytes() > 0 && a_begin < b_begin + b.nbytes() &&
         b_begin < a_begin + a.nbytes();
}

bool anyCuda(const std::vector<Tensor>& tensors) {
  return std::any_of(tensors.begin(), tensors.end(),
                     [](const Tensor& t) { return t.device().isCuda(); });
}

// The packed buffer of gather's outputs or scatter's inputs: allocated on
// the root only (null elsewhere), pinned when any of `tensors` is on a GPU.
absl::StatusOr<std::shared_ptr<HostBuffer>> rootBuffer(bool root, size_t bytes,
                                                       const std::vector<Tensor>& tensors) {
  if (!root) return std::shared_ptr<HostBuffer>();
  absl::StatusOr<std::unique_ptr<HostBuffer>> packed =
      HostBuffer::allocate(bytes, anyCuda(tensors));
  if (!packed.ok()) return packed.status();
  return std::shared_ptr<HostBuffer>(std::move(*packed));
}

// Stable across processes and builds (std::hash is neither guaranteed).
uint32_t fnv1a(const std::string& text) {
  uint32_t hash = 2166136261u;
  for (unsigned char c : text) hash = (hash ^ c) * 16777619u;
  return hash;
}

class MpiBackend final : public Backend {
 public:
  MpiBackend(const BackendContext& context, MPI_Comm comm, const mpi::MpiProcess& process)
      : Backend(context),
        timeout_(context.timeout),
        cuda_aware_(process.cuda_aware),
        tag_upper_bound_(process.tag_upper_bound),
        engine_(std::make_shared<Engine>(comm, context.group_name)) {
    Engine* engine = engine_.get();
    mpi::addExitHook(engine, [engine] {
      engine->breakWith("the process exited with the call outstanding");
      engine->shutdown();
    });
  }

  ~MpiBackend() override {
    mpi::removeExitHook(engine_.get());
    engine_->shutdown();
  }

  std::string_view name() const override { return "mpi"; }

  WorkOr broadcast(Tensor tensor, const BroadcastOptions& options,
                   const CollectiveInfo& info) override {
    absl::StatusOr<int> count = mpiCount(tensor.numel(), info);
    if (!count.ok()) return count.status();
    absl::StatusOr<StagedTensor> data = StagedTensor::of(tensor, direct(tensor));
    if (!data.ok()) return data.status();
    const bool root = options.root == rank();
    const MPI_Datatype type = mpi::mpiDatatype(tensor.dtype());
    Call call;
    call.prepare = [data = *data, root] { return root ? data.copyIn() : absl::OkStatus(); };
    call.post = [data = *data, count = *count, type, root = options.root](MPI_Comm comm,
                                                                          MPI_Request* request) {
      return MPI_Ibcast(data.data(), count, type, root, comm, request);
    };
    call.finish = [data = *data, root](const MPI_Status&) {
      return root ? absl::OkStatus() : data.copyOut();
    };
    return enqueue(std::move(call), info, options.timeout);
  }

  WorkOr allReduce(Tensor tensor, const AllReduceOptions& options,
                   const CollectiveInfo& info) override {
    absl::StatusOr<MPI_Op> op = mpi::mpiReduceOp(options.op, tensor.dtype());
    if (!op.ok()) return withInfo(op.status(), info);
    absl::StatusOr<int> count = mpiCount(tensor.numel(), info);
    if (!count.ok()) return count.status();
    absl::StatusOr<StagedTensor> data =
        StagedTensor::of(tensor, direct(tensor, mpi::reducesOnHost(options.op, tensor.dtype())));
    if (!data.ok()) return data.status();
    const MPI_Datatype type = mpi::mpiDatatype(tensor.dtype());
    Call call;
    call.prepare = [data = *data] { return data.copyIn(); };
    call.post = [data = *data, count = *count, type, op = *op](MPI_Comm comm,
                                                               MPI_Request* request) {
      return MPI_Iallreduce(MPI_IN_PLACE, data.data(), count, type, op, comm, request);
    };
    call.finish = [this, data = *data, tensor, reduce_op = options.op](const MPI_Status&) {
      averageIfAvg(reduce_op, data.data(), tensor);
      return data.copyOut();
    };
    return enqueue(std::move(call), info, options.timeout);
  }

  WorkOr reduce(Tensor tensor, const ReduceOptions& options, const CollectiveInfo& info) override {
    absl::StatusOr<MPI_Op> op = mpi::mpiReduceOp(options.op, tensor.dtype());
    if (!op.ok()) return withInfo(op.status(), info);
    absl::StatusOr<int> count = mpiCount(tensor.numel(), info);
    if (!count.ok()) return count.status();
    absl::StatusOr<StagedTensor> data =
        StagedTensor::of(tensor, direct(tensor, mpi::reducesOnHost(options.op, tensor.dtype())));
    if (!data.ok()) return data.status();
    const bool root = options.root == rank();
    const MPI_Datatype type = mpi::mpiDatatype(tensor.dtype());
    Call call;
    call.prepare = [data = *data] { return data.copyIn(); };
    call.post = [data = *data, count = *count, type, op = *op, root, root_rank = options.root](
                    MPI_Comm comm, MPI_Request* request) {
      // Only the root receives; the others' tensors keep their input.
      return MPI_Ireduce(root ? MPI_IN_PLACE : data.data(), root ? data.data() : nullptr, count,
                         type, op, root_rank, comm, request);
    };
    call.finish = [this, data = *data, tensor, root, reduce_op = options.op](const MPI_Status&) {
      if (!root) return absl::OkStatus();
      averageIfAvg(reduce_op, data.data(), tensor);
      return data.copyOut();
    };
    return enqueue(std::move(call), info, options.timeout);
  }

  WorkOr allGather(std::vector<Tensor> outputs, Tensor input, const AllGatherOptions& options,
                   const CollectiveInfo& info) override {
    absl::StatusOr<int> count = mpiCount(input.numel() * size(), info);
    if (!count.ok()) return count.status();
    // The outputs are separate tensors; MPI gathers into one packed buffer.
    absl::StatusOr<std::unique_ptr<HostBuffer>> packed =
        HostBuffer::allocate(input.nbytes() * size(), anyCuda(outputs) || input.device().isCuda());
    if (!packed.ok()) return packed.status();
    std::shared_ptr<HostBuffer> buffer = std::move(*packed);
    const MPI_Datatype type = mpi::mpiDatatype(input.dtype());
    Call call;
    call.prepare = [buffer, input, offset = input.nbytes() * rank()] {
      return copyToHost(input, buffer->data() + offset);
    };
    call.post = [buffer, count = static_cast<int>(input.numel()), type](MPI_Comm comm,
                                                                        MPI_Request* request) {
      return MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer->data(), count, type, comm,
                            request);
    };
    call.finish = [buffer, outputs, bytes = input.nbytes()](const MPI_Status&) {
      return unpack(*buffer, outputs, bytes);
    };
    return enqueue(std::move(call), info, options.timeout);
  }

  WorkOr allGatherIntoTensor(Tensor output, Tensor input, const AllGatherOptions& options,
                             const CollectiveInfo& info) override {
    absl::StatusOr<int> total = mpiCount(output.numel(), info);
    if (!total.ok()) return total.status();
    const bool in_place =
        input.data() == static_cast<char*>(output.data()) + input.nbytes() * rank();
    absl::StatusOr<StagedTensor> out = StagedTensor::of(output, direct(output));
    if (!out.ok()) return out.status();
    // Staged, the input is copied into its slot and gathered in place;
    // otherwise MPI reads the input (same device type) where it is.
    const bool use_in_place = in_place || out->staged();
    const MPI_Datatype type = mpi::mpiDatatype(input.dtype());
    Call call;
    call.prepare = [out = *out, input, offset = input.nbytes() * rank()] {
      return out.staged() ? copyToHost(input, static_cast<char*>(out.data()) + offset)
                          : absl::OkStatus();
    };
    call.post = [out = *out, input, count = static_cast<int>(input.numel()), type, use_in_place](
                    MPI_Comm comm, MPI_Request* request) {
      if (use_in_place) {
        return MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out.data(), count, type, comm,
                              request);
      }
      return MPI_Iallgather(input.data(), count, type, out.data(), count, type, comm, request);
    };
    call.finish = [out = *out](const MPI_Status&) { return out.copyOut(); };
    return enqueue(std::move(call), info, options.timeout);
  }

  WorkOr gather(std::vector<Tensor> outputs, Tensor input, const GatherOptions& options,
                const CollectiveInfo& info) override {
    absl::StatusOr<int> count = mpiCount(input.numel() * size(), info);
    if (!count.ok()) return count.status();
    absl::StatusOr<std::shared_ptr<HostBuffer>> packed =
        rootBuffer(options.root == rank(), input.nbytes() * size(), outputs);
    if (!packed.ok()) return packed.status();
    std::shared_ptr<HostBuffer> buffer = *std::move(packed);
    absl::StatusOr<StagedTensor> in = StagedTensor::of(input, direct(input));
    if (!in.ok()) return in.status();
    const MPI_Datatype type = mpi::mpiDatatype(input.dtype());
    Call call;
    call.prepare = [in = *in] { return in.copyIn(); };
    call.post = [in = *in, buffer, count = static_cast<int>(input.numel()), type,
                 root_rank = options.root](MPI_Comm comm, MPI_Request* request) {
      return MPI_Igather(in.data(), count, type, buffer ? buffer->data() : nullptr, count, type,
                         root_rank, comm, request);
    };
    call.finish = [buffer, outputs, bytes = input.nbytes()](const MPI_Status&) {
      return buffer ? unpack(*buffer, outputs, bytes) : absl::OkStatus();
    };
    return enqueue(std::move(call), info, options.timeout);
  }

  WorkOr scatter(Tensor output, std::vector<Tensor> inputs, const ScatterOptions& options,
                 const CollectiveInfo& info) override {
    absl::StatusOr<int> count = mpiCount(output.numel() * size(), info);
    if (!count.ok()) return count.status();
    absl::StatusOr<std::shared_ptr<HostBuffer>> packed =
        rootBuffer(options.root == rank(), output.nbytes() * size(), inputs);
    if (!packed.ok()) return packed.status();
    std::shared_ptr<HostBuffer> buffer = *std::move(packed);
    absl::StatusOr<StagedTensor> out = StagedTensor::of(output, direct(output));
    if (!out.ok()) return out.status();
    const MPI_Datatype type = mpi::mpiDatatype(output.dtype());
    Call call;
    call.prepare = [buffer, inputs, bytes = output.nbytes()] {
      return buffer ? pack(inputs, bytes, *buffer) : absl::OkStatus();
    };
    call.post = [out = *out, buffer, count = static_cast<int>(output.numel()), type,
                 root_rank = options.root](MPI_Comm comm, MPI_Request* request) {
      return MPI_Iscatter(buffer ? buffer->data() : nullptr, count, type, out.data(), count, type,
                          root_rank, comm, request);
    };
    call.finish = [out = *out](const MPI_Status&) { return out.copyOut(); };
    return enqueue(std::move(call), info, options.timeout);
  }

  WorkOr reduceScatter(Tensor output, std::vector<Tensor> inputs,
                       const ReduceScatterOptions& options, const CollectiveInfo& info) override {
    absl::StatusOr<MPI_Op> op = mpi::mpiReduceOp(options.op, output.dtype());
    if (!op.ok()) return withInfo(op.status(), info);
    absl::StatusOr<int> count = mpiCount(output.numel() * size(), info);
    if (!count.ok()) return count.status();
    absl::StatusOr<std::unique_ptr<HostBuffer>> packed =
        HostBuffer::allocate(output.nbytes() * size(), anyCuda(inputs));
    if (!packed.ok()) return packed.status();
    std::shared_ptr<HostBuffer> buffer = std::move(*packed);
    absl::StatusOr<StagedTensor> out =
        StagedTensor::of(output, direct(output, mpi::reducesOnHost(options.op, output.dtype())));
    if (!out.ok()) return out.status();
    const MPI_Datatype type = mpi::mpiDatatype(output.dtype());
    Call call;
    call.prepare = [buffer, inputs, bytes = output.nbytes()] {
      return pack(inputs, bytes, *buffer);
    };
    call.post = [out = *out, buffer, count = static_cast<int>(output.numel()), type, op = *op](
                    MPI_Comm comm, MPI_Request* request) {
      return MPI_Ireduce_scatter_block(buffer->data(), out.data(), count, type, op, comm, request);
    };
    call.finish = [this, out = *out, output, reduce_op = options.op](const MPI_Status&) {
      averageIfAvg(reduce_op, out.data(), output);
      return out.copyOut();
    };
    return enqueue(std::move(call), info, options.timeout);
  }

  WorkOr reduceScatterTensor(Tensor output, Tensor input, const ReduceScatterOptions& options,
                             const CollectiveInfo& info) override {
    absl::StatusOr<MPI_Op> op = mpi::mpiReduceOp(options.op, output.dtype());
    if (!op.ok()) return withInfo(op.status(), info);
    absl::StatusOr<int> count = mpiCount(input.numel(), info);
    if (!count.ok()) return count.status();
    const bool on_host = mpi::reducesOnHost(options.op, output.dtype());
    absl::StatusOr<StagedTensor> in = StagedTensor::of(input, direct(input, on_host));
    if (!in.ok()) return in.status();
    // MPI forbids overlapping buffers; an output inside the input (the
    // in-place form) receives through a copy.
    absl::StatusOr<StagedTensor> out =
        StagedTensor::of(output, direct(output, on_host) && !overlaps(input, output));
    if (!out.ok()) return out.status();
    const MPI_Datatype type = mpi::mpiDatatype(output.dtype());
    Call call;
    call.prepare = [in = *in] { return in.copyIn(); };
    call.post = [in = *in, out = *out, count = static_cast<int>(output.numel()), type, op = *op](
                    MPI_Comm comm, MPI_Request* request) {
      return MPI_Ireduce_scatter_block(in.data(), out.data(), count, type, op, comm, request);
    };
    call.finish = [this, out = *out, output, reduce_op = options.op](const MPI_Status&) {
      averageIfAvg(reduce_op, out.data(), output);
      return out.copyOut();
    };
    return enqueue(std::move(call), info, options.timeout);
  }

  WorkOr allToAll(std::vector<Tensor> outputs, std::vector<Tensor> inputs,
                  const AllToAllOptions& options, const CollectiveInfo& info) override {
    std::vector<int64_t> send_counts, recv_counts;
    for (const Tensor& t : inputs) send_counts.push_back(t.numel());
    for (const Tensor& t : outputs) recv_counts.push_back(t.numel());
    absl::StatusOr<Layout> layout = makeLayout(send_counts, recv_counts, info);
    if (!layout.ok()) return layout.status();
    const DType dtype = inputs.empty() ? DType::kFloat32 : inputs[0].dtype();
    const size_t element = dtypeSize(dtype);
    absl::StatusOr<std::unique_ptr<HostBuffer>> send =
        HostBuffer::allocate(static_cast<size_t>(layout->send_total) * element, anyCuda(inputs));
    if (!send.ok()) return send.status();
    absl::StatusOr<std::unique_ptr<HostBuffer>> recv =
        HostBuffer::allocate(static_cast<size_t>(layout->recv_total) * element, anyCuda(outputs));
    if (!recv.ok()) return recv.status();
    std::shared_ptr<HostBuffer> send_buffer = std::move(*send);
    std::shared_ptr<HostBuffer> recv_buffer = std::move(*recv);
    const MPI_Datatype type = mpi::mpiDatatype(dtype);
    Call call;
    call.prepare = [send_buffer, inputs] {
      size_t offset = 0;
      for (const Tensor& t : inputs) {
        if (absl::Status status = copyToHost(t, send_buffer->data() + offset); !status.ok()) {
          return status;
        }
        offset += t.nbytes();
      }
      return absl::OkStatus();
    };
    call.post = [send_buffer, recv_buffer, layout = *layout, type](MPI_Comm comm,
                                                                   MPI_Request* request) {
      return MPI_Ialltoallv(send_buffer->data(), layout.send_counts.data(),
                            layout.send_displs.data(), type, recv_buffer->data(),
                            layout.recv_counts.data(), layout.recv_displs.data(), type, comm,
                            request);
    };
    call.finish = [recv_buffer, outputs](const MPI_Status&) {
      size_t offset = 0;
      for (const Tensor& t : outputs) {
        if (absl::Status status = copyFromHost(recv_buffer->data() + offset, t); !status.ok()) {
          return status;
        }
        offset += t.nbytes();
      }
      return absl::OkStatus();
    };
    return enqueue(std::move(call), info, options.timeout);
  }

  WorkOr allToAllSingle(Tensor output, Tensor input, std::vector<int64_t> output_splits,
                        std::vector<int64_t> input_splits, const AllToAllOptions& options,
                        const CollectiveInfo& info) override {
    const int64_t input_row = rowElements(input);
    const int64_t output_row = rowElements(output);
    std::vector<int64_t> send_counts, recv_counts;
    for (int64_t rows : input_splits) send_counts.push_back(rows * input_row);
    for (int64_t rows : output_splits) recv_counts.push_back(rows * output_row);
    absl::StatusOr<Layout> layout = makeLayout(send_counts, recv_counts, info);
    if (!layout.ok()) return layout.status();
    absl::StatusOr<StagedTensor> in = StagedTensor::of(input, direct(input));
    if (!in.ok()) return in.status();
    absl::StatusOr<StagedTensor> out =
        StagedTensor::of(output, direct(output) && !overlaps(input, output));
    if (!out.ok()) return out.status();
    const MPI_Datatype type = mpi::mpiDatatype(input.dtype());
    Call call;
    call.prepare = [in = *in] { return in.copyIn(); };
    call.post = [in = *in, out = *out, layout = *layout, type](MPI_Comm comm,
                                                               MPI_Request* request) {
      return MPI_Ialltoallv(in.data(), layout.send_counts.data(), layout.send_displs.data(), type,
                            out.data(), layout.recv_counts.data(), layout.recv_displs.data(), type,
                            comm, request);
    };
    call.finish = [out = *out](const MPI_Status&) { return out.copyOut(); };
    return enqueue(std::move(call), info, options.timeout);
  }

  WorkOr barrier(const BarrierOptions& options, const CollectiveInfo& info) override {
    Call call;
    call.post = [](MPI_Comm comm, MPI_Request* request) { return MPI_Ibarrier(comm, request); };
    return enqueue(std::move(call), info, options.timeout);
  }

  WorkOr send(Tensor tensor, int dst, const P2POptions& options,
              const CollectiveInfo& info) override {
    if (absl::Status status = checkTag(options.tag, info); !status.ok()) return status;
    absl::StatusOr<int> count = mpiCount(tensor.numel(), info);
    if (!count.ok()) return count.status();
    absl::StatusOr<StagedTensor> data = StagedTensor::of(tensor, direct(tensor));
    if (!data.ok()) return data.status();
    const MPI_Datatype type = mpi::mpiDatatype(tensor.dtype());
    Call call;
    call.p2p = true;
    call.prepare = [data = *data] { return data.copyIn(); };
    call.post = [data = *data, count = *count, type, dst, tag = options.tag](MPI_Comm comm,
                                                                             MPI_Request* request) {
      return MPI_Isend(data.data(), count, type, dst, tag, comm, request);
    };
    return enqueue(std::move(call), info, options.timeout);
  }

  WorkOr recv(Tensor tensor, int src, const P2POptions& options,
              const CollectiveInfo& info) override {
    return receive(tensor, src, options, info);
  }

  // MPI_ANY_SOURCE, as PyTorch's ProcessGroupMPI::recvAnysource: the first
  // message with this tag from any rank of the group's communicator.
  WorkOr recvAnySource(Tensor tensor, const P2POptions& options,
                       const CollectiveInfo& info) override {
    return receive(tensor, MPI_ANY_SOURCE, options, info);
  }

  void abort() override {
    engine_->breakWith("abort() was called");
    // MPI cannot cancel a started operation, so the only way to release the
    // other ranks is to end the job, as PyTorch's ProcessGroupMPI does.
    std::fprintf(stderr,
                 "loom: backend mpi of group %s (rank %d of %d): abort() called; ending the MPI "
                 "job with MPI_Abort, since MPI cannot cancel collectives\n",
                 groupName().c_str(), rank(), size());
    std::fflush(stderr);
    MpiLock lock;
    // Open MPI ends every process of the job whichever communicator is
    // named, and 4.1 garbles its report for a duplicated one.
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

 private:
  // Counts and displacements of one MPI_Ialltoallv, in elements.
  struct Layout {
    std::vector<int> send_counts, send_displs, recv_counts, recv_displs;
    int64_t send_total = 0, recv_total = 0;
  };

  static absl::StatusOr<Layout> makeLayout(const std::vector<int64_t>& send_counts,
                                           const std::vector<int64_t>& recv_counts,
                                           const CollectiveInfo& info) {
    Layout layout;
    for (int64_t count : send_counts) {
      layout.send_counts.push_back(static_cast<int>(count));
      layout.send_displs.push_back(static_cast<int>(layout.send_total));
      layout.send_total += count;
    }
    for (int64_t count : recv_counts) {
      layout.recv_counts.push_back(static_cast<int>(count));
      layout.recv_displs.push_back(static_cast<int>(layout.recv_total));
      layout.recv_total += count;
    }
    if (absl::StatusOr<int> total = mpiCount(std::max(layout.send_total, layout.recv_total), info);
        !total.ok()) {
      return total.status();
    }
    return layout;
  }

  static int64_t rowElements(const Tensor& tensor) {
    if (tensor.shape().empty() || tensor.shape()[0] == 0) return 1;
    return tensor.numel() / tensor.shape()[0];
  }

  static absl::Status pack(const std::vector<Tensor>& inputs, size_t bytes, HostBuffer& buffer) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (absl::Status status = copyToHost(inputs[i], buffer.data() + i * bytes); !status.ok()) {
        return status;
      }
    }
    return absl::OkStatus();
  }

  static absl::Status unpack(const HostBuffer& buffer, const std::vector<Tensor>& outputs,
                             size_t bytes) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (absl::Status status = copyFromHost(buffer.data() + i * bytes, outputs[i]); !status.ok()) {
        return status;
      }
    }
    return absl::OkStatus();
  }

  static absl::Status withInfo(const absl::Status& status, const CollectiveInfo& info) {
    return makeError(errorKind(status), status.code(),
                     absl::StrCat(info.describe(), " on backend mpi: ", status.message()));
  }

  // Whether MPI may use `tensor`'s memory itself: CPU memory always, CUDA
  // memory when MPI is CUDA-aware and no host code computes on it.
  bool direct(const Tensor& tensor, bool computes_on_host = false) const {
    return !tensor.device().isCuda() || (cuda_aware_ && !computes_on_host);
  }

  void averageIfAvg(ReduceOp op, void* data, const Tensor& tensor) const {
    if (op == ReduceOp::kAvg) mpi::divideBySize(data, tensor.dtype(), tensor.numel(), size());
  }

  absl::Status checkTag(int tag, const CollectiveInfo& info) const {
    if (tag >= 0 && tag <= tag_upper_bound_) return absl::OkStatus();
    return invalidArgumentError(absl::StrCat(info.describe(), ": tag ", tag,
                                             " is outside MPI's range [0, ", tag_upper_bound_,
                                             "]; pick a tag in that range"));
  }

  // A receive from `src`, or from whichever rank sends first when it is
  // MPI_ANY_SOURCE; either way the Work names the sender.
  WorkOr receive(const Tensor& tensor, int src, const P2POptions& options,
                 const CollectiveInfo& info) {
    if (absl::Status status = checkTag(options.tag, info); !status.ok()) return status;
    absl::StatusOr<int> count = mpiCount(tensor.numel(), info);
    if (!count.ok()) return count.status();
    absl::StatusOr<StagedTensor> data = StagedTensor::of(tensor, direct(tensor));
    if (!data.ok()) return data.status();
    const MPI_Datatype type = mpi::mpiDatatype(tensor.dtype());
    Call call;
    call.p2p = true;
    call.records_source = true;
    call.post = [data = *data, count = *count, type, src, tag = options.tag](MPI_Comm comm,
                                                                             MPI_Request* request) {
      return MPI_Irecv(data.data(), count, type, src, tag, comm, request);
    };
    call.finish = [data = *data, count = *count, type](const MPI_Status& status) {
      int received = 0;
      {
        MpiLock lock;
        MPI_Get_count(&status, type, &received);
      }
      if (received != count) {
        return invalidArgumentError(absl::StrCat(
            "received ", received, " elements from rank ", status.MPI_SOURCE, " but expected ",
            count, "; the sender's tensor must have as many elements"));
      }
      return data.copyOut();
    };
    return enqueue(std::move(call), info, options.timeout);
  }

  WorkOr enqueue(Call call, const CollectiveInfo& info, std::optional<absl::Duration> timeout) {
    call.timeout = timeout.value_or(timeout_);
    call.deadline = Deadline::after(call.timeout);
    auto work = std::make_shared<MpiWork>(info, call.timeout, engine_);
    call.work = work;
    if (absl::Status status = engine_->submit(std::move(call)); !status.ok()) return status;
    return std::shared_ptr<Work>(work);
  }

  const absl::Duration timeout_;
  const bool cuda_aware_;
  const int tag_upper_bound_;
  std::shared_ptr<Engine> engine_;
};

std::string describeGroup(const BackendContext& context) {
  return absl::StrCat("backend mpi of group ", context.group_name, " (rank ", context.rank, " of ",
                      context.size, ")");
}

// Checks that the launcher's view of this process (the context) is MPI's.
absl::Status checkRanks(const BackendContext& context, const std::vector<int>& global_ranks,
                        const mpi::MpiProcess& process) {
  const std::string group = describeGroup(context);
  if (context.size < 1 || static_cast<int>(global_ranks.size()) != context.size ||
      context.rank < 0 || context.rank >= context.size) {
    return invalidArgumentError(absl::StrCat(
        group, ": the context has ", global_ranks.size(), " global ranks for a group of size ",
        context.size, " and rank ", context.rank, "; pass one global rank per group rank"));
  }
  std::set<int> seen;
  for (int global : global_ranks) {
    if (global < 0 || global >= process.world_size) {
      return makeError(
          ErrorKind::kBackend, absl::StatusCode::kFailedPrecondition,
          absl::StrCat(group, ": global rank ", global, " is outside the MPI world of ",
                       process.world_size,
                       " processes; launch the job with mpirun -np <world size> so that the "
                       "launcher's ranks are MPI's ranks"));
    }
    if (!seen.insert(global).second) {
      return invalidArgumentError(absl::StrCat(group, ": global rank ", global,
                                               " appears twice in [",
                                               absl::StrJoin(global_ranks, ", "), "]"));
    }
  }
  if (global_ranks[context.rank] != process.world_rank) {
    return makeError(
        ErrorKind::kBackend, absl::StatusCode::kFailedPrecondition,
        absl::StrCat(group, ": the launcher says this process is world rank ",
                     global_ranks[context.rank], " but MPI says it is world rank ",
                     process.world_rank, " of ", process.world_size,
                     "; the job must be launched with mpirun and take its ranks from MPI (e.g. "
                     "RANK=$OMPI_COMM_WORLD_RANK)"));
  }
  return absl::OkStatus();
}

// Waits, through the store, until every member has come to create the
// backend, so that a missing member is named instead of hanging MPI's
// communicator creation.
absl::Status awaitMembers(const BackendContext& context, const std::vector<int>& global_ranks) {
  Store& store = *context.store;
  if (absl::Status status = store.setString(absl::StrCat("mpi_member/", context.rank), "1");
      !status.ok()) {
    return status;
  }
  std::vector<std::string> keys;
  for (int r = 0; r < context.size; ++r) keys.push_back(absl::StrCat("mpi_member/", r));
  const absl::Status waited = store.wait(keys, context.timeout);
  if (waited.ok() || errorKind(waited) != ErrorKind::kTimeout) return waited;
  std::vector<std::string> missing;
  for (int r = 0; r < context.size; ++r) {
    absl::StatusOr<bool> present = store.check({keys[r]});
    if (present.ok() && !*present) {
      missing.push_back(absl::StrCat(r, " (world rank ", global_ranks[r], ")"));
    }
  }
  return timeoutError(absl::StrCat(
      describeGroup(context), ": group ranks ", absl::StrJoin(missing, ", "),
      " did not create their mpi backend within ", absl::FormatDuration(context.timeout),
      "; start every rank, and create groups in the same order on every rank"));
}

// The group's own communicator: a duplicate of MPI_COMM_WORLD for the whole
// world in order (so that its calls never mix with another group's or the
// program's), else one made over the members only.
absl::StatusOr<MPI_Comm> createCommunicator(const BackendContext& context,
                                            const std::vector<int>& global_ranks,
                                            const mpi::MpiProcess& process) {
  // Creation is collective; one at a time per process keeps the order of
  // creations the same on every rank.
  static absl::Mutex* const kCreationMu = new absl::Mutex();
  absl::MutexLock creation_lock(kCreationMu);
  bool whole_world = context.size == process.world_size;
  for (int r = 0; whole_world && r < context.size; ++r) whole_world = global_ranks[r] == r;
  MPI_Comm comm = MPI_COMM_NULL;
  const std::string what = absl::StrCat(describeGroup(context), ": creating its communicator");
  if (whole_world) {
    // Nonblocking, so that a missing rank turns into a timeout.
    MPI_Request request = MPI_REQUEST_NULL;
    {
      MpiLock lock;
      if (absl::Status status = mpiStatus(MPI_Comm_idup(MPI_COMM_WORLD, &comm, &request), what);
          !status.ok()) {
        return status;
      }
    }
    const Deadline deadline = Deadline::after(context.timeout);
    for (int done = 0; !done;) {
      {
        MpiLock lock;
        if (absl::Status status = mpiStatus(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
            !status.ok()) {
          return status;
        }
      }
      if (done) break;
      if (deadline.expired()) {
        return timeoutError(
            absl::StrCat(what, " (MPI_Comm_idup of MPI_COMM_WORLD) took longer than ",
                         absl::FormatDuration(context.timeout),
                         "; some rank did not create its backend; start every rank"));
      }
      absl::SleepFor(absl::Microseconds(200));
    }
  } else {
    MpiLock lock;
    MPI_Group world_group = MPI_GROUP_NULL;
    MPI_Group group = MPI_GROUP_NULL;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    MPI_Group_incl(world_group, context.size, global_ranks.data(), &group);
    // Groups are created in the same order everywhere; the tag keeps two
    // concurrent creations over overlapping ranks apart.
    const int tag = static_cast<int>(fnv1a(context.group_name) % 32768);
    const int code = MPI_Comm_create_group(MPI_COMM_WORLD, group, tag, &comm);
    MPI_Group_free(&group);
    MPI_Group_free(&world_group);
    if (absl::Status status = mpiStatus(code, what); !status.ok()) return status;
  }
  MpiLock lock;
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int comm_rank = -1;
  MPI_Comm_rank(comm, &comm_rank);
  if (comm_rank != context.rank) {
    return backendError(absl::StrCat(what, ": MPI placed this process at rank ", comm_rank,
                                     " instead of ", context.rank));
  }
  return comm;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> createMpiBackend(const BackendContext& context) {
  absl::StatusOr<mpi::MpiProcess> process = mpi::mpiProcess();
  if (!process.ok()) return process.status();
  std::vector<int> global_ranks = context.global_ranks;
  if (global_ranks.empty()) {
    for (int r = 0; r < context.size; ++r) global_ranks.push_back(r);
  }
  if (absl::Status status = checkRanks(context, global_ranks, *process); !status.ok()) {
    return status;
  }
  if (context.store != nullptr) {
    if (absl::Status status = awaitMembers(context, global_ranks); !status.ok()) return status;
  }
  absl::StatusOr<MPI_Comm> comm = createCommunicator(context, global_ranks, *process);
  if (!comm.ok()) return comm.status();
  return std::unique_ptr<Backend>(new MpiBackend(context, *comm, *process));
}

absl::StatusOr<bool> mpiIsCudaAware() {
  absl::StatusOr<mpi::MpiProcess> process = mpi::mpiProcess();
  if (!process.ok()) return process.status();
  return process->cuda_aware;
}

void registerMpiBackend() {
  registerBackend("mpi", {Device::Type::kCpu, Device::Type::kCuda}, &createMpiBackend);
}

}  // namespace loom::comm::mpi
