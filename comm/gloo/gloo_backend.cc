// The Gloo backend: a Gloo context per group, a worker thread that runs
// collectives in issue order, and a small pool that waits on point-to-point
// transfers.
#include "comm/gloo/gloo_backend.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "comm/errors.h"
#include "comm/gloo/direct_all_reduce.h"
#include "comm/gloo/gloo_reduce.h"
#include "comm/gloo/gloo_store.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/alltoall.h"
#include "gloo/alltoallv.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/common/error.h"
#include "gloo/gather.h"
#include "gloo/reduce.h"
#include "gloo/rendezvous/context.h"
#include "gloo/scatter.h"
#include "gloo/transport/tcp/address.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"
#include "gloo/types.h"

namespace loom::comm::gloo {
namespace {

// c10d's slot prefix for send/recv: apart from every prefix Gloo's own
// collectives use, so a user tag can never meet a collective's slot.
constexpr uint8_t kSendRecvSlotPrefix = 0x80;
// Threads that wait on point-to-point transfers. The transfers are posted
// when issued, so waiting on more of them than this in order only delays
// completions; it cannot deadlock.
constexpr size_t kMaxP2PWaiters = 16;

// Gloo adds timeouts to now(); keep the sum in range.
std::chrono::milliseconds toChrono(absl::Duration timeout) {
  const absl::Duration capped = std::min(timeout, absl::Hours(24 * 365));
  return std::chrono::milliseconds(std::max<int64_t>(1, absl::ToInt64Milliseconds(capped)));
}

absl::Status withContext(const absl::Status& status, const std::string& prefix) {
  return makeError(errorKind(status), status.code(), absl::StrCat(prefix, status.message()));
}

// Which group rank owns each socket address of this rank's connections.
// Gloo's transport errors name a peer only by the address of its end of
// the socket ("Read error [10.0.0.7]:41234: ..."). Once the mesh is
// connected every rank publishes the local address of each of its
// connections, so a failure can be mapped back to the peer's rank.
using PeerAddresses = std::map<std::string, int>;

// The rank whose socket address appears in a Gloo message, if any.
std::optional<int> peerNamedIn(const PeerAddresses& peers, std::string_view what) {
  for (size_t open = what.find('['); open != std::string_view::npos;
       open = what.find('[', open + 1)) {
    const size_t close = what.find("]:", open);
    if (close == std::string_view::npos) break;
    size_t end = close + 2;
    while (end < what.size() && absl::ascii_isdigit(static_cast<unsigned char>(what[end]))) ++end;
    auto found = peers.find(std::string(what.substr(open, end - open)));
    if (found != peers.end()) return found->second;
  }
  return std::nullopt;
}

// A Gloo exception as the error of the call it interrupted. Gloo reports
// timeouts and lost connections as IoException, naming the peer only by
// socket address; send/recv know their peer, collectives look it up.
absl::Status engineError(const CollectiveInfo& info, const std::string& what, bool io,
                         const PeerAddresses& peers) {
  std::optional<int> named = info.peer >= 0 ? std::optional<int>(info.peer) : std::nullopt;
  if (!named) named = peerNamedIn(peers, what);
  const std::string peer = named ? absl::StrCat("peer rank ", *named) : std::string("a peer");
  if (io && absl::StrContains(what, "Timed out")) {
    return timeoutError(absl::StrCat(info.describe(), " timed out in gloo: ", what, "; ", peer,
                                     " did not take part in time (is it alive and making the "
                                     "same calls in the same order?), or raise the timeout"));
  }
  if (io) {
    return networkError(absl::StrCat(info.describe(), " lost its connection to ", peer, ": ", what,
                                     "; a peer process probably exited or was killed"));
  }
  return backendError(absl::StrCat(info.describe(), " failed in gloo: ", what));
}

// The IP of an IPv4 or IPv6 socket address as text, and its port.
std::optional<std::pair<std::string, int>> ipAndPort(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    if (inet_ntop(AF_INET, &v4.sin_addr, text, sizeof(text)) == nullptr) return std::nullopt;
    return std::make_pair(std::string(text), static_cast<int>(ntohs(v4.sin_port)));
  }
  if (address.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
    if (inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof(text)) == nullptr) return std::nullopt;
    return std::make_pair(std::string(text), static_cast<int>(ntohs(v6.sin6_port)));
  }
  return std::nullopt;
}

// The local address a UDP socket would use to reach `host` (no packet is
// sent): the interface a multi-host job's peers can reach us on.
std::optional<std::string> localAddressToward(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || found == nullptr) return std::nullopt;
  std::optional<std::string> result;
  const int fd = socket(found->ai_family, SOCK_DGRAM, 0);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
      if (auto ip = ipAndPort(local)) result = ip->first;
    }
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  return result;
}

// Gloo's TCP transport writes to sockets without MSG_NOSIGNAL, so a peer
// that dies mid-transfer would kill this process with SIGPIPE instead of
// failing the call. PyTorch never sees this because Python ignores SIGPIPE;
// we do the same, unless the program installed a handler of its own.
void ignoreSigpipe() {
  static const bool kIgnored = [] {
    struct sigaction current{};
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
    }
    return true;
  }();
  (void)kIgnored;
}

class Engine;

struct Task {
  std::shared_ptr<Work> work;
  std::function<absl::Status(Engine&)> run;
};

// Runs `task`, turning whatever Gloo throws into a Status. `engine_failed`
// tells a Gloo failure (the context is unusable after it) from an error
// the call itself returned.
absl::Status runGuarded(Task& task, Engine& engine, const PeerAddresses& peers,
                        bool* engine_failed) {
  const CollectiveInfo& info = task.work->info();
  *engine_failed = true;
  try {
    absl::Status status = task.run(engine);
    *engine_failed = false;
    return status;
  } catch (const ::gloo::IoException& e) {
    return engineError(info, e.what(), /*io=*/true, peers);
  } catch (const std::exception& e) {
    return engineError(info, e.what(), /*io=*/false, peers);
  } catch (...) {
    return engineError(info, "unknown exception", /*io=*/false, peers);
  }
}

// The state the backend shares with its Works: the Gloo context, the queues,
// the threads and the caches. Works hold it weakly, so a Work can outlive
// its group.
class Engine {
 public:
  Engine(std::shared_ptr<::gloo::rendezvous::Context> context, PeerAddresses peers)
      : context_(std::move(context)), peers_(std::move(peers)) {}
  ~Engine() { shutdown(); }

  // Starts the worker, once the engine is complete.
  void start() {
    absl::MutexLock lock(&mu_);
    startThreadLocked([](Engine& engine) { engine.workerLoop(); });
  }

  const std::shared_ptr<::gloo::rendezvous::Context>& context() const { return context_; }
  const PeerAddresses& peers() const { return peers_; }
  int rank() const { return context_->rank; }
  int size() const { return context_->size; }

  // OK while the engine runs; after a failure or abort, the error for a
  // call `info` that can no longer run.
  absl::Status usable(const CollectiveInfo& info) {
    absl::MutexLock lock(&mu_);
    return brokenErrorLocked(info);
  }

  // Queues `run` behind the calls issued before it.
  absl::Status enqueue(std::shared_ptr<Work> work, std::function<absl::Status(Engine&)> run) {
    absl::MutexLock lock(&mu_);
    if (absl::Status broken = brokenErrorLocked(work->info()); !broken.ok()) return broken;
    queue_.push_back(Task{std::move(work), std::move(run)});
    return absl::OkStatus();
  }

  // Hands the wait of a posted send/recv to the waiter pool.
  void awaitTransfer(std::shared_ptr<Work> work, std::function<absl::Status(Engine&)> wait) {
    absl::MutexLock lock(&mu_);
    transfers_.push_back(Task{std::move(work), std::move(wait)});
    if (idle_waiters_ < transfers_.size() && waiters_ < kMaxP2PWaiters) {
      ++waiters_;
      startThreadLocked([](Engine& engine) { engine.waiterLoop(); });
    }
  }

  // Stops the engine: queued calls fail, later calls are refused, and the
  // connections close so that peers blocked on this rank fail at once. A
  // call already inside Gloo on this rank ends at its own timeout (Gloo
  // offers no way to interrupt a local wait), and its Work has failed
  // already.
  void abort(const absl::Status& reason) {
    std::deque<Task> dropped;
    bool close = false;
    {
      absl::MutexLock lock(&mu_);
      if (broken_.ok()) broken_ = reason;
      dropped.swap(queue_);
      close = !closed_;
      closed_ = true;
    }
    for (Task& task : dropped) task.work->complete(usable(task.work->info()));
    if (close) context_->closeConnections();
  }

  // Runs what is queued and joins the threads. A call stuck inside Gloo
  // (after an abort, say) holds this up until its own timeout: Gloo offers
  // no way to interrupt it, and its buffers must not go away under it.
  void shutdown() {
    std::vector<std::thread> threads;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      stopping_ = true;
      threads.swap(threads_);
    }
    for (std::thread& thread : threads) thread.join();
  }

  // Worker thread only: a buffer of at least `bytes`, kept between calls so
  // that steady-state calls allocate nothing.
  uint8_t* scratch(size_t bytes) {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    return scratch_.data();
  }

 private:
  void startThreadLocked(void (*loop)(Engine&)) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    threads_.emplace_back([this, loop] { loop(*this); });
  }

  absl::Status brokenErrorLocked(const CollectiveInfo& info) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (broken_.ok()) return absl::OkStatus();
    return makeError(
        ErrorKind::kBackend, absl::StatusCode::kAborted,
        absl::StrCat(info.describe(),
                     " cannot run: the gloo backend of this group "
                     "stopped after an earlier failure (",
                     broken_.message(), "); a Gloo group cannot recover, create a new group"));
  }

  bool hasTask() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stopping_; }
  bool hasTransfer() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !transfers_.empty() || stopping_;
  }

  // Completes `task` with what running it gave; a Gloo failure stops the
  // engine, since Gloo leaves the context unusable after one.
  void finish(Task& task, bool skip) {
    absl::Status status;
    bool engine_failed = false;
    if (!skip) status = runGuarded(task, *this, peers_, &engine_failed);
    if (engine_failed) {
      // A call that fails because an abort closed the connections under it
      // reports the abort, not the symptom Gloo saw.
      absl::Status cause;
      {
        absl::MutexLock lock(&mu_);
        cause = broken_;
      }
      if (!cause.ok()) {
        status = makeError(
            ErrorKind::kBackend, absl::StatusCode::kAborted,
            absl::StrCat(task.work->info().describe(), " was interrupted: ", cause.message()));
      }
      abort(status);
    }
    task.work->complete(status);
  }

  void workerLoop() {
    while (true) {
      Task task;
      absl::Status broken;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &Engine::hasTask));
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
        broken = brokenErrorLocked(task.work->info());
      }
      if (!broken.ok()) {
        task.work->complete(broken);
        continue;
      }
      // A Work that already failed (timed out or aborted) aborted the engine.
      finish(task, /*skip=*/task.work->isCompleted());
    }
  }

  void waiterLoop() {
    while (true) {
      Task task;
      {
        absl::MutexLock lock(&mu_);
        ++idle_waiters_;
        mu_.Await(absl::Condition(this, &Engine::hasTransfer));
        --idle_waiters_;
        if (transfers_.empty()) return;
        task = std::move(transfers_.front());
        transfers_.pop_front();
      }
      finish(task, /*skip=*/false);
    }
  }

  const std::shared_ptr<::gloo::rendezvous::Context> context_;
  const PeerAddresses peers_;
  absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  std::deque<Task> transfers_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  size_t waiters_ ABSL_GUARDED_BY(mu_) = 0;
  size_t idle_waiters_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  // Worker thread only.
  std::vector<uint8_t> scratch_;
};

// A collective's Work: aborting it aborts the engine, since a collective
// that one rank gave up on cannot complete on the others either.
class GlooWork : public Work {
 public:
  GlooWork(const CollectiveInfo& info, absl::Duration timeout, std::weak_ptr<Engine> engine)
      : Work(info, timeout), engine_(std::move(engine)) {}

 protected:
  void abortEngine() override {
    if (std::shared_ptr<Engine> engine = engine_.lock()) engine->abort(exception());
  }

 private:
  std::weak_ptr<Engine> engine_;
};

// A send or receive: aborting it stops waiting on its buffer, as c10d does.
class TransferWork : public Work {
 public:
  TransferWork(const CollectiveInfo& info, absl::Duration timeout,
               std::unique_ptr<::gloo::transport::UnboundBuffer> buffer, bool is_send)
      : Work(info, timeout), buffer_(std::move(buffer)), is_send_(is_send) {}

  ::gloo::transport::UnboundBuffer& buffer() { return *buffer_; }

 protected:
  void abortEngine() override {
    if (is_send_) {
      buffer_->abortWaitSend();
    } else {
      buffer_->abortWaitRecv();
    }
  }

 private:
  const std::unique_ptr<::gloo::transport::UnboundBuffer> buffer_;
  const bool is_send_;
};

// Whether tensors[r] lies right after tensors[r - 1] for every r, so that
// Gloo can use their memory as one buffer.
bool adjacent(const std::vector<Tensor>& tensors) {
  for (size_t r = 1; r < tensors.size(); ++r) {
    if (static_cast<const uint8_t*>(tensors[r].data()) !=
        static_cast<const uint8_t*>(tensors[r - 1].data()) + tensors[r - 1].nbytes()) {
      return false;
    }
  }
  return true;
}

size_t totalBytes(const std::vector<Tensor>& tensors) {
  size_t bytes = 0;
  for (const Tensor& tensor : tensors) bytes += tensor.nbytes();
  return bytes;
}

void pack(const std::vector<Tensor>& tensors, uint8_t* out) {
  for (const Tensor& tensor : tensors) {
    if (tensor.nbytes() > 0) std::memcpy(out, tensor.data(), tensor.nbytes());
    out += tensor.nbytes();
  }
}

void unpack(const uint8_t* in, const std::vector<Tensor>& tensors) {
  for (const Tensor& tensor : tensors) {
    if (tensor.nbytes() > 0) std::memcpy(tensor.data(), in, tensor.nbytes());
    in += tensor.nbytes();
  }
}

// Gloo's collective slots are built from a 32-bit tag; the sequence number
// keeps concurrent calls apart and wraps harmlessly.
uint32_t tagOf(const CollectiveInfo& info) { return static_cast<uint32_t>(info.seq); }

absl::Status finishAvg(ReduceOp op, const Tensor& tensor, int size) {
  if (op != ReduceOp::kAvg) return absl::OkStatus();
  return divideInPlace(tensor.data(), tensor.dtype(), tensor.numel(), size);
}

// Gathers every rank's `input` into `out`, rank order.
void allGatherInto(Engine& engine, uint8_t* out, const Tensor& input, const CollectiveInfo& info,
                   absl::Duration timeout) {
  if (input.nbytes() == 0) return;
  ::gloo::AllgatherOptions opts(engine.context());
  // In place when the caller passed its own slot of the output.
  uint8_t* slot = out + static_cast<size_t>(engine.rank()) * input.nbytes();
  if (input.data() != slot) opts.setInput(static_cast<uint8_t*>(input.data()), input.nbytes());
  opts.setOutput(out, input.nbytes() * static_cast<size_t>(engine.size()));
  opts.setTag(tagOf(info));
  opts.setTimeout(toChrono(timeout));
  ::gloo::allgather(opts);
}

// All-to-all over byte counts per rank.
void allToAllBytes(Engine& engine, uint8_t* out, std::vector<int64_t> out_bytes, uint8_t* in,
                   std::vector<int64_t> in_bytes, const CollectiveInfo& info,
                   absl::Duration timeout) {
  // Gloo wants real pointers even where nothing moves.
  uint8_t dummy = 0;
  if (in == nullptr) in = &dummy;
  if (out == nullptr) out = &dummy;
  const bool even =
      std::all_of(in_bytes.begin(), in_bytes.end(), [&](int64_t b) { return b == in_bytes[0]; }) &&
      std::all_of(out_bytes.begin(), out_bytes.end(), [&](int64_t b) { return b == in_bytes[0]; });
  if (even) {
    if (in_bytes[0] == 0) return;
    ::gloo::AlltoallOptions opts(engine.context());
    opts.setInput(in, static_cast<size_t>(in_bytes[0]) * in_bytes.size());
    opts.setOutput(out, static_cast<size_t>(out_bytes[0]) * out_bytes.size());
    opts.setTag(tagOf(info));
    opts.setTimeout(toChrono(timeout));
    ::gloo::alltoall(opts);
    return;
  }
  ::gloo::AlltoallvOptions opts(engine.context());
  opts.setInput(in, std::move(in_bytes));
  opts.setOutput(out, std::move(out_bytes));
  opts.setTag(tagOf(info));
  opts.setTimeout(toChrono(timeout));
  ::gloo::alltoallv(opts);
}

// The calls: each runs on the worker as a closure over values and the
// engine it is handed, not over the backend.
class GlooBackend : public Backend {
 public:
  GlooBackend(const BackendContext& context,
              std::shared_ptr<::gloo::rendezvous::Context> gloo_context, PeerAddresses peers,
              size_t direct_all_reduce_max_bytes)
      : Backend(context),
        default_timeout_(context.timeout),
        direct_all_reduce_max_bytes_(direct_all_reduce_max_bytes),
        engine_(std::make_shared<Engine>(std::move(gloo_context), std::move(peers))) {
    engine_->start();
  }

  ~GlooBackend() override { engine_->shutdown(); }

  std::string_view name() const override { return "gloo"; }

  WorkOr broadcast(Tensor tensor, const BroadcastOptions& options,
                   const CollectiveInfo& info) override {
    const auto timeout = timeoutOf(options.timeout);
    return submit(info, timeout, [tensor, options, info, timeout](Engine& e) -> absl::Status {
      if (tensor.nbytes() == 0) return absl::OkStatus();
      ::gloo::BroadcastOptions opts(e.context());
      opts.setOutput(static_cast<uint8_t*>(tensor.data()), tensor.nbytes());
      opts.setRoot(options.root);
      opts.setTag(tagOf(info));
      opts.setTimeout(toChrono(timeout));
      ::gloo::broadcast(opts);
      return absl::OkStatus();
    });
  }

  WorkOr allReduce(Tensor tensor, const AllReduceOptions& options,
                   const CollectiveInfo& info) override {
    absl::StatusOr<ReduceFn> fn = reduceFunction(options.op, tensor.dtype());
    if (!fn.ok()) return fn.status();
    const auto timeout = timeoutOf(options.timeout);
    const bool direct = tensor.nbytes() <= direct_all_reduce_max_bytes_;
    return submit(info, timeout, [tensor, options, info, timeout, direct, fn = *fn](Engine& e) {
      if (tensor.numel() == 0) return absl::OkStatus();
      if (direct) {
        const size_t bytes = tensor.nbytes();
        const size_t element = dtypeSize(tensor.dtype());
        uint8_t* scratch =
            e.scratch(directAllReduceScratchBytes(bytes, element, e.rank(), e.size()));
        if (absl::Status s = directAllReduce(*e.context(), tensor.data(), bytes, element, fn,
                                             tagOf(info), toChrono(timeout), scratch);
            !s.ok()) {
          return withContext(s, absl::StrCat(info.describe(), ": "));
        }
        return finishAvg(options.op, tensor, e.size());
      }
      ::gloo::AllreduceOptions opts(e.context());
      visitDType(tensor.dtype(), [&](auto tag) {
        using T = decltype(tag);
        opts.setOutput(static_cast<T*>(tensor.data()), static_cast<size_t>(tensor.numel()));
      });
      opts.setReduceFunction(fn);
      opts.setTag(tagOf(info));
      opts.setTimeout(toChrono(timeout));
      ::gloo::allreduce(opts);
      return finishAvg(options.op, tensor, e.size());
    });
  }

  WorkOr reduce(Tensor tensor, const ReduceOptions& options, const CollectiveInfo& info) override {
    absl::StatusOr<ReduceFn> fn = reduceFunction(options.op, tensor.dtype());
    if (!fn.ok()) return fn.status();
    const auto timeout = timeoutOf(options.timeout);
    return submit(info, timeout, [tensor, options, info, timeout, fn = *fn](Engine& e) {
      if (tensor.numel() == 0) return absl::OkStatus();
      ::gloo::ReduceOptions opts(e.context());
      visitDType(tensor.dtype(), [&](auto tag) {
        using T = decltype(tag);
        opts.setOutput(static_cast<T*>(tensor.data()), static_cast<size_t>(tensor.numel()));
      });
      opts.setRoot(options.root);
      opts.setReduceFunction(fn);
      opts.setTag(tagOf(info));
      opts.setTimeout(toChrono(timeout));
      ::gloo::reduce(opts);
      return e.rank() == options.root ? finishAvg(options.op, tensor, e.size()) : absl::OkStatus();
    });
  }

  WorkOr allGather(std::vector<Tensor> outputs, Tensor input, const AllGatherOptions& options,
                   const CollectiveInfo& info) override {
    const auto timeout = timeoutOf(options.timeout);
    return submit(info, timeout, [outputs, input, info, timeout](Engine& e) {
      const bool direct = adjacent(outputs);
      uint8_t* out =
          direct ? static_cast<uint8_t*>(outputs[0].data()) : e.scratch(totalBytes(outputs));
      allGatherInto(e, out, input, info, timeout);
      if (!direct) unpack(out, outputs);
      return absl::OkStatus();
    });
  }

  WorkOr allGatherIntoTensor(Tensor output, Tensor input, const AllGatherOptions& options,
                             const CollectiveInfo& info) override {
    const auto timeout = timeoutOf(options.timeout);
    return submit(info, timeout, [output, input, info, timeout](Engine& e) {
      allGatherInto(e, static_cast<uint8_t*>(output.data()), input, info, timeout);
      return absl::OkStatus();
    });
  }

  WorkOr gather(std::vector<Tensor> outputs, Tensor input, const GatherOptions& options,
                const CollectiveInfo& info) override {
    const auto timeout = timeoutOf(options.timeout);
    return submit(info, timeout, [outputs, input, options, info, timeout](Engine& e) {
      if (input.nbytes() == 0) return absl::OkStatus();
      ::gloo::GatherOptions opts(e.context());
      opts.setInput(static_cast<uint8_t*>(input.data()), input.nbytes());
      const bool root = e.rank() == options.root;
      const bool direct = root && adjacent(outputs);
      uint8_t* out = nullptr;
      if (root) {
        out = direct ? static_cast<uint8_t*>(outputs[0].data()) : e.scratch(totalBytes(outputs));
        opts.setOutput(out, totalBytes(outputs));
      }
      opts.setRoot(options.root);
      opts.setTag(tagOf(info));
      opts.setTimeout(toChrono(timeout));
      ::gloo::gather(opts);
      if (root && !direct) unpack(out, outputs);
      return absl::OkStatus();
    });
  }

  WorkOr scatter(Tensor output, std::vector<Tensor> inputs, const ScatterOptions& options,
                 const CollectiveInfo& info) override {
    const auto timeout = timeoutOf(options.timeout);
    return submit(info, timeout, [output, inputs, options, info, timeout](Engine& e) {
      if (output.nbytes() == 0) return absl::OkStatus();
      ::gloo::ScatterOptions opts(e.context());
      if (e.rank() == options.root) {
        std::vector<uint8_t*> pointers;
        for (const Tensor& input : inputs) pointers.push_back(static_cast<uint8_t*>(input.data()));
        opts.setInputs(pointers, output.nbytes());
      }
      opts.setOutput(static_cast<uint8_t*>(output.data()), output.nbytes());
      opts.setRoot(options.root);
      opts.setTag(tagOf(info));
      opts.setTimeout(toChrono(timeout));
      ::gloo::scatter(opts);
      return absl::OkStatus();
    });
  }

  WorkOr reduceScatter(Tensor output, std::vector<Tensor> inputs,
                       const ReduceScatterOptions& options, const CollectiveInfo& info) override {
    const bool direct = adjacent(inputs);
    return reduceScatterImpl(
        output, direct ? inputs[0].data() : nullptr,
        [inputs](uint8_t* buffer) { pack(inputs, buffer); }, options, info);
  }

  WorkOr reduceScatterTensor(Tensor output, Tensor input, const ReduceScatterOptions& options,
                             const CollectiveInfo& info) override {
    return reduceScatterImpl(output, input.data(), nullptr, options, info);
  }

  WorkOr allToAll(std::vector<Tensor> outputs, std::vector<Tensor> inputs,
                  const AllToAllOptions& options, const CollectiveInfo& info) override {
    const auto timeout = timeoutOf(options.timeout);
    return submit(info, timeout, [outputs, inputs, info, timeout](Engine& e) {
      std::vector<int64_t> in_bytes, out_bytes;
      for (const Tensor& t : inputs) in_bytes.push_back(static_cast<int64_t>(t.nbytes()));
      for (const Tensor& t : outputs) out_bytes.push_back(static_cast<int64_t>(t.nbytes()));
      const size_t in_total = totalBytes(inputs);
      const size_t out_total = totalBytes(outputs);
      const bool in_direct = adjacent(inputs);
      const bool out_direct = adjacent(outputs);
      uint8_t* scratch = e.scratch((in_direct ? 0 : in_total) + (out_direct ? 0 : out_total));
      uint8_t* in = in_direct ? static_cast<uint8_t*>(inputs[0].data()) : scratch;
      uint8_t* out = out_direct ? static_cast<uint8_t*>(outputs[0].data())
                                : scratch + (in_direct ? 0 : in_total);
      if (!in_direct) pack(inputs, in);
      allToAllBytes(e, out, std::move(out_bytes), in, std::move(in_bytes), info, timeout);
      if (!out_direct) unpack(out, outputs);
      return absl::OkStatus();
    });
  }

  WorkOr allToAllSingle(Tensor output, Tensor input, std::vector<int64_t> output_splits,
                        std::vector<int64_t> input_splits, const AllToAllOptions& options,
                        const CollectiveInfo& info) override {
    const auto timeout = timeoutOf(options.timeout);
    // Rows of dim 0; the front end checked that both tensors have rows of
    // the same size.
    const int64_t rows = input.shape().empty() ? 0 : input.shape()[0];
    const int64_t row_bytes = rows == 0 ? 0 : static_cast<int64_t>(input.nbytes()) / rows;
    for (int64_t& split : output_splits) split *= row_bytes;
    for (int64_t& split : input_splits) split *= row_bytes;
    return submit(info, timeout,
                  [output, input, output_splits, input_splits, info, timeout](Engine& e) {
                    allToAllBytes(e, static_cast<uint8_t*>(output.data()), output_splits,
                                  static_cast<uint8_t*>(input.data()), input_splits, info, timeout);
                    return absl::OkStatus();
                  });
  }

  WorkOr barrier(const BarrierOptions& options, const CollectiveInfo& info) override {
    const auto timeout = timeoutOf(options.timeout);
    return submit(info, timeout, [info, timeout](Engine& e) {
      ::gloo::BarrierOptions opts(e.context());
      opts.setTag(tagOf(info));
      opts.setTimeout(toChrono(timeout));
      ::gloo::barrier(opts);
      return absl::OkStatus();
    });
  }

  WorkOr send(Tensor tensor, int dst, const P2POptions& options,
              const CollectiveInfo& info) override {
    return transfer(tensor, dst, options, info, /*is_send=*/true);
  }

  WorkOr recv(Tensor tensor, int src, const P2POptions& options,
              const CollectiveInfo& info) override {
    return transfer(tensor, src, options, info, /*is_send=*/false);
  }

  WorkOr recvAnySource(Tensor tensor, const P2POptions& options,
                       const CollectiveInfo& info) override {
    return transfer(tensor, kAnySource, options, info, /*is_send=*/false);
  }

  void abort() override {
    engine_->abort(makeError(ErrorKind::kBackend, absl::StatusCode::kAborted,
                             absl::StrCat("group ", groupName(), " was aborted")));
  }

 private:
  absl::Duration timeoutOf(const std::optional<absl::Duration>& timeout) const {
    return timeout.value_or(default_timeout_);
  }

  WorkOr submit(const CollectiveInfo& info, absl::Duration timeout,
                std::function<absl::Status(Engine&)> run) {
    auto work = std::make_shared<GlooWork>(info, timeout, engine_);
    if (absl::Status status = engine_->enqueue(work, std::move(run)); !status.ok()) {
      return status;
    }
    return work;
  }

  // A reduce-scatter as an all-to-all of the chunks, then on each rank the
  // reduction of the `size` chunks it received, in rank order. It moves
  // what a ring or halving-doubling reduce-scatter moves ((n - 1) / n of the
  // input out and in per rank) and does as many additions, and its result
  // is the same bits on every run: the order of the terms is fixed.
  // Gloo's own ReduceScatterHalvingDoubling is not used: it overwrites part
  // of its buffer while that part may still be in flight to a peer (it never
  // waits for its sends), so large calls were sometimes wrong
  // (docs/comm.md). `input` is the whole input when its chunks are one
  // buffer, else `pack` copies them into the scratch.
  WorkOr reduceScatterImpl(Tensor output, void* input, std::function<void(uint8_t*)> pack,
                           const ReduceScatterOptions& options, const CollectiveInfo& info) {
    absl::StatusOr<ReduceFn> fn = reduceFunction(options.op, output.dtype());
    if (!fn.ok()) return fn.status();
    const auto timeout = timeoutOf(options.timeout);
    return submit(info, timeout,
                  [output, input, pack = std::move(pack), fn = *fn, op = options.op, info,
                   timeout](Engine& e) {
                    const size_t chunk = output.nbytes();
                    if (chunk == 0) return absl::OkStatus();
                    const int n = e.size();
                    uint8_t* received = e.scratch(chunk * n * (input == nullptr ? 2 : 1));
                    uint8_t* in = static_cast<uint8_t*>(input);
                    if (in == nullptr) {
                      in = received + chunk * n;
                      pack(in);
                    }
                    const std::vector<int64_t> blocks(n, static_cast<int64_t>(chunk));
                    allToAllBytes(e, received, blocks, in, blocks, info, timeout);
                    // The caller's output may be its own chunk of the input (in place):
                    // it is written only now, after the exchange has read the input.
                    const auto count = static_cast<size_t>(output.numel());
                    uint8_t* out = static_cast<uint8_t*>(output.data());
                    if (n == 1) {
                      std::memcpy(out, received, chunk);
                    } else {
                      fn(out, received, received + chunk, count);
                      for (int r = 2; r < n; ++r) fn(out, out, received + chunk * r, count);
                    }
                    return finishAvg(op, output, n);
                  });
  }

  // The `peer` of a receive from whichever rank sends first.
  static constexpr int kAnySource = -1;

  // Posts the transfer at once (so a batch of sends and receives cannot
  // deadlock behind each other) and waits for it on the waiter pool.
  WorkOr transfer(const Tensor& tensor, int peer, const P2POptions& options,
                  const CollectiveInfo& info, bool is_send) {
    if (absl::Status status = engine_->usable(info); !status.ok()) return status;
    const absl::Duration timeout = timeoutOf(options.timeout);
    // Gloo wants a real pointer even for an empty tensor.
    static uint8_t empty = 0;
    void* data = tensor.nbytes() == 0 ? &empty : tensor.data();
    std::shared_ptr<TransferWork> work;
    try {
      work = std::make_shared<TransferWork>(
          info, timeout, engine_->context()->createUnboundBuffer(data, tensor.nbytes()), is_send);
      const uint64_t slot = ::gloo::Slot::build(kSendRecvSlotPrefix, options.tag);
      if (is_send) {
        work->buffer().send(peer, slot);
      } else if (peer == kAnySource) {
        std::vector<int> others;
        for (int r = 0; r < size(); ++r) {
          if (r != rank()) others.push_back(r);
        }
        work->buffer().recv(others, slot);
      } else {
        work->buffer().recv(peer, slot);
      }
    } catch (const ::gloo::IoException& e) {
      return engineError(info, e.what(), /*io=*/true, engine_->peers());
    } catch (const std::exception& e) {
      return engineError(info, e.what(), /*io=*/false, engine_->peers());
    }
    TransferWork* raw = work.get();
    engine_->awaitTransfer(work, [raw, is_send, timeout, info](Engine&) -> absl::Status {
      int source = -1;
      const bool done = is_send ? raw->buffer().waitSend(nullptr, toChrono(timeout))
                                : raw->buffer().waitRecv(&source, toChrono(timeout));
      if (done) {
        if (!is_send) raw->setSourceRank(source);
        return absl::OkStatus();
      }
      return makeError(ErrorKind::kBackend, absl::StatusCode::kAborted,
                       absl::StrCat(info.describe(), " was aborted"));
    });
    return work;
  }

  const absl::Duration default_timeout_;
  const size_t direct_all_reduce_max_bytes_;
  const std::shared_ptr<Engine> engine_;
};

}  // namespace

GlooBackendOptions glooOptionsFromEnv(
    const std::function<std::optional<std::string>(const std::string&)>& getenv) {
  auto read = [&](const std::string& name) -> std::optional<std::string> {
    if (getenv) return getenv(name);
    const char* value = std::getenv(name.c_str());
    return value == nullptr ? std::nullopt : std::optional<std::string>(value);
  };
  GlooBackendOptions options;
  std::vector<std::string> ifaces;
  if (std::optional<std::string> list = read("GLOO_SOCKET_IFNAME")) {
    for (absl::string_view name : absl::StrSplit(*list, ',', absl::SkipWhitespace())) {
      ifaces.emplace_back(absl::StripAsciiWhitespace(name));
    }
  }
  if (std::optional<std::string> iface = read("LOOM_GLOO_IFACE"); iface && !iface->empty()) {
    options.iface = *iface;
  } else if (!ifaces.empty()) {
    // c10d spreads its Gloo contexts over the listed interfaces; here each
    // group has one context, so successive groups take them in turn.
    static std::atomic<size_t> next_iface{0};
    options.iface = ifaces[next_iface.fetch_add(1) % ifaces.size()];
  } else if (std::optional<std::string> host = read("LOOM_GLOO_HOSTNAME"); host && !host->empty()) {
    options.hostname = *host;
  } else if (std::optional<std::string> master = read("MASTER_ADDR"); master && !master->empty()) {
    if (std::optional<std::string> local = localAddressToward(*master)) options.hostname = *local;
  }
  return options;
}

namespace {

// "[ip]:port" as Gloo prints socket addresses, or "" for other families.
std::string glooAddressText(const sockaddr_storage& address) {
  const auto ip = ipAndPort(address);
  return ip ? absl::StrCat("[", ip->first, "]:", ip->second) : std::string();
}

// The local address of every connected TCP socket of this process. Gloo
// keeps the listening address as a pair's own address on the side that
// connected, while the accepting side sees the connecting socket's
// ephemeral port in its errors; only the socket itself knows that port.
std::vector<std::string> connectedTcpSocketAddresses() {
  std::vector<std::string> addresses;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return addresses;
  while (dirent* entry = readdir(dir)) {
    int fd = -1;
    if (!absl::SimpleAtoi(entry->d_name, &fd) || fd == dirfd(dir)) continue;
    int type = 0;
    socklen_t type_length = sizeof(type);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_length) != 0 || type != SOCK_STREAM) {
      continue;
    }
    sockaddr_storage local{}, remote{};
    socklen_t local_length = sizeof(local), remote_length = sizeof(remote);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_length) != 0) {
      continue;
    }
    if (std::string text = glooAddressText(local); !text.empty()) addresses.push_back(text);
  }
  closedir(dir);
  return addresses;
}

// The listening addresses this rank's pairs had before they connected,
// which the peers keep as the pairs' remote address: Gloo's full-mesh
// rendezvous stored them under the key "<rank>", one serialized tcp::Address
// per peer.
std::vector<std::string> preConnectionAddresses(::gloo::rendezvous::Context& context,
                                                Store& store) {
  std::vector<std::string> addresses;
  if (context.size < 2) return addresses;
  const size_t chunk = context.getPair(context.rank == 0 ? 1 : 0)->address().bytes().size();
  absl::StatusOr<Bytes> blob = store.get(absl::StrCat(context.rank));
  if (!blob.ok() || chunk == 0 || blob->size() % chunk != 0) return addresses;
  for (size_t at = 0; at < blob->size(); at += chunk) {
    const std::vector<char> bytes(blob->begin() + at, blob->begin() + at + chunk);
    addresses.push_back(::gloo::transport::tcp::Address(bytes).str());
  }
  return addresses;
}

// Publishes every address by which this rank's connections may appear in
// its peers' errors, and reads everyone else's (see PeerAddresses). Gloo
// names a peer by whichever it holds: the address the peer's pair listened
// on, the pair's address once connected, or the peer socket's own address
// (an ephemeral port on the side that connected). The blob is smaller than
// the one Gloo's own full-mesh rendezvous exchanges.
absl::StatusOr<PeerAddresses> exchangePeerAddresses(::gloo::rendezvous::Context& context,
                                                    Store& store) {
  constexpr char kKey[] = "gloo_socket_addresses/";
  std::vector<std::string> own = connectedTcpSocketAddresses();
  for (std::string& address : preConnectionAddresses(context, store)) {
    own.push_back(std::move(address));
  }
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer != context.rank) own.push_back(context.getPair(peer)->address().str());
  }
  std::sort(own.begin(), own.end());
  own.erase(std::unique(own.begin(), own.end()), own.end());
  const std::string mine = absl::StrJoin(own, " ");
  if (absl::Status s = store.set(absl::StrCat(kKey, context.rank), Bytes(mine.begin(), mine.end()));
      !s.ok()) {
    return s;
  }
  PeerAddresses peers;
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer == context.rank) continue;
    absl::StatusOr<Bytes> theirs = store.get(absl::StrCat(kKey, peer));
    if (!theirs.ok()) return theirs.status();
    const std::string text(theirs->begin(), theirs->end());
    for (absl::string_view address : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
      peers.emplace(std::string(address), peer);
    }
  }
  return peers;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> createGlooBackend(const BackendContext& context,
                                                           const GlooBackendOptions& options) {
  ignoreSigpipe();
  const std::string who = absl::StrCat("gloo backend of group ", context.group_name, " (rank ",
                                       context.rank, " of ", context.size, ")");
  ::gloo::transport::tcp::attr attr;
  if (!options.iface.empty()) {
    attr.iface = options.iface;
  } else {
    attr.hostname = options.hostname;
  }
  std::shared_ptr<::gloo::transport::Device> device;
  try {
    device = ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return invalidArgumentError(absl::StrCat(
        who, " cannot listen on ",
        options.iface.empty() ? "host " + options.hostname : "interface " + options.iface, ": ",
        e.what(),
        "; set GLOO_SOCKET_IFNAME (or LOOM_GLOO_IFACE) to an interface of this machine, or "
        "LOOM_GLOO_HOSTNAME to one of its addresses"));
  }
  auto gloo_context = std::make_shared<::gloo::rendezvous::Context>(context.rank, context.size);
  gloo_context->setTimeout(toChrono(context.timeout));
  GlooStore store(context.store, context.timeout);
  try {
    gloo_context->connectFullMesh(store, device);
  } catch (const StoreFailure& e) {
    return withContext(e.status(),
                       absl::StrCat(who,
                                    " could not meet its peers (each rank publishes its "
                                    "address under its rank number): "));
  } catch (const std::exception& e) {
    return networkError(absl::StrCat(who, " could not connect to its peers within ",
                                     absl::FormatDuration(context.timeout), ": ", e.what()));
  }
  absl::StatusOr<PeerAddresses> peers = exchangePeerAddresses(*gloo_context, *context.store);
  if (!peers.ok()) {
    return withContext(peers.status(), absl::StrCat(who,
                                                    " could not exchange the addresses "
                                                    "of its connections: "));
  }
  return std::unique_ptr<Backend>(new GlooBackend(
      context, std::move(gloo_context), *std::move(peers), options.direct_all_reduce_max_bytes));
}

void registerGlooBackend() {
  registerBackend("gloo", {Device::Type::kCpu}, [](const BackendContext& context) {
    return createGlooBackend(context, glooOptionsFromEnv());
  });
}

}  // namespace loom::comm::gloo
